"""One module's summary for the project pass: its imports, classes and their bases, functions
with the calls they make, loops, and where it shows CUDA use.

Read with CPython's `ast` (about an eighth of libcst's parse time), because the project pass needs
every module's summary before any file's rules run, and keeping every libcst tree alive until then
would cost gigabytes. Definitions and loops are numbered in source order, the way the file's own
walk numbers them (analysis/entry.py), so facts about them can be handed back to that walk.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import re
from typing import Any, Callable, Iterable, Iterator, Optional, Union, cast

from ..analysis import cache_misses
from ..analysis.accumulators import Accumulators, test_key, tests_a_list
from ..analysis.added_keys import added_keys
from ..analysis.arguments import (
    BUILT_PREFIX,
    ITEMS_PREFIX,
    OPTIONS,
    PARAM_PREFIX,
    asserted_values,
    chosen,
    is_boolean_test,
    items_token,
    mentions,
    subject,
    value_token,
)
from ..analysis.branch_sides import (
    Assignments,
    cold_sides,
    compared_counter,
    dotted,
    enumerate_counter,
    leaves_every_step,
)
from ..analysis.checkpoints import is_weights_url, loads_weights, registers_model
from ..analysis.failing_blocks import fails_at_end
from ..analysis.fallbacks import fallback_shape, is_not_none_test
from ..analysis.item_generators import yielded_parameter
from ..analysis.layers import CONTAINERS, LOOP_REPEATS
from ..analysis.loader_loops import builds_loader, iterated_loader
from ..analysis.loop_targets import batch_names
from ..analysis.module_flags import module_flags
from ..analysis.options import STORING, ModuleOptions, module_options, parsed_position, record_store
from ..analysis.vocabulary import (
    DEFAULT_DEVICE_SETTERS,
    GRADIENT_SYNC_WRAPPERS,
    ITERATION_WRAPPERS,
    MODULE_CHAIN_METHODS,
    NO_GRAD_CONTEXTS,
    SYNC_METHODS,
    builds_host_array,
    cuda_prefixes,
    is_cudnn_decision,
    is_cudnn_decision_call,
    is_loader_name,
    is_model_name,
    is_optimizer_class,
    is_optimizer_name,
    keeps_host_array,
    maps_a_file,
    mentions_reduced_precision,
    names_rpc_device_map,
    prepares_dataset,
    runs_rarely,
    scaler_stepped,
    sets_cuda_default,
    shows_cuda_use,
)
from ..syntax.ast_nodes import child_fields, own_nodes
from .conv_wrappers import conv_wrapper
from .dataset_items import items_in_memory
from .device_tensors import ON_DEVICE, device_source
from .host_tensors import HostTensors
from .precision import reduced_precision

_HOST_METHODS = frozenset({"cpu", "numpy", "tolist", "item"})
_HOST_FUNCTIONS = frozenset({"torch.from_numpy"})

FunctionNode = Union[ast.FunctionDef, ast.AsyncFunctionDef]
LoopNode = Union[ast.For, ast.AsyncFor, ast.While]


# marks a name of a function the caller is nested in, once per level (Call.bound_args)
ENCLOSING = "^"


@dataclasses.dataclass
class Call:
    """A call site. kind: "def" (target: a function index of this module), "global" (a
    module-level name), "dotted" (`mod.f`, `Cls.method`), "self" (`self.m`), "super"
    (`super().m`), "instance" (`CLASS|method` on a local bound to `CLASS(...)`), "selfattr"
    (`ATTR|method`: `self.ATTR.method(...)`)."""

    kind: str
    target: str
    loop: int  # innermost loop around it in the same function, -1 when none
    line: int
    host_args: list[str] = dataclasses.field(default_factory=list)  # "0", "1", ... or keywords
    # what it passes: "0", "1", ... or keywords -> analysis/arguments.py's token, "?" when not known
    args: dict[str, str] = dataclasses.field(default_factory=dict)
    star: bool = False  # passes `*args` or `**kwargs`: what goes where is not known
    # the tests on the caller's parameters (or `self.` attributes) it runs under: [test, "body"|"else"]
    guards: list[list[str]] = dataclasses.field(default_factory=list)
    # the outermost loop a block around it leaves at its end (`if done: ...; break`), -1 when none
    leaves: int = -1
    # what it passes of the caller's own parameters (the parameter, an element of it, or one of
    # those or None): "0", "1", ... or keywords -> the caller's parameter
    param_args: dict[str, str] = dataclasses.field(default_factory=dict)
    # the datasets it passes, by slot as in `args`: project/datasets.py's tokens
    datasets: dict[str, str] = dataclasses.field(default_factory=dict)
    # the models it passes wrapped for data parallelism (`train(ddp_model)` with `ddp_model =
    # DDP(model)` in the caller): slot as in `args` -> the wrapper's qualified name
    wrapped: dict[str, str] = dataclasses.field(default_factory=dict)
    # the names it passes that the caller binds to instances only: slot -> their classes as written
    instances: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    # the DataLoaders it passes, by slot as in `args`: the line of the `DataLoader(...)` call a
    # name of the caller is bound to (project/loaders.py)
    loaders: dict[str, int] = dataclasses.field(default_factory=dict)
    # a call whose only unpackings hand on the caller's own `*args`/`**kwargs`, which its body
    # never adds to (`super().__init__(key=key, *args, **kwargs)`): how many plain positional
    # arguments come before them; -1 for any other call. Where the caller's own caller passes
    # nothing into them (project/construction.py), the call passes only what it writes
    forwards: int = -1
    bound: str = ""  # the name `name = f(...)` binds its result to
    # the names `a, b = f(...)` binds the elements of its result to, by position ("" for others)
    unpacked: list[str] = dataclasses.field(default_factory=list)
    # `f(**vars(opt))`, its only unpacking: the name whose attributes it passes, each to the
    # parameter of its name (what `opt.NAME` holds, where the project pass knows it)
    spread: str = ""
    # the batches it passes unmoved of a loop over a loader parameter: slot -> that parameter
    batches: dict[str, str] = dataclasses.field(default_factory=dict)
    # the locals it passes that are bound once to a call's result: slot -> the name (the call
    # that binds it is the one whose `bound` is that name; ENCLOSING marks, one per level: in the
    # function the caller is nested in)
    bound_args: dict[str, str] = dataclasses.field(default_factory=dict)
    # the tensors it passes on the device whatever its caller is given (project/device_tensors.py)
    device_args: list[str] = dataclasses.field(default_factory=list)
    # what it passes that holds CPU tensors only, by slot (project/host_tensors.py)
    host_tensor_args: list[str] = dataclasses.field(default_factory=list)
    # passes `*args`: which parameters its positional arguments fill is not known (with `**kwargs`
    # alone it is: param_args, host_tensor_args)
    unpacks_args: bool = False
    # its result is moved to the device right away (`self.calculate_mask(size).to(x.device)`)
    moved_result: bool = False
    # the `with` items around it in its own function, dotted as written (`torch.no_grad`): the
    # project pass learns which functions every caller runs without grad (project/grad_free.py)
    contexts: list[str] = dataclasses.field(default_factory=list)
    # `f(args, **kwargs)`, its only unpacking a local bound once to a dict display or `dict(k=v)`
    # of literal keys that the caller never adds to: each key -> the token of its value
    # (project/keyword_items.py)
    kwargs_items: dict[str, str] = dataclasses.field(default_factory=dict)
    # `Trainer(model, **config["trainer"])`, its only unpacking a mapping read from configuration
    # (`_CONFIG_READS`): it sets only the keys a config file names (project/construction.py)
    config_unpack: bool = False
    stored: str = ""  # `self.ATTR = f(...)`: ATTR holds its result (ProjectView.attribute_methods)


@dataclasses.dataclass
class Function:
    name: str
    qualname: str
    line: int
    cls: int = -1  # the class it is a method of
    parent: int = -1  # the function it is nested in
    params: list[str] = dataclasses.field(default_factory=list)
    decorators: list[str] = dataclasses.field(default_factory=list)
    calls: list[Call] = dataclasses.field(default_factory=list)
    steps: list[int] = dataclasses.field(default_factory=list)  # loops of backward()/step() (-1: none)
    updates: list[int] = dataclasses.field(default_factory=list)  # loops of optimizer.step() (-1: none)
    no_grad: bool = False  # it or a function nested in it names torch.no_grad/inference_mode
    varkw: bool = False  # takes **kwargs
    returns: list[list[str]] = dataclasses.field(default_factory=list)  # per `return Callee(...)`: built()
    returns_annotation: str = ""  # `-> Callee`: the dotted name of the class it says it returns
    returns_device: bool = False  # `return torch.device(...)`, or a name bound to one
    # parameters some `return` hands back as they came in (`if world_size < 2: return loss_dict`)
    returns_params: list[str] = dataclasses.field(default_factory=list)
    # `return self.NAME` in a method, not called: a bound method it hands back, with the tests on
    # its parameters around that return (Call.guards): [NAME, guards]
    returned_methods: list[list[Any]] = dataclasses.field(default_factory=list)
    says_cuda: bool = False  # a string literal starting with "cuda" in its own body
    default_devices: list[bool] = dataclasses.field(default_factory=list)  # set_default_*: names CUDA?
    moved: list[str] = dataclasses.field(default_factory=list)  # `Callee(...).to(...)`: dotted callees
    rare: bool = False  # runs once or rarely whoever calls it: a cached builder, a visualisation helper
    weights: str = ""  # how it fetches published weights: the loader it calls, "@register_model", a URL
    loads_state: bool = False  # calls `.load_state_dict(...)`
    refs: list[str] = dataclasses.field(default_factory=list)  # CapWords names it reads (classes handed on)
    defaults: dict[str, str] = dataclasses.field(default_factory=dict)  # param -> token, when known
    positional: int = 0  # how many of `params` may be passed by position
    asserted: dict[str, str] = dataclasses.field(default_factory=dict)  # `assert p is None` in its body
    # the guards around each place a parameter is bound again (`if size is None: size = ...`)
    rebinds: dict[str, list[list[list[str]]]] = dataclasses.field(default_factory=dict)
    # `self.ATTR = ...` in its body: [ATTR, the parameter it is set from, or ""]
    self_stores: list[list[str]] = dataclasses.field(default_factory=list)
    # `self.ATTR = Callee(...) if PARAM else None` ("body") or `None if PARAM else Callee(...)`
    # ("else"): [ATTR, PARAM, the side that builds, Callee's dotted name]
    flagged_stores: list[list[str]] = dataclasses.field(default_factory=list)
    # `self.ATTR = TEST` (a comparison or boolean test) or `self.ATTR = helper(a, b)` (maybe a
    # fallback helper, analysis/fallbacks.py): [ATTR, the value's text]
    derived_stores: list[list[str]] = dataclasses.field(default_factory=list)
    # the `default(val, d)` shape (analysis/fallbacks.py): [test helper, "calls"?]; [] for others
    fallback: list[str] = dataclasses.field(default_factory=list)
    tests_not_none: bool = False  # `def exists(x): return x is not None`
    cold_calls: list[Call] = dataclasses.field(default_factory=list)  # calls in cold code (constructions)
    # `obj.ATTR = ...` or `setattr(obj, "ATTR", ...)` in its body, obj not self: ATTR
    attribute_stores: list[str] = dataclasses.field(default_factory=list)
    # stores whose attribute is not known here: "self" (`setattr(self, name, v)`, `self.__dict__`),
    # "other" (`setattr(obj, name, v)`)
    computed_stores: list[str] = dataclasses.field(default_factory=list)
    # attributes it asks `self` whether it has: `hasattr(self, "ATTR")`, `getattr(self, "ATTR", d)`
    probes: list[str] = dataclasses.field(default_factory=list)
    # per `return`: the dataset token of each element of the tuple it returns (project/datasets.py)
    returns_items: list[list[str]] = dataclasses.field(default_factory=list)
    # a function (not a method) that returns a container it fills (`return hyperparams,
    # module_list`, `return nn.Sequential(*layers)`): built() by each call of its body, a call in a
    # loop LOOP_REPEATS times; empty for any other function
    builds: list[str] = dataclasses.field(default_factory=list)
    # the names that hold the parsed command-line options here (analysis/options.py)
    namespaces: list[str] = dataclasses.field(default_factory=list)
    # names it hands to a call, bound only to a call of a function another module defines
    # (`hparams = create_hparams()`): they hold the options where that function returns them
    # (project/options.py); name -> the callee as written
    options_calls: dict[str, str] = dataclasses.field(default_factory=dict)
    # the line of the `DataLoader(...)` call it returns (`return loader` bound to one), 0 when none
    returns_loader: int = 0
    # per element of the tuple its first tuple `return` hands back: the line of the `DataLoader(...)`
    # call the element is bound to, 0 for others (`return train_loader, valset, collate_fn`)
    returns_loader_items: list[int] = dataclasses.field(default_factory=list)
    # a generator that yields the items of this parameter as it walks them (`for obj in iterable:
    # ...; yield obj`, DETR's `MetricLogger.log_every`): a loop over its result walks the argument
    yields_items_of: str = ""
    # the loops whose body calls a model the function is handed (a parameter named like one:
    # `model(x)` in `for t in timesteps:`): it drives that model, one call per iteration
    handed_model_loops: list[int] = dataclasses.field(default_factory=list)
    # its tests one side of which runs only while an accumulator is empty (analysis/accumulators.py):
    # the test's key -> whether that side is the body
    empty_fallbacks: dict[str, bool] = dataclasses.field(default_factory=dict)
    # per `return`: whether it hands back an array of host data built here (`return ids.view(b, -1)`)
    host_returns: list[bool] = dataclasses.field(default_factory=list)
    # per `return`: whether it hands back CPU tensors only, or lists and tuples of them
    # (project/host_tensors.py: DETR's matcher indices)
    host_tensor_returns: list[bool] = dataclasses.field(default_factory=list)
    # the names it binds two or more times, each time to a call's result (`name = f(...)`) and
    # never otherwise: how many such bindings (Call.bound_args passes them)
    call_bindings: dict[str, int] = dataclasses.field(default_factory=dict)

    # per `return`: the parameter whose tensor it copies to the host (`return t.detach().cpu()`)
    host_copy_returns: list[str] = dataclasses.field(default_factory=list)
    # per `return`: where it puts the tensor it hands back (project/device_tensors.py's sources)
    device_returns: list[str] = dataclasses.field(default_factory=list)
    # the names its own scope binds to a constructed optimizer (`opt = torch.optim.AdamW(...)`):
    # their `.step()` is an optimizer step (the file pass asks, analysis/hotpath.py)
    optimizers: list[str] = dataclasses.field(default_factory=list)
    # the settings its module's top level fixes (Summary.module_flags, module_flag_choices) that
    # its tests read as globals: it binds no such name itself (`if FLASH:` in a forward)
    flag_reads: list[str] = dataclasses.field(default_factory=list)

    @property
    def copies_to_host(self) -> str:
        """The parameter every `return` copies to the host, reading the device (`def to_cpu(tensor):
        return tensor.detach().cpu()`), or "": a call of it with a device tensor is a sync."""
        params = set(self.host_copy_returns)
        return self.host_copy_returns[0] if len(params) == 1 else ""

    @property
    def returns_host_data(self) -> bool:
        """Every `return` hands back host data the function builds (analysis/constants.py's host
        arrays): `Corpus.get_data` tokenising a file into `torch.LongTensor(n)`."""
        return bool(self.host_returns) and all(self.host_returns)

    @property
    def returns_host_tensors(self) -> bool:
        """Every `return` hands back CPU tensors, or lists and tuples of them."""
        return bool(self.host_tensor_returns) and all(self.host_tensor_returns)

    def binders_of(self, name: str) -> list[Call]:
        """Every call whose result the function binds a name Call.bound_args passes to (bound there
        once, or only to calls: Function.call_bindings); empty where a binding is not one call the
        summary describes."""
        binders = [call for call in (*self.calls, *self.cold_calls) if call.bound == name]
        return binders if len(binders) == self.call_bindings.get(name, 1) else []

    def binder_of(self, name: str) -> Optional[Call]:
        """The one call, hot or cold, whose result the function binds to `name` (`name = f(...)`),
        if only one does."""
        binders = [call for call in (*self.calls, *self.cold_calls) if call.bound == name]
        return binders[0] if len(binders) == 1 else None

    @property
    def returns_cuda_device(self) -> bool:
        """A device helper that may pick CUDA: `dist_util.dev()`, `select_device(opt.device)`."""
        return self.returns_device and self.says_cuda

    @property
    def sets_cuda_default(self) -> bool:
        """Makes CUDA the default device and leaves it so (llm.c sets it for loading, then restores)."""
        return bool(self.default_devices) and all(self.default_devices)


@dataclasses.dataclass
class Class:
    name: str
    qualname: str
    line: int
    bases: list[str] = dataclasses.field(default_factory=list)
    methods: dict[str, int] = dataclasses.field(default_factory=dict)
    attributes: dict[str, str] = dataclasses.field(default_factory=dict)  # self.x = Callee(...)
    builds: list[str] = dataclasses.field(default_factory=list)  # built() by each call of its methods
    items_in_memory: Optional[bool] = None  # its own __getitem__ only indexes __init__'s attributes
    # how it runs reduced precision by itself on its default configuration (project/precision.py)
    reduced_precision: str = ""
    # one convolution under another name: [its callee, the bias parameter, its position]
    # (project/conv_wrappers.py)
    conv_wrapper: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Loop:
    line: int
    function: int  # -1: module level
    parent: int  # the loop around it in the same function, -1 when none
    loader: str = ""  # what it iterates, when that is a DataLoader
    # `for i, x in enumerate(...)` whose body leaves once i reaches a bound (`if i == n - 1: break`):
    # a loader read only by such loops is read for a few batches (analysis/loader_reads.py). Hot
    # paths do not use it: without the bound's value, a training loop capped by `--steps` looks the same
    bounded: bool = False
    # the plain name it iterates, through enumerate/tqdm/zip-style wrappers, and whether that is a
    # parameter of its function, a module-level name read there, or a local ("param", "global",
    # "local"; "" for anything else)
    iterated: str = ""
    iterated_scope: str = ""
    # where it iterates a call of the project's (`metric_logger.log_every(data_loader, 10)`): the
    # call's kind and target, as in `Call`, and the plain names it passes: slot -> [name, scope]
    through: list[Any] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Summary:
    imports: dict[str, list[Any]] = dataclasses.field(default_factory=dict)  # bound: [module, name, level]
    # names imported inside functions (scoped imports), the same in every function that imports
    # them: how those functions' calls of the name resolve (no module-level name may be read so)
    local_imports: dict[str, list[Any]] = dataclasses.field(default_factory=dict)
    stars: list[list[Any]] = dataclasses.field(default_factory=list)  # [module, level]
    globals: dict[str, list[Any]] = dataclasses.field(
        default_factory=dict
    )  # ["def"|"class", i] | ["call", dotted]
    functions: list[Function] = dataclasses.field(default_factory=list)
    classes: list[Class] = dataclasses.field(default_factory=list)
    loops: list[Loop] = dataclasses.field(default_factory=list)
    toplevel: Function = dataclasses.field(default_factory=lambda: Function("<module>", "<module>", 1))
    contexts: list[str] = dataclasses.field(default_factory=list)  # dotted decorators and with-items
    shows_cuda: bool = False
    # names a precision decision (vocabulary.mentions_reduced_precision): TF32, autocast, fp16...
    mentions_precision: bool = False
    cudnn_decision: bool = False  # sets cudnn.benchmark/deterministic or picks deterministic algorithms
    channels_last: bool = False  # names channels_last in code (memory_format, a flag, an option string)
    collates: list[str] = dataclasses.field(default_factory=list)  # dotted names passed as collate_fn=
    # names read but not called (a function or class handed on: its calls are not all seen)
    handed: list[str] = dataclasses.field(default_factory=list)
    # attributes read but not called on a local object (`nd.edt`, `self.fn`): they hand on a
    # method, never a module's function (reached by its own name or through an import)
    handed_members: list[str] = dataclasses.field(default_factory=list)
    # `mod.attr` read, not called, with `mod` bound by an import: [mod, attr]; it hands on a
    # project function only where `mod` is a module of the project (`wandb.run` never does)
    handed_imported: list[list[str]] = dataclasses.field(default_factory=list)
    outer_stores: list[str] = dataclasses.field(default_factory=list)  # `obj.ATTR = ...` with obj not self
    # names an RPC device map (`device_maps=`, `set_device_map`, `set_devices`): RPC may move CUDA tensors
    rpc_device_map: bool = False
    # string keys read from a mapping (`params["order"]`) -> whether every read of it here hands
    # the value to the host (`.tolist()`, `.item()`, iterated in Python); `.get("k")` reads count too
    key_reads: dict[str, bool] = dataclasses.field(default_factory=dict)
    # string keys of the dict literals its functions return (`return {"order": ...}`)
    returned_keys: list[str] = dataclasses.field(default_factory=list)
    # the modules it looks models up in by name (`resnet.__dict__[args.arch]`), as written
    registries: list[str] = dataclasses.field(default_factory=list)
    # command-line options (analysis/options.py): dest -> default token; stores on an attribute
    # of a plain name (attribute -> [[receiver, value text]]); a store on them by a computed name
    option_defaults: dict[str, str] = dataclasses.field(default_factory=dict)
    option_stores: dict[str, list[list[str]]] = dataclasses.field(default_factory=dict)
    option_computed_store: bool = False
    # the module's functions that return the options: name -> -1 (the whole value) or a position
    options_returning: dict[str, int] = dataclasses.field(default_factory=dict)
    # `__all__` at module level: the names `from this import *` binds (None: no `__all__`, so every
    # public name; [] when it is not a literal list of strings: none known)
    all_names: Optional[list[str]] = None
    # settings its top level fixes (analysis/module_flags.py): name -> literal token; whether it
    # calls `exec` (a configurator may rebind them); the names its top level assigns
    module_flags: dict[str, str] = dataclasses.field(default_factory=dict)
    # names its top level binds more than once, each to a literal or an option read: their tokens
    module_flag_choices: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    execs: bool = False
    assigned_globals: list[str] = dataclasses.field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Summary:
        def function(d: dict[str, Any]) -> Function:
            d = dict(d)
            d["calls"] = [Call(**c) for c in d["calls"]]
            d["cold_calls"] = [Call(**c) for c in d.get("cold_calls", ())]
            return Function(**d)

        return cls(
            imports=data["imports"],
            local_imports=data.get("local_imports", {}),
            stars=data["stars"],
            globals=data["globals"],
            functions=[function(f) for f in data["functions"]],
            classes=[Class(**c) for c in data["classes"]],
            loops=[Loop(**lp) for lp in data["loops"]],
            toplevel=function(data["toplevel"]),
            contexts=data["contexts"],
            shows_cuda=data["shows_cuda"],
            mentions_precision=data.get("mentions_precision", False),
            cudnn_decision=data["cudnn_decision"],
            channels_last=data.get("channels_last", False),
            collates=data.get("collates", []),
            handed=data.get("handed", []),
            handed_members=data.get("handed_members", []),
            handed_imported=data.get("handed_imported", []),
            outer_stores=data.get("outer_stores", []),
            rpc_device_map=data.get("rpc_device_map", False),
            key_reads=data.get("key_reads", {}),
            returned_keys=data.get("returned_keys", []),
            option_defaults=data.get("option_defaults", {}),
            option_stores=data.get("option_stores", {}),
            option_computed_store=data.get("option_computed_store", False),
            options_returning=data.get("options_returning", {}),
            all_names=data.get("all_names"),
            module_flags=data.get("module_flags", {}),
            module_flag_choices=data.get("module_flag_choices", {}),
            execs=data.get("execs", False),
            assigned_globals=data.get("assigned_globals", []),
            registries=data.get("registries", []),
        )


def _unwrapped(iterable: ast.AST, wrappers: frozenset[str] = ITERATION_WRAPPERS) -> Optional[ast.AST]:
    """What a loop iterates through wrappers of one positional argument (`enumerate(tqdm(x))`:
    `x`); None where a wrapper takes more (`zip(a, b)`)."""
    while isinstance(iterable, ast.Call) and (dotted(iterable.func) or "").split(".")[-1] in wrappers:
        positional = [a for a in iterable.args if not isinstance(a, ast.Starred)]
        if len(positional) != 1:
            return None
        iterable = positional[0]
    return iterable


def _call_slots(node: ast.Call) -> list[tuple[str, ast.expr]]:
    """A call's arguments by slot: "0", "1", ... for positional ones, then the keywords."""
    slots = [(str(i), a) for i, a in enumerate(node.args)]
    slots.extend((k.arg, k.value) for k in node.keywords if k.arg)
    return slots


def _unpacked_target(target: ast.expr) -> str:
    """What `a, self.b = f(...)` binds at one position: `a`, `self.b`, or ""."""
    if isinstance(target, ast.Name):
        return target.id
    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
        return f"self.{target.attr}"
    return ""


def _iterated_name(iterable: ast.AST, local: _Locals, in_function: bool) -> tuple[str, str]:
    """(the plain name a loop iterates through wrappers, its scope) or ("", ""): a `self.`
    attribute has the scope "self", also through a local bound once to a wrapper of it
    (`tbar = tqdm(self.train_loader)`, then `for i, sample in enumerate(tbar)`)."""
    inner = _unwrapped(iterable)
    if isinstance(inner, ast.Name) and in_function and inner.id not in local.params:
        bound = local.bound_once(inner.id)
        wrapped = _unwrapped(bound) if isinstance(bound, ast.Call) else None
        if isinstance(wrapped, ast.Attribute) and wrapped is not bound:
            inner = wrapped
    if isinstance(inner, ast.Attribute) and in_function:
        name = _unpacked_target(inner)
        return (name, "self") if name else ("", "")
    if not isinstance(inner, ast.Name):
        return "", ""
    name = inner.id
    if not in_function:
        return name, "global"
    if name in local.params:
        return name, "param" if local.stores.get(name, 0) == 0 else ""
    return name, "local" if name in local.names else "global"


# what reads a configuration into a mapping: a file's parsed contents, or a config object's fields
# (pydantic's `.dict()`/`.model_dump()`, a dataclass's `asdict`, OmegaConf's container)
_CONFIG_READS = frozenset(
    {
        "json.load",
        "json.loads",
        "yaml.load",
        "yaml.safe_load",
        "yaml.full_load",
        "toml.load",
        "toml.loads",
        "tomllib.load",
        "tomllib.loads",
        "dataclasses.asdict",
        "asdict",
        "OmegaConf.to_container",
        "OmegaConf.load",
    }
)
_CONFIG_METHODS = frozenset({"dict", "model_dump"})


def _unpacks_configuration(node: ast.Call, local: _Locals) -> bool:
    """Call.config_unpack: `node`'s one unpacking is `**m` or `**m[key]...`, `m` a local bound once
    to a configuration read (`_CONFIG_READS`, `self.dict()`) that the caller never adds keys to."""
    root = _only_unpacked_mapping(node)
    while isinstance(root, ast.Subscript):
        root = root.value
    if not isinstance(root, ast.Name) or root.id in local.params:
        return False
    value = local.bound_once(root.id)
    if not isinstance(value, ast.Call) or _adds_keys(local, root.id):
        return False
    func = value.func
    if isinstance(func, ast.Attribute) and func.attr in _CONFIG_METHODS and not value.args:
        return True
    return dotted(func) in _CONFIG_READS


def _adds_keys(local: _Locals, name: str) -> bool:
    """The function of `local` may add keys to the dict `name` holds (analysis/added_keys.py, as
    the file pass reads it); the top level always may."""
    text = local.text()
    return text is None or added_keys(text, name) != []


def _assigned_before(value: ast.expr, statement: ast.stmt, block: list[ast.stmt]) -> ast.expr:
    """What the last `NAME = ...` of `statement`'s own block before it gives the name `value` is
    (`train_loader = DataLoader(...)` before `return train_loader, val_loader` in one branch of
    several that each build their own); `value` itself when there is none."""
    if not isinstance(value, ast.Name) or statement not in block:
        return value
    for earlier in reversed(block[: block.index(statement)]):
        if (
            isinstance(earlier, ast.Assign)
            and len(earlier.targets) == 1
            and isinstance(earlier.targets[0], ast.Name)
            and earlier.targets[0].id == value.id
        ):
            return earlier.value
    return value


def _loader_line(value: ast.AST, local: _Locals) -> int:
    """The line of the `DataLoader(...)` call `value` is, or the one name it reads is bound to
    (a single binding in the function, or one beside bindings to None: what iterates the name
    iterates that loader), else 0."""
    if isinstance(value, ast.Name):
        values = local.values.get(value.id, [])
        if len(values) != local.stores.get(value.id, 0):
            return 0  # bound otherwise too: a loop target, an unpacking
        built = [v for v in values if not (isinstance(v, ast.Constant) and v.value is None)]
        if len(built) != 1:
            return 0
        value = built[0]
    return value.lineno if isinstance(value, ast.Call) and builds_loader(value) else 0


def _passed_loaders(node: ast.Call, local: _Locals) -> dict[str, int]:
    """The DataLoaders a call passes by name, by slot: the line each one is built at."""
    found: dict[str, int] = {}
    for slot, value in _call_slots(node):
        if isinstance(value, ast.Name):
            line = _loader_line(value, local)
            if line:
                found[slot] = line
    return found


def _literal_strings(value: ast.AST) -> list[str]:
    """The strings of a literal list or tuple of strings; [] for anything else."""
    if not isinstance(value, (ast.List, ast.Tuple)):
        return []
    names = [e.value for e in value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return names if len(names) == len(value.elts) else []


def _enumerate_counter(loop: LoopNode) -> str:
    iterable, target = getattr(loop, "iter", None), getattr(loop, "target", None)
    return enumerate_counter(iterable, target) if iterable is not None and target is not None else ""


def _binds(loop: LoopNode, name: str) -> bool:
    target = getattr(loop, "target", None)
    return target is not None and any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(target))


def _breaks_at_counter_bound(loop: Union[ast.For, ast.AsyncFor]) -> bool:
    """`for i, x in enumerate(...)` whose own body holds `if i == / >= / > ...: break`."""
    counter = _enumerate_counter(loop)
    if not counter:
        return False
    for statement in loop.body:
        if not isinstance(statement, ast.If):
            continue
        test = statement.test
        if (
            isinstance(test, ast.Compare)
            and isinstance(test.left, ast.Name)
            and test.left.id == counter
            and len(test.ops) == 1
            and isinstance(test.ops[0], (ast.Eq, ast.GtE, ast.Gt))
            and any(isinstance(inner, ast.Break) for inner in statement.body)
        ):
            return True
    return False


def _string_key(node: ast.AST) -> Optional[str]:
    """`"order"` in `params["order"]`: a key written as a string literal."""
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _assigned(targets: list[ast.expr]) -> Iterator[ast.expr]:
    """The targets of an assignment, tuple targets unpacked (`a.x, a.y = 1, 2`)."""
    for target in targets:
        if isinstance(target, (ast.Tuple, ast.List)):
            yield from _assigned(list(target.elts))
        else:
            yield target


def _aliases_self(values: Iterable[ast.AST]) -> bool:
    """Every value bound to a name is `self`, or a conditional one branch of which is `self` (its
    wrapped self: `self if self._fsdp is None else self._fsdp`)."""
    values = list(values)

    def is_self(node: ast.AST) -> bool:
        return isinstance(node, ast.Name) and node.id == "self"

    return bool(values) and all(
        is_self(v) or (isinstance(v, ast.IfExp) and (is_self(v.body) or is_self(v.orelse))) for v in values
    )


def _strip_chain(node: ast.AST) -> ast.AST:
    """`Net().cuda().eval()` -> `Net()`."""
    while (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in MODULE_CHAIN_METHODS
    ):
        node = node.func.value
    return node


def _paired_targets(targets: list[ast.expr], value: ast.expr) -> Iterator[tuple[ast.expr, ast.expr]]:
    """Each target with the value it takes: `a = b = v` gives both `v`; `self.m, self.o = M(), O()`
    pairs the elements (the walker's _paired, for the file pass); other tuple targets take the whole."""
    for target in targets:
        if (
            isinstance(target, (ast.Tuple, ast.List))
            and isinstance(value, (ast.Tuple, ast.List))
            and len(target.elts) == len(value.elts)
        ):
            elements = list(zip(target.elts, value.elts, strict=True))
            if not any(isinstance(e, ast.Starred) for pair in elements for e in pair):
                yield from elements
                continue
        yield target, value


def _constructed(value: ast.AST) -> Optional[str]:
    """The dotted callee of `Callee(...)` (through `.cuda()`/`.to()` chains)."""
    value = _strip_chain(value)
    if isinstance(value, ast.Call):
        return dotted(value.func)
    return None


def _hands_back(value: ast.AST, name: str) -> bool:
    """`value` may be the object `name` holds: `name.cuda()`, or a call handed `name` itself."""
    stripped = _strip_chain(value)
    if isinstance(stripped, ast.Name):
        return stripped.id == name
    return isinstance(value, ast.Call) and any(
        isinstance(argument, ast.Name) and argument.id == name
        for argument in [*value.args, *(k.value for k in value.keywords)]
    )


def _each_binding(value: ast.AST, local: _Locals) -> list[ast.AST]:
    """What a local name may stand for where the function binds it only by plain assignments
    (deeplabv3plus' `classifier = DeepLabHeadV3Plus(...)` or `DeepLabHead(...)` by head;
    `_load_model`'s `model = _segm_mobilenet(...)` or `_segm_resnet(...)` by backbone), each a
    call and none handing the name back; the value itself otherwise."""
    if not isinstance(value, ast.Name) or value.id in local.params or local.function is None:
        return [value]
    values = local.assigned_values(value.id)
    if not values:
        return [value]
    if any(_hands_back(each, value.id) or not isinstance(_strip_chain(each), ast.Call) for each in values):
        return [value]  # a value handed back, or one that is no call: what it holds is not known
    return list(values)


def _bound_once(value: ast.AST, local: _Locals) -> ast.AST:
    """What a local name stands for where the function binds it once (`net = WideResNet(...)`,
    then `return net`); the value itself otherwise."""
    if not isinstance(value, ast.Name) or value.id in local.params:
        return value
    return local.bound_once(value.id) or value


def _returned_sides(value: ast.AST) -> list[ast.AST]:
    """The values a `return` may give: each side of an if-expression, else the value itself."""
    if isinstance(value, ast.IfExp):
        return [*_returned_sides(value.body), *_returned_sides(value.orelse)]
    return [value]


def _returns_container(value: ast.AST, local: _Locals) -> bool:
    """`return nn.Sequential(*layers)`, or a returned name (alone or in a tuple) bound in the
    function to a container (`module_list = nn.ModuleList()`, `layers = []`)."""
    elements = value.elts if isinstance(value, ast.Tuple) else _returned_sides(value)
    for element in elements:
        element = _strip_chain(element)
        values = local.values.get(element.id, []) if isinstance(element, ast.Name) else [element]
        if any(_is_container(v) for v in values):
            return True
    return False


def _is_container(value: ast.AST) -> bool:
    if isinstance(value, (ast.List, ast.Dict)):
        return True
    callee = dotted(value.func) if isinstance(value, ast.Call) else None
    return callee is not None and callee.rsplit(".", 1)[-1] in CONTAINERS


def _annotated_class(annotation: Optional[ast.AST]) -> str:
    """`-> LMModel`, `-> models.LMModel` or `-> "LMModel"`: the dotted name; "" for anything else
    (`Optional[...]`, unions, `None`)."""
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        text = annotation.value.strip()
        return text if all(part.isidentifier() for part in text.split(".")) else ""
    if isinstance(annotation, (ast.Name, ast.Attribute)):
        return dotted(annotation) or ""
    return ""


def built(call: ast.Call) -> list[str]:
    """What a call may construct, as written: its callee (`nn.Conv2d#grouped` for a conv with
    `groups=` other than 1, `nn.Conv2d#folded` for a `(k, 1)`/`(1, k)` kernel), then the classes it is handed (`ResNet(Bottleneck, [3, 4, 6, 3])`,
    `self._make_layer(BasicBlock, 64)`): CapWords names, which a project pass resolves."""
    callee = dotted(call.func)
    if callee in ("isinstance", "issubclass"):
        return []  # `isinstance(m, nn.Conv2d)` in a weight initialiser tests layers, builds none
    found = []
    if callee:
        groups = next((k.value for k in call.keywords if k.arg == "groups"), None)
        grouped = groups is not None and not (isinstance(groups, ast.Constant) and groups.value == 1)
        tag = "#folded" if _folded_kernel(call) else "#grouped" if grouped else ""
        found.append(callee + tag)
    for arg in [*call.args, *(k.value for k in call.keywords)]:
        name = dotted(arg) if isinstance(arg, (ast.Name, ast.Attribute)) else None
        last = name.split(".")[-1] if name else ""
        if last[:1].isupper() and not last.isupper():
            found.append(name)  # type: ignore[arg-type]  # last is non-empty, so name is set
    return found


def _folded_kernel(call: ast.Call) -> bool:
    """A `(k, 1)` or `(1, k)` kernel (the third positional argument or `kernel_size=`): a 1-D
    signal folded into 2-D (a period discriminator over a waveform), not an image."""
    kernel = call.args[2] if len(call.args) > 2 else None
    kernel = next((k.value for k in call.keywords if k.arg == "kernel_size"), kernel)
    if not isinstance(kernel, ast.Tuple) or len(kernel.elts) != 2:
        return False
    ones = [isinstance(e, ast.Constant) and e.value == 1 for e in kernel.elts]
    return ones.count(True) == 1


def _is_class_like(name: str) -> bool:
    """Capitalised, private ones too (`_NISQADIM`); acronyms (`VGG`) may be classes as well."""
    return name.lstrip("_")[:1].isupper()


def _scaler_step(node: ast.Call, scope: _Locals) -> Optional[tuple[str, str]]:
    """`scaler.step(optimizer)` (analysis/vocabulary.py's scaler_stepped): the call runs the `step`
    of the optimizer's class."""
    optimizer = scaler_stepped(node)
    if optimizer is None or optimizer not in scope.names:
        return None
    return _Summarizer._instance(optimizer, "step", scope)


def _derived(value: ast.expr) -> bool:
    """A value the project pass may work out from tokens (Function.derived_stores): a boolean
    test, or a call of a named function (not a class) with two positional arguments (a fallback
    helper)."""
    if is_boolean_test(value):
        return True
    name = dotted(value.func) if isinstance(value, ast.Call) else None
    return (
        isinstance(value, ast.Call)
        and name is not None
        and not _is_class_like(name.rsplit(".", 1)[-1])
        and len(value.args) == 2
        and not value.keywords
        and not any(isinstance(a, ast.Starred) for a in value.args)
    )


def _flagged_build(value: ast.expr, params: list[str]) -> Optional[list[str]]:
    """[PARAM, side, callee] for `Callee(...) if PARAM else None` ("body") or
    `None if PARAM else Callee(...)` ("else"); None for anything else."""
    if not (isinstance(value, ast.IfExp) and isinstance(value.test, ast.Name) and value.test.id in params):
        return None
    for side, built, other in (("body", value.body, value.orelse), ("else", value.orelse, value.body)):
        callee = dotted(built.func) if isinstance(built, ast.Call) else None
        if callee and isinstance(other, ast.Constant) and other.value is None:
            return [value.test.id, side, callee]
    return None


def fills_cache(branch: ast.If, local: Optional[_Locals] = None) -> bool:
    """A cache-miss builder (analysis/cache_misses.py), what a local bound once stands for read in
    `local`."""

    def bound(name: str) -> Optional[ast.AST]:
        value = local.bound_once(name) if local is not None else None
        return value if isinstance(value, (ast.Attribute, ast.Subscript)) else None

    return cache_misses.fills_cache(branch.test, _assigned_targets(branch.body), bound)


def _assigned_targets(statements: list[ast.stmt]) -> list[ast.expr]:
    return [t for s in statements if isinstance(s, ast.Assign) for t in s.targets]


def fills_looked_up_cache(branch: ast.If, block: list[ast.stmt]) -> bool:
    """A cache-miss builder read through a lookup (analysis/cache_misses.py): `value =
    self.cache.get(key)`, `if value is None: value = build(...)`, stored back."""
    index = next((i for i, statement in enumerate(block) if statement is branch), 0)
    previous = block[index - 1] if index > 0 else None
    if not (isinstance(previous, ast.Assign) and len(previous.targets) == 1):
        return False
    lookup = cache_misses.looked_up(previous.targets[0], previous.value)
    body = _assigned_targets(branch.body)
    later = [*body, *_assigned_targets(block[index + 1 :])]
    return cache_misses.fills_looked_up_cache(lookup, branch.test, body, later)


def _leaves(body: list[ast.stmt]) -> bool:
    return isinstance(body[-1], (ast.Return, ast.Raise, ast.Continue, ast.Break))


def _cold_guard(statement: ast.stmt, after: list[ast.stmt]) -> bool:
    """`if test: ... return` (or raise, continue, break) without else, where every training step
    takes the body (or every step until a counter passes a mark that `after` moves), or `try:
    return ...` with handlers: what follows it is cold (analysis/cold.py's cold_from)."""
    # `try`, or from Python 3.11 `try`/`except*` (same fields; ast.TryStar is missing on 3.10)
    if isinstance(statement, ast.Try) or type(statement).__name__ == "TryStar":
        tried = cast(ast.Try, statement)
        return not tried.orelse and bool(tried.handlers) and _leaves(tried.body)
    if not (isinstance(statement, ast.If) and not statement.orelse and _leaves(statement.body)):
        return False
    leaving = type(statement.body[-1]).__name__.lower()  # `return`, `raise`, `continue`, `break`
    return leaves_every_step(statement.test, leaving, lambda: _plain_assignments(after))


def _plain_assignments(statements: list[ast.stmt]) -> Assignments:
    found: Assignments = []
    for statement in statements:
        if isinstance(statement, ast.Assign):
            found.append((list(statement.targets), statement.value))
        elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
            found.append(([statement.target], statement.value))
    return found


class _Locals:
    """Names a function binds (Python makes them local), and the calls simple ones are bound to."""

    def __init__(
        self, function: Optional[FunctionNode], text_of: Optional[Callable[[ast.AST], str]] = None
    ) -> None:
        self._text_of = text_of  # a node's lines of the module's text, for `text()`
        # filled while the function's body is walked; read once the outermost function ends
        self.names: set[str] = set()
        self.values: dict[str, list[ast.AST]] = {}
        self.nested: dict[str, FunctionNode] = {}
        self.params: set[str] = set()
        self.stores: dict[str, int] = {}  # how many places bind each name
        # the names an import statement of the function binds -> what they import, as `imports`
        self.imported: dict[str, list[Any]] = {}
        self.yields = False  # a generator: its body yields
        self.unpacked: dict[str, list[tuple[ast.Call, int]]] = {}  # `a, b = f()`: (the call, position)
        # names a `for` binds to the batches of a loader it walks itself (`for x, y in loader`):
        # "" for a loader the function builds, else the parameter that hands it the loader
        self.batch_targets: dict[str, str] = {}
        self.function = function
        self._accumulators: Optional[Accumulators] = None
        # accumulator test key -> its answers (is the body the empty side; None: neither side)
        self.empty_answers: dict[str, set[Optional[bool]]] = {}
        # `ids = A if TEST else B`: the CHOSEN_PREFIX token, read where a call passes the name
        # bound nowhere else (analysis/arguments.py)
        self.chosen: dict[str, str] = {}
        # `for NAME in self.ATTR` (or a parameter): NAME -> what each such loop walks
        self.walked: dict[str, list[str]] = {}
        # `NAME += [...]`: NAME -> (the guards around it, the value added, inside a loop)
        self.extended: dict[str, list[tuple[list[list[str]], ast.AST, bool]]] = {}
        if function is None:
            return
        args = function.args
        for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
            if arg is not None:
                self.names.add(arg.arg)
                self.params.add(arg.arg)

    def text(self) -> Optional[str]:
        """The lines of the function's own text; None at the top level, or where no text was given
        (then `_adds_keys` says keys may be added: unknown, never "none")."""
        if self.function is None or self._text_of is None:
            return None
        return self._text_of(self.function)

    def assigned_values(self, name: str) -> list[ast.AST]:
        """Every value the function binds `name` to, where plain assignments are all that bind
        it; empty otherwise (a parameter, a loop target, an unpacking, a name it never binds)."""
        values = self.values.get(name, [])
        return values if len(values) == self.stores.get(name, 0) else []

    def bound_once(self, name: str) -> Optional[ast.AST]:
        """The value `name` holds where the function binds it once, by a plain assignment."""
        values = self.values.get(name, ())
        return values[0] if len(values) == 1 and self.stores.get(name, 0) == 1 else None

    def origin(self, name: str) -> Optional[ast.AST]:
        """The one value the function binds `name` to where each other binding hands that object
        back: tacotron2's `model = Tacotron2(hparams).cuda()`, then `model =
        apply_gradient_allreduce(model)`, or `model, optimizer, lr, it = load_checkpoint(path,
        model, optimizer)` (a call handed the object itself), or `model = model.eval()`."""
        values, unpacked = self.values.get(name, ()), self.unpacked.get(name, ())
        if (
            self.function is None
            or name in self.params
            or self.stores.get(name, 0) != len(values) + len(unpacked)
        ):
            return None
        if not all(_hands_back(call, name) for call, _ in unpacked):
            return None
        origins = [value for value in values if not _hands_back(value, name)]
        return origins[0] if len(origins) == 1 else None

    def empty_sides(self, test: ast.expr) -> Optional[tuple[bool, bool]]:
        """The side of `test` that runs only while an accumulator is empty (analysis/accumulators.py);
        None where `test` asks nothing of an accumulator."""
        if self.function is None or not tests_a_list(test):
            return None
        if self._accumulators is None:
            text = self.text()
            if text is not None and not _EMPTY_LIST.search(text):
                return None  # no `[]` in its text: nothing the function binds starts empty
            self._accumulators = Accumulators(self.function)
        return self._accumulators.empty_sides(test)


def _only_unpacked_mapping(node: ast.Call) -> Optional[ast.expr]:
    """The mapping `node` unpacks with `**`, where that is its only unpacking."""
    unpacked = [k.value for k in node.keywords if k.arg is None]
    if any(isinstance(a, ast.Starred) for a in node.args) or len(unpacked) != 1:
        return None
    return unpacked[0]


def _table_callables(func: ast.AST, scopes: tuple[_Locals, ...]) -> list[tuple[ast.expr, Optional[str]]]:
    """The callables a call through a dict display may run, each with its key: `loss_map[loss](...)`
    after `loss_map = {"labels": self.loss_labels, "boxes": self.loss_boxes}` (the nearest scope
    that binds the name, by that one assignment), the one under a literal key (`loss_map["boxes"]`);
    none where a value is not a name or an attribute chain, or the table is bound otherwise."""
    if not isinstance(func, ast.Subscript):
        return []
    table: Optional[ast.AST] = func.value
    if isinstance(table, ast.Name):
        scope = next((scope for scope in scopes if table.id in scope.names or table.id in scope.values), None)
        table = scope.bound_once(table.id) if scope is not None else None
    if not isinstance(table, ast.Dict) or any(key is None for key in table.keys):
        return []
    if not all(dotted(value) is not None for value in table.values):
        return []
    key = _string_key(func.slice)
    keys = [_string_key(name) if name is not None else None for name in table.keys]
    pairs = list(zip(table.values, keys, strict=True))
    chosen = [(value, name) for value, name in pairs if name == key]
    return chosen if key is not None and chosen else pairs


def _key_guard(func: ast.AST, key: Optional[str], params: Iterable[str]) -> Optional[list[str]]:
    """The guard of the call of one table entry, `loss == 'masks'` for `loss_map[loss](...)`, where
    a parameter picks the entry: the project pass decides it with what the callers pass."""
    picked = func.slice if isinstance(func, ast.Subscript) else None
    if key is None or not isinstance(picked, ast.Name) or picked.id not in params:
        return None
    return [f"{picked.id} == {key!r}", "body"]


def _spread_name(node: ast.Call) -> str:
    """NAME for a call whose only unpacking is `**vars(NAME)`; "" otherwise."""
    value = _only_unpacked_mapping(node)
    if (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Name)
        and value.func.id == "vars"
        and len(value.args) == 1
        and not value.keywords
        and isinstance(value.args[0], ast.Name)
    ):
        return value.args[0].id
    return ""


def _forwarding(node: ast.Call, function: Optional[FunctionNode]) -> int:
    """Call.forwards: how many plain positional arguments come before the unpackings of a call
    whose only unpackings are `function`'s own `*args`/`**kwargs`, untouched by its body; -1
    for any other call."""
    if function is None:
        return -1
    own = {a.arg for a in (function.args.vararg, function.args.kwarg) if a is not None}
    starred = [i for i, a in enumerate(node.args) if isinstance(a, ast.Starred)]
    unpacked = [a.value for a in node.args if isinstance(a, ast.Starred)]
    unpacked.extend(k.value for k in node.keywords if k.arg is None)
    if not unpacked or any(not (isinstance(v, ast.Name) and v.id in own) for v in unpacked):
        return -1
    if starred and starred != list(range(starred[0], len(node.args))):
        return -1  # a plain positional after `*args`: its slot is not known
    return -1 if _adds_to(function, own) else (starred[0] if starred else len(node.args))


_READ_ONLY = frozenset({"pop", "get", "keys", "items", "values", "copy"})


def _adds_to(function: FunctionNode, names: set[str]) -> bool:
    """`function` binds one of `names` again, stores into it, calls a method on it that may add
    to it (`kwargs.update(...)`), or hands it on other than unpacked (a callee may add to it)."""
    unpacked: set[int] = set()
    for node in ast.walk(function):
        if isinstance(node, ast.Starred) or (isinstance(node, ast.keyword) and node.arg is None):
            unpacked.add(id(node.value))
    for node in ast.walk(function):
        if isinstance(node, ast.Name) and node.id in names:
            if not isinstance(node.ctx, ast.Load):
                return True
        elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in names:
            if isinstance(node.ctx, ast.Store):
                return True
        elif (
            isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) and node.target.id in names
        ):
            return True
        elif isinstance(node, ast.Call):
            func = node.func
            if (
                isinstance(func, ast.Attribute)
                and isinstance(func.value, ast.Name)
                and func.value.id in names
                and func.attr not in _READ_ONLY
            ):
                return True
            handed = [*node.args, *(k.value for k in node.keywords if k.arg)]
            if any(isinstance(a, ast.Name) and a.id in names and id(a) not in unpacked for a in handed):
                return True
    return False


def _chosen_token(name: str, local: _Locals) -> Optional[str]:
    """The CHOSEN_PREFIX token of a local bound once, to an if-expression."""
    if name in local.params or local.stores.get(name) != 1 or len(local.values.get(name, ())) != 1:
        return None
    return local.chosen.get(name)


# the longest list of literals a token spells out (a table of numbers is no list of choices)
_MOST_LITERAL_ITEMS = 32


# what `_walked_token` records for a loop over a display of literals, before their repr
_LITERAL_WALK = "="


def _walked_token(name: str, local: _Locals) -> Optional[str]:
    """What `name` holds where every binding of the local is a `for` over the same parameter or
    `self.` attribute (`for loss in self.losses:`: ITEMS_PREFIX and what it walks, for the
    project pass), or over the same display of literals (`for loss in ("labels", "boxes"):`:
    one of them, analysis/arguments.py's items_token)."""
    walked = local.walked.get(name, [])
    if not walked or name in local.params or local.stores.get(name) != len(walked) or len(set(walked)) != 1:
        return None
    if walked[0].startswith(_LITERAL_WALK):
        return items_token(walked[0][len(_LITERAL_WALK) :])
    return ITEMS_PREFIX + walked[0]


def _extended_token(name: str, local: _Locals, guards: list[list[str]], line: int) -> Optional[str]:
    """The CHOSEN_PREFIX token of a list of literals bound once and extended once by `+=` under one
    guard more than the call has, both before the call: DETR's `losses = ['labels', 'boxes',
    'cardinality']`, then `if args.masks: losses += ["masks"]`."""
    values, extensions = local.values.get(name, []), local.extended.get(name, [])
    if name in local.params or len(values) != 1 or len(extensions) != 1 or local.stores.get(name) != 2:
        return None
    added_guards, added, looped = extensions[0]
    base, extra = _literal_items(values[0]), _literal_items(added)
    if (
        base is None
        or extra is None
        or looped
        or added_guards[:-1] != guards
        or len(added_guards) != len(guards) + 1
    ):
        return None
    if not values[0].lineno < added.lineno < line:  # type: ignore[attr-defined]
        return None
    test, side = added_guards[-1]
    whole, bare = repr(base + extra), repr(base)
    return chosen(test, whole, bare) if side == "body" else chosen(test, bare, whole)


def _literal_items(node: ast.AST) -> Optional[list[object]]:
    """The items of a short list or tuple display of literals (`["masks"]`), or None."""
    if not isinstance(node, (ast.List, ast.Tuple)) or len(node.elts) > _MOST_LITERAL_ITEMS:
        return None
    if not all(isinstance(e, ast.Constant) for e in node.elts):
        return None
    return [cast(ast.Constant, e).value for e in node.elts]


def _record_unpacked(node: ast.Assign, local: _Locals) -> None:
    """`train_set, model, opt = load_train_objs()`: each name with the call and its position."""
    target, value = node.targets[0], node.value
    if len(node.targets) != 1 or not isinstance(target, ast.Tuple) or not isinstance(value, ast.Call):
        return
    if any(isinstance(element, ast.Starred) for element in target.elts):
        return
    for position, element in enumerate(target.elts):
        if isinstance(element, ast.Name):
            local.unpacked.setdefault(element.id, []).append((value, position))


def _dataset_token(expr: ast.AST, local: _Locals) -> str:
    """What `expr` is as a dataset (project/datasets.py): `Callee` for a class-like callee's
    `Callee(...)`, `f#i` for element `i` of `f()`'s tuple, through a name every binding of which
    agrees; "" when neither."""
    if isinstance(expr, ast.Call):
        callee = dotted(expr.func) or ""
        return callee if callee and _is_class_like(callee.split(".")[-1]) else ""
    if not isinstance(expr, ast.Name) or expr.id in local.params:
        return ""
    values = local.values.get(expr.id, [])
    tokens = {_dataset_token(v, local) if isinstance(v, ast.Call) else "" for v in values}
    for call, position in local.unpacked.get(expr.id, ()):
        function = dotted(call.func)
        tokens.add(f"{function}#{position}" if function else "")
    return tokens.pop() if len(tokens) == 1 else ""


class _Summarizer:
    def __init__(self, source: str) -> None:
        self.source = source
        self._lines: Optional[list[str]] = None  # the source's lines, split on first use
        self.summary = Summary()
        self.import_pairs: list[tuple[str, str]] = []  # (bound, qualified), in functions too
        self.function_index: dict[ast.AST, int] = {}
        self.class_stack: list[int] = []
        self.function_stack: list[tuple[int, _Locals]] = []  # (index or -1, locals)
        self.loop_stack: list[list[int]] = [[]]  # per function: the loops around the current node
        self.module_locals = _Locals(None)  # module-level names are globals; only their values
        self.cold = 0  # inside branches a training step does not take
        self.block: list[ast.stmt] = []  # the statements of the block being walked
        self.pending: list[Callable[[], None]] = []
        self.guards: list[list[str]] = []  # tests on the current function's parameters around here
        self._guard_texts: dict[int, Optional[str]] = {}  # id of a test -> its guard's text, or None
        self._host_tensor_readers: dict[int, HostTensors] = {}  # by id of the function's locals
        self.leaving: list[int] = []  # per enclosing block that ends by leaving loops: the outermost
        self.not_handed: set[int] = set()  # ids of names read to be called, or only to test a type
        self.handed: set[str] = set()
        # `NAME.attr` read: (NAME, attr), handed on unless a class variable (_hands_bases)
        self.attribute_bases: list[tuple[str, str]] = []
        self.handed_members: set[str] = set()
        self.handed_imported: set[tuple[str, str]] = set()
        self.global_objects: set[str] = set()  # bound at module level (`nd, ok = optional_import(...)`)
        self.outer_stores: set[str] = set()
        self.lambda_params: list[set[str]] = []  # they hide the function's parameters of that name
        self.host_reads: set[int] = set()  # ids of subscripts whose value is handed to the host
        self.moved_results: set[int] = set()  # ids of calls whose result `.to(device)` moves
        self.conflicting_imports: set[str] = set()  # imported as different things by two functions
        self.comprehensions = 0  # comprehensions around the current node: their element repeats
        self.fills_container: set[int] = set()  # functions that return a container they fill
        # loops over a parameter (`for l in cfg:`): loop -> the parameter; and per function, what
        # one pass of such a loop builds, by parameter (counted once per item the calls hand in)
        self.item_loops: dict[int, str] = {}
        self.item_builds: dict[int, dict[str, list[str]]] = {}
        # (a plain callee, slot) -> what each call of the module passes there
        self.passed_values: dict[tuple[str, str], list[ast.expr]] = {}
        self.bound_calls: dict[int, str] = {}  # ids of calls `name = f(...)` binds -> the name
        self.stored_calls: dict[int, str] = {}  # ids of calls `self.ATTR = f(...)` stores -> ATTR
        self.unpacked_calls: dict[int, list[str]] = {}  # ids of calls `a, b = f(...)` unpacks -> the names
        # what the module says of its options (the names holding them per scope node id, the
        # functions returning them); the walk records their stores into it
        self.options = ModuleOptions()
        self.option_holders: set[str] = set()
        self.loop_nodes: dict[int, LoopNode] = {}  # loop index -> its node
        # indices of the loops around here on one value of whose enumerate counter the current
        # branch is taken (`if i == 0:`): cold when that loop iterates a DataLoader
        self.one_pass_of: list[int] = []
        self.with_names: list[str] = []  # the `with` items around here in the current function

    def lines_of(self, node: ast.AST) -> str:
        """The whole lines of the source that `node` spans."""
        if self._lines is None:
            # the line breaks CPython counts (not str.splitlines', which also breaks at a form feed)
            self._lines = _LINES.findall(self.source)
        start, end = getattr(node, "lineno", 1), getattr(node, "end_lineno", None)
        return "".join(self._lines[start - 1 : end])

    def source_text(self, node: ast.expr) -> str:
        """The source text of an expression, as analysis/arguments.py's `parse_test` reads it back
        (inside parentheses): a slice of its lines, at a tenth of the cost of `ast.unparse`."""
        lines = self.lines_of(node)
        if node.end_lineno is None or node.end_col_offset is None or not lines.isascii():
            return ast.unparse(node)  # offsets count UTF-8 bytes
        last = self._lines[node.end_lineno - 1]  # type: ignore[index]  # lines_of read them
        return lines[node.col_offset : len(lines) - len(last) + node.end_col_offset]

    # -- names --------------------------------------------------------------------------
    def qualify(self, name: str) -> str:
        """`optim.SGD` -> `torch.optim.SGD` through the module's absolute imports."""
        return self._qualified(name, self.summary.imports.get(name.partition(".")[0]))

    def qualify_here(self, name: str) -> str:
        """`qualify`, where the imports of the functions around here come first (`import
        matplotlib.pyplot as plt` in the body of a plotting helper, or of the function it is
        nested in); a name they bind otherwise is theirs, not the module's import."""
        head = name.partition(".")[0]
        for _, local in reversed(self.function_stack):
            if head in local.names:
                return self._qualified(name, local.imported.get(head))
        return self._qualified(name, self.summary.imports.get(head))

    @staticmethod
    def _qualified(name: str, entry: Optional[list[Any]]) -> str:
        _, _, rest = name.partition(".")
        if entry is None or entry[2]:
            return name
        module, imported, _ = entry
        base = f"{module}.{imported}" if imported else module
        return f"{base}.{rest}" if rest else base

    def current(self) -> Function:
        index = self.function_stack[-1][0] if self.function_stack else -1
        return self.summary.toplevel if index < 0 else self.summary.functions[index]

    def locals(self) -> _Locals:
        return self.function_stack[-1][1] if self.function_stack else self.module_locals

    def _call_bindings(self, local: _Locals) -> dict[str, int]:
        """Function.call_bindings: the names bound two or more times, each `name = f(...)`."""
        return {
            name: len(values)
            for name, values in local.values.items()
            if len(values) > 1 and _bound_to_calls(name, local, self.bound_calls)
        }

    def _host_tensors(self, local: _Locals) -> HostTensors:
        """The function's reader, made once; kept here, not on `local`, whose methods it holds (a
        reference cycle would keep the tree alive until a collection)."""
        reader = self._host_tensor_readers.get(id(local))
        if reader is None:
            reader = self._host_tensor_readers[id(local)] = HostTensors(
                local.assigned_values,
                frozenset(local.params),
                self.qualify,
                lambda expr: self._holds_host_data(expr, local),
            )
        return reader

    def scopes(self) -> tuple[_Locals, ...]:
        """The current function's locals, then those of the functions it is nested in."""
        if not self.function_stack:
            return (self.module_locals,)
        return tuple(local for _, local in reversed(self.function_stack))

    def resolve_pending(self) -> None:
        """Python makes a name local wherever in the function it is bound, so call sites and
        loops are described once the outermost function has been walked."""
        for work in self.pending:
            work()
        self.pending.clear()

    def innermost_loop(self) -> int:
        loops = self.loop_stack[-1]
        return loops[-1] if loops else -1

    def _literal_length(self, value: ast.AST) -> Optional[int]:
        """How many items a literal configuration holds: `[64, "M", 128]`, a module-level name bound
        once to one, or an item of a module-level dict of them under a literal key (`cfg["D"]`)."""
        if isinstance(value, ast.Subscript) and isinstance(value.slice, ast.Constant):
            table = self._module_literal(value.value)
            if isinstance(table, ast.Dict):
                keys = [k.value if isinstance(k, ast.Constant) else None for k in table.keys]
                if value.slice.value in keys:
                    return self._literal_length(table.values[keys.index(value.slice.value)])
            return None
        literal = self._module_literal(value) if isinstance(value, ast.Name) else value
        if isinstance(literal, (ast.List, ast.Tuple)) and not any(
            isinstance(e, ast.Starred) for e in literal.elts
        ):
            return len(literal.elts)
        return None

    def _module_literal(self, node: ast.AST) -> Optional[ast.AST]:
        """The value a module-level name is bound to, where one plain assignment of the module's
        own statements binds it (summarize reads them before the walk)."""
        values = self.module_locals.values.get(node.id, ()) if isinstance(node, ast.Name) else ()
        return values[0] if len(values) == 1 else None

    def item_counted_builds(self) -> None:
        """Add what each pass of a loop over a handed-in configuration builds, once per item of the
        fewest the module's own calls hand in (LOOP_REPEATS where any call's is not a literal)."""
        for index, by_param in self.item_builds.items():
            function = self.summary.functions[index]
            for param, made in by_param.items():
                slots = (str(function.params.index(param)), param) if param in function.params else ()
                passed = [v for slot in slots for v in self.passed_values.get((function.name, slot), [])]
                lengths = [self._literal_length(value) for value in passed]
                known = [n for n in lengths if n is not None]
                items = min(known) if known and len(known) == len(lengths) else LOOP_REPEATS
                function.builds.extend(made * items)

    # -- walking ------------------------------------------------------------------------
    def visit(self, node: ast.AST) -> None:
        kind = type(node)
        if kind in STORING:
            record_store(node, self.option_holders, self.options)
        try:
            handler = _HANDLERS[kind]
        except KeyError:
            handler = _HANDLERS[kind] = getattr(_Summarizer, f"_{kind.__name__}", None)
        if handler is not None:
            handler(self, node)
        else:
            self.children(node)

    def children(self, node: ast.AST) -> None:
        # ast.iter_child_nodes, without its two generators per node, nor the contexts and
        # operators (a third of all nodes), which no handler reads as nodes of their own
        for field in child_fields(type(node)):
            value = getattr(node, field, None)
            if isinstance(value, ast.AST):
                self.visit(value)
            elif isinstance(value, list):
                if value and isinstance(value[0], ast.stmt):
                    self.statements(value)
                    continue
                for item in value:
                    if isinstance(item, ast.AST):
                        self.visit(item)

    def _Yield(self, node: Union[ast.Yield, ast.YieldFrom]) -> None:
        if self.function_stack:
            self.function_stack[-1][1].yields = True
        self.children(node)

    _YieldFrom = _Yield

    def _Import(self, node: ast.Import) -> None:
        for alias in node.names:
            bound = alias.asname or alias.name.split(".")[0]
            self.import_pairs.append((bound, alias.name if alias.asname else bound))
        if self.function_stack:
            for alias in node.names:
                bound = alias.asname or alias.name.split(".")[0]
                self._import_locally(bound, [alias.name if alias.asname else bound, "", 0])
            return
        for alias in node.names:
            if alias.asname:
                self.summary.imports[alias.asname] = [alias.name, "", 0]
            else:
                head = alias.name.split(".")[0]
                self.summary.imports[head] = [head, "", 0]

    def _ImportFrom(self, node: ast.ImportFrom) -> None:
        if not node.level and node.module:
            self.import_pairs.extend((a.asname or a.name, f"{node.module}.{a.name}") for a in node.names)
        module = node.module or ""
        if self.function_stack:
            for alias in node.names:
                if alias.name != "*":
                    self._import_locally(alias.asname or alias.name, [module, alias.name, node.level])
            return
        for alias in node.names:
            if alias.name == "*":
                self.summary.stars.append([module, node.level])
            else:
                self.summary.imports[alias.asname or alias.name] = [module, alias.name, node.level]

    def _import_locally(self, bound: str, entry: list[Any]) -> None:
        """A scoped import binds a local name; its calls resolve as the import says, when every
        function that imports the name imports the same thing."""
        local = self.locals()
        local.names.add(bound)
        local.imported[bound] = entry
        known = self.summary.local_imports.get(bound)
        if known is None and bound not in self.conflicting_imports:
            self.summary.local_imports[bound] = entry
        elif known is not None and known != entry:
            del self.summary.local_imports[bound]
            self.conflicting_imports.add(bound)

    def _ClassDef(self, node: ast.ClassDef) -> None:
        if self.function_stack:
            self.locals().names.add(node.name)
        # a base is read, not handed on: its subclasses' constructions reach its __init__
        self.not_handed.update(id(base) for base in node.bases)
        for expr in [*node.decorator_list, *node.bases, *(k.value for k in node.keywords)]:
            self.visit(expr)
        outer = self.summary.classes[self.class_stack[-1]].qualname + "." if self.class_stack else ""
        index = len(self.summary.classes)
        bases = [d for d in (dotted(b) for b in node.bases) if d]
        self.summary.classes.append(Class(node.name, outer + node.name, node.lineno, bases))
        self.summary.classes[index].items_in_memory = items_in_memory(node)
        self.summary.classes[index].reduced_precision = reduced_precision(node, self.lines_of(node))
        self.summary.classes[index].conv_wrapper = conv_wrapper(node)
        if not self.function_stack and not self.class_stack:
            self.summary.globals[node.name] = ["class", index]
        self.class_stack.append(index)
        saved_functions = self.function_stack
        self.function_stack = []  # a class body's names are not the enclosing function's locals
        for statement in node.body:
            self.visit(statement)
        self.function_stack = saved_functions
        self.class_stack.pop()

    def _FunctionDef(self, node: FunctionNode) -> None:
        for decorator in node.decorator_list:
            self.visit(decorator)
            name = dotted(decorator.func if isinstance(decorator, ast.Call) else decorator)
            if name:
                self.summary.contexts.append(name)
        index = len(self.summary.functions)
        parent = self.function_stack[-1][0] if self.function_stack else -1
        if self.function_stack:
            self.locals().names.add(node.name)
            self.locals().nested[node.name] = node
        cls = self.class_stack[-1] if self.class_stack and not self.function_stack else -1
        if cls >= 0:
            qualname = f"{self.summary.classes[cls].name}.{node.name}"
            self.summary.classes[cls].methods.setdefault(node.name, index)
        else:
            qualname = node.name
            if parent < 0 and not self.class_stack:
                self.summary.globals[node.name] = ["def", index]
        args = node.args
        params = [a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]]
        decorators = [
            d for d in (dotted(x.func if isinstance(x, ast.Call) else x) for x in node.decorator_list) if d
        ]
        rare = runs_rarely(node.name, map(self.qualify, decorators), ()) or (
            cls >= 0 and prepares_dataset(node.name, self.summary.classes[cls].bases)
        )
        function = Function(node.name, qualname, node.lineno, cls, parent, params, decorators, rare=rare)
        function.namespaces = self.options.holders.get(id(node), [])
        function.varkw = args.kwarg is not None
        function.returns_annotation = _annotated_class(node.returns)
        registry = next((d for d in decorators if registers_model(d)), None)
        if registry is not None:
            function.weights = f"@{registry}"
        positional = [*args.posonlyargs, *args.args]
        function.positional = len(positional)
        for arg, default in [
            *zip(positional[len(positional) - len(args.defaults) :], args.defaults, strict=True),
            *zip(args.kwonlyargs, args.kw_defaults, strict=True),
        ]:
            token = value_token(default) if default is not None else None
            if token is not None:
                function.defaults[arg.arg] = token
        function.fallback = fallback_shape(node)
        function.tests_not_none = is_not_none_test(node)
        for statement in node.body:
            if isinstance(statement, ast.Assert):
                function.asserted.update(asserted_values(statement.test, set(params)))
        self.summary.functions.append(function)
        self.function_index[node] = index
        # defaults are evaluated once, where the function is defined
        for default in [*args.defaults, *(d for d in args.kw_defaults if d is not None)]:
            self.visit(default)
        saved_classes = self.class_stack
        self.class_stack = saved_classes if cls >= 0 else []
        self.function_stack.append((index, _Locals(node, self.lines_of)))
        self.loop_stack.append([])
        saved_guards, self.guards = self.guards, []
        saved_leaving, self.leaving = self.leaving, []
        saved_comprehensions, self.comprehensions = self.comprehensions, 0
        saved_with, self.with_names = self.with_names, []  # a nested function runs when called
        self.statements(node.body)
        self.with_names = saved_with
        self.comprehensions = saved_comprehensions
        answers = self.function_stack[-1][1].empty_answers
        function.optimizers = self._optimizer_names(self.function_stack[-1][1])
        if self.function_stack[-1][1].yields:  # only a generator hands items on
            function.yields_items_of = yielded_parameter(node)
        function.flag_reads = self._flag_reads(node, self.function_stack[-1][1])
        function.call_bindings = self._call_bindings(self.function_stack[-1][1])
        function.empty_fallbacks = {
            key: answer
            for key, found in answers.items()
            if len(found) == 1 and (answer := next(iter(found))) is not None
        }
        if index not in self.fills_container:
            function.builds.clear()  # only a container builder's body is what it returns
            self.item_builds.pop(index, None)
        self.guards, self.leaving = saved_guards, saved_leaving
        self.loop_stack.pop()
        self.function_stack.pop()
        self.class_stack = saved_classes
        if not self.function_stack:
            self.resolve_pending()

    _AsyncFunctionDef = _FunctionDef

    def _comprehension(self, node: ast.AST) -> None:
        self.comprehensions += 1
        self.children(node)
        self.comprehensions -= 1

    _ListComp = _SetComp = _DictComp = _GeneratorExp = _comprehension

    def _loop(self, node: LoopNode) -> None:
        index = len(self.summary.loops)
        function = self.function_stack[-1][0] if self.function_stack else -1
        loop = Loop(node.lineno, function, self.innermost_loop())
        loop.bounded = isinstance(node, (ast.For, ast.AsyncFor)) and _breaks_at_counter_bound(node)
        self.summary.loops.append(loop)
        self.loop_nodes[index] = node
        if not isinstance(node, ast.While):
            scopes, iterable, cls = self.scopes(), node.iter, self.current().cls
            self.host_reads.add(id(iterable))  # `for i in params["order"]`: Python takes the values

            def label() -> None:
                loop.loader = self._loader(iterable, scopes) or ""
                loop.iterated, loop.iterated_scope = _iterated_name(iterable, scopes[0], function >= 0)
                if not loop.iterated:
                    loop.through = self._iterated_call(iterable, scopes, cls, function >= 0)
                walked = _walked_loader(iterable, scopes[0]) if function >= 0 else None
                if walked is not None:
                    for name in batch_names(node.target, iterable):
                        scopes[0].batch_targets[name] = walked

            self._later(label)
        if isinstance(node, ast.While):
            self.visit(node.test)
        else:
            self.visit(node.target)
            self.visit(node.iter)
        if isinstance(node, (ast.For, ast.AsyncFor)) and self.function_stack:
            iterated = node.iter
            if isinstance(iterated, ast.Name) and iterated.id in self.locals().params:
                self.item_loops[index] = iterated.id  # `for l in cfg:` one pass per item it is handed
            walked = subject(iterated)
            items = _literal_items(iterated)
            if isinstance(node.target, ast.Name) and items is not None:
                walked = _LITERAL_WALK + repr(items)  # `for loss in ("labels", "boxes"):`
            if (
                isinstance(node.target, ast.Name)
                and walked is not None
                and (walked.startswith(("self.", _LITERAL_WALK)) or walked in self.locals().params)
            ):
                self.locals().walked.setdefault(node.target.id, []).append(walked)
        self.loop_stack[-1].append(index)
        self.statements(node.body)
        self.loop_stack[-1].pop()
        self.statements(node.orelse)

    _For = _AsyncFor = _While = _loop

    def _AugAssign(self, node: ast.AugAssign) -> None:
        if self.function_stack and isinstance(node.target, ast.Name) and isinstance(node.op, ast.Add):
            added = ([list(g) for g in self.guards], node.value, bool(self.loop_stack[-1]))
            self.locals().extended.setdefault(node.target.id, []).append(added)
        self.children(node)

    def _in_cold(self, nodes: list[ast.stmt], cold: bool, guard: Optional[list[str]] = None) -> None:
        self.cold += cold
        self.guards.extend([guard] if guard else ())
        self.statements(nodes)
        del self.guards[len(self.guards) - bool(guard) :]
        self.cold -= cold

    @functools.cached_property
    def _flag_names(self) -> frozenset[str]:
        """The settings the module's top level fixes: read once they are known, before the walk."""
        return frozenset({*self.summary.module_flags, *self.summary.module_flag_choices})

    def _flag_reads(self, node: FunctionNode, local: _Locals) -> list[str]:
        """The module's settings that the function's own tests read as globals."""
        text = self.lines_of(node) if self._flag_names else ""
        flags = {name for name in self._flag_names if name in text}  # most functions name none of them
        if not flags:
            return []
        read = {
            name.id
            for test in own_nodes(node.body)
            if isinstance(test, (ast.If, ast.IfExp, ast.While))
            for name in ast.walk(test.test)
            if isinstance(name, ast.Name) and name.id in flags
        }
        return sorted(read - local.names - local.params - local.imported.keys())

    def _guard(self, test: ast.expr, side: str) -> Optional[list[str]]:
        """The guard a test on the function's parameters (or `self.` attributes) puts around
        one side of a branch, for the project pass to decide (analysis/arguments.py)."""
        if id(test) not in self._guard_texts:  # a branch's two sides ask for one test
            self._guard_texts[id(test)] = self._guard_text(test)
        text = self._guard_texts[id(test)]
        return [text, side] if text is not None else None

    def _guard_text(self, test: ast.expr) -> Optional[str]:
        function = self.current()
        # the settings its module fixes (`if profile:`, `if FLASH:` in a forward) too: the project
        # pass hands a function their values where it reads them as globals (Function.flag_reads)
        flags = self._flag_names
        if not mentions(test, {*function.params, *function.namespaces, *flags}) or not (
            self.function_stack or function.namespaces or flags
        ):
            return None
        return self.source_text(test)

    def statements(self, nodes: list[ast.stmt]) -> None:
        """A block's statements; those after a guard that leaves in every training step are
        cold (`if x.device.type != "cpu": return`), as analysis/cold.py's cold_from says; those
        after `if flag: return` run only when the flag is off."""
        # a block that ends by raising runs only on the way to an error (analysis/cold.py's
        # fails_after): `if outside.numel() > 0: bad = int(outside[0]); raise ...`
        cold = fails_at_end(nodes)
        self.cold += cold
        guards = len(self.guards)
        for index, statement in enumerate(nodes):
            self.block = nodes
            self.visit(statement)
            if not cold and _cold_guard(statement, nodes[index + 1 :]):
                cold = True
                self.cold += 1
            if isinstance(statement, ast.If) and not statement.orelse and _leaves(statement.body):
                guard = self._guard(statement.test, "else")
                self.guards.extend([guard] if guard else ())
        self.cold -= cold
        del self.guards[guards:]

    def _cold_sides(self, test: ast.expr) -> tuple[bool, bool]:
        """branch_sides.py's cold_sides, and the empty side of an accumulator's test (accumulators.py)."""
        body, orelse = cold_sides(test)
        empty_body, empty_orelse = self._empty_sides(test)
        return body or empty_body, orelse or empty_orelse

    def _empty_sides(self, test: ast.expr) -> tuple[bool, bool]:
        """The empty side of an accumulator's test, kept in the function's summary under the test's
        key for the file pass; a key whose tests differ in their answer is dropped there."""
        local = self.locals() if self.function_stack else None
        sides = local.empty_sides(test) if local is not None else None
        if local is None or sides is None:
            return False, False
        answer = sides[0] if any(sides) else None
        local.empty_answers.setdefault(test_key(test), set()).add(answer)
        return sides

    def _If(self, node: ast.If) -> None:
        body, orelse = self._cold_sides(node.test)
        # the branch that steps the optimizer is the step itself, never a periodic extra
        body = body and not self._steps_an_optimizer(node.body)
        local = self.locals() if self.function_stack else None
        memo = fills_cache(node, local) or fills_looked_up_cache(node, self.block)
        self.visit(node.test)
        sides = ((node.body, body or memo, "body"), (node.orelse, orelse, "else"))
        once = self._counted_loop(node.test)
        for nodes, cold, side in sides:
            left = self._left_loop(nodes)
            self.leaving.extend([left] if left >= 0 else ())
            self.one_pass_of.extend([once] if once >= 0 and side == "body" else ())
            self._in_cold(nodes, cold, self._guard(node.test, side))
            del self.one_pass_of[len(self.one_pass_of) - (once >= 0 and side == "body") :]
            del self.leaving[len(self.leaving) - (left >= 0) :]

    def _counted_loop(self, test: ast.expr) -> int:
        """The loop of this function whose enumerate counter `test` compares with one value
        (`if i == 0:` in `for i, x in enumerate(loader):`), when no loop between binds it; -1 for none."""
        name = compared_counter(test)
        for index in reversed(self.loop_stack[-1] if name else ()):
            loop = self.loop_nodes[index]
            if _binds(loop, name):
                return index if _enumerate_counter(loop) == name else -1
        return -1

    def _left_loop(self, block: list[ast.stmt]) -> int:
        """The outermost loop of the function that `block` leaves at its end: the innermost one
        for `break`, the outermost for `return`/`raise`; -1 for none (hotpath.py reads it too)."""
        loops = self.loop_stack[-1]
        if not block or not loops or not isinstance(block[-1], (ast.Return, ast.Raise, ast.Break)):
            return -1
        return loops[-1] if isinstance(block[-1], ast.Break) else loops[0]

    def _IfExp(self, node: ast.IfExp) -> None:
        body, orelse = self._cold_sides(node.test)
        self.visit(node.test)
        for branch, cold, side in ((node.body, body, "body"), (node.orelse, orelse, "else")):
            guard = self._guard(node.test, side)
            self.cold += cold
            self.guards.extend([guard] if guard else ())
            self.visit(branch)
            del self.guards[len(self.guards) - bool(guard) :]
            self.cold -= cold

    def _BoolOp(self, node: ast.BoolOp) -> None:
        """Each operand runs only when those before it let it (`a and b`: when `a` holds), as
        analysis/cold.py reads a BooleanOperation."""
        side = 0 if isinstance(node.op, ast.And) else 1
        cold, guards = False, len(self.guards)
        for value in node.values:
            self.cold += cold
            self.visit(value)
            self.cold -= cold
            cold = cold or cold_sides(value)[side]
            guard = self._guard(value, ("body", "else")[side])
            self.guards.extend([guard] if guard else ())
        del self.guards[guards:]

    def _ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.type is not None:
            self.visit(node.type)
        self._in_cold(node.body, True)

    def _Lambda(self, node: ast.Lambda) -> None:
        lazy_message = isinstance(node.body, ast.JoinedStr) or (
            isinstance(node.body, ast.Constant) and isinstance(node.body.value, str)
        )
        self.cold += lazy_message
        args = node.args
        params = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
        self.lambda_params.append({a.arg for a in params if a is not None})
        self.children(node)
        self.lambda_params.pop()
        self.cold -= lazy_message

    def _With(self, node: Union[ast.With, ast.AsyncWith]) -> None:
        entered = []
        for item in node.items:
            expr = item.context_expr
            name = dotted(expr.func if isinstance(expr, ast.Call) else expr)
            if name:
                self.summary.contexts.append(name)
                entered.append(name)
        for item in node.items:
            self.visit(item.context_expr)  # evaluated before the block is entered
            if item.optional_vars is not None:
                self.visit(item.optional_vars)
        self.with_names.extend(entered)
        self.statements(node.body)
        del self.with_names[len(self.with_names) - len(entered) :]

    _AsyncWith = _With

    def _Assign(self, node: ast.Assign) -> None:
        if any(is_cudnn_decision(dotted(t) or "") for t in _assigned(node.targets)):
            self.summary.cudnn_decision = True
        if self.class_stack and not self.function_stack:
            self.children(node)
            return
        if (
            len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Call)
        ):
            self.bound_calls[id(node.value)] = node.targets[0].id
        target = node.targets[0] if len(node.targets) == 1 else None
        if isinstance(node.value, ast.Call) and isinstance(target, ast.Attribute) and subject(target):
            self.stored_calls[id(node.value)] = target.attr  # `self.ATTR = f(...)`
        if (
            len(node.targets) == 1
            and isinstance(node.targets[0], ast.Tuple)
            and isinstance(node.value, ast.Call)
        ):
            elements = node.targets[0].elts
            self.unpacked_calls[id(node.value)] = [_unpacked_target(e) for e in elements]
        for target, value in _paired_targets(node.targets, node.value):
            callee = _constructed(value)
            if (
                isinstance(target, ast.Attribute)
                and isinstance(target.value, ast.Name)
                and target.value.id == "self"
                and self.function_stack
                and callee
            ):
                cls = self.current().cls
                if cls >= 0:
                    self.summary.classes[cls].attributes.setdefault(target.attr, callee)
            elif isinstance(target, ast.Name) and not self.function_stack and callee:
                self.summary.globals.setdefault(target.id, ["call", callee])
            elif isinstance(target, ast.Name) and target.id == "__all__" and not self.function_stack:
                self.summary.all_names = _literal_strings(value)
        if self.function_stack and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            self.locals().values.setdefault(node.targets[0].id, []).append(node.value)
            if isinstance(node.value, ast.IfExp):
                value = node.value
                self.locals().chosen[node.targets[0].id] = chosen(
                    ast.unparse(value.test), self._token(value.body), self._token(value.orelse)
                )
        if self.function_stack:
            _record_unpacked(node, self.locals())
        target = node.targets[0]
        if (
            len(node.targets) == 1
            and self.function_stack
            and isinstance(target, ast.Attribute)
            and subject(target) is not None
            and isinstance(node.value, ast.Name)
            and node.value.id in self.current().params
        ):
            self.current().self_stores.append([target.attr, node.value.id])
            self.not_handed.add(id(target))
        elif len(node.targets) == 1 and self.function_stack and isinstance(target, ast.Attribute):
            flagged = _flagged_build(node.value, self.current().params)
            if flagged is not None and subject(target) is not None:
                self.current().flagged_stores.append([target.attr, *flagged])
            if subject(target) is not None and _derived(node.value):
                self.current().derived_stores.append([target.attr, ast.unparse(node.value)])
        self.children(node)

    def _AnnAssign(self, node: ast.AnnAssign) -> None:
        # `self.model: LMModel = build(cfg)` binds the attribute as `self.model = build(cfg)` does
        target, callee = node.target, _constructed(node.value) if node.value is not None else None
        if (
            callee
            and self.function_stack
            and isinstance(target, ast.Attribute)
            and isinstance(target.value, ast.Name)
            and target.value.id == "self"
        ):
            cls = self.current().cls
            if cls >= 0:
                self.summary.classes[cls].attributes.setdefault(target.attr, callee)
        self.children(node)

    def _Attribute(self, node: ast.Attribute) -> None:
        if "channels_last" in node.attr:
            self.summary.channels_last = True
        base = node.value
        if isinstance(base, ast.Name) and isinstance(base.ctx, ast.Load) and id(base) not in self.not_handed:
            self.not_handed.add(id(base))  # decided once the module's classes are known
            self.attribute_bases.append((base.id, node.attr))
        if isinstance(node.ctx, ast.Load):
            if id(node) not in self.not_handed:
                self._hand_attribute(node)
        elif id(node) in self.not_handed:
            pass  # `self.x = param`, recorded by _Assign
        elif subject(node) is not None and self.function_stack:
            self.current().self_stores.append([node.attr, ""])
        else:
            self.outer_stores.add(node.attr)
            self.current().attribute_stores.append(node.attr)
        if node.attr == "__dict__" and subject(node) is not None:
            self.current().computed_stores.append("self")  # `self.__dict__.update(kwargs)`
        if self.function_stack and node.attr in ("no_grad", "inference_mode"):
            if self.qualify(dotted(node) or "") in NO_GRAD_CONTEXTS:
                self._mark_no_grad()
        self.children(node)

    def _dynamic_attribute(self, callee: str, receiver: ast.expr, name: ast.expr) -> None:
        """What `hasattr`/`getattr`/`setattr` say of an attribute (project/arguments.py's absent
        attributes): probed on self, stored on self or another object, or stored by a name
        worked out at run time."""
        on_self = isinstance(receiver, ast.Name) and receiver.id == "self"
        attribute = name.value if isinstance(name, ast.Constant) and isinstance(name.value, str) else None
        function = self.current()
        if attribute is None:
            if callee == "setattr":
                function.computed_stores.append("self" if on_self else "other")
        elif callee != "setattr":
            if on_self and self.function_stack:
                function.probes.append(attribute)
        elif on_self:
            function.self_stores.append([attribute, ""])
        else:
            function.attribute_stores.append(attribute)

    def _hand_attribute(self, node: ast.Attribute) -> None:
        """`base.attr` read, not called: it hands on a method named attr, and a module's function
        too unless base is a local object of the function (not an import)."""
        base = node.value
        if isinstance(base, ast.Name) and not self.function_stack and base.id in self.summary.imports:
            self.handed_imported.add((base.id, node.attr))
            return
        if not (isinstance(base, ast.Name) and self.function_stack):
            self.handed.add(node.attr)
            return
        scopes = self.scopes()

        def hand() -> None:
            imported = base.id in self.summary.imports or any(base.id == b for b, _ in self.import_pairs)
            local = base.id in self.global_objects or any(base.id in scope.names for scope in scopes)
            if imported and base.id in self.summary.imports and not any(base.id in s.names for s in scopes):
                self.handed_imported.add((base.id, node.attr))  # the project pass asks where it leads
            else:
                (self.handed_members if local and not imported else self.handed).add(node.attr)

        self._later(hand)

    def _Name(self, node: ast.Name) -> None:
        if "channels_last" in node.id:
            self.summary.channels_last = True
        if isinstance(node.ctx, ast.Load) and id(node) not in self.not_handed:
            self.handed.add(node.id)
        if not self.function_stack and isinstance(node.ctx, ast.Store):
            self.global_objects.add(node.id)
        if self.function_stack and isinstance(node.ctx, ast.Store):
            self.locals().names.add(node.id)
            stores = self.locals().stores
            stores[node.id] = stores.get(node.id, 0) + 1
            if node.id in self.current().params:
                self.current().rebinds.setdefault(node.id, []).append([list(g) for g in self.guards])
        elif self.function_stack and _is_class_like(node.id):
            refs = self.current().refs
            if node.id not in refs:
                refs.append(node.id)
        if self.function_stack and node.id in ("no_grad", "inference_mode"):
            if self.qualify(node.id) in NO_GRAD_CONTEXTS:
                self._mark_no_grad()

    def _keyword(self, node: ast.keyword) -> None:
        if node.arg and "channels_last" in node.arg:
            self.summary.channels_last = True
        self.children(node)

    def _mark_no_grad(self) -> None:
        for index, _ in self.function_stack:
            if index >= 0:
                self.summary.functions[index].no_grad = True

    def _later(self, work: Callable[[], None]) -> None:
        if self.function_stack:
            self.pending.append(work)
        else:
            work()  # module-level names are known before the walk

    def _Constant(self, node: ast.Constant) -> None:
        if not isinstance(node.value, str):
            return
        if node.value.startswith("cuda"):
            self.current().says_cuda = True
        if self.function_stack and is_weights_url(node.value) and not self.current().weights:
            self.current().weights = "a weights URL"
        if "channels_last" in node.value or "channels-last" in node.value:
            self.summary.channels_last = True

    def _Subscript(self, node: ast.Subscript) -> None:
        key = _string_key(node.slice)
        if key is not None and isinstance(node.ctx, ast.Load):
            self._read_key(key, id(node) in self.host_reads)
        registry = node.value
        if isinstance(registry, ast.Attribute) and registry.attr == "__dict__":
            written = dotted(registry.value)  # `models.__dict__[arch]` (analysis/registries.py)
            if written is not None and written not in self.summary.registries:
                self.summary.registries.append(written)
        self.children(node)

    def _read_key(self, key: str, on_host: bool) -> None:
        reads = self.summary.key_reads
        reads[key] = reads.get(key, True) and on_host

    def _Return(self, node: ast.Return) -> None:
        self.children(node)
        value, function, local = node.value, self.current(), self.locals()
        if self.function_stack and isinstance(value, ast.Dict):
            for key in value.keys:
                name = _string_key(key) if key is not None else None
                if name is not None and name not in self.summary.returned_keys:
                    self.summary.returned_keys.append(name)
        if value is None:
            return
        if self.function_stack and function.cls >= 0 and isinstance(value, ast.Attribute) and subject(value):
            function.returned_methods.append([value.attr, [list(g) for g in self.guards]])  # `return self.m`
        if self.function_stack:
            # either side of `return A(self) if c else B(self)` is a value it returns
            for side in _returned_sides(value):
                bound = _bound_once(side, local)
                if isinstance(bound, ast.Name):
                    bound = local.origin(bound.id) or bound  # `return model` after it was wrapped
                for each in _each_binding(bound, local):  # `_load_model`'s model, by backbone
                    stripped = _strip_chain(each)
                    if isinstance(stripped, ast.Call):
                        # `return VGG(make_layers(cfg))`, `return DeepLabV3(backbone, classifier)`:
                        # the layers a factory builds and hands in count
                        handed = [
                            c
                            for a in [*stripped.args, *(k.value for k in stripped.keywords)]
                            for c in _each_binding(a, local)
                            if isinstance(c, ast.Call)
                        ]
                        function.returns.append(
                            [*built(stripped), *(w for call in handed for w in built(call))]
                        )
            if function.cls < 0 and _returns_container(value, local):
                self.fills_container.add(self.function_stack[-1][0])
        if self.function_stack and not function.returns_loader:

            def loader() -> None:
                function.returns_loader = _loader_line(value, local)

            self._later(loader)
        if self.function_stack and isinstance(value, ast.Tuple) and not function.returns_loader_items:
            tuple_elements, block = value.elts, self.block

            def loader_items() -> None:
                if function.returns_loader_items:
                    return  # the first tuple returned, read after the walk like every other
                function.returns_loader_items = [
                    _loader_line(_assigned_before(e, node, block), local) for e in tuple_elements
                ]

            self._later(loader_items)
        if (
            self.function_stack
            and isinstance(value, ast.Name)
            and value.id in local.params
            # not `if isinstance(x, np.ndarray): return x`: that path hands back another type
            and not any("isinstance(" in test or "type(" in test for test, _ in self.guards)
        ):
            returned_param = value.id

            def handed_back() -> None:
                if local.stores.get(returned_param, 0) == 0 and returned_param not in function.returns_params:
                    function.returns_params.append(returned_param)

            self._later(handed_back)
        if self.function_stack:
            elements = value.elts if isinstance(value, ast.Tuple) else []
            function.returns_items.append([])
            returned = function.returns_items[-1]

            def items() -> None:
                returned.extend(_dataset_token(element, local) for element in elements)

            self._later(items)

        if self.function_stack:

            def host_data() -> None:
                function.host_returns.append(self._holds_host_data(value, local))
                function.host_tensor_returns.append(self._host_tensors(local).holds(value))
                function.host_copy_returns.append(_host_copy_of_param(value, local))
                function.device_returns.append(self._device_source(value, local))

            self._later(host_data)

        def device() -> None:
            values = local.values.get(value.id, ()) if isinstance(value, ast.Name) else (value,)
            if any(self._is_device_call(v) for v in values):
                function.returns_device = True

        self._later(device)

    def _is_device_call(self, value: ast.AST) -> bool:
        return isinstance(value, ast.Call) and self.qualify(dotted(value.func) or "") == "torch.device"

    def _kwargs_items(self, node: ast.Call, local: _Locals) -> dict[str, str]:
        """Call.kwargs_items: the keys and value tokens of the one `**NAME` `node` unpacks."""
        name = _only_unpacked_mapping(node)
        if not isinstance(name, ast.Name):
            return {}
        value = local.bound_once(name.id)
        if value is None or _adds_keys(local, name.id):
            return {}
        items: dict[str, str] = {}
        if isinstance(value, ast.Dict):
            for key, item in zip(value.keys, value.values, strict=True):
                if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                    return {}
                items[key.value] = self._token(item)
        elif isinstance(value, ast.Call) and dotted(value.func) == "dict" and not value.args:
            for keyword in value.keywords:
                if keyword.arg is None:
                    return {}
                items[keyword.arg] = self._token(keyword.value)
        return items

    def _token(self, argument: ast.AST) -> str:
        """What a call passes: a literal's token, the caller's own parameter or option handed on
        (PARAM_PREFIX + `name` or `args.dest`: its value is the caller's, project/arguments.py),
        an instance the caller builds (BUILT_PREFIX + its class as written), or "?"."""
        token = value_token(argument)
        if token is not None:
            return token
        namespaces = self.current().namespaces
        if isinstance(argument, ast.Name) and argument.id in namespaces:
            return OPTIONS
        if isinstance(argument, ast.Call) and parsed_position(argument, self.options.returning) == -1:
            return OPTIONS  # `main(parse_opt())`, `main(parser.parse_args())`
        if (
            isinstance(argument, ast.Attribute)
            and isinstance(argument.value, ast.Name)
            and argument.value.id in namespaces
        ):
            return f"{PARAM_PREFIX}{argument.value.id}.{argument.attr}"
        if isinstance(argument, ast.Name):
            cls = self._instance_of(argument.id)
            if cls is not None:
                return BUILT_PREFIX + cls
        if (
            isinstance(argument, ast.Attribute)
            and isinstance(argument.value, ast.Name)
            and argument.value.id == "self"
            and self.function_stack
            and self.current().cls >= 0
            and "self" in self.current().params
        ):
            return f"{PARAM_PREFIX}self.{argument.attr}"  # what the instance keeps (`main(self.args)`)
        if (
            isinstance(argument, ast.Name)
            and self.function_stack
            and argument.id != "self"
            and argument.id in self.current().params
            and not any(argument.id in shadow for shadow in self.lambda_params)
        ):
            return PARAM_PREFIX + argument.id
        if isinstance(argument, ast.Name):
            callee = self._imported_call(argument.id)
            if callee is not None:
                # its value is the caller's: the options, where the callee returns them
                self.current().options_calls[argument.id] = callee
                return PARAM_PREFIX + argument.id
        if (
            isinstance(argument, ast.Attribute)
            and isinstance(argument.value, ast.Name)
            and self.function_stack
            and argument.value.id != "self"
            and argument.value.id in self.current().params
            and not self.locals().stores.get(argument.value.id)
        ):
            # `mode=args.loss_type` with `args` a parameter: what the caller's `args.loss_type`
            # holds, where the project pass knows (the options it is handed)
            return f"{PARAM_PREFIX}{argument.value.id}.{argument.attr}"
        return "?"

    def _imported_call(self, name: str) -> Optional[str]:
        """The imported function (as written) every binding of `name` in the current scope calls:
        `hparams = create_hparams(args.hparams)` with `from hparams import create_hparams`."""
        local = self.locals()
        values = local.values.get(name, ())
        if (
            not values
            or name in local.params
            or (self.function_stack and local.stores.get(name) != len(values))
        ):
            return None
        callees = {
            v.func.id if isinstance(v, ast.Call) and isinstance(v.func, ast.Name) else None for v in values
        }
        if len(callees) != 1:
            return None
        (callee,) = callees
        if callee is None:
            return None  # a binding that is not a call of a plain name: `h = cfg.load()`
        imported = callee in self.summary.imports or callee in self.summary.local_imports
        return callee if imported else None

    def _instance_of(self, name: str) -> Optional[str]:
        """The class (as written) every binding of `name` in the innermost scope binding it
        constructs (`model = UNet(...)`; `model = model.to(device)` keeps the object), if one."""
        classes = self._classes_of(name)
        return classes.pop() if classes is not None and len(classes) == 1 else None

    def _classes_of(self, name: str, scopes: Optional[tuple[_Locals, ...]] = None) -> Optional[set[str]]:
        """The classes (as written) the bindings of `name` in the innermost scope binding it
        construct, each binding one (`netD = Discriminator(...)`, then `netD = DDP(netD)` under
        a flag: both), or None where a binding builds no instance or `name` is a parameter.
        `scopes`: those of the call being described, once its function has been walked."""
        for scope in scopes or self.scopes():
            if name in scope.params:
                return None  # what the caller passed, maybe rebound: not this scope's own
            if name not in scope.values:
                if name in scope.names:
                    return None
                continue
            classes = set()
            for value in scope.values[name]:
                stripped = _strip_chain(value)
                if isinstance(stripped, ast.Name) and stripped.id == name:
                    continue  # the same object, moved or switched to eval
                callee = _constructed(value)
                last = (callee or "").split(".")[-1]
                if callee is None or not last[:1].isupper():
                    return None
                classes.add(callee)
            return classes or None
        return None

    def _passed_instances(self, node: ast.Call, scopes: tuple[_Locals, ...]) -> dict[str, list[str]]:
        """The classes each name it passes was built from (`train(args, generator, discriminator)`
        after `discriminator = Discriminator(...)`, maybe wrapped in DDP), or each instance it
        builds in place (`Trainer(model, Ema(model))`): slot -> classes."""
        found: dict[str, list[str]] = {}
        for slot, value in _call_slots(node):
            if isinstance(value, ast.Name):
                classes = self._classes_of(value.id, scopes)
                if classes:
                    found[slot] = sorted(classes)
            elif isinstance(value, ast.Call):
                callee = _constructed(value)
                if callee is not None and callee.split(".")[-1][:1].isupper():
                    found[slot] = [callee]
        return found

    def _setter_argument(self, node: ast.Call) -> Optional[str]:
        """What `torch.set_default_device(ARG)` is given: a string's value, a qualified name, or
        the string of `torch.device("cuda")`."""
        if not node.args:
            return None
        argument: ast.AST = node.args[0]
        if isinstance(argument, ast.Name):
            argument = self._bound_before(argument.id, node.lineno) or argument
        if self._is_device_call(argument) and argument.args:  # type: ignore[attr-defined]
            argument = argument.args[0]  # type: ignore[attr-defined]
        # `"cuda" if torch.cuda.is_available() else "cpu"`: the device the script picks on a GPU
        sides = [argument.body, argument.orelse] if isinstance(argument, ast.IfExp) else [argument]
        strings = [s.value for s in sides if isinstance(s, ast.Constant) and isinstance(s.value, str)]
        if strings:
            return next((s for s in strings if s.startswith("cuda")), strings[0])
        name = dotted(argument)
        return self.qualify(name) if name else None

    def _bound_before(self, name: str, line: int) -> Optional[ast.expr]:
        """The value `name` was last bound to above `line`, in the innermost scope binding it
        (`device = torch.device(...)` then `torch.set_default_device(device)`)."""
        for scope in self.scopes():
            values = [v for v in scope.values.get(name, ()) if isinstance(v, ast.expr) and v.lineno < line]
            if values:
                return max(values, key=lambda v: (v.lineno, v.col_offset))
            if name in scope.names:
                return None
        return None

    def _moved(self, func: ast.Attribute, scopes: tuple[_Locals, ...]) -> list[str]:
        """`Net().to(device)`, `model.cuda()` after `model = Net(...)`: what is constructed and moved."""
        receiver = func.value
        values = scopes[0].values.get(receiver.id, ()) if isinstance(receiver, ast.Name) else (receiver,)
        return [callee for callee in map(_constructed, values) if callee]

    def _Call(self, node: ast.Call) -> None:
        func = node.func
        callee_name = dotted(func)
        if (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Call)
            and func.attr in ("to", "cuda")
        ):
            # not a result a `self.` attribute keeps: a cache, refreshed now and then (kornia's
            # `self.pe = self._create_position_encoding(shape).to(...)` when inputs grow)
            cached = id(node) in self.stored_calls
            if not cached and device_source(node, _no_bindings, frozenset(), self.qualify) == ON_DEVICE:
                self.moved_results.add(id(func.value))
        if isinstance(func, ast.Attribute) and func.attr in _HOST_METHODS and not node.args:
            self.host_reads.add(id(func.value))
        if isinstance(func, ast.Attribute) and func.attr in ("get", "pop") and node.args:
            key = _string_key(node.args[0])
            if key is not None:
                self._read_key(key, False)  # what `.get` hands on is not followed
        if is_cudnn_decision_call(callee_name or ""):
            self.summary.cudnn_decision = True
        self.not_handed.add(id(node.func))
        if (
            callee_name in ("isinstance", "issubclass", "setattr", "getattr", "hasattr")
            and len(node.args) > 1
        ):
            self.not_handed.add(id(node.args[1]))
            if callee_name == "setattr" and isinstance(node.args[1], ast.Constant):
                self.outer_stores.add(str(node.args[1].value))
            self._dynamic_attribute(callee_name, node.args[0], node.args[1])
        if callee_name == "super" and node.args:
            self.not_handed.add(id(node.args[0]))  # `super(Net, self)` names its class, hands nothing on
        self.children(node)
        if isinstance(func, ast.Name):
            for slot, value in _call_slots(node):
                self.passed_values.setdefault((func.id, slot), []).append(value)
        function = self.current()
        if not self.cold and self.function_stack:
            loops = self.loop_stack[-1]
            per_item = self.item_loops.get(loops[0]) if len(loops) == 1 and not self.comprehensions else None
            repeated = self.innermost_loop() >= 0 or self.comprehensions > 0
            made = built(node) * (LOOP_REPEATS if repeated else 1)
            if per_item is not None and function.cls < 0:
                # how many items: what the module's own calls hand it (`make_layers(cfg["D"])`)
                items = self.item_builds.setdefault(self.function_stack[-1][0], {})
                items.setdefault(per_item, []).extend(built(node))
            elif function.cls >= 0:
                self.summary.classes[function.cls].builds.extend(made)
            else:
                function.builds.extend(made)
        loop = self.innermost_loop()
        cold, scopes, guards = bool(self.cold), self.scopes(), [list(g) for g in self.guards]
        once = list(self.one_pass_of)
        contexts = list(self.with_names)
        leaves = self.leaving[0] if self.leaving else -1
        bound = self.bound_calls.get(id(node), "")
        star = any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords)
        spread = _spread_name(node) if star else ""
        args = {str(i): self._token(a) for i, a in enumerate(node.args)}
        args.update((k.arg, self._token(k.value)) for k in node.keywords if k.arg)
        named = _call_slots(node)
        setter = self.qualify(callee_name or "")
        # a drawing call on a branch the step does not take leaves the rest of the function per step
        # (yolov5's on_train_batch_end logs `wandb.Image` only under `if self.plots:`, a debug flag)
        if (
            self.function_stack
            and not self.cold
            and runs_rarely("", (), (self.qualify_here(callee_name or ""),))
        ):
            function.rare = True
        if setter in DEFAULT_DEVICE_SETTERS:
            function.default_devices.append(sets_cuda_default(setter, self._setter_argument(node)))
        if self.function_stack and not function.weights and loads_weights(callee_name or "", setter):
            function.weights = (callee_name or "").split(".")[-1]
        if isinstance(node.func, ast.Attribute) and node.func.attr == "load_state_dict":
            function.loads_state = True
        for keyword in node.keywords:
            collate = dotted(keyword.value) if keyword.arg == "collate_fn" else None
            if collate and collate not in self.summary.collates:
                self.summary.collates.append(collate)

        def describe() -> None:
            func = node.func
            for slot, argument in named:
                if args.get(slot) == "?" and isinstance(argument, ast.Name):
                    local = scopes[0]
                    args[slot] = (
                        _chosen_token(argument.id, local)
                        or _walked_token(argument.id, local)
                        or _extended_token(argument.id, local, guards, node.lineno)
                        or "?"
                    )
            if isinstance(func, ast.Attribute) and self._is_step(func, scopes[0]):
                function.steps.append(loop)
                if func.attr == "step":
                    function.updates.append(loop)
            if isinstance(func, ast.Attribute) and func.attr in ("to", "cuda"):
                function.moved.extend(c for c in self._moved(func, scopes) if c not in function.moved)
            if (
                not cold
                and loop >= 0
                and isinstance(func, ast.Name)
                and func.id in scopes[0].params
                and is_model_name(func.id)
                and loop not in function.handed_model_loops
            ):
                function.handed_model_loops.append(loop)
            described = _scaler_step(node, scopes[0]) or self._describe(func, scopes, function.cls)
            # `loss_map[loss](...)` calls one of the table's callables: a call of each
            dispatched = [
                (self._describe(value, scopes, function.cls), _key_guard(func, key, scopes[0].params))
                for value, key in _table_callables(func, scopes)
            ]
            chosen_calls = [(described, None)] if described is not None else dispatched
            for (kind, target), picked in [(d, g) for d, g in chosen_calls if d is not None]:
                call = Call(
                    kind,
                    target,
                    loop,
                    node.lineno,
                    host_args=self._host_args(node, scopes[0]),
                    args=args,
                    star=star,
                    guards=[*guards, picked] if picked else guards,
                )
                call.leaves = leaves
                call.spread = spread
                call.stored = self.stored_calls.get(id(node), "")
                call.moved_result = id(node) in self.moved_results
                if star:
                    call.forwards = _forwarding(node, scopes[0].function)
                    call.kwargs_items = self._kwargs_items(node, scopes[0])
                    call.config_unpack = _unpacks_configuration(node, scopes[0])
                call.contexts = contexts
                call.unpacks_args = any(isinstance(a, ast.Starred) for a in node.args)
                if not call.unpacks_args:
                    call.param_args = self._param_args(node, scopes[0], function)
                call.datasets = self._datasets(node, scopes[0])
                call.wrapped = self._wrapped(node, scopes[0])
                call.instances = self._passed_instances(node, scopes)
                call.loaders = _passed_loaders(node, scopes[0])
                call.batches = _passed_batches(node, scopes[0])
                call.bound_args = _passed_results(node, scopes, self.bound_calls)
                call.device_args = [
                    slot
                    for slot, value in _call_slots(node)
                    if self._device_source(value, scopes[0]) == ON_DEVICE
                ]
                host_tensors = self._host_tensors(scopes[0])
                call.host_tensor_args = [
                    slot for slot, value in _call_slots(node) if host_tensors.holds(value)
                ]
                call.bound = bound
                call.unpacked = self.unpacked_calls.get(id(node), [])
                # on one step of a loop over a DataLoader (labelled before this runs): once per pass
                once_per_pass = any(self.summary.loops[index].loader for index in once)
                (function.cold_calls if cold or once_per_pass else function.calls).append(call)

        self._later(describe)

    def _iterated_call(
        self, iterable: ast.AST, scopes: tuple[_Locals, ...], cls: int, in_function: bool
    ) -> list[Any]:
        """`Loop.through` of a loop over `iterable`: [kind, target, {slot: [name, scope]}] where it
        iterates a project call that passes plain names, else []."""
        inner = _unwrapped(iterable)
        if not isinstance(inner, ast.Call):
            return []
        described = self._describe(inner.func, scopes, cls)
        names = {}
        for slot, argument in _call_slots(inner):
            name, scope = _iterated_name(argument, scopes[0], in_function)
            if name and isinstance(argument, ast.Name):
                names[slot] = [name, scope]
        return [*described, names] if described is not None and names else []

    # -- calls --------------------------------------------------------------------------
    def _is_step(self, func: ast.Attribute, local: _Locals) -> bool:
        if func.attr == "backward":
            return True
        if func.attr != "step":
            return False
        receiver = dotted(func.value)
        if receiver is None:
            return False
        if is_optimizer_name(receiver):
            return True
        return isinstance(func.value, ast.Name) and any(
            self._builds_optimizer(value) for value in local.values.get(func.value.id, ())
        )

    def _steps_an_optimizer(self, block: list[ast.stmt]) -> bool:
        """`optimizer.step()` somewhere in `block`, as `_is_step` reads it (the file pass asks the
        same of the names this pass found bound to optimizers: hotpath.py's `_steps_in`)."""
        local = self.locals()
        return any(
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Attribute)
            and call.func.attr == "step"
            and self._is_step(call.func, local)
            for statement in block
            for call in ast.walk(statement)
        )

    def _builds_optimizer(self, value: ast.AST) -> bool:
        callee = _constructed(value)
        return bool(callee) and is_optimizer_class(self.qualify(callee or ""))

    def _optimizer_names(self, local: _Locals) -> list[str]:
        """The names `local`'s scope binds to a constructed optimizer, for Function.optimizers."""
        return sorted(
            name for name, values in local.values.items() if any(map(self._builds_optimizer, values))
        )

    def _describe(self, func: ast.AST, scopes: tuple[_Locals, ...], cls: int) -> Optional[tuple[str, str]]:
        local = scopes[0]
        if isinstance(func, ast.Name) and func.id == "self" and cls >= 0:
            return "self", "__call__"  # a module calling itself runs its forward (`self(idx)` in `generate`)
        if isinstance(func, ast.Name):
            name = func.id
            for scope in scopes:
                if name in scope.nested:
                    index = self.function_index.get(scope.nested[name])
                    return ("def", str(index)) if index is not None else None
                if name in scope.names:
                    if self._scoped_import(name, scope):
                        return "global", name
                    if cls >= 0 and _aliases_self(scope.values.get(name, ())):
                        return "self", "__call__"  # `model = self if fsdp is None else fsdp; model(x)`
                    return self._instance(name, "__call__", scope)
            return "global", name
        if not isinstance(func, ast.Attribute):
            return None
        receiver, attr = func.value, func.attr
        if isinstance(receiver, ast.Name):
            if receiver.id == "self" and cls >= 0:
                return "self", attr
            if receiver.id in local.names:
                if self._scoped_import(receiver.id, local):
                    return "dotted", f"{receiver.id}.{attr}"
                return self._instance(receiver.id, attr, local)
            return "dotted", f"{receiver.id}.{attr}"
        if (
            isinstance(receiver, ast.Call)
            and isinstance(receiver.func, ast.Name)
            and receiver.func.id == "super"
        ):
            return "super", attr
        if (
            isinstance(receiver, ast.Attribute)
            and isinstance(receiver.value, ast.Name)
            and receiver.value.id == "self"
            and cls >= 0
        ):
            return "selfattr", f"{receiver.attr}|{attr}"
        chain = dotted(receiver)
        if chain is not None and chain.split(".")[0] not in local.names:
            return "dotted", f"{chain}.{attr}"
        built = dotted(receiver.func) if isinstance(receiver, ast.Call) else None
        if built is not None and built.split(".")[0] not in local.names:
            return "instance", f"{built}|{attr}"  # `SegmentationLosses(...).build_loss(...)`
        return None

    def _scoped_import(self, name: str, scope: _Locals) -> bool:
        """`name` is bound in `scope` only by an import that resolves it across the project
        (`from pkg.loss import Loss` inside `init_criterion`), and no module-level name shadows it
        but an import of the same (DETR's launcher imports `main as detection` at both levels)."""
        imported = self.summary.local_imports.get(name)
        return (
            name in scope.imported
            and not scope.stores.get(name)
            and imported is not None
            and self.summary.imports.get(name, imported) == imported
            and name not in self.summary.globals
        )

    @staticmethod
    def _instance(name: str, method: str, scope: _Locals) -> Optional[tuple[str, str]]:
        values = scope.values.get(name, ())
        callees = {_constructed(v) for v in values}
        others = scope.function is not None and scope.stores.get(name, 0) != len(values)  # `a, b = f()`
        if len(callees) > 1 or others:
            origin = scope.origin(name)  # `model = load_model(h)`, then helpers hand it back
            callees = {_constructed(origin)} if origin is not None else set()
        if len(callees) == 1:
            (callee,) = callees
            if callee:
                return "instance", f"{callee}|{method}"
        return None

    @staticmethod
    def _datasets(node: ast.Call, local: _Locals) -> dict[str, str]:
        tokens = ((slot, _dataset_token(value, local)) for slot, value in _call_slots(node))
        return {slot: token for slot, token in tokens if token}

    def _wrapped(self, node: ast.Call, local: _Locals) -> dict[str, str]:
        """The arguments that are a model wrapped by DDP or FSDP: the wrapper's call itself, or a
        name the caller binds to one (on any of its paths: `if args.distributed: model = DDP(model)`)."""
        found: dict[str, str] = {}
        for slot, value in _call_slots(node):
            values = local.values.get(value.id, ()) if isinstance(value, ast.Name) else (value,)
            for each in values:
                callee = _constructed(each)
                qualified = self.qualify(callee) if callee else ""
                if qualified in GRADIENT_SYNC_WRAPPERS:
                    found[slot] = qualified
        return found

    def _device_source(self, expr: ast.AST, local: _Locals) -> str:
        return device_source(expr, local.assigned_values, frozenset(local.params), self.qualify)

    def _host_args(self, node: ast.Call, local: _Locals) -> list[str]:
        host = [str(i) for i, arg in enumerate(node.args) if self._is_host(arg, local)]
        host.extend(k.arg for k in node.keywords if k.arg and self._is_host(k.value, local))
        return host

    def _param_args(self, node: ast.Call, local: _Locals, function: Function) -> dict[str, str]:
        passed = {str(i): _own_parameter(a, local, function) for i, a in enumerate(node.args)}
        passed.update((k.arg, _own_parameter(k.value, local, function)) for k in node.keywords if k.arg)
        return {key: param for key, param in passed.items() if param}

    def _is_host(self, expr: ast.AST, local: Optional[_Locals] = None) -> bool:
        if isinstance(expr, ast.Name) and local is not None and _batch_of(expr.id, local) == "":
            return True  # a batch of a loader built here, bound once by its loop: never moved
        if isinstance(expr, ast.Name) and local is not None and expr.id not in local.params:
            # `scores_host = scores.cpu(); f(scores_host)`: every value the function binds to it
            values = local.values.get(expr.id, ())
            return bool(values) and all(self._is_host(v) for v in values)
        if isinstance(expr, ast.Constant):
            return expr.value is not None
        if isinstance(expr, ast.JoinedStr):
            return True
        if isinstance(expr, ast.Call):
            func = expr.func
            if isinstance(func, ast.Attribute) and func.attr in _HOST_METHODS and not expr.args:
                return True
            if isinstance(func, ast.Attribute) and func.attr == "to" and len(expr.args) == 1:
                arg = expr.args[0]
                return isinstance(arg, ast.Constant) and arg.value == "cpu"
            name = dotted(func)
            qualified = self.qualify(name) if name is not None else ""
            return qualified in _HOST_FUNCTIONS or self._builds_host_tensor(qualified, expr)
        return False

    def _holds_host_data(self, expr: ast.AST, local: _Locals, seen: frozenset[str] = frozenset()) -> bool:
        """`expr` holds an array of host data the function builds: a NumPy call, a torch builder
        or factory without `device=`, a view, slice or method result of one that keeps it on the
        host, or a local name every binding of which is one (a name read while its own value is
        judged, `ids = ids[:n]`, stands for its other bindings)."""
        if isinstance(expr, ast.Subscript):
            return self._holds_host_data(expr.value, local, seen)
        if isinstance(expr, ast.Name):
            if expr.id in seen:
                return True
            values = local.assigned_values(expr.id)
            if expr.id in local.params or not values:
                return False
            return all(self._holds_host_data(v, local, seen | {expr.id}) for v in values)
        if not isinstance(expr, ast.Call):
            return False
        func = expr.func
        name = dotted(func) or ""
        head = name.partition(".")[0]
        if head in self.summary.imports and head not in local.names:
            qualified = self.qualify(name)
            keywords = [k.arg or "**" for k in expr.keywords]
            if maps_a_file(qualified, keywords):
                return False  # read from disk as it is used: not held in memory
            return builds_host_array(qualified, "device" in keywords or "**" in keywords)
        if isinstance(func, ast.Attribute) and keeps_host_array(func.attr):
            return self._holds_host_data(func.value, local, seen)
        return False

    @staticmethod
    def _builds_host_tensor(qualified: str, call: ast.Call) -> bool:
        """`torch.tensor(sizes)`: built on the host (no `device=`) from Python data, not from a
        call or attribute that may be a device tensor. Not `torch.zeros(...)`: a model's own
        `self.forward(torch.zeros(1, 3, s, s))` at set-up would make its input a host value."""
        if any(k.arg in ("device", None) for k in call.keywords):
            return False
        if qualified not in ("torch.tensor", "torch.as_tensor") or not call.args:
            return False
        return isinstance(call.args[0], (ast.Name, ast.List, ast.Tuple, ast.Constant, ast.ListComp))

    # -- loaders ------------------------------------------------------------------------
    @staticmethod
    def _loader(iterable: ast.AST, scopes: tuple[_Locals, ...]) -> Optional[str]:
        """What a `for` loop iterates when that is a DataLoader (analysis/loader_loops.py, as the
        file pass reads it), from the calls the function binds names to."""
        values = scopes[0].values

        def calls_of(name: str) -> list[ast.Call]:
            return [value for value in values.get(name, ()) if isinstance(value, ast.Call)]

        return iterated_loader(iterable, calls_of)


# wrappers that hand a loop a loader's own items: not `zip`, which pairs them with others
_BATCH_WRAPPERS = ITERATION_WRAPPERS - {"zip"}


def _walked_loader(iterable: ast.AST, local: _Locals) -> Optional[str]:
    """What DataLoader a loop takes its items from itself (`loader`, `enumerate(tqdm(loader))`):
    "" for a name the function binds only to `DataLoader(...)`, the parameter's name for a
    parameter named like a loader (a plain loader where every caller hands one: the project
    pass checks, graph.py's plain loader parameters), None for anything else: a wrapper that may
    move batches (a prefetcher, `accelerator.prepare`), an attribute, a name bound otherwise."""
    inner = _unwrapped(iterable, _BATCH_WRAPPERS)
    if not isinstance(inner, ast.Name):
        return None
    name = inner.id
    if name in local.params:
        unbound = not local.stores.get(name, 0)
        return name if unbound and is_loader_name(name) else None
    values = local.assigned_values(name)
    return "" if values and all(builds_loader(v) for v in values) else None


def _batch_of(name: str, local: _Locals) -> Optional[str]:
    """What `_walked_loader` said of the loop that binds `name`, when only that loop binds it."""
    if local.stores.get(name) != 1:
        return None
    return local.batch_targets.get(name)


def _passed_batches(node: ast.Call, local: _Locals) -> dict[str, str]:
    """Slot -> the loader parameter, for each batch of a loop over a loader parameter that the
    call passes by name, unmoved: host values where every caller hands a plain DataLoader."""
    found = {}
    for slot, value in _call_slots(node):
        if isinstance(value, ast.Name):
            walked = _batch_of(value.id, local)
            if walked:
                found[slot] = walked
    return found


def _no_bindings(name: str) -> list[ast.AST]:
    return []  # a move reads its receiver's place from the call alone


def _passed_results(
    node: ast.Call, scopes: tuple[_Locals, ...], bound_calls: dict[int, str]
) -> dict[str, str]:
    """Slot -> the name, for each name bound only to calls' results that the call passes
    (`dataloader = make_loader(...)`, then `evaluate(model, dataloader)`; `indices =
    self.matcher(...)` twice): the project pass asks what those calls return (a DataLoader, a
    tensor on the device, CPU tensors). A name of a function it is nested in, where it binds no
    such name itself, has one ENCLOSING mark per level up."""
    found = {}
    for slot, value in _call_slots(node):
        if not isinstance(value, ast.Name):
            continue
        level = next((level for level, scope in enumerate(scopes) if value.id in scope.names), -1)
        owner = scopes[level] if level >= 0 else None
        if (
            owner is not None
            and owner.function is not None
            and value.id not in owner.params
            and (
                isinstance(owner.bound_once(value.id), ast.Call)
                or _bound_to_calls(value.id, owner, bound_calls)
            )
        ):
            found[slot] = ENCLOSING * level + value.id
    return found


def _bound_to_calls(name: str, local: _Locals, bound_calls: dict[int, str]) -> bool:
    """Every binding of `name` in the function is `name = f(...)`."""
    values = local.assigned_values(name)
    return bool(values) and all(isinstance(v, ast.Call) and bound_calls.get(id(v)) == name for v in values)


def _own_parameter(expr: ast.AST, local: _Locals, function: Function, depth: int = 0) -> str:
    """The caller's own parameter that `expr` passes on: the parameter itself, never bound again
    (`f(x)`), an element of it (`x[i]`), either of those or None (`x[i] if x is not None else
    None`), or a local bound only to one of those; "" otherwise."""
    if depth > 4:
        return ""
    if isinstance(expr, ast.Name):
        if expr.id in local.params:
            return "" if expr.id in function.rebinds else expr.id
        found = {_own_parameter(v, local, function, depth + 1) for v in local.assigned_values(expr.id)}
        return found.pop() if len(found) == 1 else ""
    if isinstance(expr, ast.Subscript):
        return _own_parameter(expr.value, local, function, depth + 1)
    if isinstance(expr, ast.IfExp):
        sides = [s for s in (expr.body, expr.orelse) if not (isinstance(s, ast.Constant) and s.value is None)]
        found = {_own_parameter(s, local, function, depth + 1) for s in sides}
        return found.pop() if len(found) == 1 else ""
    return ""


_EMPTY_LIST = re.compile(r"\[(?:\s|#[^\n]*)*\]")  # `[]`, with what may stand between
_LINES = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")

# The handler of each node type (`_Summarizer._Call`), or None: found once per type, not per node.
_HANDLERS: dict[type, Optional[Callable[[_Summarizer, Any], None]]] = {}


def summarize(source: str) -> Optional[Summary]:
    """The module's summary, or None when CPython cannot parse it (the lint reports why)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    summarizer = _Summarizer(source)
    # the options' stores are recorded by the walk below (record_store), node by node
    options = module_options(tree, source)
    summarizer.options = options
    summarizer.option_holders = options.holders_anywhere()
    summarizer.summary.toplevel.namespaces = options.holders.get(id(tree), [])
    summarizer.summary.option_defaults = options.defaults
    summarizer.summary.option_stores = options.stores
    summarizer.summary.options_returning = options.returning
    flags = module_flags(tree, source)
    summarizer.summary.module_flags = flags.flags
    summarizer.summary.module_flag_choices = flags.choices
    summarizer.summary.execs = flags.execs
    summarizer.summary.assigned_globals = flags.assigned
    for node in own_nodes(tree.body):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            summarizer.module_locals.values.setdefault(node.targets[0].id, []).append(node.value)
        if isinstance(node, ast.Assign):
            _record_unpacked(node, summarizer.module_locals)
    try:
        for statement in tree.body:
            summarizer.visit(statement)
    except RecursionError:
        return None
    summarizer.item_counted_builds()
    summary = summarizer.summary
    summary.option_computed_store = options.computed_store
    summary.toplevel.optimizers = summarizer._optimizer_names(summarizer.module_locals)
    summary.handed = sorted(summarizer.handed | _handed_bases(summary, summarizer.attribute_bases))
    summary.handed_imported = sorted([base, attr] for base, attr in summarizer.handed_imported)
    summary.handed_members = sorted(summarizer.handed_members - summarizer.handed)
    summary.outer_stores = sorted(summarizer.outer_stores)
    summary.shows_cuda = shows_cuda_use(source, cuda_prefixes(summarizer.import_pairs))
    summary.mentions_precision = mentions_reduced_precision(source)
    summary.rpc_device_map = names_rpc_device_map(source)
    # The walk's deferred readers and the scopes they close over hold the tree in reference
    # cycles: broken here, the tree is freed at once instead of by a collection that walks it.
    summarizer.__dict__.clear()
    return summary


def _handed_bases(summary: Summary, bases: list[tuple[str, str]]) -> set[str]:
    """The names of `NAME.attr` reads that may hand NAME on: all but a class of the module read
    for a class variable (`ImagenTrainer.locked`), which builds nothing; a method of it (a
    factory such as `Cls.from_config(...)`) may build the class with any arguments."""
    methods: dict[str, set[str]] = {}
    for info in summary.classes:  # classes of one name (under `if`s): any of their methods
        methods.setdefault(info.name, set()).update(info.methods)
    return {name for name, attr in bases if name not in methods or attr in methods[name]}


# Methods that keep a tensor a tensor on its way to a host copy (`t.detach().cpu()`,
# `t.cpu().float().numpy()`).
_KEEPS_TENSOR = frozenset({"detach", "clone", "float", "double", "contiguous", "squeeze", "flatten"})


def _host_copy_of_param(value: ast.AST, local: _Locals) -> str:
    """The parameter `value` copies to the host through a chain of tensor methods, one of which
    reads it (`tensor.detach().cpu()`, `x.item()`), when the function never rebinds it; else ""."""
    copies = False
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and not value.keywords:
        method = value.func.attr
        if method in SYNC_METHODS and not value.args:
            copies = True
        elif method not in _KEEPS_TENSOR or value.args:
            return ""
        value = value.func.value
    if (
        copies
        and isinstance(value, ast.Name)
        and value.id in local.params
        and local.stores.get(value.id, 0) == 0
    ):
        return value.id
    return ""

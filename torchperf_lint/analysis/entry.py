"""What the project pass hands one module: the facts about it that only other modules show.

Functions, classes and loops are named by their position among the module's `def`s, `class`es
and `for`/`while` loops in source order, which the project pass (CPython's ast) and the file's
own walk (libcst) both count the same way. Everything here is plain data, so it crosses
processes and its digest keys the findings cache.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any, Iterable, Optional, TypeVar

# How a loop outside training that runs a model per iteration is named in reasons
INFERENCE_LOOP = "inference loop"


@dataclasses.dataclass(frozen=True)
class ExternalReason:
    """Why the project calls a function hot: its origin ("forward" | "step-hook" | "loop" |
    "inference") and the chain of callers, rendered ("called from WeightedCE.forward (model.py:21)")."""

    origin: str
    callers: str


@dataclasses.dataclass(frozen=True)
class EntryFacts:
    module_classes: frozenset[int] = frozenset()  # classes that are nn.Modules through any base
    hot_functions: tuple[tuple[int, ExternalReason], ...] = ()
    entry_points: tuple[int, ...] = ()  # methods a library base calls per step (MessagePassing.message)
    idle_entry_points: frozenset[int] = frozenset()  # forwards no instance runs (project/graph.py)
    step_loops: frozenset[int] = frozenset()
    # loops outside training that call a model once per iteration (generation, evaluation)
    inference_loops: frozenset[int] = frozenset()
    # loops whose body runs a model once per iteration, hot functions' included (a `generate`
    # called per batch): what sits outside them in their function runs once per many model calls
    model_loops: frozenset[int] = frozenset()
    # functions hot code calls that drive a model they are handed in a loop of their own (a
    # sampler): cold whoever calls them; that loop is one of the inference loops
    model_drivers: frozenset[int] = frozenset()
    no_grad_callables: frozenset[str] = frozenset()  # dotted names, as written here, entering no_grad
    # functions every call of the project runs without grad (project/grad_free.py)
    grad_free_functions: frozenset[int] = frozenset()
    host_parameters: tuple[tuple[int, frozenset[str]], ...] = ()  # every caller passes a host value
    device_parameters: tuple[tuple[int, frozenset[str]], ...] = ()  # every caller passes a device tensor
    # every caller passes CPU tensors, or lists and tuples of them (project/host_tensors.py)
    host_tensor_parameters: tuple[tuple[int, frozenset[str]], ...] = ()
    moved_results: frozenset[int] = frozenset()  # functions whose result every hot call moves to the device
    module_parameters: tuple[tuple[int, frozenset[str]], ...] = ()  # every caller passes a model
    # keys of the dict literals it returns that the project only ever reads on the host
    host_read_keys: frozenset[str] = frozenset()
    # per function, what every call made per step passes (project/arguments.py): name -> token
    argument_values: tuple[tuple[int, tuple[tuple[str, str], ...]], ...] = ()
    # the project's own classes (not modules) with a `to`/`cuda` of their own: a batch may be one
    # (DETR's NestedTensor); name -> whether that method takes non_blocking
    movers: tuple[tuple[str, bool], ...] = ()
    # `collate_fn=` values, as written here, that pack batches into a project class that
    # `pin_memory=True` leaves unpinned (project/graph.py, left_unpinned)
    unpinned_collates: frozenset[str] = frozenset()
    # why the module already offers DistributedDataParallel (it builds one, or calls a project
    # helper that returns one): a DataParallel beside it is the single-process fallback (TPL402)
    offers_ddp: Optional[str] = None
    # project functions, as this module calls them, that return a model wrapped in DDP or FSDP:
    # callee -> the wrapper's qualified name (project/graph.py, wrapper_builders)
    wrapper_builders: tuple[tuple[str, str], ...] = ()
    compiles: Optional[str] = None  # where some module of the project calls torch.compile (TPL703)
    # per function, the parameters another call of the project passes a model wrapped by DDP or
    # FSDP for: parameter -> the wrapper's qualified name (project/graph.py, wrapped_parameters)
    wrapped_parameters: tuple[tuple[int, tuple[tuple[str, str], ...]], ...] = ()
    cudnn_decided: bool = False  # some module of the project sets cudnn.benchmark/deterministic
    imported: bool = False  # another module of the project imports this one: not a script
    convnet_constructors: frozenset[str] = frozenset()  # callees, as written here, building 2-D convnets
    # members of project registries read here (`resnet.resnet32` for `resnet.__dict__[...]`) building them
    registry_convnets: frozenset[str] = frozenset()
    # project classes built here, as written, that are one torch.nn convolution under another name:
    # (callee, bias parameter, its position, the convolution's class) (project/conv_wrappers.py)
    conv_wrappers: tuple[tuple[str, str, int, str], ...] = ()
    # project classes built here, as written, that are 2-D convnets when the class one parameter
    # names (called in `__init__`) is a library convnet: (callee, parameter, its position)
    encoder_wrappers: tuple[tuple[str, str, int], ...] = ()
    # classes, as written here, whose instances run a `__call__` of the project's own, not a
    # module's forward (ultralytics' `YOLO(...)(image)` predicts): what that call does is not known
    own_call_classes: frozenset[str] = frozenset()
    # the callees, as written here, that build an instance of a class the project defines: an
    # object held from one runs the project's own code, not another framework's runtime
    project_classes: frozenset[str] = frozenset()
    # project functions, as written here, that may return an argument as it was given: callee ->
    # (position, parameter) of each such argument (`reduce_loss_dict(losses)` on one GPU)
    handed_back: tuple[tuple[str, int, str], ...] = ()
    # callees, as written here, whose every return is host data they build (analysis/constants.py)
    host_data_builders: frozenset[str] = frozenset()
    # project functions, as written here, that copy the parameter at a position to the host on
    # every return (`to_cpu(t)`: `return t.detach().cpu()`)
    host_copiers: tuple[tuple[str, int], ...] = ()
    host_copier_functions: frozenset[int] = frozenset()  # this module's such helpers: callers report
    # how a model the module constructs runs reduced precision by itself by default (TPL701)
    model_precision: Optional[str] = None
    # those of them whose model also has 1-D/3-D or folded convolutions: the input may not be 4-D
    signal_convnet_constructors: frozenset[str] = frozenset()
    # functions that move a model they build, called by another module's step-looping code
    stepped_model_builders: frozenset[int] = frozenset()
    channels_last_near: bool = False  # a module this one imports or is imported by names channels_last
    runs_on_cuda: Optional[str] = None  # why, when hot code of a module that shows CUDA use reaches it
    # a module that imports this one, directly or through others, and names a precision decision:
    # the process that runs this module's code may set its precision there
    precision_importer: Optional[str] = None
    # functions running a training step whose every project caller is in another module naming a
    # precision decision: function -> that module (project/graph.py, precision_callers)
    precision_callers: tuple[tuple[int, str], ...] = ()
    cuda_helper: Optional[str] = None  # why it shows CUDA use: it calls a helper returning a CUDA device
    cuda_default: Optional[str] = None  # where the project makes CUDA the default device
    rpc_device_map: Optional[str] = None  # where the project lets RPC move CUDA tensors
    # functions whose layers keep the layout of published weights (project/checkpoints.py): why
    published_weights: tuple[tuple[int, str], ...] = ()
    # datasets held in memory (project/datasets.py): tokens as written here, and per function the
    # parameters every project caller passes one for
    in_memory_datasets: frozenset[str] = frozenset()
    in_memory_parameters: tuple[tuple[int, frozenset[str]], ...] = ()
    # per function with `**kwargs`, the keys every project call hands it, each with the token the
    # calls agree on ("?" where they differ) (project/keyword_items.py)
    keyword_items: tuple[tuple[int, tuple[tuple[str, str], ...]], ...] = ()
    # the functions (-1: the top level) the project's own step and inference loops run, by evidence
    # (project/stepping.py); None where no project pass ran: then no code is known to be unstepped
    stepped_functions: Optional[frozenset[int]] = None
    # `for i, x in enumerate(...)` loops that leave once i reaches a bound (project/summary.py)
    bounded_loops: frozenset[int] = frozenset()
    # what `from m import *` of project modules binds to outside names: name -> qualified name
    # (`torch` -> `torch`, `nn` -> `torch.nn`; project/graph.py, star_imports)
    star_imports: tuple[tuple[str, str], ...] = ()
    # lines of its `DataLoader(...)` calls another function of the project iterates again and
    # again, across modules (project/loaders.py)
    reiterated_loaders: frozenset[int] = frozenset()
    # per function, its tests one side of which runs only while an accumulator is empty
    # (analysis/accumulators.py): the test's key -> whether that side is the body
    empty_fallbacks: tuple[tuple[int, tuple[tuple[str, bool], ...]], ...] = ()
    # per function (-1: the top level), the names its own scope binds to a constructed optimizer
    # (project/summary.py, Function.optimizers): their `.step()` steps one
    optimizer_names: tuple[tuple[int, frozenset[str]], ...] = ()
    # per generator function, the parameter whose items it yields as they come (`def cycle(dl):
    # ... yield data`; analysis/item_generators.py): `next(...)` of it draws the argument's items
    item_generators: tuple[tuple[int, str], ...] = ()
    # functions that run once or rarely whoever calls them (project/summary.py, Function.rare): a
    # cached builder, a visualisation helper, a dataset's one-off preparation; and of those, the
    # preparation methods (`process()`, `prepare_data()` of a dataset class)
    rare_functions: frozenset[int] = frozenset()
    preparing_functions: frozenset[int] = frozenset()
    display_name: str = ""  # the module's path relative to the project root, for reasons
    counts: tuple[int, int, int] = (-1, -1, -1)  # functions, classes, loops the project counted

    def matches(self, functions: int, classes: int, loops: int) -> bool:
        """The file's walk counts what the project counted: the indices name the same things."""
        return self.counts == (-1, -1, -1) or self.counts == (functions, classes, loops)

    def digest(self) -> str:
        """Stable across processes and runs: the findings cache keys on it. Worked out once
        (the facts are frozen), or given by `from_json`."""
        known = self.__dict__.get("_digest")
        if known is None:
            known = digest_of(self.to_json())
            object.__setattr__(self, "_digest", known)
        return known

    def to_json(self) -> dict[str, Any]:
        """Plain JSON data: tuples and sets become lists, sets sorted."""
        data: dict[str, Any] = json.loads(json.dumps(dataclasses.asdict(self), default=sorted))
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> EntryFacts:
        """The facts `to_json` gave, read back from JSON; raises on anything else."""
        facts = cls(
            module_classes=frozenset(_ints(data["module_classes"])),
            hot_functions=tuple(
                (int(index), ExternalReason(str(reason["origin"]), str(reason["callers"])))
                for index, reason in data["hot_functions"]
            ),
            entry_points=tuple(_ints(data["entry_points"])),
            step_loops=frozenset(_ints(data["step_loops"])),
            inference_loops=frozenset(_ints(data.get("inference_loops", ()))),
            model_loops=frozenset(_ints(data.get("model_loops", ()))),
            model_drivers=frozenset(_ints(data.get("model_drivers", ()))),
            no_grad_callables=frozenset(map(str, data["no_grad_callables"])),
            grad_free_functions=frozenset(_ints(data.get("grad_free_functions", ()))),
            host_parameters=tuple(
                (int(index), frozenset(map(str, names))) for index, names in data["host_parameters"]
            ),
            device_parameters=tuple(
                (int(index), frozenset(map(str, names))) for index, names in data.get("device_parameters", ())
            ),
            host_tensor_parameters=tuple(
                (int(index), frozenset(map(str, names)))
                for index, names in data.get("host_tensor_parameters", ())
            ),
            moved_results=frozenset(_ints(data.get("moved_results", ()))),
            host_read_keys=frozenset(map(str, data.get("host_read_keys", ()))),
            module_parameters=tuple(
                (int(index), frozenset(map(str, names))) for index, names in data.get("module_parameters", ())
            ),
            argument_values=tuple(
                (int(index), tuple((str(name), str(token)) for name, token in values))
                for index, values in data.get("argument_values", ())
            ),
            movers=tuple((str(name), bool(takes)) for name, takes in data["movers"]),
            unpinned_collates=frozenset(map(str, data["unpinned_collates"])),
            offers_ddp=_text(data["offers_ddp"]),
            compiles=_text(data.get("compiles")),
            wrapper_builders=tuple(
                (str(name), str(wrapper)) for name, wrapper in data.get("wrapper_builders", ())
            ),
            wrapped_parameters=tuple(
                (int(index), tuple((str(name), str(wrapper)) for name, wrapper in params))
                for index, params in data.get("wrapped_parameters", ())
            ),
            cudnn_decided=bool(data["cudnn_decided"]),
            imported=bool(data["imported"]),
            convnet_constructors=frozenset(map(str, data["convnet_constructors"])),
            registry_convnets=frozenset(map(str, data.get("registry_convnets", ()))),
            conv_wrappers=tuple(
                (str(name), str(param), int(position), str(conv))
                for name, param, position, conv in data.get("conv_wrappers", ())
            ),
            encoder_wrappers=tuple(
                (str(name), str(param), int(position))
                for name, param, position in data.get("encoder_wrappers", ())
            ),
            own_call_classes=frozenset(map(str, data.get("own_call_classes", ()))),
            project_classes=frozenset(map(str, data.get("project_classes", ()))),
            handed_back=tuple(
                (str(name), int(position), str(param))
                for name, position, param in data.get("handed_back", ())
            ),
            host_data_builders=frozenset(map(str, data.get("host_data_builders", ()))),
            host_copiers=tuple((str(name), int(index)) for name, index in data.get("host_copiers", ())),
            host_copier_functions=frozenset(_ints(data.get("host_copier_functions", ()))),
            model_precision=_text(data.get("model_precision")),
            signal_convnet_constructors=frozenset(map(str, data.get("signal_convnet_constructors", ()))),
            stepped_model_builders=frozenset(_ints(data.get("stepped_model_builders", ()))),
            channels_last_near=bool(data["channels_last_near"]),
            runs_on_cuda=_text(data["runs_on_cuda"]),
            precision_importer=_text(data.get("precision_importer")),
            precision_callers=tuple((int(i), str(why)) for i, why in data.get("precision_callers", ())),
            cuda_helper=_text(data["cuda_helper"]),
            cuda_default=_text(data["cuda_default"]),
            rpc_device_map=_text(data.get("rpc_device_map")),
            published_weights=tuple((int(i), str(why)) for i, why in data["published_weights"]),
            in_memory_datasets=frozenset(map(str, data.get("in_memory_datasets", ()))),
            in_memory_parameters=tuple(
                (int(index), frozenset(map(str, names)))
                for index, names in data.get("in_memory_parameters", ())
            ),
            keyword_items=tuple(
                (int(index), tuple((str(key), str(token)) for key, token in items))
                for index, items in data.get("keyword_items", ())
            ),
            stepped_functions=_optional_ints(data.get("stepped_functions")),
            bounded_loops=frozenset(_ints(data.get("bounded_loops", ()))),
            star_imports=tuple((str(name), str(target)) for name, target in data.get("star_imports", ())),
            reiterated_loaders=frozenset(_ints(data.get("reiterated_loaders", ()))),
            empty_fallbacks=tuple(
                (int(index), tuple((str(key), bool(body)) for key, body in tests))
                for index, tests in data.get("empty_fallbacks", ())
            ),
            optimizer_names=tuple(
                (int(index), frozenset(map(str, names))) for index, names in data.get("optimizer_names", ())
            ),
            item_generators=tuple(
                (int(index), str(param)) for index, param in data.get("item_generators", ())
            ),
            rare_functions=frozenset(_ints(data.get("rare_functions", ()))),
            preparing_functions=frozenset(_ints(data.get("preparing_functions", ()))),
            display_name=str(data["display_name"]),
            counts=tuple(_ints(data["counts"])),  # type: ignore[arg-type]
        )
        # the digest of what was read is the digest of what was written, without asdict's copy
        object.__setattr__(facts, "_digest", digest_of(data))
        return facts

    @property
    def reaches_hot_code(self) -> bool:
        """Other modules run some of this module's code per step."""
        return bool(self.hot_functions or self.step_loops or self.inference_loops or self.entry_points)

    def published_weights_of(self, index: int) -> Optional[str]:
        return _row(self.published_weights, index)

    def precision_callers_of(self, index: int) -> Optional[str]:
        return _row(self.precision_callers, index)

    def arguments_of(self, index: int) -> dict[str, str]:
        return dict(_row(self.argument_values, index) or ())

    def wrapped_params_of(self, index: int) -> dict[str, str]:
        return dict(_row(self.wrapped_parameters, index) or ())

    def keyword_items_of(self, index: int) -> Optional[dict[str, str]]:
        """What every project call hands function `index`'s `**kwargs`: key -> token; None: unknown."""
        items = _row(self.keyword_items, index)
        return dict(items) if items is not None else None

    def in_memory_params_of(self, index: int) -> frozenset[str]:
        return _row(self.in_memory_parameters, index) or frozenset()

    def host_params_of(self, index: int) -> frozenset[str]:
        return _row(self.host_parameters, index) or frozenset()

    def device_params_of(self, index: int) -> frozenset[str]:
        return _row(self.device_parameters, index) or frozenset()

    def host_tensor_params_of(self, index: int) -> frozenset[str]:
        return _row(self.host_tensor_parameters, index) or frozenset()

    def module_params_of(self, index: int) -> frozenset[str]:
        return _row(self.module_parameters, index) or frozenset()

    def yielded_param_of(self, index: int) -> str:
        return _row(self.item_generators, index) or ""


_Row = TypeVar("_Row")


def _row(table: tuple[tuple[int, _Row], ...], index: int) -> Optional[_Row]:
    """What a per-function table holds for the function numbered `index`, if anything."""
    return next((value for function, value in table if function == index), None)


NO_FACTS = EntryFacts()


def digest_of(data: dict[str, Any]) -> str:
    """The digest of facts as `to_json` gives them, or as they were read back from JSON."""
    text = json.dumps(data, sort_keys=True, default=sorted)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _text(value: Any) -> Optional[str]:
    return None if value is None else str(value)


def _optional_ints(values: Any) -> Optional[frozenset[int]]:
    return None if values is None else frozenset(_ints(values))


def _ints(values: Iterable[Any]) -> list[int]:
    # bool is an int to Python, and JSON's true is not an index
    if any(isinstance(value, bool) or not isinstance(value, int) for value in values):
        raise TypeError("not a list of integers")
    return list(values)

"""What a rule may ask about a file: one object per file, built once after the walk."""

from __future__ import annotations

import copy
import functools
from typing import Iterator, Optional

import libcst as cst

from ..analysis.accumulation import Accumulation, Accumulations
from ..analysis.batches import Batches, Source, movers, unpinned_collate
from ..analysis.caches import SlotCaches
from ..analysis.compiled import Compiled
from ..analysis.configuration import indexed_configuration, iterates_configuration
from ..analysis.constants import HostConstants
from ..analysis.constructors import ModuleGraph
from ..analysis.datasets import InMemoryData
from ..analysis.device_values import DeviceValues, mask_selections
from ..analysis.devices import HostTensors
from ..analysis.distributed import Wrapped, Wrappers
from ..analysis.entry import NO_FACTS, EntryFacts
from ..analysis.grad_mode import GradMode
from ..analysis.gradients import accumulates_into_grad
from ..analysis.hotpath import HotPaths, Reason
from ..analysis.iteration import Iterations, index_chunks
from ..analysis.names import Names
from ..analysis.parameters import ParameterSequence
from ..analysis.placement import HostModels
from ..analysis.registries import Registries, RegistryMember
from ..analysis.rpc_sends import RpcSends
from ..analysis.runtimes import Runtimes
from ..analysis.sequential import LoopDependences, LoopFacts
from ..analysis.single_step import steps_once
from ..analysis.sizes import Sizes
from ..analysis.tensors import TensorInference, Tensorness
from ..analysis.torch_apis import ApiSupport, support
from ..analysis.torch_version import Declared, bounded_by_imports, target_version
from ..analysis.trip_counts import TripCounts
from ..analysis.visible_devices import VisibleDevices
from ..analysis.vocabulary import cuda_prefixes, names_rpc_device_map, shows_cuda_use
from ..paths import matches_path
from ..settings import Settings
from ..syntax.positions import node_ranges
from ..syntax.walker import Binding, FileFacts, Loop, dotted_name


class Context:
    def __init__(
        self, path: str, source: str, facts: FileFacts, settings: Settings, entry: EntryFacts = NO_FACTS
    ) -> None:
        self.path = path
        self.source = source
        self.facts = facts
        self.settings = settings
        self.module = facts.module
        self.names = Names(facts, dict(entry.star_imports))
        self.entry = entry
        self._shows_cuda: Optional[bool] = None
        self.torch_questions = 0
        self.hot = HotPaths(facts, self.names, entry, self.shows_cuda_use)
        self.tensors = TensorInference(facts, self.names, self.hot)

    # -- names ------------------------------------------------------------------------
    def qualified_name(self, expr: cst.BaseExpression) -> Optional[str]:
        return self.names.qualified_name(expr)

    def bindings(self, name: str, at: cst.CSTNode) -> list[Binding]:
        return self.names.lookup(name, at)

    @functools.cached_property
    def _registries(self) -> Registries:
        return Registries(self.facts, self.names)

    def registry_member(self, call: cst.Call) -> Optional[RegistryMember]:
        """What `models.__dict__[args.arch]()` or `getattr(models, name)()` builds: the member a
        literal names, or the argparse default of the option, said to be assumed."""
        return self._registries.member(call)

    def registry_lookup(self, expr: cst.BaseExpression) -> Optional[RegistryMember]:
        """What a registry lookup handed on uncalled selects (`SimSiam(models.__dict__[args.arch])`)."""
        return self._registries.looked_up(expr)

    def under_option_defaults(self, test: cst.BaseExpression) -> Optional[bool]:
        """What an `if` test on command-line options gives under their defaults, or None."""
        return self._registries.under_defaults(test)

    @functools.cached_property
    def _visible_devices(self) -> VisibleDevices:
        return VisibleDevices(self.facts, self.names, self._registries)

    def one_device_by_default(self, call: cst.Call) -> bool:
        """A data-parallel wrapper built by `call` spreads over one GPU on the default run
        (analysis/visible_devices.py): a pass-through there."""
        return self._visible_devices.one_device_by_default(call)

    def torch_name(self) -> tuple[str, bool]:
        """How a fix spells `torch`, and whether it must add `import torch`."""
        alias = self.names.torch_alias()
        return (alias, False) if alias else ("torch", True)

    # -- tree -------------------------------------------------------------------------
    def parent(self, node: cst.CSTNode) -> Optional[cst.CSTNode]:
        return self.facts.parents.get(node)

    def ancestors(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        return self.facts.ancestors(node)

    def enclosing_function(self, node: cst.CSTNode) -> Optional[cst.FunctionDef]:
        return self.facts.enclosing_function(node)

    def enclosing_function_index(self, node: cst.CSTNode) -> Optional[int]:
        """The project pass's number of the `def` around `node` (EntryFacts' per-function
        tables); None at module level."""
        function = self.facts.enclosing_function(node)
        return self.hot.function_index(function) if function is not None else None

    def code(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node)

    def line_of(self, node: cst.CSTNode) -> int:
        """The 1-based line `node` starts on, for a message that names another statement ("the
        loop at line 12"). A code generation up to the node: ask only when reporting."""
        return node_ranges(self.module, [node])[node].start.line

    def nodes(self, kind: type) -> list[cst.CSTNode]:
        """Every node of `kind` in the file; only types that some enabled rule declared."""
        return self.facts.collected.get(kind, [])

    # -- hot paths --------------------------------------------------------------------
    def hot_reason(self, node: cst.CSTNode) -> Optional[Reason]:
        return self.hot.reason(node)

    def is_hot(self, node: cst.CSTNode) -> bool:
        return self.hot.reason(node) is not None

    def runs_by_default(self, node: cst.CSTNode) -> bool:
        """The default run may reach `node`: it is in no branch that the command-line options'
        defaults never take (analysis/hotpath.py)."""
        return self.hot.runs_by_default(node)

    def setting_taken_by_default(self, node: cst.CSTNode) -> bool:
        """The default run may take the setting at `node`: no branch around it is one that the
        options' defaults, or what every project call passes its function, never take
        (`if args.half: model.half()` with `--half` opt-in)."""
        return self.hot.runs_by_default(node, parameters=True)

    def false_by_default(self, expr: cst.BaseExpression) -> bool:
        """`expr` is false on the default run (`enabled=amp`, every caller passing an opt-in
        option's default): analysis/hotpath.py."""
        return self.hot.false_by_default(expr)

    def value_by_default(self, expr: cst.BaseExpression) -> cst.BaseExpression:
        """What `expr` holds on the default run where the options decide it (`{"float32":
        torch.float32, ...}[args.dtype]` gives `torch.float32`): analysis/hotpath.py."""
        return self.hot.value_by_default(expr)

    def stepped(self, node: cst.CSTNode) -> bool:
        """A step or inference loop of the project runs the code at `node`: per step by evidence, not
        only by hypothesis (project/stepping.py). True where no project pass ran."""
        stepped = self.entry.stepped_functions
        if stepped is None:
            return True
        function = self.facts.enclosing_function(node)
        index = self.hot.function_index(function) if function is not None else -1
        return index in stepped

    def runs_only_in_special_mode(self, node: cst.CSTNode) -> bool:
        """`node` runs only while scripting, tracing or exporting (analysis/hotpath.py)."""
        return self.hot.runs_only_in_special_mode(node)

    def step_loop(self, node: cst.CSTNode) -> Optional[Loop]:
        """The step loop whose body holds `node` (in the same function), if any."""
        return self.hot.step_loop(node)

    def prepares_dataset(self, node: cst.CSTNode) -> bool:
        """`node` runs once, in a dataset's `process()`/`download()` (analysis/vocabulary.py)."""
        return self.hot.prepares_dataset(node)

    def is_optimizer_step(self, call: cst.Call) -> bool:
        """`<x>.step()` on an optimizer: a receiver named like one, or bound to `torch.optim.*`."""
        return (
            isinstance(call.func, cst.Attribute)
            and call.func.attr.value == "step"
            and self.hot._is_optimizer_step(call)
        )

    def steps_once(self, built: cst.Call) -> bool:
        """The optimizer `built` is stepped exactly once, outside any loop, in a function that
        keeps it to itself and is not hot (analysis/single_step.py)."""
        return steps_once(built, self.facts, self.hot)

    @functools.cached_property
    def _loop_dependences(self) -> LoopDependences:
        return LoopDependences(self.facts.imports, SlotCaches(self.names, self.hot).holds_slots)

    def loop_facts(self, loop: Loop) -> LoopFacts:
        """What one iteration of `loop` hands to the next (`.carried`: name -> reduction or
        recurrence), every read in its body (`.uses(name)`), and whether it exits early."""
        return self._loop_dependences.facts(loop)

    def is_sequential_loop(self, loop: Loop) -> bool:
        """A name assigned in the body is read by the next iteration before it is reassigned
        (`h = cell(x[t], h)`); list appends and reductions (`acc = acc + f(x[i])`) are not."""
        return self._loop_dependences.facts(loop).sequential

    def lines_of(self, nodes: list[cst.CSTNode]) -> dict[cst.CSTNode, int]:
        """The first line of each node, for a message that names lines (a code generation of the
        file: ask only once a finding is certain)."""
        return {node: where.start.line for node, where in node_ranges(self.module, nodes).items()}

    # -- gradient accumulation and data parallelism -----------------------------------------
    @functools.cached_property
    def _accumulations(self) -> Accumulations:
        return Accumulations(self.facts, self.names, self.hot, self.hot._is_optimizer_step)

    def accumulation(self, backward: cst.Call) -> Optional[Accumulation]:
        """The gradient accumulation whose micro-steps run `backward` (analysis/accumulation.py)."""
        return self._accumulations.of(backward)

    @functools.cached_property
    def _wrappers(self) -> Wrappers:
        return Wrappers(self.facts, self.names, self.hot, self.entry)

    def wrapped_model(self, expr: cst.BaseExpression) -> Optional[Wrapped]:
        """The DDP or FSDP wrapper one of `expr`'s possible values comes from
        (analysis/distributed.py), or None."""
        return self._wrappers.of(expr)

    # -- torch.compile -------------------------------------------------------------------
    @functools.cached_property
    def compiled(self) -> Compiled:
        """What `torch.compile` reaches in the file, and whether it decides about compiling
        (analysis/compiled.py)."""
        return Compiled(self.facts, self.names, self.hot)

    def graph_break(self, node: cst.CSTNode) -> str:
        """What a sync finding's message adds when `node` runs inside compiled code."""
        return "; inside torch.compile'd code it also breaks the graph" if self.compiled.holds(node) else ""

    # -- modules ------------------------------------------------------------------------
    @functools.cached_property
    def module_graph(self) -> ModuleGraph:
        """Constructor calls behind module names and attributes, and how modules are wired."""
        return ModuleGraph(self.facts, self.names, self.hot)

    @functools.cached_property
    def sizes(self) -> Sizes:
        """Integer sizes the file states where a static reading finds them (a literal, a name
        bound once to one, a configuration class's default)."""
        return Sizes(self.facts, self.names)

    @functools.cached_property
    def trip_counts(self) -> TripCounts:
        """Whether a loop runs once per batch, sample or row, or a handful of times."""

        def int_value(expr: cst.BaseExpression) -> Optional[int]:
            found = self.sizes.value(expr)
            return found[0] if found is not None else None

        def bound_values(name: cst.Name) -> list[cst.BaseExpression]:
            bindings = self.bindings(name.value, name)
            return [b.node for b in bindings if b.kind == "assign" and isinstance(b.node, cst.BaseExpression)]

        return TripCounts(self.is_tensor, self.hot.loader_label, int_value, bound_values)

    def data_sized(self, loop: Loop) -> Optional[str]:
        """What data `loop` walks (analysis/trip_counts.py), or None for a handful."""
        return self.trip_counts.loop(loop)

    @functools.cached_property
    def iterations(self) -> Iterations:
        """Where objects built by calls (DataLoaders) are iterated, and whether that repeats."""
        return Iterations(self.facts, self.names, self.hot)

    # -- autograd and the target torch version -----------------------------------------
    @functools.cached_property
    def grad_mode(self) -> GradMode:
        return GradMode(self.facts, self.names, self.hot)

    def grad_disabled(self, node: cst.CSTNode) -> bool:
        """`node` runs under `torch.no_grad()`/`inference_mode()`/`set_grad_enabled(False)`:
        a `with` block, a decorator of an enclosing function, an earlier statement, or every
        call site in the file of the function that holds it."""
        return self.grad_mode.disabled_by(node) is not None

    @functools.cached_property
    def accumulates_into_grad(self) -> bool:
        """The file adds into gradients in place (`p.grad += g`): they must exist, so zeroing
        them is deliberate and setting them to None would break the next addition."""
        return accumulates_into_grad(self.facts)

    def target_torch_version(self) -> Declared:
        """The torch the file targets: the oldest supported release (`.version`, None: the
        newest), the release the runtime is older than (`.below`, None: no upper bound) and
        where that comes from (`.source`): --torch-version/config, else the project's requirement."""
        self.torch_questions += 1  # the runner asks again, with a newer torch, the rules that asked
        return self._target_torch_version

    @functools.cached_property
    def _target_torch_version(self) -> Declared:
        declared = target_version(self.path, self.settings.torch_version, self.settings.torch_version_source)
        if self.settings.torch_version is not None:
            return declared  # --torch-version says which torch it is
        return bounded_by_imports(declared, self.facts.imports.values())

    def limited_by_declared_torch(self) -> bool:
        """The torch the file targets comes from its project (or its imports), not from
        --torch-version, and is older than the newest: what some rules say depends on it."""
        if self.settings.torch_version is not None:
            return False
        declared = self._target_torch_version
        return declared.version is not None or declared.below is not None

    def on_torch(self, version: tuple[int, int], source: str) -> Context:
        """This context for the same file on another torch: the analyses are shared (none of them
        depends on the version), the version is asked again."""
        other = copy.copy(self)
        other.settings = self.settings.replace(torch_version=version, torch_version_source=source)
        other.__dict__.pop("_target_torch_version", None)
        return other

    def api(self, name: str) -> ApiSupport:
        """An API of analysis/torch_apis.py's table against the torch this file targets: whether
        a fix may write it (`.writable`) and whether the runtime may have it (`.usable`)."""
        return support(name, self.target_torch_version())

    # -- batches and host values ---------------------------------------------------------
    @functools.cached_property
    def _in_memory_data(self) -> InMemoryData:
        return InMemoryData(self.facts, self.names, self.hot, self.entry)

    def holds_in_memory(self, dataset: cst.BaseExpression) -> bool:
        """`dataset` is held in memory: a `TensorDataset`, or a project dataset whose
        `__getitem__` only indexes what `__init__` stored, reached through names, a returned
        tuple or a parameter every caller passes one for (analysis/datasets.py)."""
        return self._in_memory_data.holds(dataset)

    @functools.cached_property
    def _batches(self) -> Batches:
        return Batches(self.facts, self.names, self.hot)

    def batch_loop(self, expr: cst.BaseExpression) -> Optional[Source]:
        """Where the DataLoader batch that `expr` is, or is an element of (unpacked, indexed, or a
        value of its dict), is drawn: the loop over the loader, or a step loop's `next(it)` call;
        None when `expr` is not host batch data."""
        return self._batches.loop_of(expr)

    def moved_under_its_name(self, name: cst.Name) -> bool:
        """Every binding reaching `name` moves the value it had to a device and rebinds it
        (`labels = labels.to(device)`): a batch there is no longer the loader's host batch."""
        return self._batches.moved_under_its_name(name)

    def batch_loaders(self, source: Source) -> Optional[list[cst.Call]]:
        """The torch DataLoader calls of this file that the batches drawn at `source` (a
        `batch_loop` answer) may come from; None where any is unknown (analysis/batches.py)."""
        return self._batches.loaders(source)

    def is_whole_batch(self, expr: cst.BaseExpression) -> bool:
        """`expr` is a loader loop's item itself (`for batch in loader`), not an element of it."""
        return self._batches.is_whole_item(expr)

    @functools.cached_property
    def _movers(self) -> dict[str, bool]:
        return movers(self.facts, self.names, self.hot)

    def custom_move_takes_non_blocking(self, receiver: cst.BaseExpression) -> Optional[bool]:
        """What `receiver.to(...)`/`.cuda(...)` may call besides a tensor's method. None: the
        receiver is certainly a tensor, or the project has no class with a `to`/`cuda` of its
        own. Else whether every such class's method takes `non_blocking`: the receiver may be
        one of them (a batch collated into a `NestedTensor` in another module)."""
        if not self._movers or self.is_tensor(receiver, certain=True):
            return None
        return all(self._movers.values())

    def collates_unpinned(self, loader: cst.Call) -> bool:
        """The DataLoader `loader` collates its batches into a project class that
        `pin_memory=True` leaves in pageable memory (DETR's `NestedTensor`, collated in another
        module): pinning would reach only the rest of the batch."""
        return unpinned_collate(loader, self.facts, self.hot)

    @functools.cached_property
    def _host_constants(self) -> HostConstants:
        return HostConstants(self.facts, self.names, self.hot)

    def is_step_invariant(self, expr: cst.BaseExpression) -> bool:
        """`expr` has the same host value at every step: literals, and names or `self.`
        attributes that hot code never rebinds."""
        return self._host_constants.is_step_invariant(expr)

    def is_host_array(self, expr: cst.BaseExpression) -> bool:
        """`expr` is host data built once (a NumPy array, a list or a CPU tensor bound at set-up,
        or passed by every caller from there) that hot code never rebinds."""
        return self._host_constants.is_host_array(expr)

    def reads_a_file_map(self, expr: cst.BaseExpression) -> bool:
        """`expr` may hold a memory-mapped file or a view of one (`np.memmap(path)`): host data
        that need not fit in memory, let alone on a device."""
        return self._host_constants.reads_a_file_map(expr)

    @functools.cached_property
    def _host_copiers(self) -> dict[str, int]:
        return dict(self.entry.host_copiers)  # asked of every sync candidate in hot code

    def host_copied_argument(self, call: cst.Call) -> Optional[cst.BaseExpression]:
        """The argument `call` copies to the host, where it calls a project function that copies
        that parameter on every return (`to_cpu(loss)`, `def to_cpu(t): return t.detach().cpu()`;
        project/graph.py host_copiers)."""
        written = dotted_name(call.func) if self._host_copiers else None
        index = self._host_copiers.get(written) if written is not None else None
        positional = [a for a in call.args if a.keyword is None and not a.star]
        if index is None or index >= len(positional) or len(positional) != len(call.args):
            return None
        return positional[index].value

    def copied_for_callers(self, node: cst.CSTNode) -> bool:
        """`node` is in a `return` of a project helper that copies its argument to the host
        (`def to_cpu(t): return t.detach().cpu()`): the read is reported where a caller hands
        it a device tensor (host_copied_argument), not here, once for all of them."""
        if not self.entry.host_copier_functions:
            return False
        index = self.enclosing_function_index(node)
        if index is None or index not in self.entry.host_copier_functions:
            return False
        return any(isinstance(a, cst.Return) for a in self.ancestors(node))

    def is_index_array(self, expr: cst.BaseExpression) -> bool:
        """`expr` is a NumPy array of indices or a slice of one (`np.arange(n)[start:end]`):
        indexing a CUDA tensor with it copies it to the device."""
        return self._host_constants.is_index_array(expr)

    # -- tensors and devices -----------------------------------------------------------
    @functools.cached_property
    def _host_tensors(self) -> HostTensors:
        # not self.is_tensor: a bound method cached on self is a reference cycle, which keeps
        # the tree alive until the garbage collector's next full pass
        tensors = self.tensors
        return HostTensors(
            self.facts,
            self.names,
            self.hot,
            tensors.infer,
            factories_on_device=self.factories_on_device,
            rpc_moves_cuda=self.rpc_moves_cuda,
            drawn_from_loader=self._batches.binds_drawn_item,
            has_dims=self._device_values.has_dims,
            dict_items=tensors.dict_items.values,
        )

    @functools.cached_property
    def _rpc_sends(self) -> RpcSends:
        return RpcSends(self.facts, self.names, self.hot, self._host_tensors.received_over_rpc)

    def only_sent_over_rpc(self, value: cst.Call) -> bool:
        """`value`'s every use sends it over RPC, in a project without an RPC device map: it
        must stay on the host (TensorPipe carries only CPU tensors there)."""
        return not self.rpc_moves_cuda and self._rpc_sends.only_sent(value)

    @functools.cached_property
    def _runtimes(self) -> Runtimes:
        return Runtimes(self.facts, self.names, self.hot)

    def fed_to_other_runtime(self, conversion: cst.Call) -> bool:
        """The `.cpu()`/`.numpy()` copy `conversion` makes is the input of another framework's
        runtime the module holds (`self.session.run(..., {name: im})`): no torch work is waiting
        on the device for it, and no device-side form exists (analysis/runtimes.py)."""
        return self._runtimes.fed_to_other_runtime(conversion)

    def is_host_tensor(self, expr: cst.BaseExpression) -> bool:
        """`expr` is certainly a CPU tensor: built by a torch factory or from host data without
        `device=`, never moved; reading its values waits for no device."""
        return self._host_tensors.is_host_tensor(expr)

    def is_tensor(self, expr: cst.BaseExpression, certain: bool = False) -> bool:
        wanted = Tensorness.CERTAIN if certain else Tensorness.LIKELY
        return self.tensors.infer(expr) >= wanted

    def is_computed_tensor(self, expr: cst.BaseExpression) -> bool:
        """A tensor the code computes, not one only a parameter makes one (analysis/tensors.py)."""
        return self.tensors.is_computed(expr)

    @functools.cached_property
    def _device_values(self) -> DeviceValues:
        tensors, names = self.tensors, self.names  # not self, nor its bound methods: see _host_tensors
        return DeviceValues(
            self.facts,
            names,
            lambda e: tensors.infer(e) >= Tensorness.LIKELY,
            lambda e: tensors.infer(e) >= Tensorness.LIKELY and not names.is_bare_parameter(e),
        )

    def device_scalar(self, expr: cst.BaseExpression) -> bool:
        """`expr` is a 0-dim tensor that may live on the device (`t.sum()`, `torch.tensor(n,
        device=d)`, `size_t[0]` of a 1-D one): Python reads it through `.item()` where it needs a
        number (analysis/device_values.py)."""
        return self._device_values.zero_dim(expr) and not self.is_host_tensor(expr) and self.runs_on_cuda

    def host_index_tensor(self, expr: cst.BaseExpression) -> bool:
        """`expr` is certainly a tensor on the CPU, or a tuple or list of them (DETR's matcher
        indices), that may hold several indices (not certainly 0-dim): a CUDA tensor indexed with
        it gets a copy of it first (a 0-dim one is read as a number)."""
        return (
            self._host_tensors.holds_tensors(expr)
            and self.is_host_tensor(expr)
            and not self._device_values.zero_dim(expr)
        )

    def device_mask(self, expr: cst.BaseExpression) -> bool:
        """`expr` is a boolean tensor that may live on the device: indexing with it counts its
        true elements on the host (analysis/device_values.py)."""
        return self._device_values.mask(expr) and not self.is_host_tensor(expr) and self.runs_on_cuda

    def mask_selections(self, body: cst.CSTNode) -> list[cst.Subscript]:
        """The boolean-mask reads of device tensors in `body` (`boxes[mask]`, `t[:, m]`), each
        a `nonzero` and a wait for the device; writes through a mask (`t[mask] = v`) do not wait."""

        def selects(subscript: cst.Subscript) -> bool:
            # what a device mask indexes is a tensor, or an object that indexes one (`Boxes`)
            if not self.is_hot(subscript) or self.is_host_tensor(subscript.value):
                return False
            return any(
                isinstance(e.slice, cst.Index) and self.device_mask(e.slice.value) for e in subscript.slice
            )

        return mask_selections(body, selects)

    def item_loop(self, node: cst.CSTNode) -> Optional[cst.For]:
        """The outermost `for` around `node` in its function that runs inside a step (hot, and not
        itself the step loop or an inference loop): a loop over the items of one step, such as
        images, targets, levels or classes."""
        found: Optional[cst.For] = None
        for ancestor in (node, *self.ancestors(node)):
            if isinstance(ancestor, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
                break
            if not isinstance(ancestor, (cst.For, cst.While)):
                continue
            if ancestor in self.hot.step_loops or ancestor in self.hot.inference_loops:
                break
            if isinstance(ancestor, cst.For) and self.hot_reason(ancestor) is not None:
                found = ancestor
        return found

    def host_source(self, expr: cst.BaseExpression) -> Optional[cst.BaseExpression]:
        """The Python number the 0-dim tensor `expr` was built from, arithmetic included."""
        return self._device_values.host_source(expr)

    def is_declared_sequence(self, expr: cst.BaseExpression) -> bool:
        """A parameter annotated as a list or tuple (`images: list[Tensor]`): not a tensor."""
        return self.tensors.is_declared_sequence(expr)

    def parameter_sequence(self, expr: cst.BaseExpression) -> Optional[ParameterSequence]:
        """`expr` iterates a module's parameters, buffers or state-dict tensors
        (`model.parameters()`, `zip(ema.parameters(), model.parameters())`, a list built from one),
        and which of its elements are those tensors; None otherwise."""
        return self.tensors.parameters.of(expr)

    def parameter_targets(self, loop: cst.For) -> dict[str, str]:
        """The names `loop` binds to a module's tensors, each with its source (`parameters`,
        `buffers`, `state_dict`): `p_ema` and `p` of `for p_ema, p in zip(ema.parameters(), ...)`."""
        return self.tensors.parameters.tensor_targets(loop)

    @functools.cached_property
    def _host_models(self) -> HostModels:
        return HostModels(self.facts, self.names, self.hot, self.entry.imported, self.rpc_moves_cuda)

    def walks_host_model(self, expr: cst.BaseExpression) -> bool:
        """`expr` walks the tensors of models that stay on the host (`fc.parameters()` of an
        `fc = nn.Linear(4, 1)` that nothing moves, passes on or returns): CPU tensors even in a
        file that uses CUDA elsewhere (analysis/placement.py)."""
        return self._host_models.of_tensors(expr)

    def device_for(self, node: cst.CSTNode) -> Optional[cst.BaseExpression]:
        """`<tensor in scope>.device` for a fix that needs a device, or None."""
        name = self.tensors.device_of_scope(node)
        if name is None:
            return None
        return cst.Attribute(value=cst.Name(name), attr=cst.Name("device"))

    @functools.cached_property
    def is_test_file(self) -> bool:
        """The path matches a test-file pattern (pytest's defaults unless configured)."""
        return any(matches_path(self.path, p) for p in self.settings.test_file_patterns)

    @property
    def shows_cuda_use(self) -> bool:
        """`.cuda(`, `torch.cuda.` (as the imports spell it), a string literal starting with
        "cuda", an NCCL backend in the file, or a call of a project helper that returns a CUDA device."""
        if self._shows_cuda is None:
            prefixes = cuda_prefixes(self.facts.imports.items())
            self._shows_cuda = self.entry.cuda_helper is not None or shows_cuda_use(self.source, prefixes)
        return self._shows_cuda

    @property
    def runs_on_cuda(self) -> bool:
        """The file shows CUDA use, or hot code of a module that does reaches it (RULES.md)."""
        return self.entry.runs_on_cuda is not None or self.shows_cuda_use

    def index_chunks(self, expr: cst.BaseExpression) -> bool:
        """`expr` holds indices grouped k at a time (`torch.randperm(n).view(-1, k)`): a loop
        over it takes one chunk per iteration (analysis/iteration.py)."""
        return index_chunks(expr, self.names)

    def loops_over_configuration(self, loop: cst.For) -> Optional[str]:
        """What configuration `loop` walks (analysis/configuration.py), or None."""
        return iterates_configuration(loop, self.is_tensor)

    def indexed_configuration(self, body: cst.CSTNode, index: str) -> Optional[str]:
        """A `self.<attr>[index]` of a non-tensor attribute read in `body`, or None."""
        return indexed_configuration(body, index, self.is_tensor)

    def published_weights(self, node: cst.CSTNode) -> Optional[str]:
        """Why the layers built where `node` is keep the layout of published weights (the
        function around it builds a model whose checkpoints are downloaded), or None."""
        if not self.entry.published_weights:
            return None
        index = self.enclosing_function_index(node)
        return self.entry.published_weights_of(index) if index is not None else None

    def precision_set_by_callers(self, node: cst.CSTNode) -> Optional[str]:
        """The module that sets the precision of the training step `node` is in: every project call
        of the function around it comes from another module naming a precision decision."""
        if not self.entry.precision_callers:
            return None
        index = self.enclosing_function_index(node)
        return self.entry.precision_callers_of(index) if index is not None else None

    @property
    def rpc_moves_cuda(self) -> bool:
        """The project (or this file) configures an RPC device map: a tensor returned over
        RPC may arrive on a GPU. Without one, TensorPipe only carries CPU tensors."""
        return self.entry.rpc_device_map is not None or names_rpc_device_map(self.source)

    @property
    def factories_on_device(self) -> bool:
        """The project makes CUDA the default device: factories without `device=` run there."""
        return self.entry.cuda_default is not None

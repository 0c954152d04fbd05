"""The hot-path map: which code runs once per training or inference step (RULES.md, "hot paths").

Roots are nn.Module `forward`/`__call__` (through aliases and in-file subclass chains), Lightning
step hooks, and the bodies of step loops; functions reachable from them through calls resolved in
the same file are hot too, to a fixed point. Every hot region keeps a `Reason` that says why.
"""

from __future__ import annotations

import ast
import dataclasses
from collections import deque
from typing import Callable, Iterator, Optional, Union

import libcst as cst

from ..syntax.ast_view import as_ast
from ..syntax.unset import UNSET
from ..syntax.walker import (
    ClassInfo,
    FileFacts,
    Loop,
    dotted_name,
    registrations,
    returned_values,
)
from .accumulators import test_key
from .arguments import decided_sides, is_option_read
from .cold import (
    argument_sides,
    cold_from,
    compared_counter,
    crosses_cold_branch,
    enumerate_counter,
    fails_at_end,
    fills_looked_up_cache,
    leaving_statement,
    special_mode_sides,
)
from .derived_settings import DerivedSettings
from .entry import INFERENCE_LOOP, NO_FACTS, EntryFacts
from .loader_loops import CallsOf, held_out_loader, iterated_loader, loader_label
from .names import Names
from .vocabulary import (
    MODULE_CHAIN_METHODS,
    MODULE_ENTRY_POINTS,
    STEP_HOOKS,
    is_module_base,
    is_optimizer_name,
    scaler_stepped,
)

Origin = str  # "forward" | "step-hook" | "loop" | "inference"
Owner = Union[cst.FunctionDef, cst.For, cst.While]
# what crosses_cold_branch and cold_from look at
_BRANCHES = frozenset(
    {cst.If, cst.IfExp, cst.ExceptHandler, cst.Lambda, cst.IndentedBlock, cst.BooleanOperation}
)


@dataclasses.dataclass(frozen=True, eq=False)
class Reason:
    """Why a region is hot. Rendering needs line numbers, so it happens only for findings."""

    origin: Origin
    function: Optional[str] = None  # qualname of the hot function
    loop: Optional[Loop] = None  # the step loop
    loop_label: str = ""  # "loop over train_loader" / "training loop"
    caller: Optional[Reason] = None  # set when hot because it is called from a hot region
    external: str = ""  # the callers in other modules, as the project pass rendered them
    module: str = ""  # this module, named when the chain leaves it

    def render(self, line_of: Callable[[cst.CSTNode], int]) -> str:
        if self.loop is not None:
            here = f"in {self.loop_label} at line {line_of(self.loop)}"
        else:
            here = f"in {self.function}"
        if self.caller is not None:
            return f"{here}, called from {self.caller.render(line_of)[3:]}"
        if self.external:
            where = f" ({self.module})" if self.module else ""
            return f"{here}{where}, {self.external}"
        return here

    @property
    def from_model_code(self) -> bool:
        """Reached from forward or a Lightning step hook (not only from a step loop)."""
        return self.origin in ("forward", "step-hook")

    @property
    def inference_only(self) -> bool:
        """Reached only from an inference loop (generation, evaluation): rules about training
        (optimizer and gradient rules, precision of training) do not look there."""
        return self.origin == "inference"


_MAX_DEFAULT_DEPTH = 8  # names and items followed for a value on the default run


class HotPaths:
    def __init__(
        self, facts: FileFacts, names: Names, entry: EntryFacts = NO_FACTS, shows_cuda: bool = True
    ) -> None:
        self._facts = facts
        self._shows_cuda = shows_cuda
        self._names = names
        self.entry = entry
        self._function_index = {node: i for i, node in enumerate(facts.functions)}
        self._derived = DerivedSettings(facts, names)
        # per function, its accumulator tests' keys -> whether the body is the empty side
        self._empty_fallbacks = {index: dict(tests) for index, tests in entry.empty_fallbacks}
        self._optimizer_names = dict(entry.optimizer_names)
        self._loader_loops: dict[Loop, Optional[str]] = {}
        self._functions = list(facts.functions)
        self._class_index = {node: i for i, node in enumerate(facts.class_of)}
        self._module_class_cache: dict[str, bool] = {}
        self._owners: dict[cst.CSTNode, Optional[Owner]] = {}
        self._enclosing: dict[cst.CSTNode, Optional[Owner]] = {}
        self._held_out: dict[cst.BaseExpression, Optional[str]] = {}
        self._cold_edges: dict[tuple[cst.CSTNode, cst.CSTNode], bool] = {}
        # the project's answers (project/summary.py, Function.rare), by position
        self._preparing = self._by_position(entry.preparing_functions)
        self.step_loops: dict[Loop, Reason] = self._find_step_loops()
        self.inference_loops: dict[Loop, Reason] = self._find_inference_loops()
        self._rare = self._by_position(entry.rare_functions)
        self._rare.update(self._trainers())
        # a function that drives a model it is handed in a loop of its own runs once per many
        # model calls: that loop is its step, outside model code (project/graph.py)
        self._drivers = {self._functions[i] for i in entry.model_drivers if i < len(self._functions)}
        self.hot_functions: dict[cst.FunctionDef, Reason] = self._propagate()
        self._memo: dict[cst.CSTNode, Optional[Reason]] = {}
        self._callers: Optional[dict[cst.FunctionDef, list[cst.Call]]] = None
        self._special: dict[cst.FunctionDef, bool] = {}

    # -- classes ----------------------------------------------------------------------
    def is_module_class(self, cls: ClassInfo) -> bool:
        """Derives from nn.Module or LightningModule, directly or through classes of this file."""
        cached = self._module_class_cache.get(cls.name)
        if cached is not None:
            return cached
        self._module_class_cache[cls.name] = False  # guards against cyclic bases
        result = self._class_index.get(cls.node, -1) in self.entry.module_classes
        for base in () if result else cls.node.bases:
            qualified = self._names.qualified_name(base.value)
            if is_module_base(qualified):
                result = True
            else:
                local = self.local_class(base.value)
                result = local is not None and local is not cls and self.is_module_class(local)
            if result:
                break
        self._module_class_cache[cls.name] = result
        return result

    def local_class(self, expr: cst.BaseExpression) -> Optional[ClassInfo]:
        """The class of this file that a bare name refers to, if any."""
        if not isinstance(expr, cst.Name):
            return None
        bindings = self._names.lookup(expr.value, expr)
        if bindings and bindings[-1].kind == "class":
            node = bindings[-1].node
            assert isinstance(node, cst.ClassDef)
            return self._facts.class_of.get(node)
        return None

    def lineage(self, cls: ClassInfo) -> Iterator[ClassInfo]:
        """`cls`, then its bases defined in this file, breadth first, each once."""
        seen: set[str] = set()
        todo = [cls]
        while todo:
            current = todo.pop(0)
            if current.name in seen:
                continue
            seen.add(current.name)
            yield current
            todo.extend(b for b in (self.local_class(a.value) for a in current.node.bases) if b)

    def find_method(self, cls: ClassInfo, name: str) -> Optional[cst.FunctionDef]:
        for current in self.lineage(cls):
            if name in current.methods:
                return current.methods[name]
        return None

    def attribute_values(self, cls: ClassInfo, attr: str) -> list[cst.BaseExpression]:
        """Every value assigned to `self.<attr>` in the class or its in-file bases."""
        return [value for current in self.lineage(cls) for value in current.attributes.get(attr, ())]

    def registered_values(self, cls: ClassInfo, attr: str) -> list[Optional[cst.BaseExpression]]:
        """What each `self.register_buffer("<attr>", value)` made in the class or its in-file
        bases registers (None where `*args`/`**kwargs` hide it)."""
        lineage = {current.node for current in self.lineage(cls)}
        found: list[Optional[cst.BaseExpression]] = []
        for call, value in registrations(self._facts, attr):
            receiver = call.func.value if isinstance(call.func, cst.Attribute) else None
            owner = self.enclosing_class(call)
            if isinstance(receiver, cst.Name) and receiver.value == "self" and owner is not None:
                if owner.node in lineage:
                    found.append(value)
        return found

    def instance_class(self, value: cst.BaseExpression) -> Optional[ClassInfo]:
        """`Loss()` or `Loss().cuda(d)` -> the in-file class `Loss`."""
        while (
            isinstance(value, cst.Call)
            and isinstance(value.func, cst.Attribute)
            and value.func.attr.value in MODULE_CHAIN_METHODS
        ):
            value = value.func.value
        if isinstance(value, cst.Call):
            return self.local_class(value.func)
        return None

    def instance_classes(self, value: cst.BaseExpression) -> list[ClassInfo]:
        """The in-file classes `value` is an instance of: `Loss()`, or what a function or method
        of this file it calls returns (`return Loss(self)`, either side of an if-expression,
        `-> Loss`), one call deep; `self.build()` may be any override in a subclass."""
        cls = self.instance_class(value)
        if cls is not None:
            return [cls]
        while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute):
            if value.func.attr.value not in MODULE_CHAIN_METHODS:
                break
            value = value.func.value
        if not isinstance(value, cst.Call):
            return []
        found: list[ClassInfo] = []
        for function in self._builders(value):
            annotation = function.returns.annotation if function.returns is not None else None
            for returned in [*returned_values(function)[0], *filter(None, [annotation])]:
                for side in _if_sides(returned):
                    built = self.local_class(side) if side is annotation else self.instance_class(side)
                    if built is not None and built not in found:
                        found.append(built)
        return found

    def _builders(self, call: cst.Call) -> list[cst.FunctionDef]:
        """The functions of this file `call` runs by name (`build(cfg)`) or as a method of `self`,
        its own or inherited, or an override in a subclass of this file (`self.init_criterion()`)."""
        func = call.func
        if isinstance(func, cst.Name):
            bindings = self._names.lookup(func.value, call)
            last = bindings[-1] if bindings else None
            return (
                [last.node] if last and last.kind == "def" and isinstance(last.node, cst.FunctionDef) else []
            )
        if not (
            isinstance(func, cst.Attribute)
            and isinstance(func.value, cst.Name)
            and func.value.value == "self"
        ):
            return []
        cls = self.enclosing_class(call)
        if cls is None:
            return []
        name = func.attr.value
        found = [m for m in [self.find_method(cls, name)] if m is not None]
        for other in self._facts.class_of.values():
            method = other.methods.get(name)
            if other is not cls and method is not None and method not in found and cls in self.lineage(other):
                found.append(method)
        return found

    def _entry_point(self, cls: ClassInfo) -> Optional[cst.FunctionDef]:
        for name in MODULE_ENTRY_POINTS:
            method = self.find_method(cls, name)
            if method is not None:
                return method
        return None

    def enclosing_class(self, node: cst.CSTNode) -> Optional[ClassInfo]:
        current = self._facts.parents.get(node)
        while current is not None:
            if isinstance(current, cst.FunctionDef):
                info = self._facts.functions.get(current)
                if info is not None and info.cls is not None:
                    return info.cls
            current = self._facts.parents.get(current)
        return None

    # -- calls ------------------------------------------------------------------------
    def resolve_call(self, call: cst.Call) -> list[cst.FunctionDef]:
        """Functions of this file that `call` runs: plain functions, methods through `self`,
        `super()` and instances, and a module instance's forward."""
        func = call.func
        if isinstance(func, cst.Name):
            bindings = self._names.lookup(func.value, call)
            if not bindings:
                return []
            last = bindings[-1]
            if last.kind == "def" and isinstance(last.node, cst.FunctionDef):
                return [last.node]
            if last.kind == "assign" and isinstance(last.node, cst.BaseExpression):
                return self._instance_entry(last.node)
            return []
        if not isinstance(func, cst.Attribute):
            return []
        receiver, attr = func.value, func.attr.value
        stepped = self._scaler_stepped(call)
        if stepped is not None:
            receiver, attr = stepped, "step"  # the optimizer the scaler steps
        if isinstance(receiver, cst.Name) and receiver.value == "self":
            cls = self.enclosing_class(call)
            if cls is None:
                return []
            method = self.find_method(cls, attr)
            if method is not None:
                return [method]
            found: list[cst.FunctionDef] = []
            for value in self.attribute_values(cls, attr):
                found.extend(self._instance_entry(value))
            return found
        if isinstance(receiver, cst.Call) and dotted_name(receiver.func) == "super":
            cls = self.enclosing_class(call)
            if cls is None:
                return []
            bases = (self.local_class(b.value) for b in cls.node.bases)
            return [m for m in (self.find_method(b, attr) for b in bases if b) if m]
        if isinstance(receiver, cst.Name):
            local = self.local_class(receiver)
            if local is not None:
                method = self.find_method(local, attr)
                return [method] if method else []
            bindings = self._names.lookup(receiver.value, call)
            if bindings and bindings[-1].kind == "assign":
                bound = bindings[-1].node
                assert isinstance(bound, cst.BaseExpression)
                cls = self.instance_class(bound)
                if cls is not None:
                    method = self.find_method(cls, attr)
                    return [method] if method else []
        return []

    @staticmethod
    def _scaler_stepped(call: cst.Call) -> Optional[cst.Name]:
        """`scaler.step(optimizer)` (analysis/vocabulary.py's scaler_stepped): the optimizer's name."""
        func = call.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "step") or len(call.args) != 1:
            return None  # most calls: not worth converting
        converted = as_ast(call)
        if not isinstance(converted, ast.Call) or scaler_stepped(converted) is None:
            return None
        optimizer = call.args[0].value
        return optimizer if isinstance(optimizer, cst.Name) else None

    def call_sites(self, function: cst.FunctionDef) -> list[cst.Call]:
        """The calls of this file that `resolve_call` resolves to `function`."""
        if self._callers is None:
            self._callers = {}
            for call in self._facts.calls:
                for callee in self.resolve_call(call):
                    self._callers.setdefault(callee, []).append(call)
        return self._callers.get(function, [])

    def _instance_entry(self, value: cst.BaseExpression) -> list[cst.FunctionDef]:
        entries = (self._entry_point(cls) for cls in self.instance_classes(value))
        return [entry for entry in entries if entry is not None]

    # -- step loops -------------------------------------------------------------------
    def iterates_loader(self, loop: Loop) -> Optional[str]:
        """The loader's name when `loop` iterates a DataLoader, else None (analysis/loader_loops.py,
        as the project pass reads it)."""
        if not isinstance(loop, cst.For):
            return None
        if loop not in self._loader_loops:
            iterable = as_ast(loop.iter)
            self._loader_loops[loop] = iterated_loader(iterable, self._calls_at(loop)) if iterable else None
        return self._loader_loops[loop]

    def held_out_loader(self, iterable: cst.BaseExpression) -> Optional[str]:
        """The loader's name when a loop over `iterable` draws from a DataLoader over data kept out
        of training: named so (`val_loader`, `testloader`) or built from a dataset named so
        (`DataLoader(test_set)`, `DataLoader(dataset=holdout)`). An evaluation loop, whatever its
        function is called and whether or not the model was put in eval mode."""
        known = self._held_out.get(iterable, UNSET)  # asked for each model call in the loop
        if known is not UNSET:
            return known
        converted = as_ast(iterable)
        found = held_out_loader(converted, self._calls_at(iterable)) if converted else None
        self._held_out[iterable] = found
        return found

    def loader_label(self, expr: cst.BaseExpression) -> Optional[str]:
        """The loader's name when `expr` (a name, attribute or call) names or builds a DataLoader."""
        if not isinstance(expr, (cst.Name, cst.Attribute, cst.Call)):
            return None
        converted = as_ast(expr.func if isinstance(expr, cst.Call) else expr)
        if converted is None:
            return None
        # the callee alone: its arguments are not read, so they are not converted
        shown = ast.Call(converted, [], []) if isinstance(expr, cst.Call) else converted
        return loader_label(shown, self._calls_at(expr))

    def _calls_at(self, at: cst.CSTNode) -> CallsOf:
        """The calls a name is bound to where `at` reads it, as `ast` reads them."""

        def calls_of(name: str) -> list[ast.Call]:
            calls = []
            for binding in self._names.lookup(name, at):
                if binding.kind == "assign" and isinstance(binding.node, cst.Call):
                    converted = as_ast(binding.node)
                    if isinstance(converted, ast.Call):
                        calls.append(converted)
            return calls

        return calls_of

    def _is_optimizer_step(self, call: cst.Call) -> bool:
        assert isinstance(call.func, cst.Attribute)
        receiver = dotted_name(call.func.value)
        if receiver is None:
            return False
        if is_optimizer_name(receiver):
            return True
        return isinstance(call.func.value, cst.Name) and self._holds_optimizer(receiver, call)

    def _holds_optimizer(self, name: str, at: cst.CSTNode) -> bool:
        """`name`, as seen at `at`, is bound to a constructed optimizer: the project pass's answer
        for the function (or top level) whose binding of it is visible here (Function.optimizers)."""
        bindings = self._names.lookup(name, at)
        scope = bindings[0].scope.node if bindings else None
        if isinstance(scope, cst.Module):
            index: Optional[int] = -1
        else:
            index = self._function_index.get(scope) if isinstance(scope, cst.FunctionDef) else None
        return index is not None and name in self._optimizer_names.get(index, ())

    def loops_around(self, node: cst.CSTNode) -> list[Loop]:
        """Loops of the same function whose body holds `node`, innermost first."""
        loops: list[Loop] = []
        child, current = node, self._facts.parents.get(node)
        while current is not None and not isinstance(current, (cst.FunctionDef, cst.Lambda)):
            if isinstance(current, (cst.For, cst.While)) and child is current.body:
                loops.append(current)
            child, current = current, self._facts.parents.get(current)
        return loops

    def runs_once(self, node: cst.CSTNode) -> bool:
        """`node` runs once per run of the file: module-level code outside any loop (a usage
        example under `if __name__ == "__main__":` back-propagating one batch)."""
        return self._facts.enclosing_function(node) is None and not self.loops_around(node)

    def _cpu_demo(self, loop: Loop) -> bool:
        """A module-level loop of a file that never uses CUDA trains on the CPU (a usage example
        under `if __name__ == "__main__":`): no GPU step. Loops in functions may be handed CUDA
        tensors by their callers, so they keep their steps."""
        return not self._shows_cuda and self._facts.enclosing_function(loop) is None

    def _find_step_loops(self) -> dict[Loop, Reason]:
        labels: dict[Loop, str] = {}
        for loop in self._facts.loops:
            if self.prepares_dataset(loop):
                continue  # one-off preprocessing when the dataset is first built
            loader = self.iterates_loader(loop)
            if loader is not None:
                labels[loop] = f"loop over {loader}"
        updates = [c for c in self._facts.method_calls.get("step", ()) if self._is_optimizer_step(c)]
        for call in [*self._facts.method_calls.get("backward", ()), *updates]:
            for loop in self.loops_around(call):
                labels.setdefault(loop, "training loop")
        # the loop whose own body steps the optimizer runs once per step, even around an inner
        # loop of gradient accumulation (`for _ in range(accumulate): ...backward()`)
        updating = {loops[0] for loops in map(self.loops_around, updates) if loops}
        loops = self._facts.loops
        for index in self.entry.step_loops:  # the step happens in a function of the project
            if index < len(loops) and not self.prepares_dataset(loops[index]):
                labels.setdefault(loops[index], "training loop")
        loaders = {loop for loop, label in labels.items() if label.startswith("loop over")}
        outer: set[Loop] = set()
        for loop in labels:
            outer.update(self.loops_around(loop))
        # the innermost loop that steps; a loop over a loader, or one that steps the optimizer,
        # is one even around an inner loop of gradient accumulation
        return {
            loop: Reason("loop", loop=loop, loop_label=label)
            for loop, label in labels.items()
            if (loop not in outer or loop in loaders or loop in updating)
            and not self._cpu_demo(loop)
            and not self._off_by_default(loop)
        }

    def _find_inference_loops(self) -> dict[Loop, Reason]:
        """Loops that run a model once per iteration outside training (RULES.md, hot code item
        4): found by the project pass, which resolves what the loop calls across modules."""
        loops = self._facts.loops
        return {
            loops[index]: Reason("inference", loop=loops[index], loop_label=INFERENCE_LOOP)
            for index in sorted(self.entry.inference_loops)
            if index < len(loops)
            and loops[index] not in self.step_loops
            and not self.prepares_dataset(loops[index])
            and not self._off_by_default(loops[index])
        }

    def _off_by_default(self, loop: Loop) -> bool:
        """`loop` sits in a branch of its function (or of the module's top level) that the
        default run never takes, by what the function is given or the settings the module fixes
        (`if profile: ... for k in range(num_steps):` with `profile = False`)."""
        values = self._arguments_around(loop)
        if not values:
            return False
        child: cst.CSTNode = loop
        current = self._facts.parents.get(loop)
        while current is not None and not isinstance(current, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            if isinstance(current, (cst.If, cst.IfExp)):
                body, orelse = argument_sides(current.test, values)
                if (body and child is current.body) or (orelse and child is current.orelse):
                    return True
            child, current = current, self._facts.parents.get(current)
        return False

    # -- propagation ------------------------------------------------------------------
    def _owner(self, node: cst.CSTNode) -> Optional[Owner]:
        """The innermost step-loop body or function that holds `node`; None when `node` is in a
        branch a step does not take (analysis/cold.py) before either is reached."""
        return self._owner_of(node, self._owners, True)

    def _enclosing_owner(self, node: cst.CSTNode) -> Optional[Owner]:
        """`_owner` without the cold branches: the only owner `_owner` may give, so a node whose
        enclosing owner is not hot is cold, at the cost of a plain walk up (most of a library's
        functions are not hot; the cold-branch readings are what costs)."""
        return self._owner_of(node, self._enclosing, False)

    def _owner_of(
        self, node: cst.CSTNode, owners: dict[cst.CSTNode, Optional[Owner]], through_cold: bool
    ) -> Optional[Owner]:
        known = owners.get(node, UNSET)
        if known is not UNSET:
            return known
        parents = self._facts.parents
        # Every node on the way up whose own walk would go on exactly as this one does has the
        # same owner: remember it for them too (calls of one statement share their ancestors).
        same: list[cst.CSTNode] = []
        child, current = node, parents.get(node)
        defined_outside = False  # a default value or a decorator runs where its function is defined
        result: Optional[Owner] = None
        while current is not None:
            if not defined_outside:
                known = owners.get(child, UNSET)
                if known is not UNSET:
                    result = known
                    break
                same.append(child)
            kind = type(current)
            if through_cold:
                if kind in _BRANCHES and self._crosses_cold_branch(child, current):
                    break
                if kind is cst.If and self._leaves_step_loop(child, current):  # type: ignore[arg-type]
                    break
            if kind is cst.Param:
                if child is current.default:  # type: ignore[attr-defined]
                    defined_outside = True
            elif kind is cst.Decorator:
                defined_outside = True
            elif kind is cst.For or kind is cst.While:
                if child is current.body and (  # type: ignore[attr-defined]
                    current in self.step_loops or current in self.inference_loops
                ):
                    result = current  # type: ignore[assignment]
                    break
            elif kind is cst.FunctionDef:
                if not defined_outside:
                    result = current  # type: ignore[assignment]
                    break
                defined_outside = False
            child, current = current, parents.get(current)
        for each in same:
            owners[each] = result
        return result

    def _steps_in(self, branch: cst.If) -> bool:
        """The body of `branch` calls `optimizer.step()` (in this function, not in a def inside)."""
        return any(
            self._is_optimizer_step(call) and any(a is branch.body for a in self._facts.ancestors(call))
            for call in self._facts.method_calls.get("step", ())
        )

    def _crosses_cold_branch(self, child: cst.CSTNode, parent: cst.CSTNode) -> bool:
        key = (child, parent)
        crosses = self._cold_edges.get(key)
        if crosses is None:
            values = self._arguments_around(parent)
            if isinstance(parent, cst.IndentedBlock):
                # after a guard that leaves in every step: the block's statements from there on;
                # all of them in a block that ends by raising, on the way to an error
                start = (
                    0
                    if fails_at_end(parent)
                    else cold_from(parent.body, lambda test: decided_sides(test, values))
                )
                for index, statement in enumerate(parent.body):
                    self._cold_edges[(statement, parent)] = index >= start
                crosses = self._cold_edges.get(key, False)
            else:
                crosses = (
                    crosses_cold_branch(child, parent, self._alias)
                    or self._fills_looked_up_cache(child, parent)
                    or self._on_one_step(child, parent)
                    or self._empty_fallback(child, parent)
                )
                if crosses and isinstance(parent, cst.If) and child is parent.body and self._steps_in(parent):
                    # `if step % train_frequency == 0: ... optimizer.step()`: the branch that steps the
                    # optimizer is the step itself, not a periodic extra (RULES.md, cold code)
                    crosses = False
                if not crosses and values and isinstance(parent, (cst.If, cst.IfExp)):
                    body, orelse = argument_sides(parent.test, values)
                    crosses = (body and child is parent.body) or (orelse and child is parent.orelse)
                if (
                    not crosses
                    and values
                    and isinstance(parent, cst.BooleanOperation)
                    and child is parent.right
                ):
                    body, orelse = argument_sides(parent.left, values)
                    crosses = body if isinstance(parent.operator, cst.And) else orelse
                self._cold_edges[key] = crosses
        return crosses

    def _on_one_step(self, child: cst.CSTNode, parent: cst.CSTNode) -> bool:
        """`if i == 0:` in `for i, (x, y) in enumerate(loader):` where that loop is a step (or
        inference) loop: the body runs on one step of the pass. `i` must be the loop's counter,
        bound nowhere else inside it; a counter over layers or rows inside a step stays hot."""
        if not (isinstance(parent, cst.If) and child is parent.body):
            return False
        name = compared_counter(parent.test)
        if name is None:
            return False
        bindings = self._names.lookup(name.value, name)
        for loop in self.loops_around(parent):
            if enumerate_counter(loop) == name.value and (
                loop in self.step_loops or loop in self.inference_loops
            ):
                return all(
                    b.node is loop or not any(a is loop for a in self._facts.ancestors(b.node))
                    for b in bindings
                ) and any(b.node is loop for b in bindings)
        return False

    def _alias(self, name: cst.Name) -> Optional[cst.BaseExpression]:
        """The attribute or item a local name is bound to once (`backbone = self.backbone[0]`)."""
        bindings = self._names.lookup(name.value, name)
        if len(bindings) != 1 or bindings[0].kind != "assign" or self._facts.enclosing_function(name) is None:
            return None
        value = bindings[0].node
        return value if isinstance(value, (cst.Attribute, cst.Subscript)) else None

    def _fills_looked_up_cache(self, child: cst.CSTNode, parent: cst.CSTNode) -> bool:
        if not isinstance(parent, cst.If) or child is not parent.body:
            return False
        block = self._facts.parents.get(parent)
        return isinstance(block, (cst.IndentedBlock, cst.Module)) and fills_looked_up_cache(
            parent, block.body
        )

    def _empty_fallback(self, child: cst.CSTNode, parent: cst.CSTNode) -> bool:
        """`child` is the side of a test that runs only while an accumulator a loop over the
        function's data fills is empty (analysis/accumulators.py): an empty batch. The project
        pass read the function's tests; its answer is found by the test's key."""
        if not isinstance(parent, (cst.If, cst.IfExp)) or child is parent.test:
            return False
        function = self._facts.enclosing_function(parent)
        index = self._function_index.get(function) if function is not None else None
        tests = self._empty_fallbacks.get(index, {}) if index is not None else {}
        parsed = as_ast(parent.test) if tests else None
        body = tests.get(test_key(parsed)) if parsed is not None else None
        if body is None:
            return False
        return child is (parent.body if body else parent.orelse)

    def _leaves_step_loop(self, child: cst.CSTNode, branch: cst.If) -> bool:
        """`child`, a side of `branch`, ends by leaving a step loop (`if step >= max_steps: ...;
        break`, or `return`/`raise` inside one): it runs once per training, on its last step.
        A `break` out of an inner loop (gradient accumulation, layers in forward) leaves no step."""
        block = child.body if isinstance(child, cst.Else) else child
        if not isinstance(block, cst.IndentedBlock) or child not in (branch.body, branch.orelse):
            return False
        left = leaving_statement(block)
        if left is None:
            return False
        loops = self.loops_around(branch)  # innermost first
        exited = loops[:1] if isinstance(left, cst.Break) else loops
        return any(loop in self.step_loops or loop in self.inference_loops for loop in exited)

    def runs_by_default(self, node: cst.CSTNode, parameters: bool = False) -> bool:
        """False when `node` is in a branch the default run never takes, hot or cold: a test on
        the command-line options that their defaults decide (`if args.num_gpu > 1:` with
        `--num-gpu` 1 by default; project/options.py). With `parameters`, also a test on what
        every project call passes the function (`if use_amp:` where every caller passes
        `use_amp=args.use_amp`, off by default; not a `self.` attribute): a file-level rule asks
        that of a setting."""
        child, current = node, self._facts.parents.get(node)
        while current is not None:
            if isinstance(current, (cst.If, cst.IfExp)) or (
                isinstance(current, cst.BooleanOperation) and child is current.right
            ):
                options = self._settings_around(current, parameters)
                test = current.left if isinstance(current, cst.BooleanOperation) else current.test
                if options:  # `opt_lower = args.opt.lower()` then `if opt_lower == "sgd":`
                    options = {**options, **self._derived.around(test, options)}
                body, orelse = argument_sides(test, options)
                if isinstance(current, cst.BooleanOperation):
                    if body if isinstance(current.operator, cst.And) else orelse:
                        return False
                else:
                    if (body and child is current.body) or (orelse and child is current.orelse):
                        return False
            child, current = current, self._facts.parents.get(current)
        return True

    def false_by_default(self, expr: cst.BaseExpression) -> bool:
        """`expr` is false on the default run, by the options' defaults and what every project
        call passes its function (`enabled=amp` where every caller passes `amp=args.amp`, and
        `--amp` is opt-in)."""
        return argument_sides(expr, self._settings_around(expr, parameters=True))[0]

    def value_by_default(self, expr: cst.BaseExpression, depth: int = 0) -> cst.BaseExpression:
        """What `expr` holds on the default run, as far as the options' defaults and what every
        project call passes decide it: through a name bound once, and an item of a dict literal
        under a key they decide (`ptdtype = {"float32": torch.float32, ...}[args.dtype]` with
        `--dtype` float32 by default gives `torch.float32`); `expr` itself otherwise."""
        if depth > _MAX_DEFAULT_DEPTH:
            return expr
        if isinstance(expr, cst.Name):
            bindings = self._names.lookup(expr.value, expr)
            if len(bindings) == 1 and bindings[0].kind == "assign":
                value = bindings[0].node
                assert isinstance(value, cst.BaseExpression)
                return self.value_by_default(value, depth + 1)
            return expr
        if not (
            isinstance(expr, cst.Subscript) and isinstance(expr.value, cst.Dict) and len(expr.slice) == 1
        ):
            return expr
        index = expr.slice[0].slice
        key = self._string_by_default(index.value) if isinstance(index, cst.Index) else None
        for element in expr.value.elements if key is not None else ():
            if (
                isinstance(element, cst.DictElement)
                and isinstance(element.key, cst.SimpleString)
                and element.key.evaluated_value == key
            ):
                return self.value_by_default(element.value, depth + 1)
        return expr

    def _string_by_default(self, expr: cst.BaseExpression) -> Optional[str]:
        if isinstance(expr, cst.SimpleString):
            written = expr.evaluated_value
            return written if isinstance(written, str) else None
        parsed = as_ast(expr)
        token = self._settings_around(expr, parameters=True).get(ast.unparse(parsed)) if parsed else None
        try:
            value = ast.literal_eval(token) if token is not None else None
        except (ValueError, SyntaxError, RecursionError, MemoryError):
            return None
        return value if isinstance(value, str) else None

    def _settings_around(self, node: cst.CSTNode, parameters: bool) -> dict[str, str]:
        """The command-line options' defaults around `node`, and with `parameters` what every
        project call passes its function. Not the `self.` attributes: a class a package exports
        takes them from its users (project/construction.py), whose choice a setting is."""
        return {
            k: v
            for k, v in self._arguments_around(node).items()
            if is_option_read(k) or (parameters and not k.startswith("self."))
        }

    def _arguments_around(self, node: cst.CSTNode) -> dict[str, str]:
        """What every call made per step passes the function around `node` (its parameters,
        and `self.` attributes only `__init__` sets from one): project/arguments.py."""
        if not self.entry.argument_values:
            return {}
        current = self._facts.parents.get(node)
        while current is not None and not isinstance(current, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            current = self._facts.parents.get(current)
        if current is None:
            return self.entry.arguments_of(-1)  # the module's own statements: a script's options
        index = self._function_index.get(current) if isinstance(current, cst.FunctionDef) else None
        return self.entry.arguments_of(index) if index is not None else {}

    def _roots(self) -> list[tuple[cst.FunctionDef, Reason]]:
        roots: list[tuple[cst.FunctionDef, Reason]] = []
        for info in self._facts.functions.values():
            cls = info.cls
            if cls is None:
                continue
            if info.name in STEP_HOOKS:
                roots.append((info.node, Reason("step-hook", function=info.qualname)))
            elif info.name in MODULE_ENTRY_POINTS and self.is_module_class(cls):
                if self._function_index.get(info.node) in self.entry.idle_entry_points:
                    continue  # the project builds no instance that runs it (project/graph.py)
                roots.append((info.node, Reason("forward", function=info.qualname)))
        for index in self.entry.entry_points:
            if index < len(self._functions):
                node = self._functions[index]
                roots.append((node, Reason("forward", function=self._facts.functions[node].qualname)))
        return roots

    def _propagate(self) -> dict[cst.FunctionDef, Reason]:
        # each call under the owner that holds it but for cold branches; `_spread` reads the
        # branches only for the calls of owners that turn out hot
        calls_by_owner: dict[Owner, list[cst.Call]] = {}
        for call in self._facts.calls:
            owner = self._enclosing_owner(call)
            if owner is not None:
                calls_by_owner.setdefault(owner, []).append(call)
        hot: dict[cst.FunctionDef, Reason] = {}
        # Model code first, so a function reachable from forward is labelled as model code.
        queue: deque[tuple[Owner, Reason]] = deque()
        for func, reason in self._roots():
            hot[func] = reason
            queue.append((func, reason))
        queue.extend(self.step_loops.items())
        self._spread(queue, calls_by_owner, hot)
        # Then what only other modules show: functions they call per step; inference steps last,
        # as the project pass finds them where training and model code did not reach.
        self._spread_external(False, queue, calls_by_owner, hot)
        queue.extend(self.inference_loops.items())
        self._spread(queue, calls_by_owner, hot)
        self._spread_external(True, queue, calls_by_owner, hot)
        return hot

    def _spread_external(
        self,
        inference: bool,
        queue: deque[tuple[Owner, Reason]],
        calls_by_owner: dict[Owner, list[cst.Call]],
        hot: dict[cst.FunctionDef, Reason],
    ) -> None:
        for index, external in self.entry.hot_functions:
            if (external.origin == "inference") != inference:
                continue
            if index >= len(self._functions) or self._functions[index] in hot:
                continue
            node = self._functions[index]
            reason = Reason(
                external.origin,
                function=self._facts.functions[node].qualname,
                external=external.callers,
                module=self.entry.display_name if external.callers else "",
            )
            hot[node] = reason
            queue.append((node, reason))
            self._spread(queue, calls_by_owner, hot)

    def prepares_dataset(self, node: cst.CSTNode) -> bool:
        """`node` runs in a dataset's one-off preparation (`process()`, `download()`), or a
        function nested in one."""
        function = self._facts.enclosing_function(node)
        while function is not None:
            if function in self._preparing:
                return True
            function = self._facts.enclosing_function(function)
        return False

    def _trainers(self) -> Iterator[cst.FunctionDef]:
        """Functions that run a step loop of their own (an explainer or a probe fitted inside
        forward): they run once per training, whoever calls them."""
        parents = self._facts.parents
        for loop in self.step_loops:
            current = parents.get(loop)
            while current is not None and not isinstance(current, (cst.FunctionDef, cst.Lambda)):
                current = parents.get(current)
            if isinstance(current, cst.FunctionDef):
                yield current

    def _by_position(self, indices: frozenset[int]) -> set[cst.FunctionDef]:
        """The file's functions at these positions among its `def`s, as the project pass numbers them."""
        functions = self._functions
        return {functions[i] for i in indices if i < len(functions)}

    def _spread(
        self,
        queue: deque[tuple[Owner, Reason]],
        calls_by_owner: dict[Owner, list[cst.Call]],
        hot: dict[cst.FunctionDef, Reason],
    ) -> None:
        while queue:
            owner, reason = queue.popleft()
            for call in calls_by_owner.get(owner, ()):
                if self._owner(call) is not owner:
                    continue  # in a branch a step does not take
                for callee in self.resolve_call(call):
                    if callee in hot or callee in self._rare:
                        continue
                    if callee in self._drivers and not reason.from_model_code:
                        continue
                    info = self._facts.functions[callee]
                    hot[callee] = Reason(reason.origin, function=info.qualname, caller=reason)
                    queue.append((callee, hot[callee]))

    def function_index(self, function: cst.FunctionDef) -> Optional[int]:
        """Its position among the file's `def`s, as the project pass numbers them."""
        return self._function_index.get(function)

    def is_module_parameter(self, function: cst.FunctionDef, name: str) -> bool:
        """Every call of `function` in the project passes a model for `name`."""
        index = self._function_index.get(function)
        return index is not None and name in self.entry.module_params_of(index)

    def is_host_parameter(self, function: cst.FunctionDef, name: str) -> bool:
        """Every call of `function` in the project passes a host value for `name`."""
        index = self._function_index.get(function)
        return index is not None and name in self.entry.host_params_of(index)

    def holds_host_tensors(self, function: cst.FunctionDef, name: str) -> bool:
        """Every call of `function` in the project passes CPU tensors for `name`, or lists and
        tuples of them (project/host_tensors.py)."""
        index = self._function_index.get(function)
        return index is not None and name in self.entry.host_tensor_params_of(index)

    def is_device_parameter(self, function: cst.FunctionDef, name: str) -> bool:
        """Every call of `function` in the project passes a tensor on the device for `name`."""
        index = self._function_index.get(function)
        return index is not None and name in self.entry.device_params_of(index)

    def result_moved_by_callers(self, function: cst.FunctionDef) -> bool:
        """Every call of `function` made from hot code moves its result to the device."""
        index = self._function_index.get(function)
        return index is not None and index in self.entry.moved_results

    # -- queries ----------------------------------------------------------------------
    def reason(self, node: cst.CSTNode) -> Optional[Reason]:
        """Why `node` is hot, or None when it is cold."""
        known = self._memo.get(node, UNSET)  # None is an answer: cold
        if known is not UNSET:
            return known
        enclosing = self._enclosing_owner(node)
        hot_owner = (
            enclosing in self.hot_functions
            or enclosing in self.step_loops
            or enclosing in self.inference_loops
        )
        owner = self._owner(node) if hot_owner else None
        result: Optional[Reason] = None
        if isinstance(owner, (cst.For, cst.While)):
            result = self.step_loops.get(owner) or self.inference_loops[owner]
        elif owner is not None:
            result = self.hot_functions.get(owner)
        self._memo[node] = result
        return result

    def runs_only_in_special_mode(self, node: cst.CSTNode) -> bool:
        """`node` runs only while scripting, tracing or exporting: it sits in the branch of such a
        mode (`if torch.jit.is_tracing():`), or in a private function of this module that no step
        reaches and that only such code calls (torchvision's ONNX paste loop). Export runs once."""
        child, current = node, self._facts.parents.get(node)
        while current is not None:
            if isinstance(current, (cst.If, cst.IfExp)) and child is not current.test:
                body, orelse = special_mode_sides(current.test)
                if (body and child is current.body) or (orelse and child is current.orelse):
                    return True
            if isinstance(current, cst.FunctionDef):
                return self._special_mode_function(current)
            child, current = current, self._facts.parents.get(current)
        return False

    def _special_mode_function(self, function: cst.FunctionDef) -> bool:
        known = self._special.get(function)
        if known is not None:
            return known
        self._special[function] = False  # a recursive call proves nothing
        name = function.name.value
        private = name.startswith("_") and not name.endswith("__")
        sites = self.call_sites(function) if private and function not in self.hot_functions else []
        result = bool(sites) and all(self.runs_only_in_special_mode(call) for call in sites)
        self._special[function] = result
        return result

    def step_loop(self, node: cst.CSTNode) -> Optional[Loop]:
        """The step loop whose body holds `node` in the same function, if any, and runs it: not
        when `node` is in a branch a step does not take (analysis/cold.py, or an option off by
        default: `if not args.prefetcher:`)."""
        for loop in self.loops_around(node):
            if loop in self.step_loops:
                return loop if self._owner(node) is loop else None
        return None


def _if_sides(value: cst.BaseExpression) -> list[cst.BaseExpression]:
    """Each side of `a if c else b` (nested ones too), else the value itself."""
    if isinstance(value, cst.IfExp):
        return [*_if_sides(value.body), *_if_sides(value.orelse)]
    return [value]

"""Evidence of stepping (RULES.md, "Defaults follow evidence"): the code this project's own programs
run when they train or serve a model.

A `forward` is hot by assumption: whoever trains the model calls it once per step. Where the project
itself does (its step loops, inference loops, Lightning step hooks), a finding in code those programs
reach is per step by evidence; a finding in a class no program of the project builds (a library's
model zoo, a model a script never imports) is per step by hypothesis. The programs are followed from
the functions that own a step or inference loop and from the classes with step hooks, through every
call they make, hot or cold (construction is cold: `model = Net()` before the loop), into:

- the functions they call, the functions nested in them, and their module's top level (it ran when
  the module was imported: registries and module-level models live there);
- the project classes they build or name (`Net(...)`, `block=BasicBlock`, a builder's returned
  class), with every method of the class and of its project bases, so the parts its `__init__`
  builds are reached too.

A method runs on the instances it is called for: the base-class method that calls `self.update()`
is reached from the one subclass whose `update` steps (torchmetrics' `Metric._forward_full_state_update`
from BERTScore's), and its other `self.` calls run that subclass's methods, not every override in the
project (`self.compute()` is BERTScore's, not PerceptualPathLength's); the methods of a class a program
builds run on that class the same way. Such a method is followed with the class it runs on.

Everything here is a set of functions per module, by the index both passes count (entry.py); the
top level is index -1.
"""

from __future__ import annotations

from collections import deque
from typing import Iterable, Optional

from ..analysis.vocabulary import STEP_HOOKS
from .refs import ClassRef, FunctionRef, Instance, Module, ProjectView
from .summary import Call


def stepped_functions(project: ProjectView) -> dict[int, frozenset[int]]:
    """Per module (by id), the functions (-1: the top level) the project's own programs run."""

    functions: set[tuple[int, int]] = set()
    seen: set[tuple[tuple[int, int], Optional[tuple[int, int]]]] = set()
    classes: set[tuple[tuple[int, int], tuple[int, int]]] = set()
    queue: deque[tuple[FunctionRef, Optional[ClassRef]]] = deque()
    nested = _nested_functions(project.modules.values())

    def reach(function: FunctionRef, runs_on: Optional[ClassRef] = None) -> None:
        key = (function.key(), runs_on.key() if runs_on is not None else None)
        if key not in seen:
            seen.add(key)
            functions.add(function.key())
            queue.append((function, runs_on))

    def build(cls: ClassRef) -> None:
        # a worklist, not recursion: a model zoo nests parts deeper than Python's stack allows
        todo = [cls]
        while todo:
            built = todo.pop()
            for current in project.lineage(built):
                if (current.key(), built.key()) in classes:
                    continue
                classes.add((current.key(), built.key()))
                for index in current.info.methods.values():
                    reach(FunctionRef(current.module, index), built)
                for callee in current.info.attributes.values():
                    todo.extend(project.attribute_builds(current, callee))

    def named(function: FunctionRef, dotted: str) -> None:
        found = project.resolve_dotted(function.module, dotted)
        if isinstance(found, Instance):
            found = found.cls
        if isinstance(found, ClassRef):
            build(found)
        elif isinstance(found, FunctionRef):
            reach(found)
            for returned in project.returned_classes(found):
                build(returned)

    owners: list[FunctionRef] = []
    for module in project.modules.values():
        if module.is_test:
            continue
        loops = module.summary.loops
        for index in project.step_loops(module) | project.inference_loops(module):
            owners.append(FunctionRef(module, loops[index].function))
        for index, cls in enumerate(module.summary.classes):
            if STEP_HOOKS.intersection(cls.methods):
                build(ClassRef(module, index))
    for function, runs_on in _callers(project, owners):
        reach(function, runs_on)
    while queue:
        function, runs_on = queue.popleft()
        module, info = function.module, function.info
        reach(FunctionRef(module, -1))
        for child in nested.get(function.key(), ()):
            reach(FunctionRef(module, child), runs_on)
        for call in (*info.calls, *info.cold_calls):
            if call.kind in ("global", "dotted"):
                named(function, call.target)
                continue
            for callee in project.resolve_call(function, call):
                if runs_on is None or call.kind not in ("self", "super"):
                    reach(callee)
                    continue
                callee_class = _class_of(callee)
                if callee_class is None or not _related(project, callee_class, _class_of(function)):
                    reach(callee)  # a part held on `self`, not a method of the instance
                elif _ancestor(project, callee_class, runs_on):
                    reach(callee, runs_on)  # its own or an inherited method: still that instance
                elif _ancestor(project, runs_on, callee_class):
                    reach(callee)  # an override in a subclass of the class it runs on
        for name in info.refs:
            named(function, name)
    stepped: dict[int, set[int]] = {}
    for module_id, index in functions:
        stepped.setdefault(module_id, set()).add(index)
    return {module_id: frozenset(indices) for module_id, indices in stepped.items()}


def _callers(
    project: ProjectView, functions: list[FunctionRef]
) -> list[tuple[FunctionRef, Optional[ClassRef]]]:
    """`functions` and every function outside the tests that calls one of them, directly or not
    (hot or cold): the program around a step loop builds the model it steps (`main_worker` builds
    the model and calls `train`, which loops). A base-class method that reaches a subclass's method
    through `self.` runs on that subclass: it comes with the class it runs on."""
    found: dict[tuple[tuple[int, int], Optional[tuple[int, int]]], tuple[FunctionRef, Optional[ClassRef]]] = {
        (function.key(), None): (function, None) for function in functions
    }
    todo = list(found.values())
    while todo:
        function, runs_on = todo.pop()
        for caller, call in project.callers_of(function):
            if caller.module.is_test:
                continue
            on: Optional[ClassRef] = None
            callee_class, caller_class = runs_on or _class_of(function), _class_of(caller)
            if call.kind in ("self", "super") and callee_class is not None and caller_class is not None:
                if _ancestor(project, caller_class, callee_class):
                    on = callee_class  # a base-class method, run on the subclass
                elif not _ancestor(project, callee_class, caller_class):
                    continue  # another subclass: its instances run their own override
            elif runs_on is not None and not _may_hold(
                project, _held_classes(project, caller, call), runs_on
            ):
                continue  # `self.base_metric.forward()` runs the forward of what the attribute holds
            key = (caller.key(), on.key() if on is not None else None)
            if key not in found:
                found[key] = (caller, on)
                todo.append((caller, on))
    return list(found.values())


def _held_classes(project: ProjectView, caller: FunctionRef, call: Call) -> list[ClassRef]:
    """The classes whose instance a call of a method on an attribute of `self` runs on
    (`self.base_metric.forward(...)`: what the attribute holds); none known for other calls."""
    caller_class = _class_of(caller)
    if call.kind != "selfattr" or caller_class is None:
        return []
    return project.attribute_classes(caller_class, call.target.split("|")[0])


def _may_hold(project: ProjectView, held: list[ClassRef], runs_on: ClassRef) -> bool:
    """An instance of one of `held` (none: any class) may be one of `runs_on`."""
    return not held or any(
        _ancestor(project, cls, runs_on) or _ancestor(project, runs_on, cls) for cls in held
    )


def _class_of(function: FunctionRef) -> Optional[ClassRef]:

    if function.index < 0 or function.info.cls < 0:
        return None
    return ClassRef(function.module, function.info.cls)


def _ancestor(project: ProjectView, base: ClassRef, cls: ClassRef) -> bool:
    """`base` is `cls` or one of its project bases."""
    return any(current.key() == base.key() for current in project.lineage(cls))


def _related(project: ProjectView, one: ClassRef, other: Optional[ClassRef]) -> bool:
    """One of the two classes is the other or derives from it."""
    return other is not None and (_ancestor(project, one, other) or _ancestor(project, other, one))


def _nested_functions(modules: Iterable[Module]) -> dict[tuple[int, int], list[int]]:
    """Per function, the functions defined in its body (a closure runs when its parent calls it)."""
    children: dict[tuple[int, int], list[int]] = {}
    for module in modules:
        for index, info in enumerate(module.summary.functions):
            if info.parent >= 0:
                children.setdefault((id(module), info.parent), []).append(index)
    return children

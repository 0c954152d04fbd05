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

Everything here is a set of functions per module, by the index both passes count (entry.py); the
top level is index -1.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Iterable

from ..analysis.vocabulary import STEP_HOOKS

if TYPE_CHECKING:
    from .graph import ClassRef, FunctionRef, Module, Project


def stepped_functions(project: Project) -> dict[int, frozenset[int]]:
    """Per module (by id), the functions (-1: the top level) the project's own programs run."""
    from .graph import ClassRef, FunctionRef, Instance

    functions: set[tuple[int, int]] = set()
    classes: set[tuple[int, int]] = set()
    queue: deque[FunctionRef] = deque()
    nested = _nested_functions(project.modules.values())

    def reach(function: FunctionRef) -> None:
        if function.key() not in functions:
            functions.add(function.key())
            queue.append(function)

    def build(cls: ClassRef) -> None:
        # a worklist, not recursion: a model zoo nests parts deeper than Python's stack allows
        todo = [cls]
        while todo:
            for current in project.lineage(todo.pop()):
                if current.key() in classes:
                    continue
                classes.add(current.key())
                for index in current.info.methods.values():
                    reach(FunctionRef(current.module, index))
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
    for function in _callers(project, owners):
        reach(function)
    while queue:
        function = queue.popleft()
        module, info = function.module, function.info
        reach(FunctionRef(module, -1))
        for child in nested.get(function.key(), ()):
            reach(FunctionRef(module, child))
        for call in (*info.calls, *info.cold_calls):
            if call.kind in ("global", "dotted"):
                named(function, call.target)
            else:
                for callee in project.resolve_call(function, call):
                    reach(callee)
        for name in info.refs:
            named(function, name)
    stepped: dict[int, set[int]] = {}
    for module_id, index in functions:
        stepped.setdefault(module_id, set()).add(index)
    return {module_id: frozenset(indices) for module_id, indices in stepped.items()}


def _callers(project: Project, functions: list[FunctionRef]) -> list[FunctionRef]:
    """`functions` and every function outside the tests that calls one of them, directly or not
    (hot or cold): the program around a step loop builds the model it steps (`main_worker` builds
    the model and calls `train`, which loops)."""
    found = {function.key(): function for function in functions}
    todo = list(functions)
    while todo:
        for caller, _ in project.callers_of(todo.pop()):
            if caller.key() not in found and not caller.module.is_test:
                found[caller.key()] = caller
                todo.append(caller)
    return list(found.values())


def _nested_functions(modules: Iterable[Module]) -> dict[tuple[int, int], list[int]]:
    """Per function, the functions defined in its body (a closure runs when its parent calls it)."""
    children: dict[tuple[int, int], list[int]] = {}
    for module in modules:
        for index, info in enumerate(module.summary.functions):
            if info.parent >= 0:
                children.setdefault((id(module), info.parent), []).append(index)
    return children

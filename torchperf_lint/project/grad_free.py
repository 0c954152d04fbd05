"""Functions every caller in the project runs without grad: each call site is under
`with torch.no_grad():` (or `inference_mode`, or a project context manager or decorator that
enters one), or in a function decorated so, or in another such function. NMS helpers called
only from `@torch.no_grad()` evaluation loops in other modules build no graph, and their
per-image loops are post-processing, not a training step (analysis/grad_mode.py reads the set).

Left out: functions no call of the project reaches (their callers are the framework or a
library's users), functions handed on by name (a callback: its calls are not all seen), and the
roots a framework calls (forward, step hooks).
"""

from __future__ import annotations

from ..analysis.vocabulary import NO_GRAD_CONTEXTS
from .refs import External, FunctionRef, Module, ProjectView
from .summary import Call

_ENABLING = frozenset({"torch.enable_grad", "torch.autograd.enable_grad", "torch.set_grad_enabled"})


def grad_free_functions(project: ProjectView) -> dict[int, frozenset[int]]:
    """Module id -> indices of its functions whose every project caller runs without grad."""

    switches: dict[tuple[int, str], bool | None] = {}

    def switch(module: Module, name: str) -> bool | None:
        """False for a name entering no-grad, True for one that may turn grad on, else None."""
        key = (id(module), name)
        if key not in switches:
            switches[key] = _switch(project, module, name)
        return switches[key]

    def decorated_off(function: FunctionRef) -> bool:
        return function.index >= 0 and any(
            switch(function.module, d) is False for d in function.info.decorators
        )

    roots = {function.key() for function, _ in project.roots()}
    free: set[tuple[int, int]] = set()

    def call_free(caller: FunctionRef, call: Call) -> bool:
        modes = [switch(caller.module, name) for name in call.contexts]
        if True in modes:
            return False  # `with torch.enable_grad():` or a switch whose value is not read
        return False in modes or caller.key() in free or decorated_off(caller)

    # candidates: what a call made without grad reaches, then what those functions call
    todo: list[FunctionRef] = []
    seen: set[tuple[int, int]] = set()
    for module in project.modules.values():
        for offset, info in enumerate([module.summary.toplevel, *module.summary.functions]):
            caller = FunctionRef(module, offset - 1)
            off = decorated_off(caller)
            for call in (*info.calls, *info.cold_calls):
                if off or any(switch(module, name) is False for name in call.contexts):
                    todo.extend(project.resolve_call(caller, call))
    candidates: list[FunctionRef] = []
    while todo:
        function = todo.pop()
        if function.key() in seen or function.index < 0:
            continue
        seen.add(function.key())
        if function.key() in roots or project.handed_on(function):
            continue
        candidates.append(function)
        for call in (*function.info.calls, *function.info.cold_calls):
            todo.extend(project.resolve_call(function, call))
    callers = {function.key(): project.callers_of(function) for function in candidates}
    changed = True
    while changed:
        changed = False
        for function in candidates:
            key = function.key()
            sites = callers[key]
            if key not in free and sites and all(call_free(caller, call) for caller, call in sites):
                free.add(key)
                changed = True
    found: dict[int, set[int]] = {}
    for module_id, index in free:
        found.setdefault(module_id, set()).add(index)
    return {module_id: frozenset(indices) for module_id, indices in found.items()}


def _switch(project: ProjectView, module: Module, name: str) -> bool | None:

    found = project.resolve_dotted(module, name)
    if isinstance(found, External):
        if found.qualified in NO_GRAD_CONTEXTS:
            return False
        return True if found.qualified in _ENABLING else None
    if isinstance(found, FunctionRef) and found.info.no_grad:
        return False  # a project decorator or context manager that enters no_grad
    return None

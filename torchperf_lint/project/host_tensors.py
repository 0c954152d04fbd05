"""CPU tensors a function builds, as the project pass reads them (on `ast`): what a `return` hands
back and what a call passes, so that a parameter every call of the project hands CPU tensors (or
lists and tuples of them) is known to hold them (graph.py, host_tensor_parameters). DETR's
HungarianMatcher returns `[(torch.as_tensor(i), torch.as_tensor(j)) for i, j in indices]`, the
indices SciPy's `linear_sum_assignment` finds; SetCriterion hands them to its losses, which index
CUDA targets with them every step (TPL103): the file pass sees only a parameter there.

Only what is certainly a tensor on the host counts: a torch factory without `device=`, a torch
builder of data that is itself on the host (a literal, a NumPy or SciPy result, an element of
one), `torch.cat`/`torch.stack` of those, a list, tuple or comprehension of them, and a local
every binding of which is one. `torch.as_tensor(x)` of anything else may keep a device tensor
where it is.
"""

from __future__ import annotations

import ast
from typing import Callable, Mapping, Sequence

from ..analysis.branch_sides import dotted
from ..analysis.unpacked_items import drawn_path
from ..analysis.vocabulary import FROM_HOST_DATA, GENERATING_FACTORIES, LEGACY_CPU_TYPES

# every value a local name is bound to, where plain assignments are all that bind it; else none
Bindings = Callable[[str], Sequence[ast.AST]]
# the summary's host arrays of the function (`np.load(path)`, a name bound only to one)
HostArrays = Callable[[ast.AST], bool]

# factories that build on the host unless told otherwise; `torch.normal(mean, std)` draws where
# its tensor operands are
_FACTORIES = frozenset(f"torch.{name}" for name in GENERATING_FACTORIES - {"normal"})
# builders that copy the data they are handed (a CUDA tensor handed to `as_tensor` stays there)
_BUILDERS = frozenset(f"torch.{name}" for name in FROM_HOST_DATA | LEGACY_CPU_TYPES)
# torch functions whose result is where their tensor operands are
_JOINS = frozenset({"torch.cat", "torch.stack", "torch.concat", "torch.concatenate"})
# how far one answer follows names and containers
_DEPTH = 6


class HostTensors:
    """Answers for one function: `bindings`, `params`, `qualify` and `host_arrays` as the summary
    knows them there."""

    def __init__(
        self,
        bindings: Bindings,
        params: frozenset[str],
        qualify: Callable[[str], str],
        host_arrays: HostArrays,
    ) -> None:
        self._bindings = bindings
        self._params = params
        self._qualify = qualify
        self._host_arrays = host_arrays

    def holds(self, expr: ast.AST, elements: Mapping[str, ast.AST] = {}, depth: int = 0) -> bool:
        """`expr` holds CPU tensors only: one, or a list, tuple or comprehension of them.
        `elements`: the names a comprehension around `expr` binds -> what they are items of."""
        if depth > _DEPTH:
            return False
        if isinstance(expr, (ast.List, ast.Tuple)):
            return bool(expr.elts) and all(
                not isinstance(e, ast.Starred) and self.holds(e, elements, depth + 1) for e in expr.elts
            )
        if isinstance(expr, (ast.ListComp, ast.GeneratorExp)):
            return self.holds(expr.elt, {**elements, **comprehension_items(expr)}, depth + 1)
        if isinstance(expr, ast.Name):
            if expr.id in elements:  # an item of what the comprehension walks
                return self.holds(elements[expr.id], _without(elements, expr.id), depth + 1)
            values = self._bindings(expr.id) if expr.id not in self._params else ()
            return bool(values) and all(self.holds(v, {}, depth + 1) for v in values)
        if not isinstance(expr, ast.Call) or any(k.arg in ("device", None) for k in expr.keywords):
            return False
        qualified = self._qualify(dotted(expr.func) or "")
        if qualified in _FACTORIES:
            return True
        if qualified in _BUILDERS:
            return bool(expr.args) and self._host_data(expr.args[0], elements, depth + 1)
        if qualified in _JOINS:
            return bool(expr.args) and self.holds(expr.args[0], elements, depth + 1)
        return False

    def _host_data(self, expr: ast.AST, elements: Mapping[str, ast.AST], depth: int) -> bool:
        """`expr` is data on the host: a number, a literal of them, a NumPy or SciPy result, an
        item of one, a local bound only to one."""
        if depth > _DEPTH:
            return False
        if isinstance(expr, ast.Constant):
            return isinstance(expr.value, (int, float, bool))
        if isinstance(expr, (ast.List, ast.Tuple)):
            return all(
                not isinstance(e, ast.Starred) and self._host_data(e, elements, depth + 1) for e in expr.elts
            )
        if isinstance(expr, (ast.ListComp, ast.GeneratorExp)):
            return self._host_data(expr.elt, {**elements, **comprehension_items(expr)}, depth + 1)
        if isinstance(expr, ast.Name) and expr.id in elements:
            return self._host_data(elements[expr.id], _without(elements, expr.id), depth + 1)
        if isinstance(expr, ast.Name) and expr.id not in self._params:
            values = self._bindings(expr.id)
            if values and all(self._host_data(v, {}, depth + 1) for v in values):
                return True
        return self._host_arrays(expr)


def comprehension_items(comprehension: ast.ListComp | ast.GeneratorExp) -> dict[str, ast.AST]:
    """Each name a comprehension's `for`s bind -> what it is an item of (or an item of an item:
    `for i, j in pairs`): the walked value, the matching argument of `zip(...)`, the argument
    of `enumerate(x)` for its second name (a number for its count)."""
    found: dict[str, ast.AST] = {}
    for generator in comprehension.generators:
        _bind_items(generator.target, generator.iter, found)
    return found


def _bind_items(target: ast.AST, walked: ast.AST, found: dict[str, ast.AST]) -> None:
    for name in {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}:
        path = drawn_path(target, walked, name)
        source: ast.AST = ast.Constant(0)  # a count: a number
        if path is not None:
            source = walked
            for index in path:
                source = source.args[index]  # type: ignore[attr-defined]  # the path's calls
        found[name] = source


def _without(elements: Mapping[str, ast.AST], name: str) -> dict[str, ast.AST]:
    return {key: value for key, value in elements.items() if key != name}

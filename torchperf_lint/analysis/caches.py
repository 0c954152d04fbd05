"""Caches handed to a callee: a list of empty slots (`[None] * n`) that the callee fills and the
next call reads (a causal video VAE's `feat_cache`, one slot per causal conv). A loop that hands
the same slots to a call on every iteration carries state from one iteration to the next, as
`h = cell(x[t], h)` does, so it is sequential (analysis/sequential.py). An empty list (`[]`) is not
such a cache: it is as often an output list that the callee appends to.
"""

from __future__ import annotations

import libcst as cst

from .hotpath import HotPaths
from .names import Names


class SlotCaches:
    def __init__(self, names: Names, hot: HotPaths) -> None:
        self._names = names
        self._hot = hot

    def holds_slots(self, expr: cst.BaseExpression) -> bool:
        """`expr` is a name or `self.<attr>` bound only to lists of empty slots."""
        if isinstance(expr, cst.Name):
            values = [b.node for b in self._names.lookup(expr.value, expr) if b.kind == "assign"]
            bound = len(values) == len(self._names.lookup(expr.value, expr))
        elif (
            isinstance(expr, cst.Attribute)
            and isinstance(expr.value, cst.Name)
            and expr.value.value == "self"
        ):
            cls = self._hot.enclosing_class(expr)
            values = list(self._hot.attribute_values(cls, expr.attr.value)) if cls is not None else []
            bound = True
        else:
            return False
        return bound and bool(values) and all(_empty_slots(v) for v in values)


def _empty_slots(value: cst.CSTNode) -> bool:
    """`[None] * n`, `n * [None]`, `[None, None]`."""
    if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Multiply):
        return _empty_slots(value.left) or _empty_slots(value.right)
    return (
        isinstance(value, cst.List)
        and bool(value.elements)
        and all(isinstance(e.value, cst.Name) and e.value.value == "None" for e in value.elements)
    )

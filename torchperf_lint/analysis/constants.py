"""Which host values are the same at every step (RULES.md, TPL102): literals, and names and
attributes that hot code never rebinds.

A value is *step-invariant* when it is a literal (or a display, arithmetic or subscript of
literals), a name whose every binding is an import, a definition, a constant expression or an
assignment made in cold code (module level, `__init__`, the setup part of a training function),
a parameter of a cold function, a `self.<attr>` that no hot code assigns, or a pure call
(`np.array`, `list`, `range`...) of such values. Loop targets and parameters of hot functions
change every step.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from ..syntax.walker import Binding, FileFacts
from .hotpath import HotPaths
from .names import Names

_LITERALS = (cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.ConcatenatedString, cst.Ellipsis)
_CONSTANT_NAMES = frozenset({"True", "False", "None"})
# Calls whose result depends only on their arguments.
PURE_CALLS = frozenset(
    """numpy.array numpy.asarray numpy.arange numpy.linspace numpy.ones numpy.zeros numpy.full
    numpy.eye numpy.float32 numpy.float64 numpy.int64 builtins.list builtins.tuple builtins.range
    builtins.float builtins.int builtins.len builtins.sorted builtins.min builtins.max builtins.abs
    builtins.sum builtins.round""".split()
)


class HostConstants:
    def __init__(self, facts: FileFacts, names: Names, hot: HotPaths) -> None:
        self._facts = facts
        self._names = names
        self._hot = hot
        self._memo: dict[cst.CSTNode, bool] = {}
        self._in_progress: set[cst.CSTNode] = set()

    def is_step_invariant(self, expr: cst.BaseExpression) -> bool:
        """`expr` has the same host value at every step (see the module docstring)."""
        cached = self._memo.get(expr)
        if cached is not None:
            return cached
        if expr in self._in_progress:
            return False  # `n = n + 1` in a loop: a value that feeds on itself changes every step
        self._in_progress.add(expr)
        try:
            result = self._invariant(expr)
        finally:
            self._in_progress.discard(expr)
        self._memo[expr] = result
        return result

    def _all(self, exprs: list[cst.BaseExpression]) -> bool:
        return all(self.is_step_invariant(e) for e in exprs)

    def _invariant(self, expr: cst.BaseExpression) -> bool:
        if isinstance(expr, _LITERALS):
            return True
        if isinstance(expr, cst.Name):
            return expr.value in _CONSTANT_NAMES or self._name(expr)
        if isinstance(expr, cst.UnaryOperation):
            return self.is_step_invariant(expr.expression)
        if isinstance(expr, cst.BinaryOperation):
            return self._all([expr.left, expr.right])
        if isinstance(expr, (cst.List, cst.Tuple, cst.Set)):
            return self._all([e.value for e in expr.elements])
        if isinstance(expr, cst.Dict):
            values: list[cst.BaseExpression] = []
            for element in expr.elements:
                if isinstance(element, cst.DictElement):
                    values.extend((element.key, element.value))
                else:
                    values.append(element.value)
            return self._all(values)
        if isinstance(expr, cst.Subscript):
            parts: list[cst.BaseExpression] = [expr.value]
            for index in expr.slice:
                if not isinstance(index.slice, cst.Index):
                    return False
                parts.append(index.slice.value)
            return self._all(parts)
        if isinstance(expr, cst.Attribute):
            if isinstance(expr.value, cst.Name) and expr.value.value == "self":
                return self._self_attribute(expr)
            return self.is_step_invariant(expr.value)
        if isinstance(expr, cst.Call):
            if self._names.qualified_name(expr) not in PURE_CALLS:
                return False
            return self._all([arg.value for arg in expr.args])
        return False

    def _name(self, name: cst.Name) -> bool:
        bindings = self._names.lookup(name.value, name)
        return bool(bindings) and all(self._binding(b) for b in bindings)

    def _binding(self, binding: Binding) -> bool:
        node = binding.node
        if binding.kind in ("import", "def", "class"):
            return True
        if binding.kind in ("assign", "unpack") and isinstance(node, cst.BaseExpression):
            return self._cold(node) or self.is_step_invariant(node)
        if binding.kind == "augassign" and isinstance(node, cst.AugAssign):
            return self._cold(node) or self.is_step_invariant(node.value)
        if binding.kind == "param":
            return self._cold(node)
        return False  # loop and `with` targets take a new value every time

    def _cold(self, node: cst.CSTNode) -> bool:
        return self._hot.reason(node) is None

    def _self_attribute(self, expr: cst.Attribute) -> bool:
        """`self.<attr>` set somewhere in the class, and never in hot code."""
        cls = self._hot.enclosing_class(expr)
        if cls is None:
            return False
        attr = expr.attr.value
        writes = self._hot.attribute_values(cls, attr)
        in_body = self._class_body_binding(cls.node, attr)
        if not writes and in_body is None:
            return False
        return all(self._cold(value) for value in writes)

    def _class_body_binding(self, cls: cst.ClassDef, attr: str) -> Optional[list[Binding]]:
        scope = self._facts.scope_of.get(cls)
        if scope is None or attr not in scope.bindings:
            return None
        return scope.bindings[attr]

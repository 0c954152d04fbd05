"""Branches a training step does not take, read from an `if` test: special modes (TorchScript,
tracing, export), eager-only code kept out of compiled graphs, CPU-only branches, debug and verbose
switches, and work done once every N steps. Their code is cold whatever function holds it."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from ..engine.walker import dotted_name
from .vocabulary import COMPILING, DEBUG_FLAGS, SPECIAL_MODES


def _last_name(expr: cst.BaseExpression) -> Optional[str]:
    target = expr.func if isinstance(expr, cst.Call) else expr
    dotted = dotted_name(target)
    return dotted.split(".")[-1] if dotted else None


def _is_cpu_literal(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.SimpleString) and expr.evaluated_value == "cpu"


def cold_sides(test: cst.BaseExpression) -> tuple[bool, bool]:
    """(the body is cold, the else branch is cold) for `if test:`."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        body, orelse = cold_sides(test.expression)
        return orelse, body
    if isinstance(test, cst.BooleanOperation):
        first, second = cold_sides(test.left), cold_sides(test.right)
        if isinstance(test.operator, cst.And):  # the body needs both; the else either
            return first[0] or second[0], first[1] and second[1]
        return first[0] and second[0], first[1] or second[1]
    name = _last_name(test)
    if isinstance(test, cst.Call) and name in SPECIAL_MODES:
        return True, False
    if isinstance(test, cst.Call) and name in COMPILING:
        return False, True  # the else branch runs only in eager mode, kept out of graphs on purpose
    if isinstance(test, (cst.Name, cst.Attribute)) and name in DEBUG_FLAGS:
        return True, False
    if isinstance(test, cst.Attribute) and name == "is_cpu":
        return True, False
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        comparison = test.comparisons[0]
        left, right, operator = test.left, comparison.comparator, comparison.operator
        if _last_name(left) == "type" and _is_cpu_literal(right):  # x.device.type == "cpu"
            if isinstance(operator, cst.Equal):
                return True, False
            if isinstance(operator, cst.NotEqual):
                return False, True
        if (
            isinstance(left, cst.BinaryOperation)
            and isinstance(left.operator, cst.Modulo)
            and isinstance(operator, cst.Equal)
            and isinstance(right, cst.Integer)
            and right.evaluated_value == 0
        ):
            return True, False  # `if step % N == 0:` runs once every N steps
    return False, False


def crosses_cold_branch(child: cst.CSTNode, parent: cst.CSTNode) -> bool:
    """Stepping from `child` up to `parent` leaves a branch a training step does not take."""
    if isinstance(parent, cst.If):
        body, orelse = cold_sides(parent.test)
        return (body and child is parent.body) or (orelse and child is parent.orelse)
    if isinstance(parent, cst.ExceptHandler):
        return child is parent.body
    if isinstance(parent, cst.Lambda):
        # a message built lazily for a check: `KORNIA_CHECK(cond, lambda: f"...{t.item()}")`
        return isinstance(parent.body, (cst.FormattedString, cst.ConcatenatedString, cst.SimpleString))
    return False

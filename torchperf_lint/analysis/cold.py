"""Branches a training step does not take, read from an `if` test (or an if-expression's): special
modes (TorchScript, tracing, export), eager-only code kept out of compiled graphs, branches for CPU
or MPS tensors, debug and verbose switches, and work done once every N steps. Their code is cold
whatever function holds it, and so is the code after a guard that leaves the block unless the
step is in such a mode (`if x.device.type != "cpu": return`)."""

from __future__ import annotations

from typing import Optional, Sequence

import libcst as cst

from ..engine.walker import dotted_name
from .vocabulary import COMPILING, DEBUG_FLAGS, NON_CUDA_DEVICE_TYPES, SPECIAL_MODES


def _last_name(expr: cst.BaseExpression) -> Optional[str]:
    target = expr.func if isinstance(expr, cst.Call) else expr
    dotted = dotted_name(target)
    return dotted.split(".")[-1] if dotted else None


def _names_non_cuda_type(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.SimpleString) and expr.evaluated_value in NON_CUDA_DEVICE_TYPES


def _is_non_cuda_device(expr: cst.BaseExpression) -> bool:
    """`"cpu"`, `torch.device("cpu")` (or "mps")."""
    if isinstance(expr, cst.Call) and (dotted_name(expr.func) or "").split(".")[-1] == "device" and expr.args:
        return _names_non_cuda_type(expr.args[0].value)
    return _names_non_cuda_type(expr)


def _holds_only_off_cuda(left: cst.BaseExpression, right: cst.BaseExpression) -> bool:
    """`x.device.type == "cpu"`, `x.device == torch.device("cpu")`, `x.device == "mps"`."""
    name = _last_name(left)
    if name == "type":
        return _names_non_cuda_type(right)
    return name == "device" and _is_non_cuda_device(right)


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
        if _holds_only_off_cuda(left, right):
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


def _always_leaves(body: cst.BaseSuite) -> bool:
    """The block ends by leaving it: `return`, `raise`, `continue` or `break`."""
    last: Optional[cst.CSTNode] = body.body[-1] if body.body else None
    if isinstance(last, cst.SimpleStatementLine):
        last = last.body[-1] if last.body else None
    return isinstance(last, (cst.Return, cst.Raise, cst.Continue, cst.Break))


def cold_from(statements: Sequence[cst.BaseStatement]) -> int:
    """The index of the first statement that runs only when a guard before it did not leave,
    where the guard leaves in every training step: `if x.device.type != "cpu": return ...`. The
    length of `statements` when there is none."""
    for index, statement in enumerate(statements):
        if (
            isinstance(statement, cst.If)
            and statement.orelse is None
            and cold_sides(statement.test)[1]
            and _always_leaves(statement.body)
        ):
            return index + 1
    return len(statements)


def crosses_cold_branch(child: cst.CSTNode, parent: cst.CSTNode) -> bool:
    """Stepping from `child` up to `parent` leaves a branch a training step does not take (for
    a statement in a block, hotpath.py asks `cold_from` once per block)."""
    if isinstance(parent, (cst.If, cst.IfExp)):
        body, orelse = cold_sides(parent.test)
        return (body and child is parent.body) or (orelse and child is parent.orelse)
    if isinstance(parent, cst.ExceptHandler):
        return child is parent.body
    if isinstance(parent, cst.Lambda):
        # a message built lazily for a check: `KORNIA_CHECK(cond, lambda: f"...{t.item()}")`
        return isinstance(parent.body, (cst.FormattedString, cst.ConcatenatedString, cst.SimpleString))
    return False

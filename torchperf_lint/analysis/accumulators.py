"""Fallbacks for an empty accumulator (RULES.md, cold code): `torch.stack(curves) if curves else
torch.zeros(k)` where `curves` starts as `[]` and only a loop over the function's own data (its
parameters and locals: `for p, t in zip(torch.split(preds, sizes), ...)`) appends to it. The
fallback runs only when that data holds nothing, an empty batch, never in a step that has data.
A loop over a `self.` attribute or a module-level name (`for head in self.aux_heads:`) is
configuration, not data: a model configured without heads takes the fallback every step.
project/accumulators.py reads the same fact on CPython's ast for the project pass."""

from __future__ import annotations

from typing import Callable, Optional, Union

import libcst as cst

from ..syntax.walker import FileFacts
from .names import Names

LoopsAround = Callable[[cst.CSTNode], "list[Union[cst.For, cst.While]]"]


def _tested_list(test: cst.BaseExpression) -> tuple[Optional[cst.Name], bool]:
    """The name a test asks the emptiness of, and whether its body is the empty side:
    `xs`, `len(xs)`, `len(xs) > 0` or `!= 0` (body: not empty), `not xs`, `len(xs) == 0` (body: empty)."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        name, body_empty = _tested_list(test.expression)
        return name, not body_empty
    if isinstance(test, cst.Name):
        return test, False
    if isinstance(test, cst.Call) and isinstance(test.func, cst.Name) and test.func.value == "len":
        if len(test.args) == 1 and isinstance(test.args[0].value, cst.Name) and not test.args[0].star:
            return test.args[0].value, False
        return None, False
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        target = test.comparisons[0]
        zero = isinstance(target.comparator, cst.Integer) and target.comparator.value == "0"
        name, _ = _tested_list(test.left) if isinstance(test.left, cst.Call) else (None, False)
        if name is None or not zero:
            return None, False
        if isinstance(target.operator, cst.Equal):
            return name, True
        if isinstance(target.operator, (cst.GreaterThan, cst.NotEqual)):
            return name, False
    return None, False


def _empty_list(value: cst.CSTNode) -> bool:
    """`[]`, or a tuple of them unpacked (`precisions, recalls = [], []`)."""
    if isinstance(value, cst.List):
        return not value.elements
    if isinstance(value, cst.Tuple):
        return bool(value.elements) and all(_empty_list(e.value) for e in value.elements)
    return False


def _reads_only_locals(expr: cst.CSTNode, is_local: Callable[[cst.Name], bool]) -> bool:
    """Every value `expr` reads is a parameter or a local of the function; the functions it calls
    (`zip`, `torch.split`) are not values."""
    if isinstance(expr, cst.Name):
        return expr.value != "self" and is_local(expr)
    if isinstance(expr, cst.Attribute):
        return _reads_only_locals(expr.value, is_local)
    if isinstance(expr, cst.Call):
        return all(_reads_only_locals(arg.value, is_local) for arg in expr.args)
    return all(_reads_only_locals(child, is_local) for child in expr.children)


def empty_sides(
    test: cst.BaseExpression,
    names: Names,
    facts: FileFacts,
    loops_around: LoopsAround,
) -> tuple[bool, bool]:
    """(body, orelse): which side of a test runs only when an accumulator that a loop over the
    function's data fills is still empty."""
    name, body_empty = _tested_list(test)
    if name is None:
        return False, False
    bindings = names.lookup(name.value, name)
    function = facts.enclosing_function(name)
    if (
        function is None
        or not bindings
        or bindings[0].scope.node is not function
        or not all(b.kind in ("assign", "unpack") and _empty_list(b.node) for b in bindings)
    ):
        return False, False

    def is_local(read: cst.Name) -> bool:
        found = names.lookup(read.value, read)
        return bool(found) and found[0].scope.node is function

    fills = [
        call
        for method in ("append", "extend")
        for call in facts.method_calls.get(method, ())
        if isinstance(call.func, cst.Attribute)
        and isinstance(call.func.value, cst.Name)
        and call.func.value.value == name.value
        and names.lookup(name.value, call) is bindings
    ]
    if not fills:
        return False, False
    around_test = set(loops_around(test))
    for call in fills:
        loops = loops_around(call)
        if not loops or any(loop in around_test for loop in loops):
            return False, False  # filled once, or again round the loop that tests it
        for loop in loops:
            if not isinstance(loop, cst.For) or not _reads_only_locals(loop.iter, is_local):
                return False, False
    return body_empty, not body_empty

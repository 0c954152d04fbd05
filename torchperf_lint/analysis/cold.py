"""Branches a training step does not take, read from an `if` test (or an if-expression's): special
modes (TorchScript, tracing, export), eager-only code kept out of compiled graphs, branches for CPU
or MPS tensors, debug and verbose switches, work done once every N steps or on one step of many,
and cache-miss builders. Their code is cold whatever function holds it, and so is the code after a
guard that leaves the block unless the step is in such a mode (`if x.device.type != "cpu": return`)."""

from __future__ import annotations

from typing import Callable, Iterator, Mapping, Optional, Sequence

import libcst as cst

from ..syntax.walker import dotted_name, final_statement
from .arguments import decided_sides, parse_test
from .vocabulary import (
    COMPILING,
    DEBUG_FLAGS,
    DEFAULT_DTYPES,
    LAYOUT_READS,
    LOG_LEVEL_CHECKS,
    NON_CUDA_DEVICE_TYPES,
    ONCE_FLAGS,
    SPECIAL_MODES,
    STEP_COUNTERS,
    is_export_flag,
    normalised_code,
)

_CODE = cst.Module([])


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


def _holds_on_cuda(left: cst.BaseExpression, right: cst.BaseExpression) -> bool:
    """`x.device.type == "cuda"`: true in every CUDA step (not `x.device == torch.device("cuda")`,
    which a tensor on `cuda:0` fails)."""
    return (
        _last_name(left) == "type" and isinstance(right, cst.SimpleString) and right.evaluated_value == "cuda"
    )


def _accepts_default_dtype(left: cst.BaseExpression, right: cst.BaseExpression) -> bool:
    """`x.dtype == torch.float32`, `x.dtype in (torch.float32, torch.float64)`."""
    if _last_name(left) != "dtype":
        return False
    accepted = (
        [e.value for e in right.elements] if isinstance(right, (cst.Tuple, cst.List, cst.Set)) else [right]
    )
    return any(isinstance(a, cst.Attribute) and a.attr.value in DEFAULT_DTYPES for a in accepted)


def _cuda_in_default_dtype(left: cst.BaseExpression, right: cst.BaseExpression) -> bool:
    """`x.is_cuda and x.dtype in (torch.float32, torch.float64)`: a tensor on CUDA in the default
    dtype. The dtype test counts only beside a CUDA test (a fused CUDA path for fp32 input, kornia's
    SIFT): alone, `if x.dtype != torch.float32:` is the path every autocast step takes."""

    def on_cuda(test: cst.BaseExpression) -> bool:
        if isinstance(test, cst.Attribute):
            return test.attr.value == "is_cuda"
        return (
            isinstance(test, cst.Comparison)
            and len(test.comparisons) == 1
            and isinstance(test.comparisons[0].operator, cst.Equal)
            and _holds_on_cuda(test.left, test.comparisons[0].comparator)
        )

    def in_default_dtype(test: cst.BaseExpression) -> bool:
        return (
            isinstance(test, cst.Comparison)
            and len(test.comparisons) == 1
            and isinstance(test.comparisons[0].operator, (cst.Equal, cst.In))
            and _accepts_default_dtype(test.left, test.comparisons[0].comparator)
        )

    return (on_cuda(left) and in_default_dtype(right)) or (on_cuda(right) and in_default_dtype(left))


def off_cuda_sides(test: cst.BaseExpression) -> tuple[bool, bool]:
    """(the body runs only off CUDA, the else branch does) for a device test: `x.device.type == "cuda"`
    leaves the else branch to CPU, MPS and other accelerators; `x.device.type == "cpu"` the body."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        body, orelse = off_cuda_sides(test.expression)
        return orelse, body
    if isinstance(test, cst.Attribute):
        name = _last_name(test)
        return name == "is_cpu", name == "is_cuda"
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        comparison = test.comparisons[0]
        left, right, operator = test.left, comparison.comparator, comparison.operator
        equal, unequal = isinstance(operator, cst.Equal), isinstance(operator, cst.NotEqual)
        if _holds_only_off_cuda(left, right):
            return equal, unequal
        if _holds_on_cuda(left, right):
            return unequal, equal
    return False, False


def special_mode_sides(test: cst.BaseExpression) -> tuple[bool, bool]:
    """(the body runs only while scripting, tracing or exporting, the else branch does) for
    `if test:`: narrower than `cold_sides`, whose periodic and debug branches still run in training."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        body, orelse = special_mode_sides(test.expression)
        return orelse, body
    if isinstance(test, cst.BooleanOperation):
        first, second = special_mode_sides(test.left), special_mode_sides(test.right)
        if isinstance(test.operator, cst.And):
            return first[0] or second[0], first[1] and second[1]
        return first[0] and second[0], first[1] or second[1]
    return (isinstance(test, cst.Call) and _last_name(test) in SPECIAL_MODES), False


def cold_sides(test: cst.BaseExpression) -> tuple[bool, bool]:
    """(the body is cold, the else branch is cold) for `if test:`."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        body, orelse = cold_sides(test.expression)
        return orelse, body
    if isinstance(test, cst.BooleanOperation):
        first, second = cold_sides(test.left), cold_sides(test.right)
        if isinstance(test.operator, cst.And):  # the body needs both; the else either
            if _cuda_in_default_dtype(test.left, test.right):
                return False, True
            return first[0] or second[0], first[1] and second[1]
        return first[0] and second[0], first[1] or second[1]
    name = _last_name(test)
    if isinstance(test, cst.Call) and (name in SPECIAL_MODES or name in LOG_LEVEL_CHECKS):
        return True, False
    if isinstance(test, cst.Call) and name in COMPILING:
        return False, True  # the else branch runs only in eager mode, kept out of graphs on purpose
    if isinstance(test, (cst.Name, cst.Attribute)) and (
        name in DEBUG_FLAGS or name in ONCE_FLAGS or is_export_flag(name or "")
    ):
        return True, False
    if isinstance(test, cst.Attribute) and name == "is_cpu":
        return True, False
    if isinstance(test, cst.Attribute) and name == "is_cuda":
        return False, True  # every CUDA step takes the body
    if (
        isinstance(test, cst.Attribute)
        and name == "state"
        and "optim" in (_last_name(test.value) or "").lower()
    ):
        return False, True  # `if optimizer.state:` an optimizer has state from its first step on
    if isinstance(test, cst.BinaryOperation) and isinstance(test.operator, cst.Modulo):
        return False, True  # `if not step % N:` runs once every N steps
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        comparison = test.comparisons[0]
        left, right, operator = test.left, comparison.comparator, comparison.operator
        if _holds_only_off_cuda(left, right):
            if isinstance(operator, cst.Equal):
                return True, False
            if isinstance(operator, cst.NotEqual):
                return False, True
        if _holds_on_cuda(left, right):
            if isinstance(operator, cst.Equal):
                return False, True
            if isinstance(operator, cst.NotEqual):
                return True, False
        if (
            isinstance(left, cst.BinaryOperation)
            and isinstance(left.operator, cst.Modulo)
            and isinstance(operator, cst.Equal)
            and isinstance(right, cst.Integer)
            and right.evaluated_value == 0
        ):
            return True, False  # `if step % N == 0:` runs once every N steps
        if (
            isinstance(operator, cst.Equal)
            and isinstance(right, cst.Integer)
            and _last_name(left) in STEP_COUNTERS
        ):
            return True, False  # `if batch_idx == 0:` runs on one step of many
    return False, False


def compared_counter(test: cst.BaseExpression) -> Optional[cst.Name]:
    """`i` for `if i == 0:` (any int literal): the name a branch taken on one value compares.
    It makes the branch cold only where `i` counts the steps (`enumerate_counter`)."""
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1):
        return None
    comparison = test.comparisons[0]
    if not (isinstance(comparison.operator, cst.Equal) and isinstance(comparison.comparator, cst.Integer)):
        return None
    return test.left if isinstance(test.left, cst.Name) else None


def enumerate_counter(loop: cst.CSTNode) -> Optional[str]:
    """`i` for `for i, x in enumerate(...)`: in a loop whose iterations are the steps, it counts them."""
    if not (isinstance(loop, cst.For) and isinstance(loop.iter, cst.Call)):
        return None
    if dotted_name(loop.iter.func) != "enumerate" or not isinstance(loop.target, cst.Tuple):
        return None
    first = loop.target.elements[0].value if loop.target.elements else None
    return first.value if isinstance(first, cst.Name) else None


def argument_sides(test: cst.BaseExpression, values: Mapping[str, str]) -> tuple[bool, bool]:
    """(the body is never taken, the else branch is never taken) for `if test:`, given what
    every call made per step passes the function (analysis/arguments.py reads the test)."""
    if not values:
        return False, False
    parsed = parse_test(_CODE.code_for_node(test))
    return decided_sides(parsed, values) if parsed is not None else (False, False)


def _text(expr: cst.CSTNode) -> str:
    return normalised_code(_CODE.code_for_node(expr))


def _layout_base(expr: cst.BaseExpression) -> cst.BaseExpression:
    """`self.grid[i]` for `self.grid[i].shape[2:4]`, `self.grid[i].size(0)`, `len(self.grid[i])`."""
    if isinstance(expr, cst.Subscript) and isinstance(expr.value, (cst.Attribute, cst.Call)):
        expr = expr.value
    if isinstance(expr, cst.Call):
        if isinstance(expr.func, cst.Name) and expr.func.value == "len" and len(expr.args) == 1:
            return expr.args[0].value
        expr = expr.func
    if isinstance(expr, cst.Attribute) and expr.attr.value in LAYOUT_READS:
        return expr.value
    return expr


# What a local name stands for when it is bound once to an attribute or an item
# (`backbone = self.backbone[0]`); None otherwise.
Alias = Callable[[cst.Name], Optional[cst.BaseExpression]]


def _no_alias(name: cst.Name) -> Optional[cst.BaseExpression]:
    return None


def _compared_roots(expr: cst.BaseExpression, alias: Alias) -> set[str]:
    """What a stale-check reads, as text: `self.grid[i]` for `self.grid[i].shape[2:4]`; `backbone`
    and `backbone.cls_token` for `backbone.cls_token.dtype`, and what the local `backbone` stands for."""
    roots: set[str] = set()
    current: cst.BaseExpression = _layout_base(expr)
    while True:
        roots.add(_text(current))
        if isinstance(current, cst.Name):
            bound = alias(current)
            if bound is not None:
                roots.add(_text(bound))
        if not isinstance(current, cst.Attribute):
            return roots
        current = current.value


def _misses(
    test: cst.BaseExpression, stored: set[str], containers: set[str], alias: Alias = _no_alias
) -> bool:
    """`test` is true when the cache the body fills misses: `key not in self.cache`,
    `self.mask is None`, `self.grid[i].shape[2:4] != x.shape[2:4]`, `backbone.device != x.device`
    after `backbone = self.backbone[0]`."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.Or):
        return _misses(test.left, stored, containers, alias) and _misses(
            test.right, stored, containers, alias
        )
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return _text(test.expression) in containers  # `if not state:` an empty state filled once
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    left, right, operator = test.left, test.comparisons[0].comparator, test.comparisons[0].operator
    if isinstance(operator, cst.Equal) and _empty_length(left, right, containers):
        return True  # `if len(state) == 0:` an optimizer's per-parameter state, filled at its first step
    if isinstance(operator, cst.NotIn):
        return _text(right) in containers
    if isinstance(operator, cst.Is):
        return isinstance(right, cst.Name) and right.value == "None" and _text(left) in stored
    if isinstance(operator, cst.NotEqual):
        return bool((_compared_roots(left, alias) | _compared_roots(right, alias)) & stored)
    return False


def _empty_length(left: cst.BaseExpression, right: cst.BaseExpression, containers: set[str]) -> bool:
    """`len(c) == 0` for one of the `containers` the body fills."""
    if not (isinstance(right, cst.Integer) and right.evaluated_value == 0):
        return False
    return (
        isinstance(left, cst.Call)
        and isinstance(left.func, cst.Name)
        and left.func.value == "len"
        and len(left.args) == 1
        and _text(left.args[0].value) in containers
    )


def fills_cache(branch: cst.If, alias: Alias = _no_alias) -> bool:
    """A cache-miss builder: the body stores into an attribute or a container what the test found
    missing or stale, so later steps skip it (`if key not in self.cache: self.cache[key] = ...`)."""
    stored: set[str] = set()
    containers: set[str] = set()
    for statement in branch.body.body:
        for small in statement.body if isinstance(statement, cst.SimpleStatementLine) else ():
            for target in small.targets if isinstance(small, cst.Assign) else ():
                if isinstance(target.target, (cst.Attribute, cst.Subscript)):
                    stored.add(_text(target.target))
                if isinstance(target.target, cst.Subscript):
                    containers.add(_text(target.target.value))
    return bool(stored) and _misses(branch.test, stored, containers, alias)


def _assigned_targets(statements: Sequence[cst.BaseStatement]) -> Iterator[cst.BaseAssignTargetExpression]:
    for statement in statements:
        for small in statement.body if isinstance(statement, cst.SimpleStatementLine) else ():
            for target in small.targets if isinstance(small, cst.Assign) else ():
                yield target.target


def _lookup(statement: cst.BaseStatement) -> Optional[tuple[str, str]]:
    """(the name, the container) for `name = self.cache.get(key)`."""
    small = (
        statement.body[0]
        if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1
        else None
    )
    if not isinstance(small, cst.Assign) or len(small.targets) != 1:
        return None
    target, value = small.targets[0].target, small.value
    if not isinstance(target, cst.Name) or not isinstance(value, cst.Call):
        return None
    func = value.func
    if isinstance(func, cst.Attribute) and func.attr.value == "get" and isinstance(func.value, cst.Attribute):
        return target.value, _text(func.value)
    return None


def fills_looked_up_cache(branch: cst.If, block: Sequence[cst.BaseStatement]) -> bool:
    """A cache-miss builder read through a lookup: `value = self.cache.get(key)` just before
    `if value is None: value = build(...)`, and the block stores the value back
    (`self.cache[key] = value`), so later calls with the same key skip the build."""
    index = next((i for i, statement in enumerate(block) if statement is branch), 0)
    found = _lookup(block[index - 1]) if index > 0 else None
    test = branch.test
    if found is None or not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1):
        return False
    name, container = found
    comparison = test.comparisons[0]
    if not (
        isinstance(comparison.operator, cst.Is)
        and isinstance(test.left, cst.Name)
        and test.left.value == name
        and isinstance(comparison.comparator, cst.Name)
        and comparison.comparator.value == "None"
    ):
        return False
    if not isinstance(branch.body, cst.IndentedBlock):
        return False  # `if v is None: v = build(x)` on one line is a suite of small statements
    if not any(isinstance(t, cst.Name) and t.value == name for t in _assigned_targets(branch.body.body)):
        return False
    later = [*branch.body.body, *block[index + 1 :]]
    return any(isinstance(t, cst.Subscript) and _text(t.value) == container for t in _assigned_targets(later))


def leaving_statement(body: cst.BaseSuite) -> Optional[cst.CSTNode]:
    """The `return`, `raise` or `break` that ends the block, if one does."""
    last = final_statement(body)
    return last if isinstance(last, (cst.Return, cst.Raise, cst.Break)) else None


def _always_leaves(body: cst.BaseSuite) -> bool:
    """The block ends by leaving it: `return`, `raise`, `continue` or `break`."""
    return isinstance(final_statement(body), (cst.Return, cst.Raise, cst.Continue, cst.Break))


def _leaves_unless_it_fails(statement: cst.BaseStatement) -> bool:
    """`try: return attempt() except OOM: ...`: what follows runs only after a handler caught
    an error (an out-of-memory fallback)."""
    return (
        isinstance(statement, (cst.Try, cst.TryStar))
        and statement.orelse is None
        and bool(statement.handlers)
        and _always_leaves(statement.body)
    )


def cold_from(
    statements: Sequence[cst.BaseStatement],
    decided: Callable[[cst.BaseExpression], tuple[bool, bool]] = lambda test: (False, False),
) -> int:
    """The index of the first statement that runs only when a guard before it did not leave,
    where the guard leaves in every training step: `if x.device.type != "cpu": return ...` (or
    where the arguments say so: `decided`). The length of `statements` when there is none."""
    for index, statement in enumerate(statements):
        if (
            isinstance(statement, cst.If)
            and statement.orelse is None
            and _always_leaves(statement.body)
            and (cold_sides(statement.test)[1] or decided(statement.test)[1])
        ) or _leaves_unless_it_fails(statement):
            return index + 1
    return len(statements)


def crosses_cold_branch(child: cst.CSTNode, parent: cst.CSTNode, alias: Alias = _no_alias) -> bool:
    """Stepping from `child` up to `parent` leaves a branch a training step does not take (for
    a statement in a block, hotpath.py asks `cold_from` once per block)."""
    if isinstance(parent, cst.If) and child is parent.body and fills_cache(parent, alias):
        return True
    if isinstance(parent, (cst.If, cst.IfExp)):
        body, orelse = cold_sides(parent.test)
        return (body and child is parent.body) or (orelse and child is parent.orelse)
    if isinstance(parent, cst.BooleanOperation) and child is parent.right:
        # `not is_compiling() and bool(check)`: the right operand runs only when the left lets it
        body, orelse = cold_sides(parent.left)
        return body if isinstance(parent.operator, cst.And) else orelse
    if isinstance(parent, cst.ExceptHandler):
        return child is parent.body
    if isinstance(parent, cst.Lambda):
        # a message built lazily for a check: `KORNIA_CHECK(cond, lambda: f"...{t.item()}")`
        return isinstance(parent.body, (cst.FormattedString, cst.ConcatenatedString, cst.SimpleString))
    return False

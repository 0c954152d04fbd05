"""Branches a training step does not take, read from an `if` test (or an if-expression's): special
modes (TorchScript, tracing, export), eager-only code kept out of compiled graphs, branches for CPU
or MPS tensors, debug and verbose switches, work done once every N steps or on one step of many
(those judged from the test alone in analysis/branch_sides.py, for both passes), and cache-miss
builders. Their code is cold whatever function holds it, and so is the code after a
guard that leaves the block unless the step is in such a mode (`if x.device.type != "cpu": return`)."""

from __future__ import annotations

import ast
import functools
from typing import Callable, Iterator, Mapping, Optional, Sequence

import libcst as cst

from ..syntax.ast_view import as_ast
from ..syntax.walker import descendants, final_statement
from . import branch_sides, cache_misses, failing_blocks
from .arguments import decided_sides
from .branch_sides import Sides


def on_cst(judge: Callable[[ast.AST], Sides], test: cst.BaseExpression) -> Sides:
    """What `judge` (an analysis/branch_sides.py reading) says of libcst's test."""
    parsed = as_ast(test)
    return judge(parsed) if parsed is not None else (False, False)


def periodic(test: cst.BaseExpression) -> bool:
    """`step % 100 == 0`, `not (i + 1) % n`, or either inside `and`/`or`: a test that holds once
    every n steps (still training code: the hot path keeps it, rules that count what runs at
    every step leave it out)."""
    if isinstance(test, cst.BinaryOperation):
        return isinstance(test.operator, cst.Modulo) or periodic(test.left) or periodic(test.right)
    if isinstance(test, cst.Comparison):
        return periodic(test.left) or any(periodic(c.comparator) for c in test.comparisons)
    if isinstance(test, cst.BooleanOperation):
        return periodic(test.left) or periodic(test.right)
    if isinstance(test, cst.UnaryOperation):
        return periodic(test.expression)
    return False


def cold_sides(test: cst.BaseExpression) -> Sides:
    """(the body is cold, the else branch is cold) for `if test:` (analysis/branch_sides.py)."""
    return on_cst(branch_sides.cold_sides, test)


def off_cuda_sides(test: cst.BaseExpression) -> Sides:
    """(the body runs only off CUDA, the else branch does) for a device test."""
    return on_cst(branch_sides.off_cuda_sides, test)


def special_mode_sides(test: cst.BaseExpression) -> Sides:
    """(the body runs only while scripting, tracing or exporting, the else branch does)."""
    return on_cst(branch_sides.special_mode_sides, test)


def compared_counter(test: cst.BaseExpression) -> Optional[cst.Name]:
    """`i` for `if i == 0:` (any int literal), as branch_sides.compared_counter reads it."""
    if not (isinstance(test, cst.Comparison) and isinstance(test.left, cst.Name)):
        return None
    parsed = as_ast(test)
    return test.left if parsed is not None and branch_sides.compared_counter(parsed) else None


def enumerate_counter(loop: cst.CSTNode) -> Optional[str]:
    """`i` for `for i, x in enumerate(...)`, as branch_sides.enumerate_counter reads it."""
    if not isinstance(loop, cst.For):
        return None
    iterable, target = as_ast(loop.iter), as_ast(loop.target)
    if iterable is None or target is None:
        return None
    counter = branch_sides.enumerate_counter(iterable, target)
    return counter or None


def argument_sides(test: cst.BaseExpression, values: Mapping[str, str]) -> tuple[bool, bool]:
    """(the body is never taken, the else branch is never taken) for `if test:`, given what
    every call made per step passes the function (analysis/arguments.py reads the test)."""
    if not values:
        return False, False
    parsed = as_ast(test)
    return decided_sides(parsed, values) if parsed is not None else (False, False)


# What a local name stands for when it is bound once to an attribute or an item
# (`backbone = self.backbone[0]`); None otherwise.
Alias = Callable[[cst.Name], Optional[cst.BaseExpression]]


def _no_alias(name: cst.Name) -> Optional[cst.BaseExpression]:
    return None


_STORES = (cst.Name, cst.Attribute, cst.Subscript)


def _small_targets(smalls: Sequence[cst.BaseSmallStatement], kinds: tuple[type, ...]) -> Iterator[ast.expr]:
    for small in smalls:
        for target in small.targets if isinstance(small, cst.Assign) else ():
            parsed = as_ast(target.target) if isinstance(target.target, kinds) else None
            if parsed is not None:
                yield parsed


def _assigned_targets(
    statements: Sequence[cst.BaseStatement], kinds: tuple[type, ...] = _STORES
) -> Iterator[ast.expr]:
    """What the assignments among `statements` store into (names, attributes or items: `kinds`
    of them), as CPython reads it."""
    for statement in statements:
        if isinstance(statement, cst.SimpleStatementLine):
            yield from _small_targets(statement.body, kinds)


def _suite_targets(body: cst.BaseSuite, kinds: tuple[type, ...] = _STORES) -> list[ast.expr]:
    """`_assigned_targets` of a branch's body, also on one line (`if v is None: v = build()`)."""
    if isinstance(body, cst.IndentedBlock):
        return list(_assigned_targets(body.body, kinds))
    return list(_small_targets(body.body, kinds)) if isinstance(body, cst.SimpleStatementSuite) else []


def fills_cache(branch: cst.If, alias: Alias = _no_alias) -> bool:
    """A cache-miss builder: the body stores into an attribute or a container what the test found
    missing or stale, so later steps skip it (`if key not in self.cache: self.cache[key] = ...`)."""
    targets = _suite_targets(branch.body, (cst.Attribute, cst.Subscript))  # what a cache is kept in
    test = as_ast(branch.test) if targets else None
    if test is None:
        return False

    def bound(name: str) -> Optional[ast.AST]:
        read = next(
            (n for n in descendants(branch.test) if isinstance(n, cst.Name) and n.value == name), None
        )
        value = alias(read) if read is not None else None
        return as_ast(value) if value is not None else None

    return cache_misses.fills_cache(test, targets, bound)


def fills_looked_up_cache(branch: cst.If, block: Sequence[cst.BaseStatement]) -> bool:
    """A cache-miss builder read through a lookup: `value = self.cache.get(key)` just before
    `if value is None: value = build(...)`, and the block stores the value back
    (`self.cache[key] = value`), so later calls with the same key skip the build."""
    index = next((i for i, statement in enumerate(block) if statement is branch), 0)
    previous = block[index - 1] if index > 0 else None
    small = (
        previous.body[0]
        if isinstance(previous, cst.SimpleStatementLine) and len(previous.body) == 1
        else None
    )
    if not (isinstance(small, cst.Assign) and len(small.targets) == 1):
        return False
    target, value, test = as_ast(small.targets[0].target), as_ast(small.value), as_ast(branch.test)
    if target is None or value is None or test is None:
        return False
    body = _suite_targets(branch.body)
    later = [*body, *_assigned_targets(block[index + 1 :])]
    return cache_misses.fills_looked_up_cache(cache_misses.looked_up(target, value), test, body, later)


def leaving_statement(body: cst.BaseSuite) -> Optional[cst.CSTNode]:
    """The `return`, `raise` or `break` that ends the block, if one does."""
    last = final_statement(body)
    return last if isinstance(last, (cst.Return, cst.Raise, cst.Break)) else None


_CODE = cst.Module([])


def fails_at_end(block: cst.BaseSuite) -> bool:
    """The block ends by raising an error (not `raise SystemExit(...)`, which ends a program that
    ran) and nothing before leaves it (`if a: return x` ... `raise ValueError(...)` dispatches):
    what it does runs only on the way to the error. analysis/failing_blocks.py reads it, on the
    block parsed back, as the project pass does; only a block whose last statement raises is."""
    last = final_statement(block)
    if not isinstance(last, cst.Raise):
        return False
    if _only_statement(block, last):
        # the common `if bad: raise ValueError(...)`: its one expression converted, not the block
        # rendered and parsed back
        raised = as_ast(last.exc) if last.exc is not None else None
        if raised is not None or last.exc is None:
            return failing_blocks.fails_at_end([ast.Raise(exc=raised, cause=None)])
    try:  # a block renders as the suite after a colon: under any header it parses alone
        parsed = ast.parse(f"if 1:{_CODE.code_for_node(block)}")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    header = parsed.body[0]
    return isinstance(header, ast.If) and failing_blocks.fails_at_end(header.body)


def _only_statement(block: cst.BaseSuite, last: cst.Raise) -> bool:
    """`last` is all the block holds."""
    if isinstance(block, cst.SimpleStatementSuite):
        return len(block.body) == 1
    line = block.body[0] if len(block.body) == 1 else None
    return isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1 and line.body[0] is last


def fails_after(ancestors: Iterator[cst.CSTNode]) -> bool:
    """A block around the node (given its ancestors, innermost first) ends by `raise`, with no
    loop or function between: what the node does runs only on the way to an error (simsiam's
    `elif args.gpu is not None: model = model.cuda(args.gpu); raise NotImplementedError(...)`)."""
    for ancestor in ancestors:
        if isinstance(ancestor, (cst.For, cst.While, cst.FunctionDef, cst.Lambda)):
            return False
        if isinstance(ancestor, cst.IndentedBlock) and fails_at_end(ancestor):
            return True
    return False


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
    decided: Callable[[ast.AST], tuple[bool, bool]] = lambda test: (False, False),
) -> int:
    """The index of the first statement that runs only when a guard before it did not leave,
    where the guard leaves in every training step (branch_sides.leaves_every_step: `if
    x.device.type != "cpu": return ...`, or where the arguments say so: `decided`, or until a
    counter passes a mark that the statements after it move), or only after a handler caught an
    error. The length of `statements` when there is none."""
    for index, statement in enumerate(statements):
        if _leaves_unless_it_fails(statement):
            return index + 1
        if not (
            isinstance(statement, cst.If) and statement.orelse is None and _always_leaves(statement.body)
        ):
            continue
        test = as_ast(statement.test)
        leaving = type(final_statement(statement.body)).__name__.lower()
        after = functools.partial(_plain_assignments, statements[index + 1 :])
        if test is not None and branch_sides.leaves_every_step(test, leaving, after, decided):
            return index + 1
    return len(statements)


def _plain_assignments(statements: Sequence[cst.BaseStatement]) -> branch_sides.Assignments:
    """The plain assignments among `statements`, on `ast`, as branch_sides.assigned_marks reads them."""
    found: branch_sides.Assignments = []
    for statement in statements:
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if isinstance(small, cst.Assign):
                pairs = [(t.target, small.value) for t in small.targets]
            elif isinstance(small, cst.AnnAssign) and small.value is not None:
                pairs = [(small.target, small.value)]
            else:
                continue
            for target, value in pairs:
                converted, assigned = as_ast(target), as_ast(value)
                if converted is not None and assigned is not None:
                    found.append(([converted], assigned))
    return found


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

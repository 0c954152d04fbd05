"""Which side of a branch a training step takes, judged from its test alone: special modes
(TorchScript, tracing, export), eager-only code kept out of compiled graphs, CPU or MPS tensors,
debug and verbose switches, work done once every N steps or on one step of many.

One reading for both passes, on CPython's `ast`: the project pass hands its own tests, the file
pass converts libcst's test to the tree CPython parses from its code (syntax/ast_view.py), so
the two agree word for word. The project pass never imports libcst.
"""

from __future__ import annotations

import ast
from typing import Callable, Optional

from .vocabulary import (
    COMPILING,
    DEBUG_FLAGS,
    DEFAULT_DTYPES,
    LOG_LEVEL_CHECKS,
    NON_CUDA_DEVICE_TYPES,
    ONCE_FLAGS,
    SPECIAL_MODES,
    STEP_COUNTERS,
    is_export_flag,
)

Sides = tuple[bool, bool]  # (the body ..., the else branch ...)


def dotted(node: ast.AST) -> Optional[str]:
    """`a.b.c` for a chain of attributes on a name; None otherwise."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _last_name(node: ast.AST) -> str:
    return (dotted(node.func if isinstance(node, ast.Call) else node) or "").split(".")[-1]


def _names_non_cuda_type(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value in NON_CUDA_DEVICE_TYPES


def _holds_only_off_cuda(left: ast.AST, right: ast.AST) -> bool:
    """`x.device.type == "cpu"`, `x.device == torch.device("cpu")`, `x.device == "mps"`."""
    if not isinstance(left, ast.Attribute):
        return False
    if left.attr == "type":
        return _names_non_cuda_type(right)
    if left.attr != "device":
        return False
    if isinstance(right, ast.Call) and _last_name(right.func) == "device" and right.args:
        return _names_non_cuda_type(right.args[0])
    return _names_non_cuda_type(right)


def _holds_on_cuda(left: ast.AST, right: ast.AST) -> bool:
    """`x.device.type == "cuda"`: true in every CUDA step (not `x.device == torch.device("cuda")`,
    which a tensor on `cuda:0` fails)."""
    return (
        isinstance(left, ast.Attribute)
        and left.attr == "type"
        and isinstance(right, ast.Constant)
        and right.value == "cuda"
    )


def _accepts_default_dtype(left: ast.AST, right: ast.AST) -> bool:
    """`x.dtype == torch.float32`, `x.dtype in (torch.float32, torch.float64)`."""
    if not (isinstance(left, ast.Attribute) and left.attr == "dtype"):
        return False
    accepted = right.elts if isinstance(right, (ast.Tuple, ast.List, ast.Set)) else [right]
    return any(isinstance(a, ast.Attribute) and a.attr in DEFAULT_DTYPES for a in accepted)


def _single_comparison(test: ast.AST) -> Optional[tuple[ast.expr, ast.cmpop, ast.expr]]:
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        return test.left, test.ops[0], test.comparators[0]
    return None


def _cuda_in_default_dtype(tests: list[ast.expr]) -> bool:
    """`x.is_cuda and x.dtype in (torch.float32, torch.float64)`: a tensor on CUDA in the default
    dtype. The dtype test counts only beside a CUDA test (a fused CUDA path for fp32 input, kornia's
    SIFT): alone, `if x.dtype != torch.float32:` is the path every autocast step takes."""

    def on_cuda(test: ast.expr) -> bool:
        if isinstance(test, ast.Attribute):
            return test.attr == "is_cuda"
        found = _single_comparison(test)
        return found is not None and isinstance(found[1], ast.Eq) and _holds_on_cuda(found[0], found[2])

    def in_default_dtype(test: ast.expr) -> bool:
        found = _single_comparison(test)
        return (
            found is not None
            and isinstance(found[1], (ast.Eq, ast.In))
            and _accepts_default_dtype(found[0], found[2])
        )

    if len(tests) != 2:
        return False
    left, right = tests
    return (on_cuda(left) and in_default_dtype(right)) or (on_cuda(right) and in_default_dtype(left))


def _joined(test: ast.BoolOp, sides: list[Sides]) -> Sides:
    """`a and b`: the body needs every operand, the else branch any one; `a or b` the reverse."""
    if isinstance(test.op, ast.And):
        return any(b for b, _ in sides), all(o for _, o in sides)
    return all(b for b, _ in sides), any(o for _, o in sides)


def cold_sides(test: ast.AST) -> Sides:
    """(the body is cold, the else branch is cold) for `if test:`."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        body, orelse = cold_sides(test.operand)
        return orelse, body
    if isinstance(test, ast.BoolOp):
        if isinstance(test.op, ast.And) and _cuda_in_default_dtype(test.values):
            return False, True
        return _joined(test, [cold_sides(v) for v in test.values])
    name = _last_name(test)
    if isinstance(test, ast.Call) and (name in SPECIAL_MODES or name in LOG_LEVEL_CHECKS):
        return True, False
    if isinstance(test, ast.Call) and name in COMPILING:
        return False, True  # the else branch runs only in eager mode, kept out of graphs on purpose
    if isinstance(test, (ast.Name, ast.Attribute)) and (
        name in DEBUG_FLAGS or name in ONCE_FLAGS or is_export_flag(name)
    ):
        return True, False
    device = off_cuda_sides(test)  # every CUDA step takes the other side
    if any(device):
        return device
    if isinstance(test, ast.Attribute) and name == "state" and "optim" in _last_name(test.value).lower():
        return False, True  # `if optimizer.state:` an optimizer has state from its first step on
    if isinstance(test, ast.BinOp) and isinstance(test.op, ast.Mod):
        return False, True  # `if not step % N:` runs once every N steps
    found = _single_comparison(test)
    if found is None:
        return False, False
    left, operator, right = found
    if isinstance(operator, ast.Eq) and isinstance(right, ast.Constant) and type(right.value) is int:
        if isinstance(left, ast.BinOp) and isinstance(left.op, ast.Mod) and right.value == 0:
            return True, False  # `if step % N == 0:` runs once every N steps
        if _last_name(left) in STEP_COUNTERS:
            return True, False  # `if batch_idx == 0:` runs on one step of many
    return False, False


_BELOW = (ast.Lt, ast.LtE)
_ABOVE = (ast.Gt, ast.GtE)


Marks = dict[str, list[ast.AST]]  # a name or `self.` attribute -> the values assigned to it


def gate_sides(test: ast.AST, marks: Marks) -> Sides:
    """(the body runs once per interval, the else branch does) for the gate of a guard whose test
    compares a counter with a mark that the code after the guard sets from the counter (`marks`:
    what the statements after it assign): edm's `if cur_nimg < tick_start_nimg + kimg_per_tick *
    1000: continue`, then `tick_start_nimg = cur_nimg`; kornia's `if scores[best] <=
    best_minimal_score: continue`, then `best_minimal_score = scores[best]`. The counter passes
    the mark once per interval (or per new best), so the side taken while it is below the mark
    runs at every step and the other rarely. A name the code after the guard moves by itself
    (`count += 1`) is a counter, not a mark. In `a and b` or `a or b` the gate decides: the other
    operands are conditions of the schedule (`not done`, `cur_tick != 0`), false on the steps
    that end or start it."""
    if not marks:
        return False, False
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        body, orelse = gate_sides(test.operand, marks)
        return orelse, body
    if isinstance(test, ast.BoolOp):
        sides = [gate_sides(value, marks) for value in test.values]
        return any(b for b, _ in sides), any(o for _, o in sides)
    found = _single_comparison(test)
    if found is None:
        return False, False
    left, operator, right = found
    if isinstance(operator, _BELOW):
        low, high = left, right
    elif isinstance(operator, _ABOVE):
        low, high = right, left
    else:
        return False, False
    if _set_from(high, low, marks):
        return False, True  # `count < mark`: true until the counter passes the mark
    if _set_from(low, high, marks):
        return True, False  # `mark <= count`: true once the counter has passed it
    return False, False


def _set_from(side: ast.AST, other: ast.AST, marks: Marks) -> bool:
    """`side` reads a mark that every assignment after the guard sets from what `other` reads."""
    read = _names_read(other)
    for name in _names_read(side) - read:
        values = marks.get(name, ())
        if values and all(_names_read(value) & read for value in values):
            return True
    return False


def _names_read(expr: ast.AST) -> set[str]:
    found = (dotted(node) for node in ast.walk(expr) if isinstance(node, (ast.Name, ast.Attribute)))
    return {name for name in found if name is not None}


Assignments = list[tuple[list[ast.AST], ast.AST]]  # (targets, value) of plain assignments


def assigned_marks(assignments: Assignments) -> Marks:
    """What plain assignments (targets, value) set: each name or dotted attribute a target binds
    (each element of `a, b = ...` too), with the values assigned to it."""
    marks: Marks = {}
    for targets, value in assignments:
        todo = list(targets)
        while todo:
            target = todo.pop()
            if isinstance(target, (ast.Tuple, ast.List)):
                todo.extend(target.elts)
            elif isinstance(target, ast.Starred):
                todo.append(target.value)
            else:
                name = dotted(target)
                if name is not None:
                    marks.setdefault(name, []).append(value)
    return marks


def _undecided(test: ast.AST) -> Sides:
    return False, False


def leaves_every_step(
    test: ast.AST,
    leaving: str,
    after: Callable[[], Assignments],
    decided: Callable[[ast.AST], Sides] = _undecided,
) -> bool:
    """For `if test:` without else whose body ends by leaving (`leaving`: "return", "raise",
    "continue" or "break"): every training step takes the body, as the test says itself
    (`if x.device.type != "cpu": return ...`) or the function's arguments do (`decided`), or, for
    `continue` and `return`, until a counter passes a mark that the assignments after the guard
    move (`after`, read only then). What follows such a guard is cold: analysis/cold.py's
    cold_from on libcst and the project pass's walk on `ast` both ask here."""
    if cold_sides(test)[1] or decided(test)[1]:
        return True
    if leaving not in ("continue", "return"):
        return False
    marks = assigned_marks(after())
    return bool(marks) and gate_sides(test, marks)[1]


def off_cuda_sides(test: ast.AST) -> Sides:
    """(the body runs only off CUDA, the else branch does) for a device test: `x.device.type == "cuda"`
    leaves the else branch to CPU, MPS and other accelerators; `x.device.type == "cpu"` the body."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        body, orelse = off_cuda_sides(test.operand)
        return orelse, body
    if isinstance(test, ast.Attribute):
        return test.attr == "is_cpu", test.attr == "is_cuda"
    found = _single_comparison(test)
    if found is None:
        return False, False
    left, operator, right = found
    equal, unequal = isinstance(operator, ast.Eq), isinstance(operator, ast.NotEq)
    if _holds_only_off_cuda(left, right):
        return equal, unequal
    if _holds_on_cuda(left, right):
        return unequal, equal
    return False, False


def special_mode_sides(test: ast.AST) -> Sides:
    """(the body runs only while scripting, tracing or exporting, the else branch does) for
    `if test:`: narrower than `cold_sides`, whose periodic and debug branches still run in training."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        body, orelse = special_mode_sides(test.operand)
        return orelse, body
    if isinstance(test, ast.BoolOp):
        return _joined(test, [special_mode_sides(v) for v in test.values])
    return (isinstance(test, ast.Call) and _last_name(test) in SPECIAL_MODES), False


def compared_counter(test: ast.AST) -> str:
    """`i` for `if i == 0:` (any int literal): the name a branch taken on one value compares; "" for
    none. It makes the branch cold only where `i` counts the steps (`enumerate_counter`)."""
    found = _single_comparison(test)
    if found is None or not isinstance(found[1], ast.Eq):
        return ""
    left, _, right = found
    if isinstance(right, ast.Constant) and type(right.value) is int and isinstance(left, ast.Name):
        return left.id
    return ""


def enumerate_counter(iterable: ast.AST, target: ast.AST) -> str:
    """`i` for `for i, x in enumerate(...)`: in a loop whose iterations are the steps, it counts
    them; "" otherwise."""
    if not (isinstance(iterable, ast.Call) and dotted(iterable.func) == "enumerate"):
        return ""
    first = target.elts[0] if isinstance(target, ast.Tuple) and target.elts else None
    return first.id if isinstance(first, ast.Name) else ""

"""Fallbacks for an empty accumulator (RULES.md, cold code): `torch.stack(curves) if curves else
torch.zeros(k)` where `curves` starts as `[]` and only a loop over the function's own data (its
parameters and locals: `for p, t in zip(torch.split(preds, sizes), ...)`) appends to it. The
fallback runs only when that data holds nothing, an empty batch, never in a step that has data.
A loop over a `self.` attribute or a module-level name (`for head in self.aux_heads:`) is
configuration, not data: a model configured without heads takes the fallback every step.

Read once, by the project pass (summary.py, on CPython's ast): each function's summary lists its
tests that have such a side, by `test_key`; the file pass finds a test there by the same key
(analysis/hotpath.py, through EntryFacts.empty_fallbacks)."""

from __future__ import annotations

import ast
from typing import Optional, Union

from .vocabulary import normalised_code

FunctionNode = Union[ast.FunctionDef, ast.AsyncFunctionDef]


def test_key(test: ast.AST) -> str:
    """How both passes name a test: its text as CPython prints it, spaces and quotes normalised."""
    return normalised_code(ast.unparse(test))


def tests_a_list(test: ast.expr) -> bool:
    """`test` asks whether a name holds anything (`xs`, `not xs`, `len(xs) == 0`...)."""
    return _tested_list_ast(test)[0] is not None


def _tested_list_ast(test: ast.expr) -> tuple[Optional[str], bool]:
    """The name a test asks the emptiness of, and whether its body is the empty side: `xs`,
    `len(xs)`, `len(xs) > 0` or `!= 0` (body: not empty), `not xs`, `len(xs) == 0` (body: empty)."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        name, body_empty = _tested_list_ast(test.operand)
        return name, not body_empty
    if isinstance(test, ast.Name):
        return test.id, False
    if isinstance(test, ast.Call) and isinstance(test.func, ast.Name) and test.func.id == "len":
        if len(test.args) == 1 and not test.keywords and isinstance(test.args[0], ast.Name):
            return test.args[0].id, False
        return None, False
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.left, ast.Call):
        right = test.comparators[0]
        zero = isinstance(right, ast.Constant) and type(right.value) is int and right.value == 0
        name, _ = _tested_list_ast(test.left)
        if name is None or not zero:
            return None, False
        if isinstance(test.ops[0], ast.Eq):
            return name, True
        if isinstance(test.ops[0], (ast.Gt, ast.NotEq)):
            return name, False
    return None, False


def _empty_list_ast(value: ast.AST) -> bool:
    """`[]`, or a tuple of them unpacked (`precisions, recalls = [], []`)."""
    if isinstance(value, ast.List):
        return not value.elts
    if isinstance(value, ast.Tuple):
        return bool(value.elts) and all(_empty_list_ast(e) for e in value.elts)
    return False


def _own_parents(function: FunctionNode) -> dict[ast.AST, ast.AST]:
    """Child -> parent over the function's own nodes (not into nested functions or classes)."""
    parents: dict[ast.AST, ast.AST] = {}
    todo: list[ast.AST] = [function]
    while todo:
        node = todo.pop()
        for child in ast.iter_child_nodes(node):
            parents[child] = node
            if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                todo.append(child)
    return parents


def _loops_around_ast(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> list[ast.AST]:
    loops: list[ast.AST] = []
    child, current = node, parents.get(node)
    while current is not None:
        if isinstance(current, (ast.For, ast.AsyncFor, ast.While)) and child in current.body:
            loops.append(current)
        child, current = current, parents.get(current)
    return loops


def _reads_only_locals_ast(expr: ast.AST, local: set[str]) -> bool:
    """Every value `expr` reads is a parameter or a local of the function; the functions it calls
    (`zip`, `torch.split`) are not values."""
    if isinstance(expr, ast.Name):
        return expr.id != "self" and expr.id in local
    if isinstance(expr, ast.Attribute):
        return _reads_only_locals_ast(expr.value, local)
    if isinstance(expr, ast.Call):
        values = [*expr.args, *(k.value for k in expr.keywords)]
        return all(_reads_only_locals_ast(v, local) for v in values)
    return all(_reads_only_locals_ast(child, local) for child in ast.iter_child_nodes(expr))


class Accumulators:
    """`empty_sides` on ast, for the tests of one function: its names, lists and fills read once."""

    def __init__(self, function: FunctionNode) -> None:
        args = function.args
        self.params = {
            a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg] if a
        }
        self.parents = _own_parents(function)
        self.local = set(self.params)
        self.empty: dict[str, bool] = {}  # name -> every binding is `[]`
        self.fills: dict[str, list[ast.Call]] = {}
        for node in self.parents:
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                self.local.add(node.id)
                statement = self.parents[node]
                while isinstance(statement, ast.Tuple):
                    statement = self.parents[statement]
                empty = isinstance(statement, ast.Assign) and _empty_list_ast(statement.value)
                self.empty[node.id] = self.empty.get(node.id, True) and empty
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("append", "extend")
                and isinstance(node.func.value, ast.Name)
            ):
                self.fills.setdefault(node.func.value.id, []).append(node)

    def empty_sides(self, test: ast.expr) -> Optional[tuple[bool, bool]]:
        """(body, orelse): which side of `test` runs only while the accumulator is empty; None
        where `test` asks nothing of a local bound only to `[]`."""
        name, body_empty = _tested_list_ast(test)
        if name is None or not self.empty.get(name) or name in self.params:
            return None
        if test not in self.parents:
            return False, False
        fills = self.fills.get(name)
        if not fills:
            return False, False
        around_test = _loops_around_ast(test, self.parents)
        for call in fills:
            loops = _loops_around_ast(call, self.parents)
            if not loops or any(loop in around_test for loop in loops):
                return False, False
            for loop in loops:
                if not isinstance(loop, (ast.For, ast.AsyncFor)) or not _reads_only_locals_ast(
                    loop.iter, self.local
                ):
                    return False, False
        return body_empty, not body_empty

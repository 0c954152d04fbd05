"""Cache-miss builders (RULES.md, cold code): a branch whose body stores what its test found
missing or stale, so later steps skip it (`if key not in self.cache: self.cache[key] = ...`,
`if self.grid[i].shape[2:4] != x.shape[2:4]: self.grid[i] = ...`), or a lookup built on a miss
and stored back (`value = self.cache.get(key)`, `if value is None: value = build(...)`).

One reading on CPython's `ast` for both passes: the project pass hands its own nodes, the file pass
converts libcst's test and targets to the trees CPython parses from their code (syntax/ast_view.py),
so the two agree word for word.
"""

from __future__ import annotations

import ast
from typing import Callable, Iterable, Optional, Sequence

from .vocabulary import LAYOUT_READS, normalised_code

# What a local name stands for when it is bound once to an attribute or an item
# (`backbone = self.backbone[0]`); None otherwise.
Alias = Callable[[str], Optional[ast.AST]]


def _no_alias(name: str) -> Optional[ast.AST]:
    return None


def text(node: ast.AST) -> str:
    """An expression's source text, as both passes compare it."""
    return normalised_code(ast.unparse(node))


def _layout_base(node: ast.AST) -> ast.AST:
    """`self.grid[i]` for `self.grid[i].shape[2:4]`, `self.grid[i].size(0)`, `len(self.grid[i])`."""
    if isinstance(node, ast.Subscript) and isinstance(node.value, (ast.Attribute, ast.Call)):
        node = node.value
    if isinstance(node, ast.Call):
        if isinstance(node.func, ast.Name) and node.func.id == "len" and len(node.args) == 1:
            return node.args[0]
        node = node.func
    if isinstance(node, ast.Attribute) and node.attr in LAYOUT_READS:
        return node.value
    return node


def _compared_roots(node: ast.AST, alias: Alias) -> set[str]:
    """What a stale-check reads, as text: `self.grid[i]` for `self.grid[i].shape[2:4]`; `backbone`
    and `backbone.cls_token` for `backbone.cls_token.dtype`, and what the local `backbone` stands for."""
    roots: set[str] = set()
    current = _layout_base(node)
    while True:
        roots.add(text(current))
        bound = alias(current.id) if isinstance(current, ast.Name) else None
        if bound is not None:
            roots.add(text(bound))
        if not isinstance(current, ast.Attribute):
            return roots
        current = current.value


def _empty_length(left: ast.AST, right: ast.AST, containers: set[str]) -> bool:
    """`len(c) == 0` for one of the `containers` the body fills."""
    return (
        isinstance(right, ast.Constant)
        and type(right.value) is int
        and right.value == 0
        and isinstance(left, ast.Call)
        and isinstance(left.func, ast.Name)
        and left.func.id == "len"
        and len(left.args) == 1
        and text(left.args[0]) in containers
    )


def _misses(test: ast.AST, stored: set[str], containers: set[str], alias: Alias) -> bool:
    """`test` is true when the cache the body fills misses: `key not in self.cache`,
    `self.mask is None`, `self.grid[i].shape[2:4] != x.shape[2:4]`, `backbone.device != x.device`
    after `backbone = self.backbone[0]`."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
        return all(_misses(v, stored, containers, alias) for v in test.values)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return text(test.operand) in containers  # `if not state:` an empty state filled once
    if not isinstance(test, ast.Compare) or len(test.ops) != 1:
        return False
    left, right, operator = test.left, test.comparators[0], test.ops[0]
    if isinstance(operator, ast.Eq) and _empty_length(left, right, containers):
        return True  # `if len(state) == 0:` an optimizer's per-parameter state, filled at its first step
    if isinstance(operator, ast.NotIn):
        return text(right) in containers
    if isinstance(operator, ast.Is):
        return isinstance(right, ast.Constant) and right.value is None and text(left) in stored
    if isinstance(operator, ast.NotEq):
        return bool((_compared_roots(left, alias) | _compared_roots(right, alias)) & stored)
    return False


def fills_cache(test: ast.AST, body_targets: Iterable[ast.AST], alias: Alias = _no_alias) -> bool:
    """A cache-miss builder: `body_targets` (what the body's assignments store into) hold what
    `test` found missing or stale."""
    stored: set[str] = set()
    containers: set[str] = set()
    for target in body_targets:
        if isinstance(target, (ast.Attribute, ast.Subscript)):
            stored.add(text(target))
        if isinstance(target, ast.Subscript):
            containers.add(text(target.value))
    return bool(stored) and _misses(test, stored, containers, alias)


def looked_up(target: ast.AST, value: ast.AST) -> Optional[tuple[str, str]]:
    """(the name, the container) for `name = self.cache.get(key)`."""
    if not isinstance(target, ast.Name) or not isinstance(value, ast.Call):
        return None
    func = value.func
    if isinstance(func, ast.Attribute) and func.attr == "get" and isinstance(func.value, ast.Attribute):
        return target.id, text(func.value)
    return None


def fills_looked_up_cache(
    lookup: Optional[tuple[str, str]],
    test: ast.AST,
    body_targets: Sequence[ast.AST],
    later_targets: Sequence[ast.AST],
) -> bool:
    """A cache-miss builder read through a lookup: `lookup` (`looked_up` of the statement just
    before the branch) names `value`, the test is `value is None`, the body binds `value` and the
    body or the rest of the block stores into the looked-up container (`later_targets`)."""
    if lookup is None or not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return False
    name, container = lookup
    right = test.comparators[0]
    if not (
        isinstance(test.ops[0], ast.Is)
        and isinstance(test.left, ast.Name)
        and test.left.id == name
        and isinstance(right, ast.Constant)
        and right.value is None
    ):
        return False
    if not any(isinstance(t, ast.Name) and t.id == name for t in body_targets):
        return False
    return any(isinstance(t, ast.Subscript) and text(t.value) == container for t in later_targets)

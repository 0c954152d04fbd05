"""CPython's `ast` walked without what no reader asks for: the contexts and operators (`Load`,
`Add`, a third of all nodes) are left out, and no generator is made per node, so a walk costs
half of `ast.walk`'s. The project pass's summarizer and the readers it hands the whole tree to
(analysis/options.py) share it.
"""

from __future__ import annotations

import ast
from typing import Iterator

# the fields that are contexts and operators: nodes of their own to `ast`, never read as such
_NOT_CHILDREN = frozenset({"ctx", "op", "ops"})
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}


def child_fields(kind: type) -> tuple[str, ...]:
    """The fields of a node type that may hold nodes worth visiting, found once per type."""
    fields = _CHILD_FIELDS.get(kind)
    if fields is None:
        fields = _CHILD_FIELDS[kind] = tuple(f for f in kind._fields if f not in _NOT_CHILDREN)  # type: ignore[attr-defined]
    return fields


def every_node(tree: ast.AST) -> list[ast.AST]:
    """`tree` and every node below it but contexts and operators, parents before children."""
    found = [tree]
    index = 0
    while index < len(found):
        node = found[index]
        index += 1
        for field in child_fields(type(node)):
            value = getattr(node, field, None)
            if isinstance(value, ast.AST):
                found.append(value)
            elif isinstance(value, list):
                found.extend(item for item in value if isinstance(item, ast.AST))
    return found


_OWN_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def own_nodes(body: list[ast.stmt]) -> Iterator[ast.AST]:
    """Every node of a body in source order, not descending into the functions, classes or
    lambdas defined in it (their names are theirs), but yielding those definitions themselves."""
    todo: list[ast.AST] = list(reversed(body))
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, _OWN_SCOPES):
            todo.extend(reversed(list(ast.iter_child_nodes(node))))

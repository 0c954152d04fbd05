"""What a name a loop unpacks is drawn from, one reading on CPython's `ast` for both passes (the
file pass converts libcst's target and iterable, syntax/ast_view.py, and follows the path it gets
on its own nodes: analysis/tensors.py, walked_source): `for t, (_, j) in zip(targets, indices)`
draws `j` from the items of `indices`, `for i, x in enumerate(xs)` draws `x` from `xs` and `i` is a
count, `for a, b in pairs` draws both from the items of `pairs`. A value every item of which is on
the host (a CPU tensor, a list of them) gives names on the host.
"""

from __future__ import annotations

import ast
from typing import Optional

# item_source's answer for a name unpacked from the walked value's own items
WALKED = -1
# the wrappers whose items are drawn from their arguments
_WRAPPERS = frozenset({"zip", "enumerate"})


def item_source(position: int, count: int, wrapper: str, arguments: int) -> Optional[int]:
    """Where the name at `position` of a target of `count` names finds its value, the loop walking
    a call of `wrapper` (its name as written, "" for anything else) with `arguments` plain
    positional arguments: the index of the argument whose items hold it (`zip`, `enumerate`'s
    second), WALKED for the walked value's items, None for `enumerate`'s count."""
    if wrapper == "zip" and arguments == count:
        return position
    if wrapper == "enumerate" and arguments == 1 and count == 2:
        return 0 if position == 1 else None
    return WALKED


def drawn_path(
    target: ast.AST, walked: ast.AST, name: str, items_of_items: bool = True
) -> Optional[list[int]]:
    """How a loop target walking `walked` draws `name`: the positional arguments to descend
    through `zip`/`enumerate` calls (nested: `enumerate(zip(a, b))`), to the value whose items
    hold it ([] for `walked` itself). A name unpacked from those items' own items (`(_, j)` from
    the items of `indices`) ends there too with `items_of_items`, and has no path without; None
    for `enumerate`'s count or a name the target does not bind."""
    if isinstance(target, ast.Name):
        return [] if target.id == name else None
    if not isinstance(target, (ast.Tuple, ast.List)) or any(isinstance(e, ast.Starred) for e in target.elts):
        return None
    # the plain positional arguments of a `zip`/`enumerate` walked, none for anything else
    args: list[ast.expr] = []
    wrapper = ""
    if isinstance(walked, ast.Call) and isinstance(walked.func, ast.Name) and walked.func.id in _WRAPPERS:
        if not walked.keywords and not any(isinstance(a, ast.Starred) for a in walked.args):
            args, wrapper = walked.args, walked.func.id
    for position, element in enumerate(target.elts):
        if not any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(element)):
            continue
        source = item_source(position, len(target.elts), wrapper if args else "", len(args))
        if source is None:
            return None
        if source == WALKED:
            return [] if items_of_items else None
        inner = drawn_path(element, args[source], name, items_of_items)
        return None if inner is None else [source, *inner]
    return None

"""What a name a loop unpacks is an item of, for both passes (item_source; walked_source reads a
libcst target with it, project/host_tensors.py an `ast` comprehension): `for t, (_, j) in zip(targets,
indices)` binds `j` within the items of `indices`, `for i, x in enumerate(xs)` binds `x` to an
item of `xs` and `i` to a count, `for a, b in pairs` binds both within the items of `pairs`. A value
every item of which is on the host (a CPU tensor, a list of them) gives names on the host.
"""

from __future__ import annotations

from typing import Callable, Optional

import libcst as cst

# item_source's answer for a name unpacked from the walked value's own items
WALKED = -1


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


# a call's qualified name (`builtins.zip`), as the file's names read it
Qualify = Callable[[cst.Call], Optional[str]]
_WRAPPERS = {"builtins.zip": "zip", "builtins.enumerate": "enumerate"}
ZIPPING = frozenset(_WRAPPERS)


def walked_source(
    target: cst.BaseExpression,
    walked: cst.BaseExpression,
    name: str,
    qualify: Qualify,
    items_of_items: bool = True,
) -> Optional[cst.BaseExpression]:
    """What a loop or comprehension target walking `walked` draws `name` from, on libcst: the
    walked value for a plain name, the matching argument of `zip` or `enumerate` (nested:
    `enumerate(zip(a, b))`), None for `enumerate`'s count or a name the target does not bind.
    A name unpacked from the walked value's own items (`for t, (_, j) in zip(targets,
    indices)`: `j` from the items of `indices`) gives that value with `items_of_items`, None
    without."""
    if isinstance(target, cst.Name):
        return walked if target.value == name else None
    if not isinstance(target, (cst.Tuple, cst.List)):
        return None
    elements = target.elements
    if any(isinstance(e, cst.StarredElement) for e in elements):
        return None
    call = walked if isinstance(walked, cst.Call) else None
    plain = call is not None and bool(call.args) and all(a.keyword is None and not a.star for a in call.args)
    wrapper = _WRAPPERS.get(qualify(call) or "", "") if call is not None and plain else ""
    for position, element in enumerate(elements):
        if not _binds(element.value, name):
            continue
        source = item_source(
            position, len(elements), wrapper, len(call.args) if call is not None and plain else 0
        )
        if source is None or (source == WALKED and not items_of_items):
            return None
        part = walked if source == WALKED else call.args[source].value  # type: ignore[union-attr]
        return walked_source(element.value, part, name, qualify, items_of_items)
    return None


def _binds(target: cst.BaseExpression, name: str) -> bool:
    if isinstance(target, cst.Name):
        return target.value == name
    if isinstance(target, (cst.Tuple, cst.List)):
        return any(_binds(e.value, name) for e in target.elements)
    return False

"""What a name a loop unpacks is an item of, for both passes: `for t, (_, j) in zip(targets,
indices)` binds `j` within the items of `indices`, `for i, x in enumerate(xs)` binds `x` to an
item of `xs` and `i` to a count, `for a, b in pairs` binds both within the items of `pairs`. A value
every item of which is on the host (a CPU tensor, a list of them) gives names on the host.
"""

from __future__ import annotations

from typing import Optional

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

"""What keys a scope may add to the dict a name holds, read from the scope's text: both passes
ask it (project/summary.py, whether a `**name` unpacking hands over the keys the name was bound
with; analysis/constructors.py, which keys a DataLoader's `**loader_args` holds).

The reading is textual on purpose: a mention in a nested function, a string or a comment counts,
so the answer errs towards "may add others", which makes the rules that ask silent.
"""

from __future__ import annotations

import re
from typing import Optional

_LITERAL_KEY = re.compile(r"\s*(['\"])(\w+)\1\s*")


def added_keys(text: str, name: str) -> Optional[list[str]]:
    """The string keys `text` adds to `name`, in order: a store under a literal key
    (`opt_args['eps'] = args.opt_eps`, `d['n'] += 1`) or a literal key given to `setdefault`;
    None where it may add others (`name.update(...)`, `name |= ...`, `name.__setitem__(...)`, a
    store or `setdefault` under a computed key)."""
    escaped = re.escape(name)
    if re.search(rf"\b{escaped}\s*(\|=|\.\s*(update|__setitem__)\b)", text):
        return None
    added: list[str] = []
    for call in re.finditer(rf"\b{escaped}\s*\.\s*setdefault\b\s*\(([^,)]*)", text):
        key = _LITERAL_KEY.fullmatch(call.group(1))
        if key is None:
            return None
        added.append(key.group(2))
    for store in re.finditer(rf"\b{escaped}\s*\[([^\]]*)\]\s*[-+*/|&]?=(?!=)", text):
        key = _LITERAL_KEY.fullmatch(store.group(1))
        if key is None:
            return None
        added.append(key.group(2))
    return added

"""A marker for "not worked out yet" in memo tables whose answers include None, typed so that
`if found is not UNSET` narrows it away: `table.get(node, UNSET)` hashes a libcst node once, where
`node in table` then `table[node]` hashes it twice (libcst's nodes hash in Python)."""

from __future__ import annotations

import enum
from typing import Final


class _Unset(enum.Enum):
    TOKEN = enum.auto()


UNSET: Final = _Unset.TOKEN

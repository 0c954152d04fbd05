"""libcst's parse without its per-node validation.

Every libcst node checks its own invariants when it is constructed (`CSTNode.__post_init__`).
A tree that libcst's parser builds from source holds them by construction (base.py's own comment
says the checks could be skipped when parsing), and on the benchmark corpus they are a seventh
of the parse. Nodes built any other way (the fixer's replacements) are still checked.
"""

from __future__ import annotations

import libcst as cst

_VALIDATING = cst.CSTNode.__post_init__


def _unchecked(self: cst.CSTNode) -> None:
    """A parsed node: nothing to check."""


def parse_module(source: bytes | str) -> cst.Module:
    """`libcst.parse_module`, with its errors, minus the validation of the nodes it builds."""
    cst.CSTNode.__post_init__ = _unchecked  # type: ignore[method-assign]
    try:
        return cst.parse_module(source)
    finally:
        cst.CSTNode.__post_init__ = _VALIDATING  # type: ignore[method-assign]

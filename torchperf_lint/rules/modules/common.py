"""Helpers shared by the modules rules."""

from __future__ import annotations

import libcst as cst

from ...analysis.vocabulary import nn_class_name
from ...engine.context import Context


def nn_class(call: cst.Call, ctx: Context, names: frozenset[str]) -> str | None:
    """The `torch.nn` class among `names` that `call` constructs, through any import spelling."""
    qualified = ctx.qualified_name(call)
    return nn_class_name(qualified, names) if qualified is not None else None

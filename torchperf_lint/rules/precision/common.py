"""Helpers shared by the precision rules."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from ...engine.context import Context


def torch_optimizer(call: cst.Call, ctx: Context) -> Optional[str]:
    """`AdamW` for `torch.optim.AdamW(...)` / `torch.optim.adamw.AdamW(...)`, else None."""
    qualified = ctx.qualified_name(call) or ""
    parts = qualified.split(".")
    if parts[:2] != ["torch", "optim"] or len(parts) not in (3, 4) or not parts[-1][:1].isupper():
        return None
    return parts[-1]

"""Helpers shared by the modules rules."""

from __future__ import annotations

import libcst as cst

from ...engine.context import Context

CONVS = frozenset(f"Conv{n}d" for n in (1, 2, 3)) | frozenset(f"ConvTranspose{n}d" for n in (1, 2, 3))
NN_MODULES = (
    "torch.nn",
    "torch.nn.modules",
    "torch.nn.modules.conv",
    "torch.nn.modules.batchnorm",
    "torch.nn.modules.instancenorm",
)


def nn_class(call: cst.Call, ctx: Context, names: frozenset[str]) -> str | None:
    """The `torch.nn` class among `names` that `call` constructs, through any import spelling."""
    qualified = ctx.qualified_name(call)
    if qualified is None:
        return None
    module, _, cls = qualified.rpartition(".")
    return cls if module in NN_MODULES and cls in names else None

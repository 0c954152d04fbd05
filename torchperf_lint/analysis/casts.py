"""Whether a `.to(...)` call only casts a tensor on the device it is on (`.to(torch.float64)`,
`.to(dtype=torch.half)`, `.to(x.dtype)`), rather than moving it: shared by the host-tensor
inference (analysis/devices.py) and the batches (analysis/batches.py), for which a batch cast on
the host is still a host batch and one moved is not."""

from __future__ import annotations

import libcst as cst

from ..syntax.walker import FileFacts, bound_value, dotted_name
from .names import Names

_DTYPE_FUNCTIONS = frozenset({"torch.get_default_dtype", "torch.promote_types", "torch.result_type"})


def casts_only(call: cst.Call, names: Names, facts: FileFacts) -> bool:
    """`.to(torch.float64)`, `.to(dtype=torch.half)`, `.to(x.dtype)`: a cast on the same device."""
    for arg in call.args:
        if arg.star:
            return False
        if arg.keyword is not None:
            if arg.keyword.value not in ("dtype", "copy", "memory_format", "non_blocking"):
                return False
            continue
        if not is_dtype(arg.value, names, facts):
            return False
    return True


def is_dtype(expr: cst.BaseExpression, names: Names, facts: FileFacts) -> bool:
    """`torch.float64`, `x.dtype`, `torch.get_default_dtype()`, `torch.promote_types(...)`, or a
    name bound only to those (`device, dtype = x.device, x.dtype`); not `torch.device("cuda")`."""
    if isinstance(expr, cst.Call):
        return names.qualified_name(expr) in _DTYPE_FUNCTIONS
    if isinstance(expr, cst.Name):
        values = []
        for binding in names.lookup(expr.value, expr):
            node = bound_value(binding, expr.value, facts)
            if node is None:
                break
            values.append(node)
        else:
            if values and all(is_dtype(v, names, facts) for v in values):
                return True
    dtype = names.qualified_name(expr) or dotted_name(expr) or ""
    return dtype.startswith("torch.") and dtype[6:].isidentifier() or dtype.endswith(".dtype")

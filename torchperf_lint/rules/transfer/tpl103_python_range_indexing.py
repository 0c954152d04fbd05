"""TPL103 python-range-indexing: Tensor indexed with a Python range or list."""

from __future__ import annotations

from typing import Iterator, Optional

import libcst as cst

from ...engine.context import Context
from ...engine.edits import add_keyword, torch_attribute
from ...engine.findings import Fix, Report, Safety
from ..base import Rule


def _index_kind(value: cst.BaseExpression, ctx: Context) -> Optional[tuple[str, Optional[cst.Call]]]:
    """What kind of host-built index `value` is, and the `range(...)` call a fix can replace."""
    if isinstance(value, cst.Call):
        qualified = ctx.qualified_name(value)
        if qualified == "builtins.range":
            return "range()", value
        if qualified == "builtins.list" and len(value.args) == 1:
            inner = value.args[0].value
            if isinstance(inner, cst.Call) and ctx.qualified_name(inner) == "builtins.range":
                return "list(range())", value
        return None
    if isinstance(value, cst.List) and value.elements:
        if all(_is_int_literal(e.value) for e in value.elements):
            return "a list of ints", None
        return None
    if isinstance(value, cst.ListComp):
        return "a list comprehension", None
    return None


def _is_int_literal(expr: cst.BaseExpression) -> bool:
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        expr = expr.expression
    return isinstance(expr, cst.Integer)


def _range_args(call: cst.Call) -> list[cst.Arg]:
    if isinstance(call.func, cst.Name) and call.func.value == "list":
        inner = call.args[0].value
        assert isinstance(inner, cst.Call)
        call = inner
    return list(call.args)


class PythonRangeIndexing(Rule):
    """## What it does
    Flags a tensor subscript that contains `range(...)`, `list(range(...))`, a list display of
    ints or a list comprehension: `pred[range(n), target]`.

    ## Why it is slow
    The index is a Python object: PyTorch turns it into a CPU tensor element by element and
    copies it to the device at every call. `torch.arange(n, device=...)` builds it on the GPU
    in one kernel. The difference grows with n, since the conversion is paid per element (seed
    004's weighted NLL loss). The measured effect on an H100 is in the Measured section below.

    ## Fix safety
    `range(...)` and `list(range(...))` become `torch.arange(..., device=x.device)` with the same
    start, stop and step: the same elements are selected. Safe when the subscripted value is
    certainly a tensor (built by torch); when it is only assumed to be one (a function
    parameter), the fix is unsafe. List displays and comprehensions have no automatic fix.

    ## When it stays silent
    Cold code (an index built once costs nothing per step); tensors on the host (a
    `torch.tensor(shape)` indexed by a list copies nothing to the device); subscripts of lists,
    dicts and NumPy arrays; `range` rebound by the file; single ints and slices.
    """

    code = "TPL103"
    name = "python-range-indexing"
    summary = "Tensor indexed with a Python range or list"
    message = "{what} index is built on the host at every call; use torch.arange(..., device=...)"
    fix_safety = Safety.SAFE
    where = "hot code"
    node_types = (cst.Subscript,)
    default_on = False  # below the real-code precision bar (evidence.py, precision.json)
    benchmark = "TPL103"

    BAD = {
        "seed-weighted-nll": """
            import torch
            from torch import nn

            def weighted_nll(pred, target, weight):
                nll = -pred[range(target.shape[0]), target]  # expect: TPL103
                return (nll * weight[target]).mean()

            class CrossEntropyLoss(nn.Module):
                def forward(self, input, target):
                    pred = torch.log_softmax(input, dim=1)
                    return weighted_nll(pred, target, self.weight)
            """,
        "list-range-in-forward": """
            import torch
            from torch import nn

            class Head(nn.Module):
                def forward(self, logits, labels):
                    picked = logits[list(range(len(labels))), labels]  # expect: TPL103
                    return picked.sum()
            """,
        "int-list-in-step-loop": """
            import torch

            def train(model, loader, optimizer):
                for x, y in loader:
                    out = model(x)
                    loss = out[[0, 1, 2]].sum()  # expect: TPL103
                    loss.backward()
                    optimizer.step()
            """,
    }
    FIXED = {
        "seed-weighted-nll": """
            import torch
            from torch import nn

            def weighted_nll(pred, target, weight):
                nll = -pred[torch.arange(target.shape[0], device=pred.device), target]
                return (nll * weight[target]).mean()

            class CrossEntropyLoss(nn.Module):
                def forward(self, input, target):
                    pred = torch.log_softmax(input, dim=1)
                    return weighted_nll(pred, target, self.weight)
            """,
        "list-range-in-forward": """
            import torch
            from torch import nn

            class Head(nn.Module):
                def forward(self, logits, labels):
                    picked = logits[torch.arange(len(labels), device=logits.device), labels]
                    return picked.sum()
            """,
    }
    GOOD = {
        # Found in real code (kornia's DKD.__init__, yolov5's val.py): a tensor built once, or one
        # on the host, pays no per-step copy.
        "certain-tensor-in-cold-code": """
            import torch

            scores = torch.randn(100, 10)
            best = scores[range(100), scores.argmax(1)]
            """,
        "host-tensor-in-hot-code": """
            import torch

            def train(model, loader, optimizer):
                for x, shape in loader:
                    gain = torch.tensor(shape)[[1, 0, 1, 0]]
                    model(x, gain).sum().backward()
                    optimizer.step()
            """,
        "same-line-in-init": """
            import torch
            from torch import nn

            class Net(nn.Module):
                def __init__(self, table):
                    super().__init__()
                    self.register_buffer("picked", table[range(4)])

                def forward(self, x):
                    return x + self.picked
            """,
        "shadowed-range": """
            import torch
            from torch import nn
            from mylib import range

            class Net(nn.Module):
                def forward(self, x):
                    return x[range(4)]
            """,
        "numpy-and-lists-in-hot-code": """
            import numpy as np
            import torch
            from torch import nn

            class Net(nn.Module):
                def forward(self, x):
                    table = np.arange(10)
                    rows = [layer for layer in self.layers]
                    return x * float(table[[1, 2]].sum()) + len(rows[0:2])
            """,
        "arange-and-slices": """
            import torch
            from torch import nn

            class Net(nn.Module):
                def forward(self, x, t):
                    rows = torch.arange(x.shape[0], device=x.device)
                    return x[rows, t] + x[0] + x[:, 1:3].sum()
            """,
        "cold-helper-on-parameter": """
            import torch

            def pick(values, n):
                return values[range(n)]
            """,
    }

    def check(self, node: cst.Subscript, ctx: Context) -> Iterator[Report]:
        for element in node.slice:
            if not isinstance(element.slice, cst.Index):
                continue
            found = _index_kind(element.slice.value, ctx)
            if found is None:
                continue
            what, range_call = found
            reason = ctx.hot_reason(node)
            if reason is None or not ctx.is_tensor(node.value) or ctx.is_host_tensor(node.value):
                return
            fix = self._fix(node, range_call, ctx) if range_call is not None else None
            yield self.report(node, reason=reason, fix=fix, what=what)
            return

    @staticmethod
    def _fix(node: cst.Subscript, range_call: cst.Call, ctx: Context) -> Optional[Fix]:
        if isinstance(node.value, (cst.Name, cst.Attribute)):
            device: Optional[cst.BaseExpression] = cst.Attribute(value=node.value, attr=cst.Name("device"))
        else:
            device = ctx.device_for(node)
        if device is None:
            return None
        arange, needs_import = torch_attribute(ctx, "arange")
        args = [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in _range_args(range_call)]
        call = add_keyword(cst.Call(func=arange, args=args), "device", device)
        safety = Safety.SAFE if ctx.is_tensor(node.value, certain=True) else Safety.UNSAFE
        return Fix.replace(range_call, call, safety, "use torch.arange on the device", needs_import)

"""TPL203 tensor-from-tensor-list: torch.tensor() built from a list of tensors."""

from __future__ import annotations

from typing import Iterator, Optional

import libcst as cst

from ...engine.context import Context
from ...engine.findings import Report
from ..base import Rule
from .common import data_argument


# -- TPL203 -------------------------------------------------------------------------------
def _is_item_call(expr: cst.BaseExpression) -> bool:
    return (
        isinstance(expr, cst.Call)
        and isinstance(expr.func, cst.Attribute)
        and expr.func.attr.value == "item"
        and not expr.args
    )


def _host_number_of_tensor(expr: cst.BaseExpression, ctx: Context) -> bool:
    """`t.item()`, or `float(t)`/`int(t)`/`bool(t)` of a tensor: a Python number read from one;
    not from a tensor that lives on the host (reading it waits for no device)."""
    if _is_item_call(expr):
        assert isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute)
        return not ctx.is_host_tensor(expr.func.value)
    if (
        isinstance(expr, cst.Call)
        and ctx.qualified_name(expr) in ("builtins.float", "builtins.int", "builtins.bool")
        and len(expr.args) == 1
    ):
        return _is_tensor(expr.args[0].value, ctx)  # certain: `Tensor | float` params are often floats
    return False


def _scalar_of_tensor(expr: cst.BaseExpression, ctx: Context) -> bool:
    """A Python number read from a tensor, or a tensor derived by torch."""
    return _host_number_of_tensor(expr, ctx) or _is_tensor(expr, ctx)


def _tensor_elements(data: cst.BaseExpression, ctx: Context, follow_names: bool = True) -> Optional[str]:
    """What `data` is when it is a Python list of tensors or of their `.item()` values."""
    # A list named and filled in other statements already holds the numbers that `.item()` read
    # there (that is where the syncs are): here it is one host-to-device copy, as `x.tolist()`.
    element = _scalar_of_tensor if follow_names else _is_tensor
    if isinstance(data, (cst.List, cst.Tuple)):
        if any(element(e.value, ctx) for e in data.elements if isinstance(e, cst.Element)):
            return "a list of tensors"
        return None
    if isinstance(data, (cst.ListComp, cst.GeneratorExp)):
        if follow_names and _is_item_call(data.elt) and _host_number_of_tensor(data.elt, ctx):
            return "a list of .item() values"
        return "a list of tensors" if element(data.elt, ctx) else None
    if isinstance(data, cst.Name) and follow_names:
        return _appended_tensors(data, ctx)
    return None


def _is_tensor(expr: cst.BaseExpression, ctx: Context) -> bool:
    """A tensor derived by torch that is not known to live on the host."""
    return ctx.is_tensor(expr, certain=True) and not ctx.is_host_tensor(expr)


def _appended_tensors(name: cst.Name, ctx: Context) -> Optional[str]:
    """`vals = []` then `vals.append(loss.detach())` in the same scope."""
    bindings = ctx.bindings(name.value, name)
    if not bindings:
        return None
    found: Optional[str] = None
    for binding in bindings:
        value = binding.node
        if binding.kind != "assign" or not isinstance(value, (cst.List, cst.ListComp, cst.GeneratorExp)):
            return None
        if not (isinstance(value, cst.List) and not value.elements):
            found = found or _tensor_elements(value, ctx, follow_names=False)
    for call in ctx.facts.method_calls.get("append", ()):
        assert isinstance(call.func, cst.Attribute)
        receiver = call.func.value
        if (
            isinstance(receiver, cst.Name)
            and receiver.value == name.value
            and len(call.args) == 1
            and ctx.bindings(name.value, call) is bindings
            and _is_tensor(call.args[0].value, ctx)
        ):
            found = found or "a list of tensors"
    return found


def _data_sized(data: cst.BaseExpression, ctx: Context) -> bool:
    """The list's length grows with the data: a comprehension over a loader, a dataset or a
    tensor's rows, or a list appended to in such a loop (analysis/trip_counts.py); a literal list
    is a handful."""
    if isinstance(data, (cst.ListComp, cst.GeneratorExp)):
        comp: Optional[cst.CompFor] = data.for_in
        while comp is not None:
            if ctx.trip_counts.iteration(comp.iter) is not None or _data_sized(comp.iter, ctx):
                return True
            comp = comp.inner_for_in
        return False
    if not isinstance(data, cst.Name):
        return False
    bindings = ctx.bindings(data.value, data)
    for binding in bindings:
        if isinstance(binding.node, (cst.ListComp, cst.GeneratorExp)) and _data_sized(binding.node, ctx):
            return True
    for call in ctx.facts.method_calls.get("append", ()):
        assert isinstance(call.func, cst.Attribute)
        receiver = call.func.value
        if (
            isinstance(receiver, cst.Name)
            and receiver.value == data.value
            and ctx.bindings(data.value, call) is bindings
        ):
            loops = ctx.hot.loops_around(call)
            if loops and ctx.data_sized(loops[0]) is not None:
                return True
    return False


class TensorFromTensorList(Rule):
    """## What it does
    Flags `torch.tensor(...)` (also `torch.as_tensor`, `torch.Tensor` and the legacy
    `torch.FloatTensor`-style constructors) applied to a Python list of tensors or of their
    `.item()` values: `torch.tensor([t.item() for t in losses])`,
    `torch.tensor([loss_a.detach(), loss_b.detach()])`, or a list filled by
    `vals.append(loss.detach())` in the same function. Looks in hot code, and outside it where
    the list grows with the data: a comprehension over, or a list appended to in a loop over, a
    loader, a dataset, a tensor's rows or a range that is not a small constant
    (analysis/trip_counts.py).

    ## Why it is slow
    `torch.tensor` reads a list element by element on the host: every CUDA tensor in it is
    copied to the host with a device sync (every `.item()` is one too), then the result is
    built on the CPU and copied back. `torch.stack(list)` keeps the data on the device in one
    kernel. The measured effect on an H100 is in the Measured section below.

    ## Fix safety
    No automatic fix: `torch.stack` keeps the values' device and autograd history (call
    `.detach()` where the list held `.item()` values), and where `.item()` was called the list
    comprehension should keep the tensors instead.

    ## When it stays silent
    Python numbers, literal lists and shapes (`torch.tensor([x.shape[0], 5])`), NumPy arrays,
    `torch.tensor(x.tolist())` (one transfer), lists whose elements are not known to be
    tensors (a parameter that may hold floats), and a named list of numbers that `.item()` read
    in other statements (`tokens.append(tok.item())` while decoding, lengths also handed to
    `split`): it holds Python numbers by then, and the syncs are where `.item()` is called.
    Outside hot code, a handful of values read once per call (a literal list of three
    `.item()`s, a comprehension over a collection of unknown size such as the keyframes a
    pipeline was handed).
    """

    code = "TPL203"
    name = "tensor-from-tensor-list"
    summary = "torch.tensor() built from a list of tensors"
    message = (
        "{func}() on {what} copies and syncs once per element; "
        "use torch.stack() on the tensors to keep them on the device"
    )
    default_on = False  # below the real-code precision bar (evidence.py, precision.json)
    where = "hot code, or a data-sized loop"
    node_types = (cst.Call,)
    benchmark = "TPL203"

    BAD = {
        "device-values-beside-host-ones": """
            import torch

            def suggestions(model, loader, history):
                losses = torch.tensor(history)
                for x in loader:
                    scores = model(x)
                    on_host = scores.detach().cpu()
                    yield torch.tensor([on_host[0].item(), scores[1].item(), losses[0]])  # expect: TPL203
            """,
        "item-comprehension-over-a-loader": """
            import torch

            @torch.no_grad()
            def batch_losses(model, loader):
                history = torch.tensor([model(x).mean().item() for x in loader])  # expect: TPL203
                return history.mean(), history.std()
            """,
        "list-of-scalar-tensors": """
            import torch
            from torch import nn

            class MultiTaskLoss(nn.Module):
                def forward(self, pred, target):
                    parts = torch.tensor([  # expect: TPL203
                        (pred - target).abs().mean(),
                        (pred - target).pow(2).mean(),
                    ])
                    return parts @ self.weights
            """,
        "appended-list-in-eval-loop": """
            import torch

            @torch.no_grad()
            def evaluate(model, loader):
                accuracies = []
                for x, y in loader:
                    accuracies.append((model(x).argmax(1) == y).float().mean())
                return torch.as_tensor(accuracies).mean()  # expect: TPL203
            """,
    }
    GOOD = {
        # outside hot code, a handful of values read once per call
        "a-handful-once-per-call": """
            import torch

            def suggestion(history, scores):
                losses = torch.tensor(history)
                return torch.tensor([scores[0].item(), scores[1].item(), losses[0]])
            """,
        "values-of-host-tensors": """
            import torch

            def suggestion(history, scores):
                losses = torch.tensor(history)
                grads = torch.tensor([0.5 * (losses[i + 1] - losses[i - 1]) for i in range(1, len(losses) - 1)])
                on_host = scores.detach().cpu()
                return grads.argmin(), torch.tensor([on_host[i].item() for i in range(3)])
            """,
        "python-numbers-and-literals": """
            import torch

            WEIGHTS = torch.tensor([0.1, 0.2, 0.7])

            def class_weights(counts):
                total = sum(counts)
                return torch.tensor([total / c for c in counts])
            """,
        "numpy-array-and-tolist": """
            import numpy as np
            import torch

            def load(path, x):
                table = np.load(path)
                return torch.tensor(table), torch.tensor(x.tolist())
            """,
        "shape-ints": """
            import torch
            from torch import nn

            class Net(nn.Module):
                def forward(self, x):
                    size = torch.tensor([x.shape[0], x.shape[1]])
                    return x.view(-1) * size.prod()
            """,
        "stack-instead": """
            import torch

            def epoch_summary(step_losses):
                history = torch.stack([loss.detach() for loss in step_losses])
                return history.mean()
            """,
        "item-values-kept-as-host-numbers": """
            import torch

            def pack(hidden, mask, groups, n):
                lengths = [mask[groups == g].sum().item() for g in range(n)]
                parts = torch.split(hidden, lengths)
                return parts, torch.tensor(lengths)
            """,
        "tokens-read-while-decoding": """
            import torch

            @torch.no_grad()
            def generate(model, token, stop, steps):
                tokens = []
                for _ in range(steps):
                    token = model(token).argmax(-1)
                    if token.item() in stop:
                        break
                    tokens.append(token.item())
                return torch.tensor(tokens)
            """,
        "floats-appended": """
            import torch

            def read_values(lines):
                values = []
                for line in lines:
                    values.append(float(line))
                return torch.tensor(values)
            """,
    }

    def check(self, node: cst.Call, ctx: Context) -> Iterator[Report]:
        func = ctx.qualified_name(node)
        if func is None or not func.startswith("torch."):
            return
        constructor = func[len("torch.") :]
        if constructor not in ("tensor", "as_tensor") and not (
            "." not in constructor and constructor.endswith("Tensor")
        ):
            return
        data = data_argument(node, "data")
        what = _tensor_elements(data, ctx) if data is not None else None
        if what is None:
            return
        assert data is not None
        if not ctx.is_hot(node) and not _data_sized(data, ctx):
            return  # outside hot code, a handful of values read once per call costs little
        yield self.report(node, reason=ctx.hot_reason(node), func=ctx.code(node.func), what=what)

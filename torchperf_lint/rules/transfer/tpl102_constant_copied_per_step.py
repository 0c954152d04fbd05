"""TPL102 constant-copied-per-step: Constant host data copied to the device at every step."""

from __future__ import annotations

from typing import Iterator, Optional

import libcst as cst

from ...analysis.batches import HOST_CONVERSIONS
from ...engine.context import Context
from ...engine.findings import Report, Safety
from ..base import Rule, hot_place
from .common import (
    to_accelerator,
)

# -- shared by TPL102-TPL107 ------------------------------------------------------------

_HOST_CONSTRUCTORS = frozenset(
    {"torch.tensor", "torch.Tensor", "torch.as_tensor", "torch.asarray", "torch.from_numpy"}
)


def _is_host_constructor(qualified: str) -> bool:
    """`torch.tensor`, `torch.from_numpy`... and the legacy `torch.FloatTensor`-style classes."""
    if qualified in _HOST_CONSTRUCTORS:
        return True
    name = qualified[len("torch.") :] if qualified.startswith("torch.") else ""
    return "." not in name and name[:1].isupper() and name.endswith("Tensor")


def _move_after_conversions(call: cst.Call, ctx: Context) -> Optional[cst.Call]:
    """The `.cuda()`/`.to()`/`.type_as()` applied to `call`'s result, through `.float()`-style
    conversions."""
    current = call
    while True:
        attribute = ctx.parent(current)
        if not (isinstance(attribute, cst.Attribute) and attribute.value is current):
            return None
        outer = ctx.parent(attribute)
        if not (isinstance(outer, cst.Call) and outer.func is attribute):
            return None
        if attribute.attr.value in ("cuda", "to", "type_as"):
            return outer
        if attribute.attr.value not in HOST_CONVERSIONS:
            return None
        current = outer


class ConstantCopiedPerStep(Rule):
    """## What it does
    Flags a tensor built from host values that never change (`torch.tensor([...])`,
    `torch.Tensor(list)`, `torch.FloatTensor(...)`, `torch.as_tensor(np_array)`,
    `torch.from_numpy(...)`) and moved with `.cuda()`/`.to(...)` in hot code: literals,
    module-level names, parameters of the setup code and `self.` attributes that hot code never
    assigns.

    ## Why it is slow
    Every step builds the same tensor on the CPU and copies it from pageable memory to the
    device: a host-to-device copy and a synchronisation point the GPU waits on. Built once and
    kept as a buffer, it costs nothing. Seed 004's loss, for instance, passed
    `torch.Tensor([0.1]*10).cuda()` as class weights at every call. The measured effect on an
    H100 is in the Measured section below.

    Off by default (RULES.md, "Defaults follow evidence"): on an H100 no case gained 5% with
    confidence: seed 004's loss alone 0.99x, in a balanced training step 0.99x, GPU-bound 1.05x
    (1.04-1.05), the article's full pipeline 1.20x (0.95-1.24). The copy is real but small next to
    a step; enable it with `--extend-select TPL102` when profiling shows host-to-device copies.

    ## Fix safety
    No automatic fix: where the tensor should live (a buffer of which module, a variable before
    which loop) is a design decision. The message says what to do.

    ## When it stays silent
    Cold code (`__init__`, module level); host values that change every step (batch data,
    parameters of `forward`, attributes that `forward` assigns); conversions that do not move
    the tensor to a device (`.to(torch.float16)`, `.to("cpu")`).
    """

    code = "TPL102"
    default_on = False
    name = "constant-copied-per-step"
    summary = "Constant host data copied to the device at every step"
    message = "{constructor}() copies the same host values to the device in {place} at every step; {remedy}"
    fix_safety = Safety.NONE
    where = "hot code"
    node_types = (cst.Call,)
    benchmark = "TPL102"

    BAD = {
        "seed-class-weights-in-loss": """
            import torch
            import torch.nn.functional as F
            from torch import nn

            def weighted_nll(pred, target, weight):
                nll = -pred.gather(1, target[:, None])[:, 0]
                return (nll * weight[target]).mean()

            class CrossEntropyLoss(nn.Module):
                def forward(self, input, target):
                    pred = F.log_softmax(input, dim=1)
                    return weighted_nll(pred, target, torch.Tensor([0.1] * 10).cuda())  # expect: TPL102
            """,
        "self-attributes-in-forward": """
            import torch
            from torch import nn

            class Normalize(nn.Module):
                def __init__(self, mean, std):
                    super().__init__()
                    self.mean = mean
                    self.std = std

                def forward(self, x):
                    mean = torch.tensor(self.mean).view(1, -1, 1, 1).to(x.device)  # expect: TPL102
                    std = torch.as_tensor(self.std).view(1, -1, 1, 1).to(x.device)  # expect: TPL102
                    return (x - mean) / std
            """,
        "module-constant-in-step-loop": """
            import numpy as np
            import torch
            import torch.nn.functional as F

            CLASS_WEIGHTS = np.array([1.0, 2.0, 0.5])

            def train(model, loader, optimizer, device):
                for x, y in loader:
                    weight = torch.from_numpy(CLASS_WEIGHTS).float().to(device)  # expect: TPL102
                    loss = F.cross_entropy(model(x.to(device)), y.to(device), weight=weight)
                    loss.backward()
                    optimizer.step()
            """,
        "legacy-constructor-with-alias": """
            import torch as th
            from torch import nn

            LUMA = [0.299, 0.587, 0.114]

            class Grayscale(nn.Module):
                def forward(self, rgb):
                    coefficients = th.FloatTensor(LUMA).cuda(rgb.device)  # expect: TPL102
                    return (rgb * coefficients[:, None, None]).sum(0)
            """,
        "anchors-moved-like-the-input": """
            import numpy as np
            import torch
            from torch import nn

            class YoloHead(nn.Module):
                def __init__(self, anchors):
                    super().__init__()
                    self.anchors = np.array(anchors, dtype=np.float32)

                def forward(self, x):
                    grid = torch.from_numpy(self.anchors).type_as(x)  # expect: TPL102
                    scale = torch.tensor([8.0, 16.0, 32.0]).to(x)  # expect: TPL102
                    return x * grid.sum() / scale.sum()
            """,
        "setup-value-in-step-loop": """
            import torch

            def train(model, loader, optimizer, class_counts):
                weights = [1.0 / c for c in class_counts]
                criterion = torch.nn.CrossEntropyLoss(reduction="none")
                for x, y in loader:
                    w = torch.tensor(weights).cuda()  # expect: TPL102
                    loss = (criterion(model(x.cuda()), y.cuda()) * w[y.cuda()]).mean()
                    loss.backward()
                    optimizer.step()
            """,
    }
    GOOD = {
        "buffer-built-in-init": """
            import torch
            import torch.nn.functional as F
            from torch import nn

            class CrossEntropyLoss(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.register_buffer("weight", torch.Tensor([0.1] * 10).cuda())

                def forward(self, input, target):
                    return F.nll_loss(F.log_softmax(input, dim=1), target, weight=self.weight)
            """,
        "per-step-host-data": """
            import torch
            from torch import nn

            class Packer(nn.Module):
                def forward(self, x, lengths):
                    sizes = torch.tensor(lengths).to(x.device)
                    return x[: int(sizes.max())]

            def train(model, loader, optimizer):
                for step, (x, lengths) in enumerate(loader):
                    steps = torch.tensor([step] * len(lengths)).cuda()
                    loss = model(x.cuda(), lengths).sum() + steps.sum()
                    loss.backward()
                    optimizer.step()
            """,
        "attribute-written-in-forward": """
            import torch
            from torch import nn

            class Decay(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.weights = [1.0, 1.0]

                def forward(self, x):
                    self.weights = [w * 0.9 for w in self.weights]
                    return x * torch.tensor(self.weights).to(x.device)
            """,
        "dtype-cast-and-cpu": """
            import torch
            from torch import nn

            class Scale(nn.Module):
                def forward(self, x):
                    half = torch.tensor(0.5).to(x.dtype)
                    table = torch.tensor([1, 2, 3]).to("cpu")
                    return x * half + table.sum()
            """,
        "module-level-copy-made-once": """
            import torch

            TABLE = torch.tensor([0.1, 0.2, 0.7]).cuda()

            def lookup(i):
                return TABLE[i]
            """,
    }

    def check(self, node: cst.Call, ctx: Context) -> Iterator[Report]:
        qualified = ctx.qualified_name(node)
        if qualified is None or not _is_host_constructor(qualified) or not node.args:
            return
        reason = ctx.hot_reason(node)
        if reason is None:
            return
        move = _move_after_conversions(node, ctx)
        if move is None or not to_accelerator(move, ctx):
            return
        if not all(ctx.is_step_invariant(arg.value) for arg in node.args):
            return
        if reason.from_model_code:
            remedy = "build it once in __init__ and keep it with self.register_buffer(...)"
        else:
            remedy = "build it on the device once, before the loop"
        yield self.report(
            move, reason=reason, constructor=qualified, place=hot_place(node, ctx), remedy=remedy
        )

"""TPL103 python-range-indexing: seed 004's `pred[range(n), target]`."""

from __future__ import annotations

from ..harness import Case, Tolerance
from .tpl102 import make_loss_step

BAD = """
import torch
import torch.nn.functional as F
from torch import nn


def weighted_nll(pred, target, weight):
    nll = -pred[range(target.shape[0]), target]
    nll = nll * weight[target]
    nll = nll / weight[target].sum()
    return nll.sum()


class CrossEntropyLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("weight", torch.Tensor([0.1] * 10))

    def forward(self, input, target):
        pred = F.log_softmax(input, dim=1)
        return weighted_nll(pred, target, self.weight)
"""

CASES = [
    Case(
        name="tpl103_seed_range_index",
        code="TPL103",
        title="seed 004 loss: pred[range(n), target] vs torch.arange(n, device=...)",
        bad=BAD,
        fixes=("TPL103",),
        make=make_loss_step,
        # 128: a small classification batch; 4096: a large one; 65536: per-token loss of 64 sequences x 1024 tokens.
        sizes=[
            {"label": f"n={n}", "regime": f"loss fwd+bwd alone, batch {n}", "batch": n}
            for n in (128, 4096, 65536)
        ],
        smoke_sizes=[{"label": "n=16", "batch": 16}],
        tolerance=Tolerance(1e-6, 1e-7),
    )
]

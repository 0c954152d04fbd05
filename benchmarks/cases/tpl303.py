"""TPL303 hand-written-fused-op: seed 004's hand-written log_softmax instead of the fused kernel."""

from __future__ import annotations

from ..harness import Case, Tolerance
from .tpl102 import make_loss_step

# Seed 004 writes `x - x.exp().sum(-1).log().unsqueeze(-1)`; the keepdim spelling below computes the same.
BAD = """
import torch.nn.functional as F
from torch import nn


def log_softmax(x):
    return x - x.exp().sum(-1, keepdim=True).log()


class CrossEntropyLoss(nn.Module):
    def forward(self, input, target):
        return F.nll_loss(log_softmax(input), target)
"""

CASES = [
    Case(
        name="tpl303_seed_log_softmax",
        code="TPL303",
        title="loss fwd+bwd: hand-written x - x.exp().sum(-1, keepdim=True).log() vs torch.log_softmax",
        bad=BAD,
        fixes=("TPL303",),
        make=make_loss_step,
        # Seed 004: CIFAR-10, batch 1024; a language model head: 4096 tokens over LLaMA's 32000-word vocabulary.
        sizes=[
            {
                "label": "1024x10",
                "regime": "loss alone, 1024x10 (launch-bound)",
                "batch": 1024,
                "classes": 10,
            },
            {
                "label": "4096x32000",
                "regime": "LM-head loss 4096x32000 (memory-bound)",
                "batch": 4096,
                "classes": 32000,
            },
        ],
        smoke_sizes=[{"label": "8x10", "batch": 8, "classes": 10}],
        tolerance=Tolerance(1e-4, 1e-6),
        note="the fused kernel rounds differently (and cannot overflow): tolerance 1e-4",
    )
]

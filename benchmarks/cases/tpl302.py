"""TPL302 module-in-hot-path: seed 004's nn.NLLLoss built inside forward, every call."""

from __future__ import annotations

from ..harness import Case, Tolerance
from .tpl102 import make_loss_step

BAD = """
import torch
import torch.nn.functional as F
from torch import nn


class CrossEntropyLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("weight", torch.Tensor([0.1] * 10))

    def forward(self, input, target):
        pred = F.log_softmax(input, dim=1)
        return nn.NLLLoss(self.weight)(pred, target)
"""

# Seed 004's "optimisation 5": create the loss module once, in __init__.
GOOD = """
import torch
import torch.nn.functional as F
from torch import nn


class CrossEntropyLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.nll = nn.NLLLoss(torch.Tensor([0.1] * 10))

    def forward(self, input, target):
        pred = F.log_softmax(input, dim=1)
        return self.nll(pred, target)
"""

CASES = [
    Case(
        name="tpl302_seed_nll_module",
        code="TPL302",
        title="seed 004 loss: nn.NLLLoss(weight) built in forward vs once in __init__",
        bad=BAD,
        good=GOOD,
        make=make_loss_step,
        sizes=[{"label": "batch=1024", "batch": 1024}],  # seed 004's batch
        smoke_sizes=[{"label": "batch=8", "batch": 8}],
        tolerance=Tolerance(1e-6, 1e-7),
    )
]

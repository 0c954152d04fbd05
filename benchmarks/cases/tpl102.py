"""TPL102 constant-copied-per-step: seed 004's class weights copied to the GPU in every forward."""

from __future__ import annotations

import torch

from ..harness import Case, Tolerance

# Seed 004's loss with its other problems already fixed, so that only the constant copy differs.
BAD = """
import torch
import torch.nn.functional as F
from torch import nn


def weighted_nll(pred, target, weight):
    nll = -pred[torch.arange(target.shape[0], device=pred.device), target]
    nll = nll * weight[target]
    nll = nll / weight[target].sum()
    return nll.sum()


class CrossEntropyLoss(nn.Module):
    def forward(self, input, target):
        pred = F.log_softmax(input, dim=1)
        loss = weighted_nll(pred, target, torch.Tensor([0.1] * 10).cuda())
        return loss
"""

# What the message asks for: build the constant once, as a buffer that moves with the module.
GOOD = """
import torch
import torch.nn.functional as F
from torch import nn


def weighted_nll(pred, target, weight):
    nll = -pred[torch.arange(target.shape[0], device=pred.device), target]
    nll = nll * weight[target]
    nll = nll / weight[target].sum()
    return nll.sum()


class CrossEntropyLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("weight", torch.Tensor([0.1] * 10))

    def forward(self, input, target):
        pred = F.log_softmax(input, dim=1)
        loss = weighted_nll(pred, target, self.weight)
        return loss
"""


def make_loss_step(module, size, device):
    """Forward and backward of a classification loss on fixed logits: what the loss adds to a training step."""
    criterion = module.CrossEntropyLoss().to(device)
    logits = torch.randn(size["batch"], size.get("classes", 10), device=device, requires_grad=True)
    target = torch.randint(0, size.get("classes", 10), (size["batch"],), device=device)

    def step():
        logits.grad = None
        loss = criterion(logits, target)
        loss.backward()
        return loss.detach(), logits.grad

    return step


CASES = [
    Case(
        name="tpl102_seed_weights",
        code="TPL102",
        title="seed 004 loss: torch.Tensor([0.1]*10).cuda() per call vs a registered buffer",
        bad=BAD,
        good=GOOD,
        make=make_loss_step,
        # Seed 004 trains on CIFAR-10-like data in batches of 1024.
        sizes=[{"label": "batch=1024", "batch": 1024}],
        smoke_sizes=[{"label": "batch=8", "batch": 8}],
        tolerance=Tolerance(1e-6, 1e-7),
    )
]

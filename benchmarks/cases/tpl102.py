"""TPL102 constant-copied-per-step: seed 004's class weights copied to the GPU in every forward."""

from __future__ import annotations

import torch

from ..harness import Case, Tolerance
from . import common

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
    """The loss in a training step: alone on fixed logits ("width" absent: what the loss adds to a step), or
    after an MLP of `width` (4 layers) with its SGD update, from launch-bound to GPU-bound."""
    criterion = module.CrossEntropyLoss().to(device)
    target = torch.randint(0, 10, (size["batch"],), device=device)
    if "width" not in size:
        logits = torch.randn(size["batch"], 10, device=device, requires_grad=True)

        def loss_alone():
            logits.grad = None
            loss = criterion(logits, target)
            loss.backward()
            return loss.detach(), logits.grad

        return loss_alone
    model = common.mlp(size["width"], 4, 10, device)
    optimizer = common.sgd(model)
    x = torch.randn(size["batch"], size["width"], device=device)

    def train_step():
        optimizer.zero_grad(set_to_none=True)
        loss = criterion(model(x), target)
        loss.backward()
        optimizer.step()
        return loss.detach(), common.state_summary(model)

    return train_step


# Seed 004 trains on CIFAR-10-like data in batches of 1024: the loss alone at that batch (launch-bound: a
# dozen small kernels), then in a training step behind an MLP that makes the step balanced or GPU-bound.
LOSS_SIZES = [
    {
        "label": "loss alone, batch=1024",
        "regime": "loss fwd+bwd alone, batch 1024 (launch-bound)",
        "batch": 1024,
    },
    {
        "label": "MLP 1024x4 step, batch=1024",
        "regime": "train step, balanced MLP 1024x4 b=1024",
        "width": 1024,
        "batch": 1024,
    },
    {
        "label": "MLP 4096x4 step, batch=4096",
        "regime": "train step, GPU-bound MLP 4096x4 b=4096",
        "width": 4096,
        "batch": 4096,
    },
]
LOSS_SMOKE_SIZES = [
    {"label": "loss alone, batch=8", "batch": 8},
    {"label": "MLP 16x4 step, batch=8", "width": 16, "batch": 8},
]

CASES = [
    Case(
        name="tpl102_seed_weights",
        code="TPL102",
        title="seed 004 loss: torch.Tensor([0.1]*10).cuda() per call vs a registered buffer",
        bad=BAD,
        good=GOOD,
        make=make_loss_step,
        sizes=LOSS_SIZES,
        smoke_sizes=LOSS_SMOKE_SIZES,
        tolerance=Tolerance(1e-5, 1e-6),
    )
]

"""TPL104 assert-on-tensor: an assert that reads GPU values syncs the host every step."""

from __future__ import annotations

from ..harness import Case, Tolerance
from . import common
from .tpl102 import LOSS_SIZES, LOSS_SMOKE_SIZES, make_loss_step

SEED_LOSS = """
import torch
import torch.nn.functional as F
from torch import nn


def weighted_nll(pred, target, weight):
    assert target.max() < 10
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
        return weighted_nll(pred, target, self.weight)
"""

FINITE_CHECK = """
import torch
import torch.nn.functional as F


def train(model, train_loader, optimizer):
    for x, y in train_loader:
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        assert torch.isfinite(loss).all()
        loss.backward()
        optimizer.step()
    return loss.detach()
"""


def make_mlp_loop(module, size, device):
    """A few training steps of an MLP through the source's own `train` loop."""
    model = common.mlp(size["width"], size.get("depth", 4), 10, device)
    optimizer = common.sgd(model)
    loader = common.batches(size.get("steps", 4), size["batch"], (size["width"],), 10, device)
    return lambda: (module.train(model, loader, optimizer), common.state_summary(model))


CASES = [
    Case(
        name="tpl104_seed_assert",
        code="TPL104",
        title="seed 004 loss: assert target.max() < 10 vs torch._assert_async",
        bad=SEED_LOSS,
        fixes=("TPL104",),
        make=make_loss_step,
        sizes=LOSS_SIZES,
        smoke_sizes=LOSS_SMOKE_SIZES,
        tolerance=Tolerance(1e-5, 1e-6),
    ),
    Case(
        name="tpl104_isfinite_step",
        code="TPL104",
        title="assert torch.isfinite(loss).all() every step (MLP, 4 steps)",
        bad=FINITE_CHECK,
        fixes=("TPL104",),
        make=make_mlp_loop,
        # From launch-bound (the GPU needs ~0.1 ms of a 0.5 ms step) through balanced to GPU-bound.
        sizes=[
            {
                "label": "MLP 1024x4, batch 256",
                "regime": "launch-bound MLP 1024x4 b=256",
                "width": 1024,
                "batch": 256,
            },
            {
                "label": "MLP 1024x4, batch 1024",
                "regime": "balanced MLP 1024x4 b=1024",
                "width": 1024,
                "batch": 1024,
            },
            {
                "label": "MLP 4096x4, batch 1024",
                "regime": "GPU-bound MLP 4096x4 b=1024",
                "width": 4096,
                "batch": 1024,
            },
        ],
        smoke_sizes=[{"label": "MLP 16x4, batch 8", "width": 16, "batch": 8}],
        tolerance=Tolerance(1e-5, 1e-6),
    ),
]

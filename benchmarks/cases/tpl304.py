"""TPL304 loss-accumulation-keeps-graph: `total += loss` keeps every step's autograd graph alive."""

from __future__ import annotations

from ..harness import Case, Tolerance
from . import common

VALIDATION = """
import torch.nn.functional as F


def validate(model, val_loader):
    total = 0.0
    for x, y in val_loader:
        loss = F.cross_entropy(model(x), y)
        total += loss
    return total / len(val_loader)
"""

TRAINING = """
import torch.nn.functional as F


def train(model, train_loader, optimizer):
    running = 0.0
    for x, y in train_loader:
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        running += loss
    return running / len(train_loader)
"""


def make_validation(module, size, device):
    model = common.mlp(size["width"], 8, 10, device)
    loader = common.batches(size["batches"], size["batch"], (size["width"],), 10, device)
    return lambda: module.validate(model, loader)


def make_training(module, size, device):
    model = common.mlp(size["width"], 4, 10, device)
    optimizer = common.sgd(model)
    loader = common.batches(size["batches"], size["batch"], (size["width"],), 10, device)
    return lambda: (module.train(model, loader, optimizer), common.state_summary(model))


CASES = [
    Case(
        name="tpl304_validation_total",
        code="TPL304",
        title="validation loop summing graph-attached losses (MLP 4096x8): total += loss vs loss.detach()",
        bad=VALIDATION,
        fixes=("TPL304",),
        make=make_validation,
        # 16 batches of 1024: every batch's activations (8 layers x 1024 x 4096 floats) stay alive in the bad variant.
        sizes=[
            {
                "label": "16 batches of 1024x4096",
                "regime": "validation, GPU-bound MLP 4096x8 b=1024",
                "width": 4096,
                "batch": 1024,
                "batches": 16,
            }
        ],
        smoke_sizes=[{"label": "4 batches of 4x16", "width": 16, "batch": 4, "batches": 4}],
        tolerance=Tolerance(1e-6, 1e-7),
        memory=True,
    ),
    Case(
        name="tpl304_running_loss",
        code="TPL304",
        title="training loop with running += loss (MLP 1024x4, 32 steps) vs loss.detach()",
        bad=TRAINING,
        fixes=("TPL304",),
        make=make_training,
        sizes=[
            {
                "label": "32 steps of 256x1024",
                "regime": "training, launch-bound MLP 1024x4 b=256",
                "width": 1024,
                "batch": 256,
                "batches": 32,
            }
        ],
        smoke_sizes=[{"label": "4 steps of 4x16", "width": 16, "batch": 4, "batches": 4}],
        tolerance=Tolerance(1e-5, 1e-6),
        memory=True,
    ),
]

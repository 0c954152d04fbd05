"""End to end, seed 000: an anomaly-detection training step whose loss shuffles ~1e8 feature values with
torch.randperm on the CPU, before and after `torchperf-lint --fix --unsafe-fixes`."""

from __future__ import annotations

import torch

from ..harness import Case, Tolerance

BAD = '''
import torch
import torch.nn.functional as F
from torch import nn


class Encoder(nn.Module):
    """A small convolutional feature extractor (the anomaly model's backbone)."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 32, 3, padding=1)
        self.conv2 = nn.Conv2d(32, 96, 3, padding=1)

    def forward(self, x):
        return F.relu(self.conv2(F.relu(self.conv1(x))))


class ContrastLoss(nn.Module):
    """Seed 000's third loss: shuffle the elements of the normal and anomalous features, then compare."""

    def forward(self, norm, anom):
        num = norm.numel()
        norm = norm.reshape(-1)[torch.randperm(num)]
        anom = anom.reshape(-1)[torch.randperm(num)]
        return F.relu(1.0 - (norm - anom).abs()).mean()


def make_optimizer(model):
    return torch.optim.Adam(model.parameters(), lr=1e-4)


def train(model, criterion, optimizer, train_loader):
    for normal, anomalous in train_loader:
        optimizer.zero_grad(set_to_none=True)
        norm = model(normal.cuda(non_blocking=True))
        anom = model(anomalous.cuda(non_blocking=True))
        loss = criterion(norm, anom)
        loss.backward()
        optimizer.step()
    return loss.detach()
'''


def make_training(module, size, device):
    model = module.Encoder().to(device)
    criterion = module.ContrastLoss()
    optimizer = module.make_optimizer(model)
    shape = (size["batch"], 3, size["hw"], size["hw"])
    loader = [(torch.randn(shape), torch.randn(shape) + 0.5)]
    if device.type == "cuda":
        loader = [(x.pin_memory(), y.pin_memory()) for x, y in loader]
    return lambda: module.train(model, criterion, optimizer, loader)


CASES = [
    Case(
        name="seed000_randperm_loss",
        code="SEED000",
        title="seed 000 end to end: anomaly-model step with a randperm(1e8)-shuffled loss, before and after "
        "--fix --unsafe-fixes",
        bad=BAD,
        fixes=("TPL101", "TPL701", "TPL702"),
        select=None,
        make=make_training,
        # MVTec images at 256x256, 16 normal and 16 anomalous per step: 16 x 96 x 256 x 256 = 1.0e8 features each.
        sizes=[
            {
                "label": "1 step, 2x16x3x256x256, n=1.0e8",
                "regime": "the article's step: host randperm of 1e8 values",
                "batch": 16,
                "hw": 256,
            }
        ],
        smoke_sizes=[
            {
                "label": "1 step, 2x2x3x16x16, n=49152",
                "batch": 2,
                "hw": 16,
                "tolerance": Tolerance(
                    5e-2, 0.0, "the loss, a mean over n shuffled pairs (10 sigma at n=49152)"
                ),
            }
        ],
        tolerance=Tolerance(
            1e-2,
            0.0,
            "the loss, a mean over 1e8 randomly paired values: the CPU and GPU random "
            "streams differ, so the two variants agree statistically (1e-2 >> 1/sqrt(n))",
        ),
        publish=("TPL101",),
        note="all fixes of the file together (TPL101, TPL701, TPL702 by the fixer)",
    )
]

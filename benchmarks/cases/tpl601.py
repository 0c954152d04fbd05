"""TPL601 anomaly-detection-enabled: autograd anomaly mode left on in training code."""

from __future__ import annotations

from ..harness import Case, Tolerance
from . import common

BAD = """
import torch
import torch.nn.functional as F

torch.autograd.set_detect_anomaly(True)


def train(model, train_loader, optimizer):
    for x, y in train_loader:
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
    return loss.detach()
"""


def make_loop(module, size, device):
    if size["model"] == "mlp":
        model = common.mlp(1024, 8, 10, device)
        loader = common.batches(4, size["batch"], (1024,), 10, device)
    else:
        model = common.cifar_convnet().to(device)
        loader = common.batches(4, size["batch"], (3, 32, 32), 10, device)
    optimizer = common.sgd(model)
    return lambda: (module.train(model, loader, optimizer), common.state_summary(model))


CASES = [
    Case(
        name="tpl601_detect_anomaly",
        code="TPL601",
        title="4 train steps with torch.autograd.set_detect_anomaly(True) vs without",
        bad=BAD,
        fixes=("TPL601",),
        make=make_loop,
        sizes=[
            {
                "label": "MLP 1024x8, batch 256",
                "regime": "launch-bound MLP 1024x8 b=256",
                "model": "mlp",
                "batch": 256,
            },
            {
                "label": "CIFAR-10 convnet, batch 256",
                "regime": "CIFAR-10 convnet b=256",
                "model": "convnet",
                "batch": 256,
            },
        ],
        smoke_sizes=[
            {"label": "MLP 1024x8, batch 2", "model": "mlp", "batch": 2},
            {"label": "CIFAR-10 convnet, batch 2", "model": "convnet", "batch": 2},
        ],
        tolerance=Tolerance(1e-3, 1e-5),
        note="anomaly mode changes no arithmetic; cuDNN backward is not bitwise deterministic: tolerance 1e-3",
    )
]

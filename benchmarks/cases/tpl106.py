"""TPL106 blocking-host-to-device: `batch.to(device)` from pinned memory without non_blocking=True."""

from __future__ import annotations

from ..harness import Case, Tolerance
from . import common

BAD = """
import torch
import torch.nn.functional as F


def train(model, train_loader, optimizer, device):
    for images, labels in train_loader:
        images = images.to(device)
        labels = labels.to(device)
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(images), labels)
        loss.backward()
        optimizer.step()
    return loss.detach()
"""


def make_pinned_loop(module, size, device):
    """Batches in pinned host memory, as a DataLoader with pin_memory=True delivers them."""
    model = common.resnet18_sized().to(device)
    optimizer = common.sgd(model)
    loader = [
        (x.cpu(), y.cpu())
        for x, y in common.batches(2, size["batch"], (3, size["hw"], size["hw"]), 1000, device)
    ]
    if device.type == "cuda":
        loader = [(x.pin_memory(), y.pin_memory()) for x, y in loader]
    return lambda: (module.train(model, loader, optimizer, device), common.state_summary(model))


CASES = [
    Case(
        name="tpl106_pinned_copy",
        code="TPL106",
        title="ResNet-18-sized train steps fed from pinned memory: .to(device) vs non_blocking=True",
        bad=BAD,
        fixes=("TPL106",),
        make=make_pinned_loop,
        # 256 ImageNet images of 3x224x224 in fp32: a 154 MB batch.
        sizes=[{"label": "batch 256x3x224x224 (154 MB), 2 steps", "batch": 256, "hw": 224}],
        smoke_sizes=[{"label": "batch 2x3x32x32, 2 steps", "batch": 2, "hw": 32}],
        tolerance=Tolerance(1e-3, 1e-5),
        note="cuDNN convolution backward is not bitwise deterministic: tolerance 1e-3",
    )
]

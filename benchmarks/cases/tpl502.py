"""TPL502 dataloader-pin-memory: batches copied to the GPU from pageable memory."""

from __future__ import annotations

import torch

from ..harness import Case, Tolerance
from . import common

BAD = """
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def make_loader(dataset):
    return DataLoader(dataset, batch_size=64, num_workers=4, persistent_workers=True)


def train_epoch(model, loader, optimizer):
    for images, labels in loader:
        images = images.to(device, non_blocking=True)
        labels = labels.to(device, non_blocking=True)
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(images), labels)
        loss.backward()
        optimizer.step()
    return loss.detach()
"""


def make_epoch(module, size, device):
    images = torch.randn(size["items"], 3, size["hw"], size["hw"])
    labels = torch.randint(0, 1000, (size["items"],))
    loader = module.make_loader(torch.utils.data.TensorDataset(images, labels))
    model = (common.small_convnet() if size.get("model") == "small" else common.resnet18_sized()).to(device)
    optimizer = common.sgd(model)
    return lambda: (module.train_epoch(model, loader, optimizer), common.state_summary(model))


CASES = [
    Case(
        name="tpl502_pin_memory",
        code="TPL502",
        title="epoch of 8 ImageNet batches from 4 persistent workers: pin_memory off vs on",
        bad=BAD,
        fixes=("TPL502",),
        make=make_epoch,
        # ImageNet batches of 64 x 3x224x224 fp32: 38.5 MB per host-to-device copy, for a model whose step
        # costs the GPU about as much as the copy (small convnet) or several times more (ResNet-18-sized).
        sizes=[
            {
                "label": "8 batches of 64x3x224x224, small convnet",
                "regime": "copy-heavy: small convnet (0.5 GFLOP/image), 38.5 MB per batch",
                "items": 512,
                "hw": 224,
                "model": "small",
            },
            {
                "label": "8 batches of 64x3x224x224, ResNet-18-sized",
                "regime": "GPU-bound: ResNet-18-sized (3.6 GFLOP/image), 38.5 MB per batch",
                "items": 512,
                "hw": 224,
            },
        ],
        smoke_sizes=[{"label": "2 batches of 64x3x8x8", "items": 128, "hw": 8}],
        tolerance=Tolerance(1e-3, 1e-5),
        note="pinning only changes the copy; cuDNN backward is not bitwise deterministic: tolerance 1e-3",
    )
]

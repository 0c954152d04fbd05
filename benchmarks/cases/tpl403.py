"""TPL403 cudnn-benchmark-off (off by default): cuDNN heuristics instead of timed algorithm choice."""

from __future__ import annotations

from ..harness import Case, Tolerance
from . import common

BAD = '''
import torch
import torch.nn.functional as F
from torch import nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def block(c_in, c_out):
    return [nn.Conv2d(c_in, c_out, 3, padding=1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU(inplace=True)]


def make_model():
    """A VGG-style CIFAR-10 network of 3x3 convolutions."""
    return nn.Sequential(
        *block(3, 64), *block(64, 64), nn.MaxPool2d(2),
        *block(64, 128), *block(128, 128), nn.MaxPool2d(2),
        *block(128, 256), *block(256, 256), nn.AdaptiveAvgPool2d(1),
        nn.Flatten(), nn.Linear(256, 10),
    )


def train(model, train_loader, optimizer):
    for x, y in train_loader:
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
    return loss.detach()
'''


def make_vgg_loop(module, size, device):
    model = module.make_model().to(device)
    optimizer = common.sgd(model)
    loader = common.batches(2, size["batch"], (3, 32, 32), 10, device)
    return lambda: (module.train(model, loader, optimizer), common.state_summary(model))


CASES = [
    Case(
        name="tpl403_cudnn_benchmark",
        code="TPL403",
        title="VGG-style CIFAR-10 net, 2 train steps, fixed shapes: cudnn.benchmark off vs on",
        bad=BAD,
        fixes=("TPL403",),
        make=make_vgg_loop,
        sizes=[
            {"label": "batch 256x3x32x32", "regime": "CIFAR-10 VGG-style, fixed shapes, b=256", "batch": 256}
        ],  # a usual CIFAR-10 batch
        smoke_sizes=[{"label": "batch 2x3x32x32", "batch": 2}],
        tolerance=Tolerance(1e-3, 1e-5),
        note="autotuned and heuristic cuDNN algorithms round differently: tolerance 1e-3",
    )
]

"""TPL305 eval-without-no-grad: an evaluation loop that records autograd graphs nobody uses."""

from __future__ import annotations

from ..harness import Case, Tolerance
from . import common

BAD = """
import torch


def evaluate(model, val_loader):
    model.eval()
    correct = 0
    for images, labels in val_loader:
        logits = model(images)
        correct += (logits.argmax(1) == labels).sum()
    return correct.float()
"""

GOOD = """
import torch


def evaluate(model, val_loader):
    model.eval()
    correct = 0
    with torch.no_grad():
        for images, labels in val_loader:
            logits = model(images)
            correct += (logits.argmax(1) == labels).sum()
    return correct.float()
"""


def make_evaluate(module, size, device):
    model = common.resnet18_sized().to(device)
    loader = common.batches(4, size["batch"], (3, size["hw"], size["hw"]), 1000, device)
    return lambda: module.evaluate(model, loader)


CASES = [
    Case(
        name="tpl305_eval_convnet",
        code="TPL305",
        title="evaluate a ResNet-18-sized convnet on 4 batches: no torch.no_grad() vs with it",
        bad=BAD,
        good=GOOD,
        make=make_evaluate,
        sizes=[
            {
                "label": "4 batches of 128x3x224x224",
                "regime": "GPU-bound ResNet-18-sized evaluation b=128",
                "batch": 128,
                "hw": 224,
            }
        ],  # ImageNet evaluation
        smoke_sizes=[{"label": "4 batches of 2x3x32x32", "batch": 2, "hw": 32}],
        tolerance=Tolerance(0.0, 2.0, "number of correct predictions (of 512; a near-tie may flip)"),
        memory=True,
    )
]

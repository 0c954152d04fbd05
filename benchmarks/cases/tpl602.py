"""TPL602 profiler-in-training-code (off by default): torch.profiler wrapped around the step loop."""

from __future__ import annotations

from ..harness import Case, Tolerance
from . import common

BAD = """
import torch
import torch.nn.functional as F


def train(model, train_loader, optimizer):
    with torch.profiler.profile() as prof:
        for x, y in train_loader:
            optimizer.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            prof.step()
    return loss.detach()
"""

GOOD = """
import torch
import torch.nn.functional as F


def train(model, train_loader, optimizer):
    for x, y in train_loader:
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
    return loss.detach()
"""


def make_loop(module, size, device):
    model = common.mlp(size["width"], 4, 10, device)
    loader = common.batches(10, size["batch"], (size["width"],), 10, device)
    optimizer = common.sgd(model)
    return lambda: (module.train(model, loader, optimizer), common.state_summary(model))


CASES = [
    Case(
        name="tpl602_profiler",
        code="TPL602",
        title="10 MLP train steps inside torch.profiler.profile() vs without",
        bad=BAD,
        good=GOOD,
        make=make_loop,
        sizes=[
            {
                "label": "MLP 1024x4, batch 256",
                "regime": "launch-bound MLP 1024x4 b=256",
                "width": 1024,
                "batch": 256,
            }
        ],
        smoke_sizes=[{"label": "MLP 16x4, batch 4", "width": 16, "batch": 4}],
        tolerance=Tolerance(1e-5, 1e-6),
        note="time per call includes the profiler's start and its trace processing at exit",
    )
]

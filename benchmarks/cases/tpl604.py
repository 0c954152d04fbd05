"""TPL604 synchronize-in-step: torch.cuda.synchronize() / empty_cache() at every step."""

from __future__ import annotations

from ..harness import Case, Tolerance
from . import common

SYNCHRONIZE = """
import torch
import torch.nn.functional as F


def train(model, train_loader, optimizer):
    for x, y in train_loader:
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        torch.cuda.synchronize()
    return loss.detach()
"""

EMPTY_CACHE = SYNCHRONIZE.replace("torch.cuda.synchronize()", "torch.cuda.empty_cache()")

WITHOUT = SYNCHRONIZE.replace("        torch.cuda.synchronize()\n", "")


def make_loop(module, size, device):
    model = common.mlp(size["width"], 4, 10, device)
    loader = common.batches(8, size["batch"], (size["width"],), 10, device)
    optimizer = common.sgd(model)
    return lambda: (module.train(model, loader, optimizer), common.state_summary(model))


# From launch-bound (the host's launches take longer than the GPU's work) to GPU-bound.
SIZES = [
    {"label": "MLP 256x4, batch 64", "regime": "launch-bound MLP 256x4 b=64", "width": 256, "batch": 64},
    {"label": "MLP 1024x4, batch 1024", "regime": "balanced MLP 1024x4 b=1024", "width": 1024, "batch": 1024},
    {
        "label": "MLP 4096x4, batch 1024",
        "regime": "GPU-bound MLP 4096x4 b=1024",
        "width": 4096,
        "batch": 1024,
    },
]

CASES = [
    Case(
        name="tpl604_synchronize",
        code="TPL604",
        title="8 MLP train steps with torch.cuda.synchronize() per step vs without",
        bad=SYNCHRONIZE,
        good=WITHOUT,
        make=make_loop,
        sizes=SIZES,
        smoke_sizes=[{"label": "MLP 16x4, batch 4", "width": 16, "batch": 4}],
        tolerance=Tolerance(1e-5, 1e-6),
    ),
    Case(
        name="tpl604_empty_cache",
        code="TPL604",
        title="8 MLP train steps with torch.cuda.empty_cache() per step vs without",
        bad=EMPTY_CACHE,
        good=WITHOUT,
        make=make_loop,
        sizes=SIZES,
        smoke_sizes=[{"label": "MLP 16x4, batch 4", "width": 16, "batch": 4}],
        tolerance=Tolerance(1e-5, 1e-6),
    ),
]

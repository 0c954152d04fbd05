"""TPL307 model-moved-per-step: `model.to(device)` at every step of the loop, where the model is already on
the device, against the move once before the loop. The move is a Python walk over every parameter and
buffer of the module tree; no copy happens, so it matters only where the host's launch time is the step."""

from __future__ import annotations

import torch

from ..harness import Case, Tolerance
from . import common

BAD = """
import torch.nn.functional as F


def train(model, optimizer, batches, device):
    for x, y in batches:
        model.to(device)
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
    return loss.detach()
"""

# What the message asks for: the model moves once, before the loop.
GOOD = BAD.replace(
    "    for x, y in batches:\n        model.to(device)\n", "    model.to(device)\n    for x, y in batches:\n"
)
STEPS = 4  # per call: the steps of one loop


def make_moving_step(module, size, device):
    model = common.init_by_name(common.mlp(size["width"], size["depth"], 10, device))
    optimizer = common.sgd(model)
    batches = [
        (
            torch.randn(size["batch"], size["width"], device=device),
            torch.randint(0, 10, (size["batch"],), device=device),
        )
        for _ in range(STEPS)
    ]

    def step():
        loss = module.train(model, optimizer, batches, device)
        return loss, common.state_summary(model)

    return step


CASES = [
    Case(
        name="tpl307_model_moved_per_step",
        code="TPL307",
        title="4 MLP train steps with model.to(device) inside the step loop vs once before it",
        bad=BAD,
        good=GOOD,
        make=make_moving_step,
        sizes=[
            {
                "label": "MLP 256x32, batch 64",
                "regime": "launch-bound (32 small layers, 66 tensors)",
                "width": 256,
                "depth": 32,
                "batch": 64,
            },
            {
                "label": "MLP 4096x8, batch 4096",
                "regime": "GPU-bound (8 wide layers)",
                "width": 4096,
                "depth": 8,
                "batch": 4096,
            },
        ],
        smoke_sizes=[{"label": "MLP 16x4, batch 8", "width": 16, "depth": 4, "batch": 8}],
        tolerance=Tolerance(1e-5, 1e-6),
    ),
]

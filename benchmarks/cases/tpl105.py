"""TPL105 sync-in-forward: `if torch.isnan(h).any():` halfway through forward waits for the GPU."""

from __future__ import annotations

from ..harness import Case, Tolerance
from . import common

BAD = '''
import torch
from torch import nn


def stack(width, depth):
    layers = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.ReLU()]
    return nn.Sequential(*layers)


class CheckedMLP(nn.Module):
    """An MLP that checks its hidden activations for NaN halfway through forward."""

    def __init__(self, width, depth, classes):
        super().__init__()
        self.lower = stack(width, depth // 2)
        self.upper = stack(width, depth - depth // 2)
        self.head = nn.Linear(width, classes)

    def forward(self, x):
        h = self.lower(x)
        if torch.isnan(h).any():
            raise FloatingPointError("NaN in the hidden activations")
        return self.head(self.upper(h))
'''

# The check stays, on the device: torch._assert_async raises at the next sync instead of forcing one here.
GOOD = BAD.replace(
    """        if torch.isnan(h).any():
            raise FloatingPointError("NaN in the hidden activations")
""",
    """        torch._assert_async(~torch.isnan(h).any())
""",
)


def make_checked_step(module, size, device):
    model = module.CheckedMLP(size["width"], 8, 10).to(device)
    optimizer = common.sgd(model)
    x, y = common.batches(1, size["batch"], (size["width"],), 10, device)[0]
    return lambda: common.train_step(model, optimizer, x, y)


CASES = [
    Case(
        name="tpl105_nan_check",
        code="TPL105",
        title="MLP train step with `if torch.isnan(h).any(): raise` mid-forward vs torch._assert_async",
        bad=BAD,
        good=GOOD,
        make=make_checked_step,
        # From launch-bound (width 256, batch 64) to GPU-bound (width 4096, batch 1024): the sync costs most
        # when host and device time are balanced.
        sizes=[
            {"label": "MLP 256x8, batch 64", "width": 256, "batch": 64},
            {"label": "MLP 1024x8, batch 256", "width": 1024, "batch": 256},
            {"label": "MLP 4096x8, batch 1024", "width": 4096, "batch": 1024},
        ],
        smoke_sizes=[{"label": "MLP 16x8, batch 4", "width": 16, "batch": 4}],
        tolerance=Tolerance(1e-5, 1e-6),
    )
]

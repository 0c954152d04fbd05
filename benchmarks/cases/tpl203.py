"""TPL203 tensor-from-tensor-list: `torch.tensor([t.item() for t in ...])` syncs once per element."""

from __future__ import annotations

import torch

from ..harness import EXACT, Case

BAD = '''
import torch


def epoch_losses(step_losses):
    """The losses of every step of an epoch, gathered on the host for logging."""
    return torch.tensor([loss.item() for loss in step_losses])
'''

GOOD = '''
import torch


def epoch_losses(step_losses):
    """The losses of every step of an epoch, gathered on the host for logging."""
    return torch.stack(step_losses).cpu()
'''


def make_gather(module, size, device):
    losses = [torch.rand((), device=device) for _ in range(size["steps"])]
    return lambda: module.epoch_losses(losses)


CASES = [
    Case(
        name="tpl203_gather_losses",
        code="TPL203",
        title="per-step losses to the host: torch.tensor([l.item() ...]) vs torch.stack(...).cpu()",
        bad=BAD,
        good=GOOD,
        make=make_gather,
        # 100 and 1000 steps: an epoch of a small and of an ImageNet-sized (1251 steps at batch 1024) dataset.
        sizes=[
            {"label": "100 steps", "regime": "100 scalar syncs", "steps": 100},
            {"label": "1000 steps", "regime": "1000 scalar syncs", "steps": 1000},
        ],
        smoke_sizes=[{"label": "10 steps", "steps": 10}],
        tolerance=EXACT,
    )
]

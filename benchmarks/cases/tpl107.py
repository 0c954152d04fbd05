"""TPL107 sync-per-step (off by default): `loss.item()` every step of the training loop."""

from __future__ import annotations

from ..harness import Case, Tolerance
from . import common

BAD = """
import torch
import torch.nn.functional as F


def train(model, train_loader, optimizer):
    history = []
    for x, y in train_loader:
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        history.append(loss.item())
    return history
"""

# Keep the losses on the device and read them once, after the loop.
GOOD = BAD.replace("history.append(loss.item())", "history.append(loss.detach())").replace(
    "    return history\n", "    return torch.stack(history).tolist()\n"
)


def make_logged_loop(module, size, device):
    model = common.mlp(size["width"], 4, 10, device)
    optimizer = common.sgd(model)
    loader = common.batches(8, size["batch"], (size["width"],), 10, device)
    return lambda: module.train(model, loader, optimizer)


CASES = [
    Case(
        name="tpl107_item_per_step",
        code="TPL107",
        title="8 MLP train steps logging loss.item() every step vs once after the loop",
        bad=BAD,
        good=GOOD,
        make=make_logged_loop,
        sizes=[
            {
                "label": "MLP 256x4, batch 64",
                "regime": "launch-bound MLP 256x4 b=64",
                "width": 256,
                "batch": 64,
            },
            {
                "label": "MLP 1024x4, batch 256",
                "regime": "launch-bound MLP 1024x4 b=256",
                "width": 1024,
                "batch": 256,
            },
            {
                "label": "MLP 4096x4, batch 1024",
                "regime": "GPU-bound MLP 4096x4 b=1024",
                "width": 4096,
                "batch": 1024,
            },
        ],
        smoke_sizes=[{"label": "MLP 16x4, batch 4", "width": 16, "batch": 4}],
        tolerance=Tolerance(1e-5, 1e-6),
    )
]

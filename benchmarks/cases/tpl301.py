"""TPL301 zero-grad-without-set-to-none: zeroing 200 gradients every step instead of dropping them."""

from __future__ import annotations

from ..harness import Case, Tolerance
from . import common

BAD = """
import torch.nn.functional as F


def train(model, train_loader, optimizer):
    for x, y in train_loader:
        optimizer.zero_grad(set_to_none=False)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
    return loss.detach()
"""


def make_deep_loop(module, size, device):
    # 99 hidden layers and a head: 100 Linear layers, 200 parameter tensors.
    model = common.mlp(size["width"], 99, 10, device)
    optimizer = common.sgd(model)
    loader = common.batches(4, size["batch"], (size["width"],), 10, device)
    return lambda: (module.train(model, loader, optimizer), common.state_summary(model))


CASES = [
    Case(
        name="tpl301_zero_grad",
        code="TPL301",
        title="4 train steps of a 100-layer MLP (200 params): zero_grad(set_to_none=False) vs True",
        bad=BAD,
        fixes=("TPL301",),
        make=make_deep_loop,
        sizes=[
            {
                "label": "200 params, width 256, batch 64",
                "regime": "launch-bound 100-layer MLP, width 256 b=64",
                "width": 256,
                "batch": 64,
            },
            {
                "label": "200 params, width 1024, batch 256",
                "regime": "balanced 100-layer MLP, width 1024 b=256",
                "width": 1024,
                "batch": 256,
            },
        ],
        smoke_sizes=[{"label": "200 params, width 8, batch 4", "width": 8, "batch": 4}],
        tolerance=Tolerance(1e-5, 1e-6),
    )
]

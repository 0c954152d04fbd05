"""TPL702 unfused-optimizer: AdamW's default multi-tensor step vs fused=True (the fix) vs foreach=False."""

from __future__ import annotations

import torch
from torch import nn

from ..harness import Case, Tolerance

BAD = """
import torch


def configure(model, lr):
    model = model.cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    return model, optimizer
"""

# The slowest spelling, which TPL702 also flags: one kernel chain per parameter tensor.
FOR_LOOP = BAD.replace("weight_decay=0.01)", "weight_decay=0.01, foreach=False)")


def make_adamw_step(module, size, device):
    """96 Linear(1024, 1024): 100.8M parameters in 192 tensors (BERT-base has 110M), with random gradients."""
    model = nn.Sequential(
        *[nn.Linear(size["width"], size["width"], device=device) for _ in range(size["layers"])]
    )
    for parameter in model.parameters():
        parameter.grad = torch.randn_like(parameter) * 1e-3
    model, optimizer = module.configure(model, 1e-4)

    def step():
        optimizer.step()
        return model[0].weight.detach(), model[-1].bias.detach()

    return step


CASES = [
    Case(
        name="tpl702_adamw",
        code="TPL702",
        title="AdamW step over 100.8M params in 192 tensors: default (foreach) vs fused=True vs foreach=False",
        bad=BAD,
        fixes=("TPL702",),
        alternatives={"foreach_false": FOR_LOOP},
        comparisons=(("bad", "good"), ("foreach_false", "good"), ("foreach_false", "bad")),
        make=make_adamw_step,
        sizes=[
            {
                "label": "100.8M params, 192 tensors",
                "regime": "optimizer step alone, 100.8M params in 192 tensors",
                "width": 1024,
                "layers": 96,
            }
        ],
        smoke_sizes=[{"label": "0.2M params, 192 tensors", "width": 32, "layers": 96}],
        tolerance=Tolerance(1e-5, 1e-7, "first weight and last bias after one step"),
    )
]

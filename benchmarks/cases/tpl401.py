"""TPL401 conv-bias-before-batchnorm: a conv bias that the next BatchNorm subtracts again."""

from __future__ import annotations

import contextlib

import torch

from ..harness import Case, Tolerance
from . import common

BAD = """
import torch
from torch import nn


class ConvBN(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)
        self.bn = nn.BatchNorm2d(channels)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


def make_model(channels, depth):
    return nn.Sequential(*[ConvBN(channels) for _ in range(depth)])
"""


def make_blocks(module, size, device):
    # Same weights in both variants, whatever random numbers the biases drew during construction.
    model = common.init_by_name(module.make_model(64, 8)).to(device)
    optimizer = common.sgd(model)
    x = torch.randn(size["batch"], 64, size["hw"], size["hw"], device=device)
    precision = (
        torch.autocast(device.type, dtype=torch.bfloat16)
        if size["dtype"] == "bf16"
        else contextlib.nullcontext()
    )

    def step():
        optimizer.zero_grad(set_to_none=True)
        with precision:
            loss = model(x).float().square().mean()
        loss.backward()
        optimizer.step()
        return loss.detach(), model[0].conv.weight.detach()

    return step


CASES = [
    Case(
        name="tpl401_conv_bias_bn",
        code="TPL401",
        title="8 conv3x3+BN+ReLU blocks, train step: conv bias vs bias=False",
        bad=BAD,
        fixes=("TPL401",),
        make=make_blocks,
        # 64 channels at 56x56, batch 64: the shapes of ResNet-50's first stage.
        sizes=[
            {
                "label": "64x64x56x56 fp32",
                "regime": "GPU-bound conv-BN stack, fp32",
                "batch": 64,
                "hw": 56,
                "dtype": "fp32",
            },
            {
                "label": "64x64x56x56 bf16 autocast",
                "regime": "GPU-bound conv-BN stack, bf16 autocast",
                "batch": 64,
                "hw": 56,
                "dtype": "bf16",
                "tolerance": Tolerance(2e-2, 1e-3, "bf16: the bias is cancelled only up to rounding"),
            },
        ],
        smoke_sizes=[
            {"label": "2x64x8x8 fp32", "batch": 2, "hw": 8, "dtype": "fp32"},
            {
                "label": "2x64x8x8 bf16",
                "batch": 2,
                "hw": 8,
                "dtype": "bf16",
                "tolerance": Tolerance(2e-2, 1e-3, "bf16: the bias is cancelled only up to rounding"),
            },
        ],
        tolerance=Tolerance(
            1e-3, 1e-5, "loss and first conv weight after one step; BatchNorm cancels the bias"
        ),
    )
]

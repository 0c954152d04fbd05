"""TPL302 module-in-hot-path: modules built at every call (seed 004's nn.NLLLoss in its loss; a transformer
block's activation and dropout in forward)."""

from __future__ import annotations

import torch
from torch import nn

from ..harness import Case, Tolerance
from . import common
from .tpl102 import LOSS_SIZES, LOSS_SMOKE_SIZES, make_loss_step

BAD = """
import torch
import torch.nn.functional as F
from torch import nn


class CrossEntropyLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("weight", torch.Tensor([0.1] * 10))

    def forward(self, input, target):
        pred = F.log_softmax(input, dim=1)
        return nn.NLLLoss(self.weight)(pred, target)
"""

# Seed 004's "optimisation 5": create the loss module once, in __init__.
GOOD = """
import torch
import torch.nn.functional as F
from torch import nn


class CrossEntropyLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.nll = nn.NLLLoss(torch.Tensor([0.1] * 10))

    def forward(self, input, target):
        pred = F.log_softmax(input, dim=1)
        return self.nll(pred, target)
"""

BLOCKS = """
import torch
from torch import nn


class Block(nn.Module):
    \"\"\"A transformer MLP block that builds its activation and dropout at every call.\"\"\"

    def __init__(self, width):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.fc1 = nn.Linear(width, 4 * width)
        self.fc2 = nn.Linear(4 * width, width)

    def forward(self, x):
        h = nn.GELU()(self.fc1(self.norm(x)))
        return x + nn.Dropout(0.1)(self.fc2(h))


class Net(nn.Module):
    def __init__(self, width, depth, classes):
        super().__init__()
        self.blocks = nn.Sequential(*[Block(width) for _ in range(depth)])
        self.head = nn.Linear(width, classes)

    def forward(self, x):
        return self.head(self.blocks(x))
"""

# What the message asks for: create the modules once, in __init__.
BLOCKS_GOOD = BLOCKS.replace(
    """        self.fc2 = nn.Linear(4 * width, width)

    def forward(self, x):
        h = nn.GELU()(self.fc1(self.norm(x)))
        return x + nn.Dropout(0.1)(self.fc2(h))
""",
    """        self.fc2 = nn.Linear(4 * width, width)
        self.act = nn.GELU()
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        h = self.act(self.fc1(self.norm(x)))
        return x + self.drop(self.fc2(h))
""",
).replace(
    "that builds its activation and dropout at every call", "with its activation and dropout built once"
)


def make_block_step(module, size, device):
    """A training step of `depth` blocks over (batch, tokens, width); dropout draws the same numbers in
    both variants (the same calls in the same order)."""
    model = module.Net(size["width"], size["depth"], 10).to(device)
    optimizer = common.sgd(model)
    x = torch.randn(size["batch"], size["tokens"], size["width"], device=device)
    y = torch.randint(0, 10, (size["batch"] * size["tokens"],), device=device)

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss = nn.functional.cross_entropy(model(x).flatten(0, 1), y)
        loss.backward()
        optimizer.step()
        return loss.detach(), common.state_summary(model)

    return step


CASES = [
    Case(
        name="tpl302_seed_nll_module",
        code="TPL302",
        title="seed 004 loss: nn.NLLLoss(weight) built in forward vs once in __init__",
        bad=BAD,
        good=GOOD,
        make=make_loss_step,
        sizes=LOSS_SIZES,
        smoke_sizes=LOSS_SMOKE_SIZES,
        tolerance=Tolerance(1e-5, 1e-6),
    ),
    Case(
        name="tpl302_blocks",
        code="TPL302",
        title="train step of 8 transformer MLP blocks: nn.GELU() and nn.Dropout() built in forward vs in __init__",
        bad=BLOCKS,
        good=BLOCKS_GOOD,
        make=make_block_step,
        sizes=[
            {
                "label": "8 blocks d=256, batch 8x64 tokens",
                "regime": "launch-bound (8 blocks d=256, 512 tokens)",
                "width": 256,
                "depth": 8,
                "batch": 8,
                "tokens": 64,
            },
            {
                "label": "8 blocks d=512, batch 8x128 tokens",
                "regime": "balanced (8 blocks d=512, 1k tokens)",
                "width": 512,
                "depth": 8,
                "batch": 8,
                "tokens": 128,
            },
            {
                "label": "8 blocks d=1024, batch 16x128 tokens",
                "regime": "GPU-bound (8 blocks d=1024, 2k tokens)",
                "width": 1024,
                "depth": 8,
                "batch": 16,
                "tokens": 128,
            },
        ],
        smoke_sizes=[
            {"label": "8 blocks d=16, batch 2x4 tokens", "width": 16, "depth": 8, "batch": 2, "tokens": 4}
        ],
        tolerance=Tolerance(1e-5, 1e-6),
    ),
]

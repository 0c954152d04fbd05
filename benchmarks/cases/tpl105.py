"""TPL105 sync-in-forward: a condition on a tensor value in forward waits for the GPU (eager), and under
torch.compile also breaks the graph."""

from __future__ import annotations

import torch

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


COMPILED = """
import torch
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    \"\"\"A transformer MLP block that stops when its activations blow up.\"\"\"

    def __init__(self, width):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.fc1 = nn.Linear(width, 4 * width)
        self.fc2 = nn.Linear(4 * width, width)

    def forward(self, x):
        x = x + self.fc2(F.gelu(self.fc1(self.norm(x))))
        if x.abs().max().item() > 1e4:
            raise FloatingPointError("activations blew up")
        return x


class Net(nn.Module):
    def __init__(self, width, depth, classes):
        super().__init__()
        self.blocks = nn.Sequential(*[Block(width) for _ in range(depth)])
        self.head = nn.Linear(width, classes)

    def forward(self, x):
        return self.head(self.blocks(x))
"""

# The check stays, on the device, inside the graph: no sync and no graph break.
COMPILED_GOOD = COMPILED.replace(
    """        if x.abs().max().item() > 1e4:
            raise FloatingPointError("activations blew up")
""",
    """        torch._assert_async(x.abs().max() <= 1e4, "activations blew up")
""",
)


def make_compiled_step(module, size, device):
    """A training step of the torch.compile'd model (forward and backward compiled, the optimizer eager).
    The first call compiles: the harness reports it apart, and times the steps after warm-up."""
    model = module.Net(size["width"], size["depth"], 10).to(device)
    optimizer = common.sgd(model)
    compiled = torch.compile(model, backend=size.get("backend", "inductor"))
    x = torch.randn(size["batch"], size["tokens"], size["width"], device=device)
    y = torch.randint(0, 10, (size["batch"] * size["tokens"],), device=device)

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(compiled(x).flatten(0, 1), y)
        loss.backward()
        optimizer.step()
        return loss.detach(), common.state_summary(model)

    return step


# The detector's strides and letterbox padding kept as buffers (they follow the model to the GPU): each is
# then a 0-dim CUDA tensor where Python needs a number. Per level a clamp_ bound and two slice bounds, and four
# int() for F.pad: 13 syncs per step. The good variant is the detection source itself, its Python ints kept
# beside the tensors.
DEVICE_SCALARS = common.edited(
    common.DETECTION,
    (
        "        self.pad = [0, border, 0, border]\n",
        '        self.register_buffer("pad", torch.tensor([0, border, 0, border]))\n',
    ),
    ("F.pad(images, self.pad)", "F.pad(images, [int(v) for v in self.pad])"),
    (
        "        self.strides = tuple(strides)\n",
        '        self.register_buffer("strides", torch.tensor(strides))\n',
    ),
)


CASES = [
    Case(
        name="tpl105_nan_check",
        code="TPL105",
        title="MLP train step with `if torch.isnan(h).any(): raise` mid-forward vs torch._assert_async",
        bad=BAD,
        good=GOOD,
        make=make_checked_step,
        # From launch-bound (width 256, batch 64) through balanced (about 1 ms of GPU work for about 1 ms of
        # Python) to GPU-bound (width 4096, batch 1024): the sync costs most when the two are balanced.
        sizes=[
            {
                "label": "MLP 256x8, batch 64",
                "regime": "eager, launch-bound MLP 256x8 b=64",
                "width": 256,
                "batch": 64,
            },
            {
                "label": "MLP 1024x8, batch 1024",
                "regime": "eager, balanced MLP 1024x8 b=1024",
                "width": 1024,
                "batch": 1024,
            },
            {
                "label": "MLP 4096x8, batch 1024",
                "regime": "eager, GPU-bound MLP 4096x8 b=1024",
                "width": 4096,
                "batch": 1024,
            },
        ],
        smoke_sizes=[{"label": "MLP 16x8, batch 4", "width": 16, "batch": 4}],
        tolerance=Tolerance(1e-5, 1e-6),
    ),
    Case(
        name="tpl105_compiled_blocks",
        code="TPL105",
        title="torch.compile'd train step, 6 transformer MLP blocks with `if x.abs().max().item() > 1e4: raise` "
        "vs torch._assert_async",
        bad=COMPILED,
        good=COMPILED_GOOD,
        make=make_compiled_step,
        first_call=True,
        # The bad model compiles into 7 graphs (a break at each .item()) and syncs 6 times per step; the good
        # one into one graph. Small and large steps: the breaks and syncs cost what the host cannot hide.
        sizes=[
            {
                "label": "6 blocks d=512, batch 64x128 tokens",
                "regime": "compiled, ~15 ms step (6 blocks d=512, 8k tokens)",
                "width": 512,
                "depth": 6,
                "batch": 64,
                "tokens": 128,
            },
            {
                "label": "6 blocks d=1024, batch 512x128 tokens",
                "regime": "compiled, GPU-bound ~0.4 s step (6 blocks d=1024, 64k tokens)",
                "width": 1024,
                "depth": 6,
                "batch": 512,
                "tokens": 128,
            },
        ],
        # The smoke run traces with dynamo (graph breaks included) but leaves out inductor's code generation.
        smoke_sizes=[
            {
                "label": "6 blocks d=16, batch 2x4 tokens",
                "width": 16,
                "depth": 6,
                "batch": 2,
                "tokens": 4,
                "backend": "eager",
            }
        ],
        tolerance=Tolerance(1e-4, 1e-5, "loss and weights; the two compilations fuse differently"),
        note="first call = compilation (cold inductor cache on a fresh machine); time = steady-state steps",
    ),
    Case(
        name="tpl105_detector_device_scalars",
        code="TPL105",
        title="detector training step whose strides and padding are 0-dim CUDA tensors (clamp_ bound, slice "
        "bounds, F.pad amounts: 13 syncs) vs Python ints kept beside them",
        bad=DEVICE_SCALARS,
        good=common.DETECTION,
        make=common.make_detection_step,
        sizes=common.DETECTION_SIZES,
        smoke_sizes=common.DETECTION_SMOKE_SIZES,
        tolerance=common.DETECTION_TOLERANCE,
        # a gain of some percent beside the step's noise: more samples, in both orders
        sampling_s=6.0,
        rounds=2,
    ),
]

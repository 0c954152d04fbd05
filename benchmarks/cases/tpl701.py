"""TPL701 fp32-training: full-fp32 matmuls (no tensor cores) vs TF32 (the fix) vs bf16 autocast."""

from __future__ import annotations

from ..harness import Case, Tolerance
from . import common

BAD = """
import torch
import torch.nn.functional as F

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def train(model, train_loader, optimizer):
    for x, y in train_loader:
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
    return loss.detach()
"""

# The other remedy the message names: bf16 autocast around forward and loss.
BF16 = BAD.replace(
    "        loss = F.cross_entropy(model(x), y)\n",
    "        with torch.autocast(device.type, dtype=torch.bfloat16):\n"
    "            loss = F.cross_entropy(model(x), y)\n",
)


def make_loop(module, size, device):
    if size["model"] == "mlp":
        model = common.mlp(size["width"], 8, 10, device)
        loader = common.batches(2, size["batch"], (size["width"],), 10, device)
    else:
        model = common.cifar_convnet().to(device)
        loader = common.batches(2, size["batch"], (3, 32, 32), 10, device)
    optimizer = common.sgd(model)
    return lambda: module.train(model, loader, optimizer)


CASES = [
    Case(
        name="tpl701_fp32_training",
        code="TPL701",
        title="2 train steps in fp32 vs TF32 (set_float32_matmul_precision) vs bf16 autocast",
        bad=BAD,
        fixes=("TPL701",),
        alternatives={"bf16": BF16},
        comparisons=(("bad", "good"), ("bad", "bf16")),
        make=make_loop,
        sizes=[
            {
                "label": "MLP 4096x8, batch 4096",
                "regime": "matmul-bound MLP 4096x8 b=4096",
                "model": "mlp",
                "width": 4096,
                "batch": 4096,
            },
            {
                "label": "CIFAR-10 convnet, batch 512",
                "regime": "conv, memory-bound CIFAR-10 convnet b=512",
                "model": "convnet",
                "batch": 512,
            },
        ],
        smoke_sizes=[
            {"label": "MLP 32x8, batch 2", "model": "mlp", "width": 32, "batch": 2},
            {"label": "CIFAR-10 convnet, batch 2", "model": "convnet", "batch": 2},
        ],
        tolerance={
            "good": Tolerance(1e-2, 1e-3, "loss after the second step; TF32 rounds matmul inputs to 10 bits"),
            "bf16": Tolerance(5e-2, 1e-2, "loss after the second step; bf16 keeps 8 bits of mantissa"),
        },
    )
]

"""TPL703 step-not-compiled: the same training steps run eagerly (bad) and with the model under
`torch.compile` (good: what the message asks for; TPL703 has no automatic fix), on one GPU.

Two models in the regimes where the issue measured it: a GPT-2-small-sized transformer (124M parameters,
8x1024 tokens, bf16 autocast, fused AdamW) and a ResNet-18-sized convnet (bf16 autocast, channels_last,
batch 128 at 224x224). The first call compiles (forward and backward graphs; the optimizer stays eager): the
harness reports it apart as the start-up cost, and times the steps after warm-up. One call is 2 steps. The
check: loss and weights after the first call (inductor's fused kernels round differently from eager's).
The smoke run compiles with the `eager` backend (dynamo's tracing without inductor's code generation).
"""

from __future__ import annotations

import torch

from ..harness import Case, Tolerance
from . import common

STEPS = 2

BAD = """
import torch
import torch.nn.functional as F


def prepare(model, backend):
    return model


def train_steps(model, optimizer, batches):
    for x, y in batches:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type="cuda" if x.is_cuda else "cpu", dtype=torch.bfloat16):
            out = model(x)
        loss = F.cross_entropy(out.float().flatten(0, -2), y.flatten())
        loss.backward()
        optimizer.step()
    return loss.detach()
"""

GOOD = BAD.replace(
    """def prepare(model, backend):
    return model""",
    """def prepare(model, backend):
    return torch.compile(model, backend=backend)""",
)


def make_step(module, size, device):
    if size["model"] == "gpt":
        model = common.TinyGPT(size["vocab"], size["width"], size["depth"], size["heads"], size["tokens"])
        model = model.to(device)
        shape = (size["batch"], size["tokens"])
        batches = [
            (
                torch.randint(0, size["vocab"], shape, device=device),
                torch.randint(0, size["vocab"], shape, device=device),
            )
            for _ in range(STEPS)
        ]
    else:
        model = common.resnet18_sized(size["classes"]).to(device, memory_format=torch.channels_last)
        image = (size["batch"], 3, size["image"], size["image"])
        batches = [
            (
                torch.randn(*image, device=device).contiguous(memory_format=torch.channels_last),
                torch.randint(0, size["classes"], (size["batch"],), device=device),
            )
            for _ in range(STEPS)
        ]
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=device.type == "cuda")
    prepared = module.prepare(model, size.get("backend", "inductor"))

    def step():
        loss = module.train_steps(prepared, optimizer, batches)
        return loss, common.state_summary(model)

    return step


CASES = [
    Case(
        name="tpl703_compiled_step",
        code="TPL703",
        title="training step eager vs under torch.compile (first call = compilation, reported apart)",
        bad=BAD,
        good=GOOD,
        make=make_step,
        first_call=True,
        sizes=[
            {
                "label": "GPT-2-small-sized, 8x1024 tokens, bf16",
                "regime": "transformer 124M params, bf16 autocast, fused AdamW",
                "model": "gpt",
                "vocab": 50304,
                "width": 768,
                "depth": 12,
                "heads": 12,
                "batch": 8,
                "tokens": 1024,
            },
            {
                "label": "ResNet-18-sized, batch 128 at 224x224, bf16 channels_last",
                "regime": "convnet 11M params, bf16 autocast, channels_last, fused AdamW",
                "model": "resnet",
                "classes": 1000,
                "batch": 128,
                "image": 224,
            },
        ],
        smoke_sizes=[
            {
                "label": "2 layers d=16, 2x8 tokens",
                "model": "gpt",
                "vocab": 64,
                "width": 16,
                "depth": 2,
                "heads": 2,
                "batch": 2,
                "tokens": 8,
                "backend": "eager",
            },
            {
                "label": "ResNet-18-sized, batch 2 at 32x32",
                "model": "resnet",
                "classes": 10,
                "batch": 2,
                "image": 32,
                "backend": "eager",
            },
        ],
        tolerance=Tolerance(
            2e-2, 2e-3, "loss and weights after 2 AdamW steps; compiled kernels round differently"
        ),
        note="first call = compilation (cold inductor cache on a fresh machine); time = steady-state steps",
    )
]

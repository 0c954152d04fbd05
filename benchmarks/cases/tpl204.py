"""TPL204 per-parameter-loop: an EMA teacher updated by a loop over its parameters beside a ViT training step,
and gradient clipping written as a loop with `.item()` per parameter, against their multi-tensor forms."""

from __future__ import annotations

import copy

import torch
from torch import nn

from ..harness import Case, Tolerance

# DINO/iBOT/MoCo v3's momentum teacher: one multiply and one add per tensor, every step.
EMA_BAD = """
import torch
import torch.nn.functional as F


@torch.no_grad()
def ema_update(teacher, student, momentum):
    for p_t, p_s in zip(teacher.parameters(), student.parameters()):
        p_t.mul_(momentum).add_(p_s.detach(), alpha=1 - momentum)


def train(student, teacher, batches, optimizer, momentum=0.996):
    for images, labels in batches:
        with torch.autocast(images.device.type, dtype=torch.bfloat16):
            loss = F.cross_entropy(student(images), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        ema_update(teacher, student, momentum)
    return loss.detach(), [p.detach() for p in teacher.parameters()][:4]
"""

# A global-norm clip written by hand: one norm, one `.item()` (a host sync) and one multiply per tensor.
CLIP_BAD = """
import torch
import torch.nn.functional as F


def clip_gradients(model, max_norm):
    total = 0.0
    for p in model.parameters():
        if p.grad is not None:
            total += p.grad.norm(2).item() ** 2
    total = total**0.5
    coef = max_norm / (total + 1e-6)
    if coef < 1:
        for p in model.parameters():
            if p.grad is not None:
                p.grad.mul_(coef)
    return total


def train(model, batches, optimizer, max_norm=0.5):
    for images, labels in batches:
        with torch.autocast(images.device.type, dtype=torch.bfloat16):
            loss = F.cross_entropy(model(images), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        clip_gradients(model, max_norm)
        optimizer.step()
    return loss.detach(), [p.detach() for p in model.parameters()][:4]
"""

CLIP_GOOD = """
import torch
import torch.nn.functional as F


def train(model, batches, optimizer, max_norm=0.5):
    for images, labels in batches:
        with torch.autocast(images.device.type, dtype=torch.bfloat16):
            loss = F.cross_entropy(model(images), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm, foreach=True)
        optimizer.step()
    return loss.detach(), [p.detach() for p in model.parameters()][:4]
"""


class ViT(nn.Module):
    """A ViT of timm's shapes (pre-norm blocks, GELU MLP of 4x width, class token, learned positions):
    ViT-S/16 is width 384, 6 heads; ViT-B/16 width 768, 12 heads; 12 blocks, 152 parameter tensors."""

    def __init__(self, width: int, heads: int, depth: int = 12, image: int = 224, patch: int = 16):
        super().__init__()
        self.patch_embed = nn.Conv2d(3, width, patch, patch)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, width))
        self.pos_embed = nn.Parameter(torch.randn(1, (image // patch) ** 2 + 1, width) * 0.02)
        layer = nn.TransformerEncoderLayer(
            width, heads, 4 * width, dropout=0.0, activation="gelu", batch_first=True, norm_first=True
        )
        self.blocks = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, 1000)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patch_embed(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(len(x), -1, -1), x], dim=1) + self.pos_embed
        return self.head(self.norm(self.blocks(x))[:, 0])


LR = 1e-4
# Adam normalises each gradient element, so an element whose gradient is near zero moves by about +-LR whatever its
# size: a float sum taken in another order (the fix's norm, on the device in fp32, against the host's fp64) can flip
# its sign and move that parameter by 2 LR per step. The largest size runs 4 steps: 8e-4 at most.
ADAM_STEPS_TOLERANCE = Tolerance(
    1e-4,
    2 * LR * 4 + 1e-5,
    what="the loss and the first parameters after the steps; an AdamW step can move a "
    "near-zero-gradient element by 2 lr when a reordered sum flips its sign",
)


def _setup(size, device):
    model = ViT(size["width"], size["heads"], size.get("depth", 12), size["image"], size.get("patch", 16))
    model = model.to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR)
    batches = [
        (
            torch.randn(size["batch"], 3, size["image"], size["image"], device=device),
            torch.randint(0, 1000, (size["batch"],), device=device),
        )
        for _ in range(size["steps"])
    ]
    return model, optimizer, batches


def make_ema(module, size, device):
    student, optimizer, batches = _setup(size, device)
    teacher = copy.deepcopy(student).requires_grad_(False)
    return lambda: module.train(student, teacher, batches, optimizer)


def make_clip(module, size, device):
    model, optimizer, batches = _setup(size, device)
    return lambda: module.train(model, batches, optimizer)


_SIZES = [
    # A long step: the GPU works ~20-40 ms per step, long enough to hide the loop's launches behind it.
    {
        "label": "ViT-S/16 (152 tensors), batch 64, bf16 autocast, 2 steps",
        "regime": "ViT-S training step, bf16 autocast b=64",
        "width": 384,
        "heads": 6,
        "image": 224,
        "batch": 64,
        "steps": 2,
    },
    # Short steps over many small tensors: the regime where a loop of per-tensor kernels costs most, since the
    # host's launches, not the GPU's arithmetic, set the pace (small models, RL and fine-tuning steps).
    {
        "label": "ViT-Ti/8 (152 tensors), 64x64 images, batch 32, bf16 autocast, 4 steps",
        "regime": "short ViT-Ti steps, 152 small tensors, b=32",
        "width": 192,
        "heads": 3,
        "image": 64,
        "patch": 8,
        "batch": 32,
        "steps": 4,
    },
    {
        "label": "24-block ViT, width 128 (296 tensors), 32x32 images, batch 16, bf16 autocast, 4 steps",
        "regime": "short steps of a deep narrow ViT, 296 small tensors, b=16",
        "width": 128,
        "heads": 4,
        "depth": 24,
        "image": 32,
        "patch": 4,
        "batch": 16,
        "steps": 4,
    },
]
_SMOKE = [
    {
        "label": "2-block ViT, width 32, 32x32 images",
        "width": 32,
        "heads": 2,
        "depth": 2,
        "image": 32,
        "batch": 2,
        "steps": 2,
    }
]

CASES = [
    Case(
        name="tpl204_ema_teacher",
        code="TPL204",
        title="ViT training steps with an EMA teacher: a loop of mul_/add_ per tensor vs one _foreach_lerp_",
        bad=EMA_BAD,
        fixes=("TPL204",),
        make=make_ema,
        sizes=_SIZES,
        smoke_sizes=_SMOKE,
        # lerp rounds differently from a multiply and an add (teacher only: the student's steps are the same)
        tolerance=Tolerance(1e-4, 1e-5),
        # a gain of ~5% beside launch-bound steps that vary by as much from call to call: more samples, timed
        # bad, good, good, bad so that a drifting host favours neither
        sampling_s=6.0,
        rounds=2,
    ),
    Case(
        name="tpl204_clip_item",
        code="TPL204",
        title="ViT training steps with a global-norm clip: a loop with .item() per tensor vs clip_grad_norm_",
        bad=CLIP_BAD,
        good=CLIP_GOOD,
        make=make_clip,
        sizes=_SIZES,
        smoke_sizes=_SMOKE,
        # the hand-written norm sums squares in float64 on the host, clip_grad_norm_ in float32 on the device
        tolerance=ADAM_STEPS_TOLERANCE,
        sampling_s=6.0,
        rounds=2,
    ),
]

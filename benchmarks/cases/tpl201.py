"""TPL201 loop-over-tensor-dim: a Python loop launching kernels per row instead of one batched op."""

from __future__ import annotations

import torch

from ..harness import EXACT, Case, Tolerance
from . import common

QUANTIZE = '''
import torch
from torch import nn


class Quantize(nn.Module):
    """Seed 000: map every activation to one of `levels` intensity levels, one row at a time."""

    def __init__(self, levels):
        super().__init__()
        self.register_buffer("edges", torch.linspace(-3, 3, levels - 1))

    def forward(self, x):
        codes = torch.empty_like(x, dtype=torch.long)
        for i in range(x.shape[0]):
            codes[i] = (x[i].unsqueeze(-1) > self.edges).sum(-1)
        return codes
'''

# Seed 000's own fix: one vectorised call (bucketize counts the edges below each value).
QUANTIZE_GOOD = '''
import torch
from torch import nn


class Quantize(nn.Module):
    """Seed 000: map every activation to one of `levels` intensity levels."""

    def __init__(self, levels):
        super().__init__()
        self.register_buffer("edges", torch.linspace(-3, 3, levels - 1))

    def forward(self, x):
        return torch.bucketize(x, self.edges)
'''

PER_HEAD = '''
import torch
from torch import nn


class Scores(nn.Module):
    """Attention scores computed head by head."""

    def forward(self, q, k):
        scores = torch.empty(q.shape[0], q.shape[1], k.shape[1], device=q.device)
        for h in range(q.shape[0]):
            scores[h] = q[h] @ k[h].transpose(0, 1)
        return scores
'''

PER_HEAD_GOOD = '''
import torch
from torch import nn


class Scores(nn.Module):
    """Attention scores of every head in one batched matmul."""

    def forward(self, q, k):
        return torch.bmm(q, k.transpose(1, 2))
'''


# The per-image loop of many detection losses: each image's targets picked out of the batch's with a boolean
# mask, five selections per image and level, each a nonzero() whose size the host must wait for.
DETECTOR_MASK_LOOP = common.edited(
    common.DETECTION,
    (
        """            xy = centres * self.content / stride
            wh = sizes * self.content / stride
            cells = xy.long().clamp_(0, inside - 1)
            raw = p[image, cells[:, 1], cells[:, 0]]
            boxes = torch.cat([xy - cells, wh], 1)
            per_target = weights * (
                1.0
                - giou(decode(raw[:, :4], anchors), boxes)
                + F.cross_entropy(raw[:, 5:], labels, reduction="none")
            )
            totals = p.new_zeros(batch).index_add_(0, image, per_target)
            weight_sums = p.new_zeros(batch).index_add_(0, image, weights)
            box_cls = box_cls + (totals / weight_sums).sum()
            present[image, cells[:, 1], cells[:, 0]] = 1.0
""",
        """            for b in range(p.shape[0]):
                mask = image == b
                xy = centres[mask] * self.content / stride
                wh = sizes[mask] * self.content / stride
                cls = labels[mask]
                anchor = anchors[mask]
                weight = weights[mask]
                cells = xy.long().clamp_(0, inside - 1)
                raw = p[b, cells[:, 1], cells[:, 0]]
                boxes = torch.cat([xy - cells, wh], 1)
                per_target = weight * (
                    1.0
                    - giou(decode(raw[:, :4], anchor), boxes)
                    + F.cross_entropy(raw[:, 5:], cls, reduction="none")
                )
                box_cls = box_cls + per_target.sum() / weight.sum()
                present[b, cells[:, 1], cells[:, 0]] = 1.0
""",
    ),
)

# The objectness of every cell but the ignored ones, selected once per step with a boolean mask: the
# ordinary dynamic-shape cost of many losses, one sync per step, which TPL201 does not report.
DETECTOR_ONE_MASK = common.edited(
    common.DETECTION,
    (
        "torch.where(keep, objectness, 0.0).sum() / keep.sum()",
        "objectness[keep].mean()",
    ),
)


def make_quantize(module, size, device):
    quantize = module.Quantize(16).to(device)
    x = torch.randn(size["rows"], size["cols"], device=device)
    return lambda: quantize(x)


def make_scores(module, size, device):
    scores = module.Scores()
    q = torch.randn(size["heads"], size["seq"], 64, device=device)
    k = torch.randn(size["heads"], size["seq"], 64, device=device)
    return lambda: scores(q, k)


CASES = [
    Case(
        name="tpl201_seed_quantize",
        code="TPL201",
        title="seed 000 quantisation: loop over rows vs torch.bucketize",
        bad=QUANTIZE,
        good=QUANTIZE_GOOD,
        make=make_quantize,
        # 4096 rows of 256 features: a 64x64 feature map with 256 channels, row by pixel.
        sizes=[{"label": "4096x256", "regime": "Python loop over 4096 rows", "rows": 4096, "cols": 256}],
        smoke_sizes=[{"label": "16x8", "rows": 16, "cols": 8}],
        tolerance=EXACT,
    ),
    Case(
        name="tpl201_per_head_matmul",
        code="TPL201",
        title="attention scores: loop of 512 matmuls vs one torch.bmm",
        bad=PER_HEAD,
        good=PER_HEAD_GOOD,
        make=make_scores,
        # 512 = 8 sequences x 64 heads (head dim 64, 128 tokens), as in a BERT-large-sized attention layer.
        sizes=[
            {
                "label": "512 heads x 128x64",
                "regime": "Python loop of 512 small matmuls (launch-bound)",
                "heads": 512,
                "seq": 128,
            }
        ],
        smoke_sizes=[{"label": "4 heads x 8x64", "heads": 4, "seq": 8}],
        tolerance=Tolerance(1e-4, 1e-4),
        note="fp32 matmuls (TF32 off, PyTorch's default): mm and bmm kernels round differently",
    ),
    Case(
        name="tpl201_detector_mask_loop",
        code="TPL201",
        title="detector training step, loss looping over images and levels with 5 boolean-mask selections "
        "each vs the same gathers once for the batch (index_add_ per image)",
        bad=DETECTOR_MASK_LOOP,
        good=common.DETECTION,
        make=common.make_detection_step,
        # 16 images x 3 levels = 48 iterations, 240 mask selections (a sync each) and dozens of small kernels
        # per iteration, forward and backward.
        sizes=common.DETECTION_SIZES,
        smoke_sizes=common.DETECTION_SMOKE_SIZES,
        tolerance=common.DETECTION_TOLERANCE,
    ),
    Case(
        name="tpl201_detector_one_mask",
        code="TPL201",
        title="detector training step with one boolean-mask selection per step (objectness[keep].mean()) "
        "vs torch.where: not reported",
        bad=DETECTOR_ONE_MASK,
        good=common.DETECTION,
        make=common.make_detection_step,
        sizes=common.DETECTION_SIZES,
        smoke_sizes=common.DETECTION_SMOKE_SIZES,
        tolerance=common.DETECTION_TOLERANCE,
        reported=False,
        note="one sync per step, not reported by TPL201: the control for its per-item loops",
        # a small gain beside the step's noise: more samples, in both orders
        sampling_s=6.0,
        rounds=2,
    ),
]

"""TPL402 data-parallel: nn.DataParallel (one process drives both GPUs) vs DistributedDataParallel (one
process per GPU), the same model, global batch and optimizer, on two GPUs.

The bad variant runs in the harness's process and DataParallel scatters each global batch over GPUs 0 and 1.
The good variant runs as two processes (benchmarks/distributed.py, NCCL, NVLink multicast off); each takes
its half of the same global batch, as a DistributedSampler would hand it out. Both are timed on GPU 0 (DDP:
rank 0, whose steps end after the gradient all-reduce), 4 steps per call. The check: the weights after the
first 4 steps from the same initial weights (fp32, full-precision matmuls). On fewer than two GPUs the case is skipped; the smoke run checks the
same code as two CPU processes on the gloo backend.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from ..harness import Case, Tolerance, allclose
from . import common

STEPS = 4  # per call: at least 5 samples after warm-up make a few dozen steps per variant

BAD = """
import torch
import torch.nn.functional as F
from torch import nn


def wrap(model):
    return nn.DataParallel(model, device_ids=[0, 1])


def train_step(model, optimizer, tokens, labels):
    optimizer.zero_grad(set_to_none=True)
    loss = F.cross_entropy(model(tokens).flatten(0, 1), labels.flatten())
    loss.backward()
    optimizer.step()
    return loss.detach()
"""

# TPL402 has no automatic fix: the message asks for DistributedDataParallel, one process per GPU (the
# process group is started by benchmarks/distributed.py, as torchrun would start it).
GOOD = """
import torch
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel


def wrap(model):
    device = next(model.parameters()).device
    return DistributedDataParallel(model, device_ids=[device] if device.type == "cuda" else None)


def train_step(model, optimizer, tokens, labels):
    optimizer.zero_grad(set_to_none=True)
    loss = F.cross_entropy(model(tokens).flatten(0, 1), labels.flatten())
    loss.backward()
    optimizer.step()
    return loss.detach()
"""


def make_parallel_step(module, size, device):
    """`steps` training steps on this process's share of the global batch: all of it under DataParallel
    (which scatters it), half of it on each DistributedDataParallel rank."""
    rank, world = (dist.get_rank(), dist.get_world_size()) if dist.is_initialized() else (0, 1)
    model = module.wrap(common.token_mlp(size["width"], size["depth"], 10).to(device))
    optimizer = common.sgd(model)
    shape = (size["batch"], size["tokens"])
    tokens = torch.randn(*shape, size["width"]).chunk(world)[rank].to(device)
    labels = torch.randint(0, 10, shape).chunk(world)[rank].to(device)

    def steps():
        for _ in range(STEPS):
            loss = module.train_step(model, optimizer, tokens, labels)
        return loss, common.state_summary(model)

    return steps


def compare_weights(reference, result, tol):
    """The weights only: DataParallel's loss is over the global batch, a DDP rank's over its half."""
    return allclose(reference[1:], result[1:], tol)


CASES = [
    Case(
        name="tpl402_data_parallel",
        code="TPL402",
        title="transformer MLP blocks on 2 GPUs, same global batch: nn.DataParallel vs DistributedDataParallel",
        bad=BAD,
        good=GOOD,
        make=make_parallel_step,
        gpus=2,
        distributed=("good",),
        sizes=[
            {
                "label": "4 steps, 4 blocks d=512, global batch 16x128 tokens",
                "regime": "2 GPUs, launch-bound: 4 blocks d=512 (8M params), 2k tokens",
                "width": 512,
                "depth": 4,
                "batch": 16,
                "tokens": 128,
            },
            {
                "label": "4 steps, 8 blocks d=1024, global batch 32x128 tokens",
                "regime": "2 GPUs, GPU-bound: 8 blocks d=1024 (67M params), 4k tokens",
                "width": 1024,
                "depth": 8,
                "batch": 32,
                "tokens": 128,
            },
            {
                "label": "4 steps, 8 blocks d=2048, global batch 32x256 tokens",
                "regime": "2 GPUs, GPU-bound, large: 8 blocks d=2048 (268M params), 8k tokens",
                "width": 2048,
                "depth": 8,
                "batch": 32,
                "tokens": 256,
            },
        ],
        smoke_sizes=[
            {
                "label": "4 steps, 2 blocks d=16, global batch 4x8 tokens",
                "width": 16,
                "depth": 2,
                "batch": 4,
                "tokens": 8,
            }
        ],
        tolerance=Tolerance(1e-4, 1e-6, "weights after 4 steps; the gradient sums run in another order"),
        compare=compare_weights,
        note="2 GPUs of one host; DDP over NCCL with NVLink multicast off (NCCL_NVLS_ENABLE=0)",
    )
]

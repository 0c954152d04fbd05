"""TPL406 all-reduce-every-micro-step: gradient accumulation under DistributedDataParallel, every micro-step's
backward() all-reducing (bad) vs the micro-steps that do not step under `no_sync()` (good: the linter's fix),
on two GPUs, over NVLink and with NCCL over sockets.

A GPT-2-small-sized transformer (12 layers, d=768, 12 heads, vocabulary 50304, tied head: 124M parameters)
trains under bf16 autocast with fused AdamW; one call is one optimizer step of 4 micro-steps of 8x1024 tokens
per rank. Both variants run as two processes (benchmarks/distributed.py, NCCL, NVLink multicast off) and are
timed on rank 0. The socket regime sets `NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1` in both processes before the
process group starts: NCCL then moves the gradients through the host's network stack, a stand-in for the link
between hosts that multi-node training has. The check: the loss and the weights after one optimizer step from
the same initial weights (the all-reduce of a sum and the sum of all-reduces round differently; AdamW's first
update divides by the gradient's own size, so a weight whose gradient is near zero may move by up to lr).
On fewer than two GPUs the case is skipped; the smoke run checks it as two CPU processes on gloo.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from ..harness import Case, Tolerance
from . import common

BAD = """
import torch
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP


class Trainer:
    def __init__(self, model, optimizer, accum_steps):
        device = next(model.parameters()).device
        self.model = DDP(model, device_ids=[device] if device.type == "cuda" else None)
        self.optimizer = optimizer
        self.accum_steps = accum_steps

    def step(self, batches):
        for i, (tokens, labels) in enumerate(batches):
            with torch.autocast(device_type=tokens.device.type, dtype=torch.bfloat16):
                logits = self.model(tokens)
            loss = F.cross_entropy(logits.float().flatten(0, 1), labels.flatten()) / self.accum_steps
            loss.backward()
            if (i + 1) % self.accum_steps == 0:
                self.optimizer.step()
                self.optimizer.zero_grad(set_to_none=True)
        return loss.detach()
"""


def make_accumulating_step(module, size, device):
    """One optimizer step of `accum` micro-steps on this rank's own batches."""
    rank = dist.get_rank() if dist.is_initialized() else 0
    model = common.TinyGPT(size["vocab"], size["width"], size["depth"], size["heads"], size["tokens"]).to(
        device
    )
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=device.type == "cuda")
    trainer = module.Trainer(model, optimizer, size["accum"])
    generator = torch.Generator().manual_seed(1000 + rank)
    shape = (size["batch"], size["tokens"])
    batches = [
        (
            torch.randint(0, size["vocab"], shape, generator=generator).to(device),
            torch.randint(0, size["vocab"], shape, generator=generator).to(device),
        )
        for _ in range(size["accum"])
    ]

    def step():
        loss = trainer.step(batches)
        return loss, common.state_summary(model)

    return step


_GPT2_SMALL = {"vocab": 50304, "width": 768, "depth": 12, "heads": 12, "batch": 8, "tokens": 1024, "accum": 4}
_SOCKETS = {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"}

CASES = [
    Case(
        name="tpl406_ddp_accumulation",
        code="TPL406",
        title="DDP on 2 GPUs, GPT-2-small-sized transformer, 4 micro-steps per optimizer step: "
        "all-reduce at every micro-step vs no_sync() on the 3 that do not step",
        bad=BAD,
        fixes=("TPL406",),
        make=make_accumulating_step,
        gpus=2,
        distributed=("bad", "good"),
        sizes=[
            {
                "label": "124M params, 4 x 8x1024 tokens per rank, NVLink",
                "regime": "2 GPUs over NVLink (NCCL peer-to-peer)",
                **_GPT2_SMALL,
            },
            {
                "label": "124M params, 4 x 8x1024 tokens per rank, NCCL over sockets",
                "regime": "2 GPUs, NCCL over sockets (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1): a link between hosts",
                "env": _SOCKETS,
                **_GPT2_SMALL,
            },
        ],
        smoke_sizes=[
            {
                "label": "2 layers d=16, 2 x 2x8 tokens per rank",
                "vocab": 64,
                "width": 16,
                "depth": 2,
                "heads": 2,
                "batch": 2,
                "tokens": 8,
                "accum": 2,
            }
        ],
        tolerance=Tolerance(
            1e-3, 5e-4, "loss and weights after one AdamW step; the reductions round differently"
        ),
        note="2 GPUs of one host; NCCL with NVLink multicast off (NCCL_NVLS_ENABLE=0); bf16 autocast, fused AdamW",
    )
]

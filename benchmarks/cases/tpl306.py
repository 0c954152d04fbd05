"""TPL306 hand-written-attention: minGPT/nanoGPT's causal self-attention written out vs the fused SDPA kernel."""

from __future__ import annotations

import contextlib

import torch

from ..harness import Case, Tolerance

# minGPT's CausalSelfAttention (nanoGPT's slow path): a T x T mask buffer, scores, mask, softmax, dropout, @ v.
BAD = """
import math

import torch
import torch.nn.functional as F
from torch import nn


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, block_size, dropout):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.attn_dropout = nn.Dropout(dropout)
        self.resid_dropout = nn.Dropout(dropout)
        self.n_head = n_head
        self.n_embd = n_embd
        self.register_buffer(
            "bias", torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size, block_size)
        )

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        att = self.attn_dropout(att)
        y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))
"""

# GPT-2 small's attention: 12 heads of 64 (n_embd 768).
HEADS, HEAD_DIM = 12, 64


def make_attention(module, size, device):
    """One training step's forward and backward through the attention block, in bf16 autocast (nanoGPT's
    default on GPUs that have it) or in fp32. Dropout 0 (nanoGPT's pretraining setting), so both variants
    compute the same function."""
    width = size.get("heads", HEADS) * size.get("head_dim", HEAD_DIM)
    model = module.CausalSelfAttention(width, size.get("heads", HEADS), size["T"], 0.0).to(device).train()
    x = torch.randn(size["batch"], size["T"], width, device=device, requires_grad=True)
    precision = (
        torch.autocast(device.type, dtype=torch.bfloat16)
        if size["dtype"] == "bf16"
        else contextlib.nullcontext()
    )

    def step():
        model.zero_grad(set_to_none=True)
        x.grad = None
        with precision:
            y = model(x)
        y.float().square().mean().backward()
        return y.detach(), x.grad, model.c_attn.weight.grad

    return step


def relative_error(reference, other, tol: Tolerance) -> str | None:
    """Each result's relative L2 error ||good - bad|| / ||bad|| at most `tol.rtol` (an elementwise allclose is
    the wrong test for bf16: the fused kernel keeps the probabilities in fp32 where the hand-written path rounds
    them to bf16 before the second product, so single elements differ by several bf16 ulps)."""
    if len(reference) != len(other):
        return f"{len(other)} results where the bad variant gave {len(reference)}"
    for index, (a, b) in enumerate(zip(reference, other, strict=True)):
        a64, b64 = a.detach().cpu().double(), b.detach().cpu().double()
        if a64.shape != b64.shape:
            return f"result {index}: shape {tuple(b64.shape)} instead of {tuple(a64.shape)}"
        error = ((b64 - a64).norm() / a64.norm().clamp_min(1e-30)).item()
        if not error <= tol.rtol:
            return f"result {index}: relative L2 error {error:.3g} exceeds {tol.rtol:g}"
    return None


BF16 = Tolerance(
    3e-2, 0.0, "relative L2 error of output, input grad and c_attn weight grad; bf16 keeps 8 bits of mantissa"
)
FP32 = Tolerance(1e-3, 0.0, "relative L2 error of output, input grad and c_attn weight grad; fp32")


def _sizes(batch: int, heads: int, head_dim: int, lengths: dict[str, list[int]]) -> list[dict]:
    return [
        {
            "label": f"{dtype} B={batch} H={heads} T={length} D={head_dim}",
            # short contexts are dominated by the projections; the T x T matrix grows with T squared
            "regime": f"{dtype} attention block, context {length}"
            + (" (projection-bound)" if length <= 512 else " (score-matrix-bound)" if length >= 2048 else ""),
            "batch": batch,
            "heads": heads,
            "head_dim": head_dim,
            "T": length,
            "dtype": dtype,
            "tolerance": BF16 if dtype == "bf16" else FP32,
        }
        for dtype, values in lengths.items()
        for length in values
    ]


CASES = [
    Case(
        name="tpl306_causal_self_attention",
        code="TPL306",
        title="GPT-2 causal self-attention block fwd+bwd: hand-written softmax(q @ k^T) @ v vs SDPA",
        bad=BAD,
        fixes=("TPL306",),
        make=make_attention,
        # GPT-2 small's attention (12 heads of 64) at batch 8, context swept from 512 to 4096 tokens.
        sizes=_sizes(8, HEADS, HEAD_DIM, {"bf16": [512, 1024, 2048, 4096], "fp32": [1024, 4096]}),
        smoke_sizes=_sizes(2, 2, 8, {"bf16": [16], "fp32": [16]}),
        tolerance=FP32,
        compare=relative_error,
        memory=True,
        note="the c_attn and c_proj projections are timed too; dropout 0 in both variants",
    )
]

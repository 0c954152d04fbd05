"""Swin-style window attention, fwd+bwd on CUDA: the hand-written chain against SDPA.

    python benchmarks/window_attention.py OUT.json

TPL306 stays silent on Swin's window attention (a learned relative-position bias, a shift mask
added on one side of an `if`, a softmax on both sides). This measures why: on 64-token windows
the fused kernels take a float mask and win nothing, and SwinIR's sizes run slower. Two SDPA
forms: the mask materialised per window and batch element (4-D), and a 5-D call that
broadcasts the (windows, heads, N, N) mask over the batch.
"""

from __future__ import annotations

import json
import sys

import torch
import torch.nn.functional as F

# (case, batch, windows per image, heads, tokens per window, head dim, dtype)
CASES = [
    ("SwinIR x2 train (48px patches, win 8, 180 ch, 6 heads), batch 16", 16, 36, 6, 64, 30, torch.float32),
    ("SwinIR same, bf16", 16, 36, 6, 64, 30, torch.bfloat16),
    ("SwinV2-T 256px stage 1 (win 8, 3 heads x 32), batch 64", 64, 64, 3, 64, 32, torch.float32),
    ("SwinV2-T stage 1, bf16", 64, 64, 3, 64, 32, torch.bfloat16),
    ("SwinV2 win 16 (256 tokens), 3 heads x 32, batch 64, bf16", 64, 16, 3, 256, 32, torch.bfloat16),
]


def hand(q, k, v, bias, mask, scale):
    attn = (q * scale) @ k.transpose(-2, -1)
    attn = attn + bias
    windows = mask.shape[0]
    batch, heads, n, _ = attn.shape
    attn = attn.view(batch // windows, windows, heads, n, n) + mask.unsqueeze(1).unsqueeze(0)
    attn = attn.view(-1, heads, n, n).softmax(dim=-1)
    return attn @ v


def sdpa(q, k, v, bias, mask, scale):
    windows = mask.shape[0]
    batch, heads, n, _ = q.shape
    both = (bias.unsqueeze(0) + mask.unsqueeze(1)).unsqueeze(0)
    both = both.expand(batch // windows, windows, heads, n, n).reshape(batch, heads, n, n)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=both, scale=scale)


def sdpa_broadcast(q, k, v, bias, mask, scale):
    windows = mask.shape[0]
    batch, heads, n, dim = q.shape
    shape = (batch // windows, windows, heads, n, dim)
    both = bias.unsqueeze(0) + mask.unsqueeze(1)
    out = F.scaled_dot_product_attention(
        q.view(shape), k.view(shape), v.view(shape), attn_mask=both, scale=scale
    )
    return out.view(batch, heads, n, dim)


def milliseconds(fn, args, iters=50):
    """Median of five timings of `iters` fwd+bwd steps, after a warm-up."""
    for _ in range(5):
        fn(*args).sum().backward()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(5):
        start.record()
        for _ in range(iters):
            fn(*args).sum().backward()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / iters)
    return sorted(times)[2]


def main(out: str) -> None:
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    rows = []
    for name, batch, windows, heads, n, dim, dtype in CASES:
        q, k, v = (
            torch.randn(batch * windows, heads, n, dim, device="cuda", dtype=dtype, requires_grad=True)
            for _ in range(3)
        )
        bias = torch.randn(heads, n, n, device="cuda", dtype=dtype, requires_grad=True)
        mask = torch.zeros(windows, n, n, device="cuda", dtype=dtype)
        mask[:, :, : n // 4] = -100.0
        args = (q, k, v, bias, mask, dim**-0.5)
        reference = hand(*args)
        bad, good, broadcast = (milliseconds(f, args) for f in (hand, sdpa, sdpa_broadcast))
        row = {
            "case": name,
            "hand_ms": round(bad, 3),
            "sdpa_ms": round(good, 3),
            "speedup": round(bad / good, 2),
            "max_abs_diff": (reference - sdpa(*args)).abs().max().item(),
            "sdpa_broadcast_mask_ms": round(broadcast, 3),
            "speedup_broadcast": round(bad / broadcast, 2),
            "max_abs_diff_broadcast": (reference - sdpa_broadcast(*args)).abs().max().item(),
        }
        print(json.dumps(row), flush=True)
        rows.append(row)
    result = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}
    with open(out, "w") as handle:
        json.dump(result, handle, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])

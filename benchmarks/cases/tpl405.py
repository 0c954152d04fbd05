"""TPL405 size-off-tensor-cores (off by default): vocabulary 50257 vs 50304 (GPT-2's, padded to 64)."""

from __future__ import annotations

import torch

from ..harness import Case, Tolerance
from . import common

BAD = '''
import torch
from torch import nn
from torch.nn import functional as F

VOCAB = 50257
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    """GPT-2's layout with a tied head; `layers=0` is the embedding, head and loss alone."""

    def __init__(self, layers, d, heads, context):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, d)
        self.wpe = nn.Embedding(context, d)
        self.blocks = nn.ModuleList([Block(d, heads) for _ in range(layers)])
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, VOCAB, bias=False)
        self.wte.weight = self.head.weight

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]).float(), targets.view(-1))
'''

GOOD = BAD.replace("VOCAB = 50257", "VOCAB = 50304  # padded to a multiple of 64; targets stay below 50257")


def make_step(module, size, device):
    torch.manual_seed(0)
    # init_by_name draws each weight row by row from a generator keyed by its name: the first 50257
    # rows of the padded embedding equal the unpadded one's, so both start from the same model
    model = common.init_by_name(module.GPT(size["layers"], size["d"], size["heads"], size["context"])).to(
        device
    )
    generator = torch.Generator().manual_seed(1)
    shape = (size["batch"], size["context"])
    idx = torch.randint(0, 50257, shape, generator=generator).to(device)
    targets = torch.randint(0, 50257, shape, generator=generator).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=device.type == "cuda")

    def step():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=torch.bfloat16):
            loss = model(idx, targets)
        loss.backward()
        optimizer.step()
        return loss.detach()

    return step


_LOSS = Tolerance(2e-2, 1e-3, "the loss: 47 more classes add ~0.1% to the softmax's sum; bf16 rounding")

CASES = [
    Case(
        name="tpl405_vocab_padding",
        code="TPL405",
        title="bf16 training step with a tied LM head: vocabulary 50257 vs 50304",
        bad=BAD,
        good=GOOD,
        make=make_step,
        sizes=[
            {
                "label": "GPT-2 small, B=8 T=1024",
                "regime": "GPT-2 small step (12 layers, d=768, T=1024, B=8), bf16, SDPA, tied head",
                "layers": 12,
                "d": 768,
                "heads": 12,
                "context": 1024,
                "batch": 8,
            },
            {
                "label": "embedding + head + CE, B=16 T=1024 d=1024",
                "regime": "embedding + tied LM head + cross-entropy alone, B=16 T=1024 d=1024, bf16",
                "layers": 0,
                "d": 1024,
                "heads": 16,
                "context": 1024,
                "batch": 16,
            },
        ],
        smoke_sizes=[
            {"label": "2 layers d=64 T=16", "layers": 2, "d": 64, "heads": 4, "context": 16, "batch": 2},
        ],
        tolerance=_LOSS,
        note="hand-written good variant (no fix: padding changes checkpoints); extra logits are never targets",
    )
]

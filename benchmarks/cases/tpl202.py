"""TPL202 cat-in-loop: an accumulator re-grown with torch.cat at every iteration copies quadratically."""

from __future__ import annotations

import torch
from torch import nn

from ..harness import EXACT, Case

BAD = '''
import torch


def embed_all(model, loader, device):
    """Embed every batch of a retrieval corpus."""
    embeddings = torch.empty(0, 256, device=device)
    with torch.no_grad():
        for x in loader:
            embeddings = torch.cat([embeddings, model(x)])
    return embeddings
'''

GOOD = '''
import torch


def embed_all(model, loader, device):
    """Embed every batch of a retrieval corpus."""
    chunks = []
    with torch.no_grad():
        for x in loader:
            chunks.append(model(x))
    return torch.cat(chunks)
'''


def make_embed(module, size, device):
    model = nn.Linear(256, 256, device=device)
    loader = [torch.randn(size["batch"], 256, device=device) for _ in range(size["batches"])]
    return lambda: module.embed_all(model, loader, device)


CASES = [
    Case(
        name="tpl202_grow_embeddings",
        code="TPL202",
        title="collect 512 batches of embeddings: torch.cat per batch vs one cat of a list",
        bad=BAD,
        good=GOOD,
        make=make_embed,
        # 512 batches of 64 embeddings of width 256: a 32k-document retrieval corpus.
        sizes=[
            {
                "label": "512 batches of 64x256",
                "regime": "512 appends of 64 KB (quadratic copies)",
                "batches": 512,
                "batch": 64,
            }
        ],
        smoke_sizes=[{"label": "8 batches of 4x256", "batches": 8, "batch": 4}],
        tolerance=EXACT,
    )
]

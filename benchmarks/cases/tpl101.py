"""TPL101 cpu-factory-in-hot-path: a tensor generated on the CPU and copied to the GPU at every step."""

from __future__ import annotations

import torch

from ..harness import EXACT, Case, Tolerance

RANDPERM = '''
import torch
from torch import nn


class Shuffle(nn.Module):
    """Seed 000: shuffle pixel-level anomaly features before a contrastive loss."""

    def forward(self, features):
        order = torch.randperm(features.shape[0]).to(features.device)
        return features[order]
'''

RAND_MASK = '''
import torch
from torch import nn


class TokenDrop(nn.Module):
    """Drop whole hidden units of every token at random (a dropout-style mask)."""

    def __init__(self, p):
        super().__init__()
        self.p = p

    def forward(self, x):
        keep = torch.rand(x.shape[0], x.shape[1]).to(x.device) > self.p
        return x * keep / (1 - self.p)
'''

ZEROS = '''
import torch
from torch import nn


class Recurrent(nn.Module):
    """The initial hidden state of a 2-layer LSTM, built in forward as much RNN code does."""

    def __init__(self, layers, hidden):
        super().__init__()
        self.layers = layers
        self.hidden = hidden

    def forward(self, x):
        h0 = torch.zeros(self.layers, x.shape[0], self.hidden).to(x.device)
        return h0
'''


def sorted_values_equal(reference: list, result: list, tol: Tolerance) -> str | None:
    a, b = reference[0].sort().values, result[0].sort().values
    return None if torch.equal(a, b) else "the shuffled output is not a permutation of the same values"


def make_shuffle(module, size, device):
    shuffle = module.Shuffle()
    features = torch.randn(size["n"], device=device)
    return lambda: shuffle(features)


def make_mask(module, size, device):
    drop = module.TokenDrop(0.1)
    x = torch.ones(size["tokens"], size["width"], device=device)
    return lambda: drop(x).mean()


def make_zeros(module, size, device):
    rnn = module.Recurrent(2, 1024)
    x = torch.randn(size["batch"], 8, device=device)
    return lambda: rnn(x)


CASES = [
    Case(
        name="tpl101_randperm",
        code="TPL101",
        title="torch.randperm(n).to(dev) vs randperm(n, device=dev)",
        bad=RANDPERM,
        fixes=("TPL101",),
        make=make_shuffle,
        # 1e8: seed 000 shuffles the pixel features of an MVTec batch (about 1e8 values); 1e6: a dataset index.
        sizes=[
            {"label": "n=1e6", "regime": "host randperm + copy, 1e6 values (8 MB)", "n": 10**6},
            {"label": "n=1e7", "regime": "host randperm + copy, 1e7 values (80 MB)", "n": 10**7},
            {"label": "n=1e8", "regime": "host randperm + copy, 1e8 values (800 MB)", "n": 10**8},
        ],
        smoke_sizes=[{"label": "n=1000", "n": 1000}],
        tolerance=Tolerance(
            0.0,
            0.0,
            "sorted output: both variants return a permutation of the same values "
            "(the CPU and GPU random streams differ)",
        ),
        compare=sorted_values_equal,
    ),
    Case(
        name="tpl101_rand_mask",
        code="TPL101",
        title="torch.rand(B, D).to(dev) mask vs rand(B, D, device=dev)",
        bad=RAND_MASK,
        fixes=("TPL101",),
        make=make_mask,
        # 8192 tokens x 1024: a GPT-2 medium batch of 8 sequences of 1024 tokens.
        sizes=[
            {"label": "512x1024", "regime": "per-step mask, 2 MB", "tokens": 512, "width": 1024},
            {"label": "8192x1024", "regime": "per-step mask, 32 MB", "tokens": 8192, "width": 1024},
        ],
        smoke_sizes=[{"label": "64x32", "tokens": 64, "width": 32}],
        tolerance=Tolerance(
            0.0,
            0.05,
            "mean of the masked all-ones input, 1 in expectation (the CPU and GPU random streams differ)",
        ),
    ),
    Case(
        name="tpl101_zeros",
        code="TPL101",
        title="LSTM h0 = torch.zeros(2, B, 1024).to(dev) vs zeros(..., device=dev)",
        bad=ZEROS,
        fixes=("TPL101",),
        make=make_zeros,
        # batch 64: a typical RNN batch; 4096: a large-batch sequence model.
        sizes=[
            {"label": "batch=64", "regime": "LSTM state per call, 0.5 MB (launch-bound)", "batch": 64},
            {"label": "batch=4096", "regime": "LSTM state per call, 32 MB (copy-bound)", "batch": 4096},
        ],
        smoke_sizes=[{"label": "batch=4", "batch": 4}],
        tolerance=EXACT,
    ),
]

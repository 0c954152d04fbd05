"""Acceptance on the seed articles (../shared/seeds/): the slow lines of their losses are flagged
through the call graph, with the chain in the context; the same lines in `__init__` or at module
level are not."""

from __future__ import annotations

import textwrap

from torchperf_lint.api import lint_source

# Seed 000: an anomaly-detection training loop whose third loss shuffles two score matrices with
# `torch.randperm(num)`, built on the CPU (1-2 s per step for ~1e8 elements) inside the loss.
SEED_000 = textwrap.dedent(
    """\
    import torch
    import torch.nn as nn
    import torch.nn.functional as F


    def shuffle_loss(norm, anom):
        num = norm.numel()
        idx = torch.randperm(num)
        norm = norm.reshape(-1)[idx]
        anom = anom.reshape(-1)[torch.randperm(num)]
        return torch.relu(1 - (anom - norm)).mean()


    def total_loss(rec, img, norm, anom):
        return F.mse_loss(rec, img) + F.l1_loss(rec, img) + shuffle_loss(norm, anom)


    def train(model, loader, optimizer, device):
        for img in loader:
            img = img.cuda()
            rec, norm, anom = model(img)
            loss = total_loss(rec, img, norm, anom)
            optimizer.zero_grad()
            loss.backward(retain_graph=True)
            optimizer.step()
    """
)

# Seed 004: the article's custom cross-entropy loss, as published (profiler lines left out).
SEED_004 = textwrap.dedent(
    """\
    import torch
    import torch.nn as nn


    def log_softmax(x):
        return x - x.exp().sum(-1).log().unsqueeze(-1)

    def weighted_nll(pred, target, weight):
        assert target.max() < 10
        nll = -pred[range(target.shape[0]), target]
        nll = nll * weight[target]
        nll = nll / weight[target].sum()
        sum_nll = nll.sum()
        return sum_nll

    # custom loss definition
    class CrossEntropyLoss(nn.Module):
        def forward(self, input, target):
            pred = log_softmax(input)
            loss = weighted_nll(pred, target, torch.Tensor([0.1]*10).cuda())
            return loss
    """
)


def findings(source: str, code: str) -> list[tuple[int, str | None]]:
    return [(f.line, f.context) for f in lint_source(source, "seed.py", select=[code])]


def line_of(source: str, text: str, occurrence: int = 0) -> int:
    lines = [number for number, line in enumerate(source.splitlines(), start=1) if text in line]
    return lines[occurrence]


def test_seed_000_randperm_in_a_loss_is_flagged_through_the_call_graph() -> None:
    found = findings(SEED_000, "TPL101")
    loop_line = line_of(SEED_000, "for img in loader")
    chain = f"in shuffle_loss, called from total_loss, called from loop over loader at line {loop_line}"
    assert found == [
        (line_of(SEED_000, "idx = torch.randperm(num)"), chain),
        (line_of(SEED_000, "[torch.randperm(num)]"), chain),
    ]


def test_seed_004_range_index_in_weighted_nll_is_flagged_from_cross_entropy_forward() -> None:
    assert findings(SEED_004, "TPL103") == [
        (line_of(SEED_004, "pred[range("), "in weighted_nll, called from CrossEntropyLoss.forward")
    ]


def test_the_seed_lines_in_init_or_at_module_level_are_not_flagged() -> None:
    cold = textwrap.dedent(
        """\
        import torch
        import torch.nn as nn

        num = 1000
        pred, target = load_predictions(num)
        idx = torch.randperm(num)
        nll = -pred[range(target.shape[0]), target]


        class CrossEntropyLoss(nn.Module):
            def __init__(self, pred, target, num):
                super().__init__()
                self.idx = torch.randperm(num)
                self.nll = -pred[range(target.shape[0]), target]

            def forward(self, input, target):
                return (input[self.idx] - self.nll).mean().cuda()
        """
    )
    assert findings(cold, "TPL101") == []
    assert findings(cold, "TPL103") == []


def test_the_seed_helpers_are_not_flagged_when_nothing_hot_calls_them() -> None:
    uncalled = SEED_004.replace("loss = weighted_nll(pred, target,", "loss = F.nll_loss(pred, target,")
    assert findings(uncalled, "TPL103") == []
    uncalled = SEED_000.replace("loss = total_loss(rec, img, norm, anom)", "loss = F.mse_loss(rec, img)")
    assert findings(uncalled, "TPL101") == []

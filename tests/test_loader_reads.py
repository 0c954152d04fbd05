"""A DataLoader read for a few batches, once (analysis/loader_reads.py): TPL501 and TPL502 leave it,
and keep a loader that a loop reads whole or that is read anywhere else."""

from __future__ import annotations

import textwrap

import pytest

from torchperf_lint.api import lint_source

DUMP = """
import torch
from torch.utils.data import DataLoader

def main(test_set, n):
    test_loader = DataLoader(test_set, batch_size=1)
    for i, x in enumerate(test_loader):
        x = x.cuda()
        {bound}
"""


def _codes(source: str) -> list[str]:
    found = lint_source(textwrap.dedent(source), "train.py", select=["TPL501", "TPL502"])
    return sorted(f.code for f in found)


@pytest.mark.parametrize("bound", ["if i == n - 1:\n            break", "if i >= 8:\n            break"])
def test_a_loop_that_breaks_at_a_bound_reads_a_few_batches(bound: str) -> None:
    assert _codes(DUMP.format(bound=bound)) == []


@pytest.mark.parametrize(
    "bound",
    [
        "pass",  # the whole loader, every batch
        "if x.sum() > 0:\n            break",  # a data-dependent exit is no bound
        "if i == n - 1:\n            continue",
    ],
)
def test_a_loop_over_the_whole_loader_keeps_the_findings(bound: str) -> None:
    assert _codes(DUMP.format(bound=bound)) == ["TPL501", "TPL502"]


def test_a_loader_read_elsewhere_too_keeps_the_findings() -> None:
    source = DUMP.format(bound="if i == n - 1:\n            break") + "    return test_loader\n"
    assert _codes(source) == ["TPL501", "TPL502"]


def test_a_second_loop_over_the_whole_loader_keeps_the_findings() -> None:
    source = (
        DUMP.format(bound="if i == 7:\n            break") + "    for x in test_loader:\n        x.cuda()\n"
    )
    assert _codes(source) == ["TPL501", "TPL502"]

"""Real code: the installed torch's own sources lint without a single internal error.

torch.nn, torch.optim, torch.utils.data and torch.distributed by default (about 200k lines);
set TORCHPERF_REALCODE_ALL=1 to lint the whole package. A crash found here becomes a regression
test of its own."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch  # installed by the test extra (torch==2.13.0): its sources are the corpus

from torchperf_lint.checking import Job
from torchperf_lint.config import Settings
from torchperf_lint.parallel import check_paths, default_jobs
from torchperf_lint.rules import ALL_RULES

ROOT = Path(torch.__file__).parent
PACKAGES = ("nn", "optim", "utils/data", "distributed")


def _files() -> list[str]:
    roots = [ROOT] if os.environ.get("TORCHPERF_REALCODE_ALL") else [ROOT / p for p in PACKAGES]
    return sorted(str(p) for root in roots for p in root.rglob("*.py"))


@pytest.mark.realcode
def test_torch_sources_lint_without_internal_errors() -> None:
    files = _files()
    assert len(files) > 300, "the torch sources were not found"
    # every rule, off-by-default ones too, on every file (no torch prefilter)
    job = Job(Settings(lint_all_files=True), tuple(rule.code for rule in ALL_RULES))
    outcomes = check_paths([job], files, default_jobs())
    errors = [f for outcome in outcomes for f in outcome.findings if f.code == "TPL000"]
    assert errors == []
    assert len(outcomes) == len(files)

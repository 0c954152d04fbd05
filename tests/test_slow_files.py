"""A file that takes long to check (a large generated module: about as long as libcst's parse of it)
is named on stderr, so that a CI log says where the time went. The threshold is injected, so that
no test depends on how fast the machine is."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from tests.test_cli import HOT, run, write
from torchperf_lint import command
from torchperf_lint.checking import FileOutcome


def test_a_slow_file_is_named_with_its_time() -> None:
    checked = [("gen/big.py", FileOutcome([], seconds=52.4)), ("train.py", FileOutcome([], seconds=0.3))]
    assert command.slow_file_lines(checked, threshold=10.0) == [
        "torchperf-lint: gen/big.py took 52 s to check (most of it libcst's parse of a large module; "
        "extend-exclude skips generated code)\n"
    ]


def test_a_file_at_the_threshold_is_not_slow() -> None:
    assert command.slow_file_lines([("a.py", FileOutcome([], seconds=10.0))], threshold=10.0) == []


@pytest.mark.parametrize("jobs", ["1", "2"], ids=["one-process", "pool"])
def test_every_checked_file_is_timed_and_named_over_the_threshold(
    tmp_path: Path, capsys, monkeypatch, jobs: str
) -> None:
    paths = [write(tmp_path / "a.py", HOT), write(tmp_path / "b.py", HOT)]
    monkeypatch.setattr(command, "SLOW_FILE_SECONDS", -1.0)  # every file took longer than that
    _, _, err = run(capsys, "--jobs", jobs, *paths)
    named = [line.split(" took ")[0] for line in err.splitlines() if " took " in line]
    assert named == [f"torchperf-lint: {path}" for path in paths]


def test_no_file_is_named_under_the_threshold(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setattr(command, "SLOW_FILE_SECONDS", math.inf)
    _, _, err = run(capsys, write(tmp_path / "a.py", HOT))
    assert " to check " not in err

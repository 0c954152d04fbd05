"""A default text run says how many findings the rules that are off by default would add, and how
to see them (issue 27): counted in the same parse and walk as the rules that are on, kept in the
result cache with them, and never counting a rule the user ignored or a line with noqa."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.test_cli import CLEAN, HOT, run, write
from torchperf_lint.engine import runner

ROOT = Path(__file__).resolve().parent.parent
LINE = "from rules that are off by default: --extend-select ALL."
# two findings of rules that are off by default: TPL105 (the .item()) and TPL104 (the assert)
OFF = b"""\
import torch
import torch.nn as nn


class Loss(nn.Module):
    def forward(self, pred, target):
        scale = pred.abs().max().item()
        assert target.max() < 10
        return (pred / scale).mean()
"""


def _example(tmp_path: Path) -> Path:
    # a copy: the examples' own config turns every rule on; a torch requirement that hides nothing,
    # so that the summary ends with the line these tests read (tests/test_torch_summary.py has the others)
    write(tmp_path / "requirements.txt", b"torch>=2.3\n")
    return Path(shutil.copy(ROOT / "examples" / "slow_training.py", tmp_path / "train.py"))


def _codes(capsys: pytest.CaptureFixture[str], *args: object) -> list[str]:
    _, out, _ = run(capsys, "--format", "json", *args)
    return [finding["code"] for finding in json.loads(out)]


def test_a_default_run_counts_what_the_rules_off_by_default_add(tmp_path: Path, capsys) -> None:
    path = _example(tmp_path)
    shown, every = _codes(capsys, path), _codes(capsys, "--extend-select", "ALL", path)
    assert shown and len(every) > len(shown)
    code, out, _ = run(capsys, path)
    assert code == 1
    assert out.splitlines()[-1] == f"{len(every) - len(shown)} more {LINE}"
    assert out.count(": TPL") == len(shown)  # their findings are counted, not listed


def test_a_run_whose_findings_are_all_off_says_so_and_exits_clean(tmp_path: Path, capsys) -> None:
    path = write(tmp_path / "loss.py", OFF)
    assert _codes(capsys, path) == []
    hidden = len(_codes(capsys, "--extend-select", "ALL", path))
    code, out, _ = run(capsys, path)
    assert (code, out) == (0, f"{hidden} findings {LINE}\n")


def test_statistics_list_the_rules_off_by_default_apart(tmp_path: Path, capsys) -> None:
    path = _example(tmp_path)
    shown, every = _codes(capsys, path), _codes(capsys, "--extend-select", "ALL", path)
    _, out, _ = run(capsys, "--statistics", path)
    rows = [line for line in out.splitlines() if line.endswith(" (off by default)")]
    counted = {row.split()[1]: int(row.split()[0]) for row in rows}
    hidden = [code for code in every if code not in shown]
    assert counted == {code: hidden.count(code) for code in set(hidden)}


@pytest.mark.parametrize("output", ["json", "github", "sarif"])
def test_only_text_output_counts_them(tmp_path: Path, capsys, output: str) -> None:
    _, out, _ = run(capsys, "--format", output, write(tmp_path / "loss.py", HOT))
    assert LINE not in out and "more from rules" not in out


@pytest.mark.parametrize(
    "options", [(), ("--select", "TPL7"), ("--extend-select", "ALL"), ("--fix",), ("--diff",)]
)
def test_no_line_where_nothing_is_left_out_or_the_rules_are_named(
    tmp_path: Path, capsys, options: tuple[str, ...]
) -> None:
    paths = [write(tmp_path / "ok.py", CLEAN)] if not options else [_example(tmp_path)]
    _, out, err = run(capsys, *options, *paths)
    assert "off by default" not in out + err


def test_ignored_rules_do_not_count(tmp_path: Path, capsys) -> None:
    path = write(tmp_path / "loss.py", OFF)
    assert sorted(_codes(capsys, "--extend-select", "ALL", path)) == ["TPL104", "TPL105"]
    assert run(capsys, "--ignore", "TPL104", path)[1] == f"1 finding {LINE}\n"
    assert run(capsys, "--extend-ignore", "assert-on-tensor", path)[1] == f"1 finding {LINE}\n"
    assert run(capsys, "--ignore", "TPL1", path)[1] == ""
    write(tmp_path / "pyproject.toml", b'[tool.torchperf-lint]\nignore = ["TPL105"]\n')
    assert run(capsys, path)[1] == f"1 finding {LINE}\n"


def test_lines_with_noqa_and_per_file_ignores_do_not_count(tmp_path: Path, capsys) -> None:
    quiet = OFF.replace(b"scale = pred.abs().max().item()", b"scale = pred.abs().max().item()  # noqa")
    path = write(tmp_path / "loss.py", quiet)
    assert run(capsys, path)[1] == f"1 finding {LINE}\n"
    write(tmp_path / "pyproject.toml", b'[tool.torchperf-lint.per-file-ignores]\n"loss.py" = ["TPL104"]\n')
    assert run(capsys, path)[1] == ""


def test_the_off_rules_run_in_the_parse_and_walk_of_the_rules_on(tmp_path: Path, capsys, monkeypatch) -> None:
    parses: list[str] = []
    parse = runner.parse
    monkeypatch.setattr(runner, "parse", lambda data, path: parses.append(path) or parse(data, path))
    run(capsys, "--jobs", "1", _example(tmp_path), write(tmp_path / "loss.py", HOT))
    assert sorted(Path(path).name for path in parses) == ["loss.py", "train.py"]


def test_cached_results_carry_the_counted_findings(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.delenv("TORCHPERF_LINT_NO_CACHE")
    (tmp_path / "project").mkdir()
    path, cache = _example(tmp_path / "project"), ["--cache-dir", tmp_path / "cache"]
    first = run(capsys, *cache, path)
    every = _codes(capsys, "--no-cache", "--extend-select", "ALL", path)

    def no_lint(*args: object, **kwargs: object) -> None:
        raise AssertionError("linted again instead of read from the cache")

    monkeypatch.setattr(runner, "lint_bytes", no_lint)
    assert run(capsys, *cache, path) == first
    # an entry holds the findings of every rule the run ran: --extend-select ALL reads it too
    assert _codes(capsys, *cache, "--extend-select", "ALL", path) == every

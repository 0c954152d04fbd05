"""A text run says which torch it assumed (issue 37): that fixes assume torch 2.x when no requirement
names torch, and how many findings the project's torch pin hides, with the option that shows them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.test_cli import run, write
from torchperf_lint.config import Settings
from torchperf_lint.engine.runner import lint_bytes
from torchperf_lint.rules import select_rules

ROOT = Path(__file__).resolve().parent.parent
ASSUMED = (
    "No torch requirement found: fixes assume torch 2.x; "
    "set torch-version in the config (or pass --torch-version X.Y)."
)
NEWER = "need a newer torch than the project's pin"


def _project(tmp_path: Path, requirement: str | None) -> Path:
    """The example training script (SGD without fused=True, fp32 CUDA training) in a project that
    declares `requirement`, or no torch requirement at all."""
    write(tmp_path / "pyproject.toml", b"[project]\nname = 'trainer'\n")
    if requirement is not None:
        write(tmp_path / "requirements.txt", f"{requirement}\nnumpy\n".encode())
    return Path(shutil.copy(ROOT / "examples" / "slow_training.py", tmp_path / "train.py"))


def _codes(capsys: pytest.CaptureFixture[str], *args: object) -> list[str]:
    _, out, _ = run(capsys, "--format", "json", *args)
    return sorted(finding["code"] for finding in json.loads(out))


def test_a_pin_that_hides_findings_says_how_many_and_what_shows_them(tmp_path: Path, capsys) -> None:
    path = _project(tmp_path, "torch==1.4.0")
    pinned, newest = _codes(capsys, path), _codes(capsys, "--torch-version", "2.3", path)
    hidden = [code for code in newest if code not in pinned]
    # channels_last (1.5), fp32 matmul precision (1.12), fused SGD (2.3)
    assert sorted(hidden) == ["TPL404", "TPL701", "TPL702"]
    code, out, _ = run(capsys, path)
    assert code == 1
    assert out.splitlines()[-1] == (f"3 findings {NEWER} (torch==1.4.0); `--torch-version 2.3` shows them.")
    assert ASSUMED not in out


def test_one_hidden_finding_is_said_in_the_singular(tmp_path: Path, capsys) -> None:
    # has set_float32_matmul_precision and multi-tensor optimizers by default, not SGD(fused=)
    path = _project(tmp_path, "torch==2.0.1")
    _, out, _ = run(capsys, path)
    assert out.splitlines()[-1] == (
        "1 finding needs a newer torch than the project's pin (torch==2.0.1); `--torch-version 2.3` shows it."
    )


def test_a_hidden_finding_on_a_noqa_line_is_not_counted(tmp_path: Path, capsys) -> None:
    path = _project(tmp_path, "torch==1.4.0")
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("lr=0.1)", "lr=0.1)  # noqa: TPL702"), encoding="utf-8")
    _, out, _ = run(capsys, path)
    assert out.splitlines()[-1].startswith("2 findings need a newer torch than the project's pin")


@pytest.mark.parametrize(
    "requirement, args",
    [
        ("torch>=2.3", []),  # a torch that has every API the rules recommend
        ("torch==1.4.0", ["--torch-version", "1.4"]),  # the user said which torch
        ("torch==1.4.0", ["--select", "TPL103"]),  # none of the hidden rules selected
    ],
)
def test_no_pin_line_where_nothing_is_hidden(
    tmp_path: Path, capsys, requirement: str, args: list[str]
) -> None:
    path = _project(tmp_path, requirement)
    _, out, _ = run(capsys, *args, path)
    assert NEWER not in out and ASSUMED not in out


def test_the_pin_line_is_text_output_only(tmp_path: Path, capsys) -> None:
    path = _project(tmp_path, "torch==1.4.0")
    _, out, _ = run(capsys, "--format", "json", path)
    assert all(not finding.get("newer_torch") for finding in json.loads(out))
    _, out, _ = run(capsys, "--format", "github", path)
    assert NEWER not in out


def test_fixes_without_a_torch_requirement_say_they_assume_torch_2(tmp_path: Path, capsys) -> None:
    path = _project(tmp_path, None)
    code, out, _ = run(capsys, path)
    assert code == 1 and out.splitlines()[-1] == ASSUMED
    assert out.count(ASSUMED) == 1
    # the fixes were written for torch 2.x: a fixing run says so too
    _, out, _ = run(capsys, "--fix", "--unsafe-fixes", path)
    assert ASSUMED in out


@pytest.mark.parametrize("requirement, args", [("torch>=2.1", []), (None, ["--torch-version", "2.1"])])
def test_no_assumption_line_where_the_torch_is_known(
    tmp_path: Path, capsys, requirement: str | None, args: list[str]
) -> None:
    path = _project(tmp_path, requirement)
    _, out, _ = run(capsys, *args, path)
    assert ASSUMED not in out


def test_no_assumption_line_without_a_fix(tmp_path: Path, capsys) -> None:
    source = (
        b"import torch\nfrom torch import nn\n\n\nclass Loss(nn.Module):\n    def forward(self, pred, target):\n"
        b"        loss = (pred - target).abs().mean()\n        print(loss)\n        return loss\n"
    )
    path = write(tmp_path / "loss.py", source)
    write(tmp_path / "pyproject.toml", b"[project]\nname = 'loss'\n")
    code, out, _ = run(capsys, "--select", "TPL105", path)
    assert code == 1 and "TPL105" in out  # a finding, with no fix to write
    assert ASSUMED not in out


def test_hidden_findings_are_found_only_when_asked_for(tmp_path: Path) -> None:
    """The fixer, flake8, the language server and the API never see what the pin hides."""
    path = _project(tmp_path, "torch==1.4.0")
    rules = select_rules(("TPL702",), (), ())
    asked = lint_bytes(path.read_bytes(), str(path), rules, Settings(newer_torch=True)).findings
    assert [(f.code, f.newer_torch) for f in asked] == [("TPL702", True)]
    assert lint_bytes(path.read_bytes(), str(path), rules, Settings()).findings == []

"""--add-noqa: a clean baseline. Every line with a finding gets a `# noqa: TPLxxx` where flake8
reads it, merged with a noqa comment already there; files that did not parse are never touched;
a second run adds nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from torchperf_lint.cli import main
from torchperf_lint.engine.runner import EXCLUDE_HINT

ROOT = Path(__file__).resolve().parents[1]

SOURCE = '''\
import json
import torch
from torch import nn


class Net(nn.Module):
    def forward(self, x, n):
        a = torch.zeros(n).cuda()  # noqa: E501 a long line
        b = torch.ones(n).cuda()  # the bias
        c = torch.zeros(json.loads("""
3
""")).cuda()
        d = torch.zeros(n) \\
            .cuda()
        return x[range(n)] + torch.rand(n).cuda() + a + b + c + d
'''
EXPECTED = '''\
import json
import torch
from torch import nn


class Net(nn.Module):
    def forward(self, x, n):
        a = torch.zeros(n).cuda()  # noqa: E501, TPL101 a long line
        b = torch.ones(n).cuda()  # the bias  # noqa: TPL101
        c = torch.zeros(json.loads("""
3
""")).cuda()  # noqa: TPL101
        d = torch.zeros(n) \\
            .cuda()  # noqa: TPL101
        return x[range(n)] + torch.rand(n).cuda() + a + b + c + d  # noqa: TPL101, TPL103
'''
SELECT = ["--select", "TPL101,TPL103"]


def run(capsys, *args: object) -> tuple[int, str, str]:
    code = main([*SELECT, *map(str, args)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_every_finding_gets_a_noqa_where_flake8_reads_it(tmp_path: Path, capsys) -> None:
    path = tmp_path / "net.py"
    path.write_text(SOURCE)
    assert run(capsys, "--add-noqa", path) == (0, "", "Added 5 noqa comments to 1 file.\n")
    assert path.read_text() == EXPECTED
    assert run(capsys, path) == (0, "", "")  # a clean baseline for the CLI...
    flake8 = subprocess.run(
        [sys.executable, "-m", "flake8", "--select", "TPL", str(path)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
        timeout=120,
    )
    assert (flake8.returncode, flake8.stdout) == (0, "")  # ...and for flake8


def test_a_second_run_adds_nothing(tmp_path: Path, capsys) -> None:
    path = tmp_path / "net.py"
    path.write_text(SOURCE)
    run(capsys, "--add-noqa", path)
    assert run(capsys, "--add-noqa", path) == (0, "", "Added 0 noqa comments to 0 files.\n")
    assert path.read_text() == EXPECTED


def test_the_file_keeps_its_encoding_newlines_and_mode(tmp_path: Path, capsys) -> None:
    source = (
        b"# -*- coding: latin-1 -*-\r\nimport torch\r\nfrom torch import nn\r\n\r\n\r\n"
        b"class Net(nn.Module):\r\n    def forward(self, x, n):\r\n"
        b"        return x + torch.zeros(n).cuda()  # caf\xe9\r\n"
    )
    path = tmp_path / "net.py"
    path.write_bytes(source)
    path.chmod(0o640)
    assert run(capsys, "--add-noqa", path)[0] == 0
    assert path.read_bytes() == source.replace(b"# caf\xe9\r\n", b"# caf\xe9  # noqa: TPL101\r\n")
    assert path.stat().st_mode & 0o777 == 0o640


def test_a_file_that_does_not_parse_is_never_touched(tmp_path: Path, capsys) -> None:
    broken = tmp_path / "broken.py"
    broken.write_bytes(b"import torch\ndef f(:\n    return torch.zeros(3).cuda()\n")
    good = tmp_path / "net.py"
    good.write_text(SOURCE)
    code, out, err = run(capsys, "--add-noqa", broken, good)
    assert code == 2
    assert out.splitlines()[0] == f"{broken}:2:7: TPL000 could not parse: invalid syntax{EXCLUDE_HINT}"
    assert err == "Added 5 noqa comments to 1 file.\n"
    assert broken.read_bytes() == b"import torch\ndef f(:\n    return torch.zeros(3).cuda()\n"
    assert good.read_text() == EXPECTED


def test_a_read_only_file_is_reported_and_left_alone(tmp_path: Path, capsys) -> None:
    path = tmp_path / "net.py"
    path.write_text(SOURCE)
    path.chmod(0o444)
    code, out, _ = run(capsys, "--add-noqa", path)
    assert code == 2
    assert f"{path}:1:1: TPL000 file is read-only; not written" in out
    assert path.read_text() == SOURCE


def test_notebook_cells_get_their_comments(tmp_path: Path, capsys) -> None:
    cells = [
        {"cell_type": "markdown", "metadata": {}, "source": ["# notes\n"]},
        {
            "cell_type": "code",
            "metadata": {},
            "outputs": [],
            "source": ["%matplotlib inline\n", "import torch\n"],
        },
        {
            "cell_type": "code",
            "metadata": {},
            "outputs": [],
            "source": ["for x in loader:\n", "    y = x + torch.zeros(3).cuda()\n"],
        },
    ]
    path = tmp_path / "train.ipynb"
    path.write_text(
        json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}, indent=1)
    )
    assert run(capsys, "--add-noqa", path)[0] == 0
    after = json.loads(path.read_text())
    assert after["cells"][2]["source"] == [
        "for x in loader:\n",
        "    y = x + torch.zeros(3).cuda()  # noqa: TPL101\n",
    ]
    assert after["cells"][1]["source"] == cells[1]["source"]
    assert run(capsys, path) == (0, "", "")


@pytest.mark.parametrize("other", [["--fix"], ["--diff"], ["-"]])
def test_add_noqa_with_fixing_or_stdin_is_a_usage_error(capsys, other: list[str]) -> None:
    code, out, err = run(capsys, "--add-noqa", *other)
    assert (code, out) == (2, "")
    assert err.startswith("torchperf-lint: error: --add-noqa ")

"""Notebooks through the command line: per-cell positions, fixes that keep the notebook."""

from __future__ import annotations

import json
from pathlib import Path

from torchperf_lint.cli import main

CELLS = [
    {"cell_type": "markdown", "metadata": {}, "source": ["# Training\n"]},
    {
        "cell_type": "code",
        "execution_count": 1,
        "metadata": {"tags": ["setup"]},
        "outputs": [{"output_type": "stream", "name": "stdout", "text": ["GPU ok\n"]}],
        "source": [
            "%load_ext autoreload\n",
            "import torch\n",
            "from torch import nn\n",
            "\n",
            "class Net(nn.Module):\n",
            "    def forward(self, x):\n",
            "        return x + torch.ones(x.shape[0], 1).cuda()\n",
        ],
    },
    {
        "cell_type": "code",
        "execution_count": 2,
        "metadata": {},
        "outputs": [],
        "source": ["!nvidia-smi\n", "def pick(out):\n", "    return out[[0, 1]]\n"],
    },
    {
        "cell_type": "code",
        "execution_count": 3,
        "metadata": {},
        "outputs": [],
        "source": [
            "model = Net()\n",
            "for xb, yb in train_loader:\n",
            "    loss = pick(model(xb)).sum()\n",
            "    loss.backward()\n",
        ],
    },
]


def _write(tmp_path: Path) -> Path:
    path = tmp_path / "train.ipynb"
    path.write_text(
        json.dumps(
            {
                "cells": CELLS,
                "metadata": {"language_info": {"name": "python"}},
                "nbformat": 4,
                "nbformat_minor": 5,
            },
            indent=1,
        )
        + "\n"
    )
    return path


def test_text_output_names_cell_line_and_column(tmp_path: Path, capsys) -> None:
    path = _write(tmp_path)
    assert main(["--select", "TPL101,TPL103", "--show-context", str(path)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[:4] == [
        f"{path}:cell 2:7:20: TPL101 [*] torch.ones() creates its tensor on the CPU inside forward(); "
        'pass device="cuda"',
        "    hot: in Net.forward",
        f"{path}:cell 3:3:12: TPL103 a list of ints index is copied to the device at every call, a full sync "
        "(the host waits for all queued GPU work), not a small copy; index with the slice [0:2] (a view, not a copy)",
        "    hot: in pick, called from loop over train_loader at cell 4, line 2",
    ]


def test_json_output_carries_the_cell(tmp_path: Path, capsys) -> None:
    path = _write(tmp_path)
    main(["--select", "TPL101", "--format", "json", str(path)])
    (finding,) = json.loads(capsys.readouterr().out)
    assert (finding["cell"], finding["line"], finding["col"]) == (2, 7, 20)


def test_directories_include_notebooks(tmp_path: Path, capsys) -> None:
    _write(tmp_path)
    assert main(["--select", "TPL101", str(tmp_path)]) == 1
    assert "train.ipynb:cell 2:7:20" in capsys.readouterr().out


def test_fix_rewrites_only_the_fixed_cell_and_keeps_outputs(tmp_path: Path, capsys) -> None:
    path = _write(tmp_path)
    before = json.loads(path.read_text())
    assert main(["--select", "TPL101", "--fix", str(path)]) == 0
    after = json.loads(path.read_text())
    assert after["cells"][1]["source"][-1] == '        return x + torch.ones(x.shape[0], 1, device="cuda")\n'
    assert after["cells"][1]["source"][0] == "%load_ext autoreload\n"
    assert after["cells"][1]["outputs"] == before["cells"][1]["outputs"]
    assert after["cells"][1]["metadata"] == before["cells"][1]["metadata"]
    assert after["cells"][2:] == before["cells"][2:] and after["metadata"] == before["metadata"]
    assert main(["--select", "TPL101", "--fix", str(path)]) == 0  # idempotent
    assert json.loads(path.read_text()) == after


def test_broken_notebook_is_a_one_line_error(tmp_path: Path, capsys) -> None:
    path = tmp_path / "broken.ipynb"
    path.write_text('{"cells": [torch')
    assert main([str(path)]) == 2
    line, summary = capsys.readouterr().out.splitlines()
    assert summary == "1 file could not be checked."
    assert line.startswith(f"{path}:1:1: TPL000 could not read notebook: not valid notebook JSON")


# TPL403's fix inserts a line after the imports of cell 1; TPL501 in cell 3 has no fix and stays.
SHIFTING = [
    {
        "cell_type": "code",
        "metadata": {},
        "outputs": [],
        "source": ["import torch\n", "import torch.nn as nn\n"],
    },
    {
        "cell_type": "code",
        "metadata": {},
        "outputs": [],
        "source": [
            "model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU()).cuda()\n",
            "optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n",
        ],
    },
    {
        "cell_type": "code",
        "metadata": {},
        "outputs": [],
        "source": [
            "loader = torch.utils.data.DataLoader(dataset, batch_size=64)\n",
            "for images, labels in loader:\n",
            "    model(images.cuda()).mean().backward()\n",
            "    optimizer.step()\n",
        ],
    },
]
FIX_ARGS = ["--select", "TPL403,TPL501", "--unsafe-fixes", "--format", "json"]


def _positions(out: str) -> list[tuple[str, int, int, int]]:
    return [(f["code"], f["cell"], f["line"], f["col"]) for f in json.loads(out)]


def test_after_a_fix_that_adds_lines_later_cells_are_reported_where_a_rerun_puts_them(
    tmp_path: Path, capsys
) -> None:
    path = tmp_path / "train.ipynb"
    path.write_text(
        json.dumps({"cells": SHIFTING, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}, indent=1) + "\n"
    )
    main([*FIX_ARGS, "--fix", str(path)])
    fixed = _positions(capsys.readouterr().out)
    assert json.loads(path.read_text())["cells"][0]["source"][-1] == "torch.backends.cudnn.benchmark = True\n"
    main([*FIX_ARGS, str(path)])
    assert fixed == _positions(capsys.readouterr().out) == [("TPL501", 3, 1, 10)]


def test_diff_reports_later_cells_where_they_are_on_disk(tmp_path: Path, capsys) -> None:
    path = tmp_path / "train.ipynb"
    path.write_text(
        json.dumps({"cells": SHIFTING, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}, indent=1) + "\n"
    )
    before = path.read_text()
    main([*FIX_ARGS, str(path)])
    linted = [p for p in _positions(capsys.readouterr().out) if p[0] == "TPL501"]
    main(["--select", "TPL403,TPL501", "--unsafe-fixes", "--diff", str(path)])
    out = capsys.readouterr().out
    assert '+    "torch.backends.cudnn.benchmark = True\\n"' in out
    assert [line.split(": TPL501")[0] for line in out.splitlines() if " TPL501 " in line] == [
        f"{path}:cell {cell}:{line}:{col}" for _, cell, line, col in linted
    ]
    assert path.read_text() == before


def test_help_lines_and_timed_cells_are_checked_not_errors(tmp_path: Path, capsys) -> None:
    timed = {
        "cell_type": "code",
        "execution_count": 4,
        "metadata": {},
        "outputs": [],
        "source": [
            "%%time\n",
            "model.fit?\n",
            "?pick\n",
            "for xb, yb in train_loader:\n",
            "    y = model(xb)[[0, 1]]\n",
            "    y.sum().backward()\n",
        ],
    }
    path = tmp_path / "train.ipynb"
    notebook = {"cells": [*CELLS, timed], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path.write_text(json.dumps(notebook, indent=1) + "\n")
    assert main(["--select", "TPL103", str(path)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert [line.split(": TPL")[0] for line in out if ": TPL" in line] == [
        f"{path}:cell 3:3:12",
        f"{path}:cell 5:5:9",
    ]

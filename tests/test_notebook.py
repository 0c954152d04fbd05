"""Notebooks: cells analysed as one module, findings per cell, fixes written back."""

from __future__ import annotations

import json

import pytest

from torchperf_lint.api import fix_source, lint_source
from torchperf_lint.notebook import NotebookError, read_notebook, write_back

pytestmark = pytest.mark.usefixtures("precision_off_rules_on")  # conftest.PRECISION_OFF


def _notebook(*cells: tuple[str, list[str]], **extra: object) -> str:
    data = {
        "cells": [
            {
                "cell_type": kind,
                "metadata": {},
                "source": source,
                **(
                    {
                        "execution_count": 1,
                        "outputs": [{"output_type": "stream", "name": "stdout", "text": ["ok\n"]}],
                    }
                    if kind == "code"
                    else {}
                ),
            }
            for kind, source in cells
        ],
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
        **extra,
    }
    return json.dumps(data, indent=1) + "\n"


MODEL_CELL = [
    "import torch\n",
    "from torch import nn\n",
    "%matplotlib inline\n",
    "!nvidia-smi\n",
    "class Net(nn.Module):\n",
    "    def forward(self, x):\n",
    "        return x + torch.zeros(x.shape[0], 1).cuda()\n",
]
LOOP_CELL = [
    "model = Net()\n",
    "for xb, yb in train_loader:\n",
    "    loss = model(xb)[[0, 1]].sum()\n",
    "    loss.backward()\n",
    "    files = !ls\n",
    "    optimizer.step()",
]


def test_unchanged_notebook_round_trips_byte_for_byte() -> None:
    text = _notebook(("markdown", ["# Title"]), ("code", MODEL_CELL), ("code", LOOP_CELL))
    notebook = read_notebook(text)
    assert write_back(notebook, notebook.module_source()) == text


def test_magics_and_shell_escapes_are_masked_not_errors() -> None:
    notebook = read_notebook(_notebook(("code", MODEL_CELL), ("code", LOOP_CELL)))
    source = notebook.module_source()
    assert "%matplotlib" not in source and "!nvidia-smi" not in source and "!ls" not in source
    assert all(f.code != "TPL000" for f in lint_source(source))


def test_findings_are_located_in_their_cells() -> None:
    notebook = read_notebook(_notebook(("markdown", ["# Title"]), ("code", MODEL_CELL), ("code", LOOP_CELL)))
    located = sorted((notebook.locate(f.line), f.code) for f in lint_source(notebook.module_source()))
    # cell numbers count every cell, markdown included, as the notebook shows them
    assert located == [((2, 7), "TPL101"), ((3, 3), "TPL103"), ((3, 4), "TPL701")]


def test_loop_in_one_cell_makes_a_helper_of_another_hot() -> None:
    helper = ["import torch\n", "def pick(out):\n", "    return out[[0, 1]].sum()\n"]
    loop = ["for xb, yb in train_loader:\n", "    loss = pick(model(xb))\n", "    loss.backward()"]
    device = ['device = torch.device("cuda")\n']  # a notebook that trains on the GPU
    notebook = read_notebook(_notebook(("code", helper), ("code", loop), ("code", device)))
    found = [
        (notebook.locate(f.line), f.code, notebook.relabel(f.context))
        for f in lint_source(notebook.module_source())
    ]
    assert found == [((1, 3), "TPL103", "in pick, called from loop over train_loader at cell 2, line 1")]
    assert lint_source("".join(helper)) == []  # alone, the helper is cold


def test_fix_writes_cells_back_keeping_outputs_metadata_and_magics() -> None:
    text = _notebook(("markdown", ["# Title"]), ("code", MODEL_CELL), ("code", LOOP_CELL))
    notebook = read_notebook(text)
    fixed = write_back(notebook, fix_source(notebook.module_source()))
    data = json.loads(fixed)
    assert data["metadata"] == json.loads(text)["metadata"]
    cell = data["cells"][1]
    assert cell["outputs"] == [{"output_type": "stream", "name": "stdout", "text": ["ok\n"]}]
    assert cell["source"][2:4] == ["%matplotlib inline\n", "!nvidia-smi\n"]
    assert cell["source"][-1] == '        return x + torch.zeros(x.shape[0], 1, device="cuda")\n'
    assert data["cells"][2]["source"][4] == "    files = !ls\n"


def test_not_a_notebook_is_a_clear_error() -> None:
    with pytest.raises(NotebookError, match="not valid notebook JSON"):
        read_notebook("{ not json")
    with pytest.raises(NotebookError, match="no cell list"):
        read_notebook('{"metadata": {}}')


EXPORT_CELL = [
    "import torch\n",
    "!python export.py --weights yolov5s.pt \\\n",
    "--grid --include onnx\n",
    "for xb, yb in train_loader:\n",
    "    %run export.py --weights {w} \\\n",
    "        --img 640 \\\n",
    "      --dynamic\n",
    "    files = !ls runs/ \\\n",
    "*.onnx\n",
    "    loss = model(xb + torch.randn(4).cuda()).sum()\n",
    "    loss.backward()\n",
    "path = 'a' \\\n",
    "    '.onnx'",
]


def test_shell_lines_and_magics_continued_with_a_backslash_are_masked_whole() -> None:
    text = _notebook(("code", EXPORT_CELL))
    notebook = read_notebook(text)
    source = notebook.module_source()
    assert "--grid" not in source and "--img" not in source and "--dynamic" not in source
    assert "*.onnx" not in source
    assert "path = 'a' \\\n    '.onnx'" in source  # a Python line continued is Python
    assert [(notebook.locate(f.line), f.code) for f in lint_source(source)] == [((1, 10), "TPL101")]
    assert write_back(notebook, source) == text
    fixed = json.loads(write_back(notebook, fix_source(source)))["cells"][0]["source"]
    assert fixed[:9] == EXPORT_CELL[:9]
    assert fixed[9] == '    loss = model(xb + torch.randn(4, device="cuda")).sum()\n'


def _timed_loop(magic: str) -> list[str]:
    return [
        f"{magic}\n",
        "model = Net()\n",
        "for xb, yb in train_loader:\n",
        "    loss = model(xb)[[0, 1]].sum()\n",
        "    loss.backward()\n",
        "    optimizer.step()",
    ]


@pytest.mark.parametrize("magic", ["%%time", "%%timeit -n 1 -r 1", "%%capture output", "%%prun -s cumtime"])
def test_a_cell_magic_with_a_python_body_is_linted_at_the_cells_lines(magic: str) -> None:
    text = _notebook(("code", MODEL_CELL), ("code", _timed_loop(magic)))
    notebook = read_notebook(text)
    source = notebook.module_source()
    located = sorted((notebook.locate(f.line), f.code) for f in lint_source(source))
    assert located == [((1, 7), "TPL101"), ((2, 4), "TPL103"), ((2, 5), "TPL701")]
    assert write_back(notebook, source) == text
    fixed = json.loads(write_back(notebook, fix_source(source)))["cells"][1]["source"]
    assert fixed[0] == f"{magic}\n"


@pytest.mark.parametrize("magic", ["%%bash", "%%html", "%%writefile train.py", "%%javascript", "%%sh"])
def test_a_cell_magic_whose_body_is_not_python_is_skipped_without_a_finding(magic: str) -> None:
    text = _notebook(
        ("code", MODEL_CELL),
        ("code", _timed_loop(magic)[:-1] + ["    optimizer.step()\n", "echo 'not (python'"]),
    )
    notebook = read_notebook(text)
    source = notebook.module_source()
    assert [(notebook.locate(f.line), f.code) for f in lint_source(source)] == [((1, 7), "TPL101")]
    assert write_back(notebook, source) == text


HELP_CELL = [
    "?model\n",
    "model??\n",
    "model.fit?\n",
    "??torch.nn.Linear\n",
    "for xb, yb in train_loader:\n",
    "    loss = model(xb)[[0, 1]].sum()\n",
    "    loss.backward()\n",
    "    optimizer.step()",
]


def test_help_lines_are_masked_like_other_magics() -> None:
    text = _notebook(("code", MODEL_CELL), ("code", HELP_CELL))
    notebook = read_notebook(text)
    source = notebook.module_source()
    assert "?" not in source.replace("# torchperf-lint", "")
    located = sorted((notebook.locate(f.line), f.code) for f in lint_source(source))
    assert located == [((1, 7), "TPL101"), ((2, 6), "TPL103"), ((2, 7), "TPL701")]
    assert write_back(notebook, source) == text

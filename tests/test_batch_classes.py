"""What a batch is (issue 25, item 3): a fix that adds `non_blocking=True` to `.to()` needs the
receiver proven a tensor. A project class with its own `to` that takes no `non_blocking` (DETR's
`NestedTensor`), collated into batches in another module, gets no finding; one whose `to` takes
it gets only an unsafe fix. The fixed DETR-like project still trains (torch on the CPU)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from torchperf_lint.api import lint_source
from torchperf_lint.config import Settings
from torchperf_lint.engine.runner import lint_bytes
from torchperf_lint.rules import select_rules

MISC = """\
import torch


class NestedTensor:
    def __init__(self, tensors, mask):
        self.tensors = tensors
        self.mask = mask

    def to(self, device):
        return NestedTensor(self.tensors.to(device), self.mask.to(device))


def nested_tensor_from_tensor_list(tensors):
    batch = torch.stack(tensors)
    return NestedTensor(batch, torch.zeros(batch.shape[0], dtype=torch.bool))


def collate_fn(batch):
    batch = list(zip(*batch))
    return tuple([nested_tensor_from_tensor_list(batch[0]), torch.stack(batch[1])])
"""

ENGINE = """\
import torch


def train_one_epoch(model, criterion, data_loader, optimizer, device):
    for samples, targets in data_loader:
        samples = samples.to(device)
        targets = targets.to(device)
        loss = criterion(model(samples.tensors), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()
"""

MAIN = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

from engine import train_one_epoch
from util.misc import collate_fn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
dataset = TensorDataset(torch.randn(8, 4), torch.randn(8, 2))
loader = DataLoader(dataset, batch_size=4, collate_fn=collate_fn)
model = torch.nn.Linear(4, 2).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
print(train_one_epoch(model, torch.nn.MSELoss(), loader, optimizer, device))
"""


def _project(root: Path, misc: str = MISC) -> Path:
    (root / "util").mkdir()
    (root / "util" / "__init__.py").write_text("")
    (root / "util" / "misc.py").write_text(misc)
    (root / "engine.py").write_text(ENGINE)
    (root / "main.py").write_text(MAIN)
    (root / "pyproject.toml").write_text('[project]\nname = "detr-like"\n')
    return root


def _tpl106(root: Path) -> list[tuple[int, bool]]:
    path = root / "engine.py"
    findings = lint_source(path.read_text(), path=str(path), select=["TPL106"])
    return [(f.line, f.fix is not None and f.fix.safety.name == "SAFE") for f in findings]


def test_a_project_batch_class_whose_to_takes_no_non_blocking_gets_no_finding(tmp_path: Path) -> None:
    assert _tpl106(_project(tmp_path)) == []


def test_a_project_batch_class_whose_to_takes_non_blocking_gets_an_unsafe_fix(tmp_path: Path) -> None:
    misc = MISC.replace("def to(self, device):", "def to(self, device, non_blocking=False):")
    assert _tpl106(_project(tmp_path, misc)) == [(6, False), (7, False)]


def test_without_a_project_batch_class_batch_elements_keep_the_safe_fix(tmp_path: Path) -> None:
    misc = MISC.replace("    def to(self, device):\n", "    def move(self, device):\n")
    assert _tpl106(_project(tmp_path, misc)) == [(6, True), (7, True)]


def test_the_class_in_the_linted_file_itself_counts_without_a_project() -> None:
    source = MISC + ENGINE.replace("import torch\n", "")
    assert lint_source(source, path="<string>", select=["TPL106"]) == []


# torch_geometric's `InMemoryDataset.to(self, device)` moves a whole dataset: a loader draws from a
# dataset and never yields one, so its `to` is no batch's, whatever it takes
DATASETS = """\
import torch


class GraphDataset(torch.utils.data.Dataset):
    def __len__(self):
        return 0


class InMemoryDataset(GraphDataset):
    def to(self, device):
        self.data = self.data.to(device)
        return self

    def cuda(self, device=None):
        return self.to(device or "cuda")
"""


def test_a_dataset_class_with_its_own_to_is_no_batch_class(tmp_path: Path) -> None:
    misc = MISC.replace("def to(self, device):", "def to(self, device, non_blocking=False):")
    root = _project(tmp_path, misc)
    (root / "util" / "datasets.py").write_text(DATASETS)
    assert _tpl106(root) == [(6, False), (7, False)]


def test_a_dataset_class_of_the_linted_file_is_no_batch_class_without_a_project() -> None:
    source = DATASETS.replace(
        "import torch\n", "import torch\nfrom torch.utils.data import IterableDataset\n"
    )
    source = source.replace("(torch.utils.data.Dataset)", "(IterableDataset)") + ENGINE.replace(
        "import torch\n", ""
    )
    assert [f.line for f in lint_source(source, path="<string>", select=["TPL106"])] == [21, 22]
    # the file's own reading, without the project pass's answer
    alone = lint_bytes(source, "<string>", select_rules(["TPL106"], [], []), Settings())
    assert [f.line for f in alone.findings] == [21, 22]


def test_a_dataset_next_to_a_batch_class_whose_to_takes_no_non_blocking_keeps_it_silent(
    tmp_path: Path,
) -> None:
    root = _project(tmp_path)
    (root / "util" / "datasets.py").write_text(DATASETS)
    assert _tpl106(root) == []


@pytest.mark.parametrize("extra", [[], ["--unsafe-fixes"]])
def test_the_fixed_detr_like_project_still_trains(tmp_path: Path, extra: list[str]) -> None:
    root = _project(tmp_path)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "torchperf_lint",
            "--no-cache",
            "--extend-select",
            "ALL",
            "--fix",
            *extra,
            "--exit-zero",
            str(root),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "samples.to(device)" in (root / "engine.py").read_text()
    run = subprocess.run([sys.executable, "main.py"], cwd=root, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr


def _tpl502(root: Path) -> list[int]:
    path = root / "main.py"
    return [f.line for f in lint_source(path.read_text(), path=str(path), select=["TPL502"])]


def test_a_loader_collating_into_a_class_pinning_leaves_alone_gets_no_pin_memory_finding(
    tmp_path: Path,
) -> None:
    assert _tpl502(_project(tmp_path)) == []


def test_a_batch_class_with_its_own_pin_memory_keeps_the_pin_memory_finding(tmp_path: Path) -> None:
    misc = MISC.replace(
        "    def to(self, device):\n",
        "    def pin_memory(self):\n        return self\n\n    def to(self, device):\n",
    )
    assert _tpl502(_project(tmp_path, misc)) == [9]


def test_a_batch_class_deriving_from_a_library_container_keeps_the_pin_memory_finding(
    tmp_path: Path,
) -> None:
    misc = MISC.replace("class NestedTensor:", "class NestedTensor(dict):")
    assert _tpl502(_project(tmp_path, misc)) == [9]

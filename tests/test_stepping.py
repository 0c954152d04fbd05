"""Evidence of stepping (RULES.md, "Defaults follow evidence"; project/stepping.py): a rule whose
default form asks for it reports code that a step or inference loop of the project runs, and leaves
code hot only by assumption (a forward no program of the project builds) to `--library`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from torchperf_lint.api import lint_source
from torchperf_lint.rules import ALL_RULES
from torchperf_lint.settings import Settings

from .helpers import write_project

pytestmark = pytest.mark.stepping_evidence

MODELS = """
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.bn = nn.BatchNorm2d(8)

    def forward(self, x):
        return self.bn(self.conv(x)) + torch.randn(8, 1, 1)


class Unused(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.bn = nn.BatchNorm2d(8)

    def forward(self, x):
        return self.bn(self.conv(x)) + torch.randn(8, 1, 1)
"""

# the program around the loop builds the model: main builds it and calls train, which loops
TRAIN = """
import torch
from models import Net


def train(model, loader, optimizer):
    for x, y in loader:
        loss = model(x.cuda()).sum()
        loss.backward()
        optimizer.step()


def main():
    model = Net().cuda()
    train(model, [], torch.optim.SGD(model.parameters(), lr=0.1))


if __name__ == "__main__":
    main()
"""

SPLIT = ["TPL101", "TPL401"]


def _lines(root: Path, name: str, library: bool = False) -> list[tuple[int, str]]:
    path = root / name
    found = lint_source(path.read_text(), str(path), settings=Settings(library=library), select=SPLIT)
    return sorted((f.line, f.code) for f in found)


def test_code_a_step_loop_runs_is_reported_and_a_class_no_program_builds_is_not(tmp_path: Path) -> None:
    root = write_project(tmp_path, {"models.py": MODELS, "train.py": TRAIN})
    assert _lines(root, "models.py") == [(8, "TPL401"), (12, "TPL101")]
    assert _lines(root, "models.py", library=True) == [
        (8, "TPL401"),
        (12, "TPL101"),
        (18, "TPL401"),
        (22, "TPL101"),
    ]


def test_a_library_without_step_loops_is_silent_by_default(tmp_path: Path) -> None:
    root = write_project(tmp_path, {"models.py": MODELS})
    assert _lines(root, "models.py") == []
    assert len(_lines(root, "models.py", library=True)) == 4


def test_parts_built_by_a_stepped_model_and_helpers_it_calls_are_stepped(tmp_path: Path) -> None:
    models = """
    import torch
    from torch import nn


    def block(c):
        return nn.Sequential(nn.Conv2d(c, c, 3), nn.BatchNorm2d(c))


    class Stem(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3)
            self.bn = nn.BatchNorm2d(8)

        def forward(self, x):
            return self.bn(self.conv(x))


    class Net(nn.Module):
        def __init__(self, stem):
            super().__init__()
            self.stem = stem()
            self.body = block(8)


    def resnet():
        return Net(Stem)  # a builder hands the block class on, as torchvision's resnet18 does
    """
    train = TRAIN.replace("from models import Net", "from models import resnet").replace("Net()", "resnet()")
    root = write_project(tmp_path, {"models.py": models, "train.py": train})
    assert _lines(root, "models.py") == [(6, "TPL401"), (12, "TPL401")]


def test_lightning_step_hooks_are_evidence(tmp_path: Path) -> None:
    module = """
    import torch
    from torch import nn
    import lightning as L


    class Head(nn.Module):
        def forward(self, x):
            return x + torch.randn(8)


    class Model(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.head = Head()

        def training_step(self, batch, index):
            return self.head(batch).sum()
    """
    root = write_project(tmp_path, {"model.py": module})
    assert _lines(root, "model.py") == [(8, "TPL101")]


def test_rules_without_the_split_are_unchanged(tmp_path: Path) -> None:
    root = write_project(tmp_path, {"models.py": MODELS.replace("torch.randn(8, 1, 1)", "x[range(8)]")})
    path = root / "models.py"
    found = lint_source(path.read_text(), str(path), select=["TPL103"])
    assert [f.line for f in found] == [12, 22]


def test_the_rules_whose_broad_form_misses_the_bar_ask_for_stepping() -> None:
    asking = {rule.code for rule in ALL_RULES if rule.stepping_evidence}
    assert asking == {"TPL101", "TPL102", "TPL104", "TPL201", "TPL302", "TPL303", "TPL401"}


def _cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "torchperf_lint", "--no-cache", "--select", ",".join(SPLIT), *args, "."]
    return subprocess.run(command, cwd=root, capture_output=True, text=True)


def test_the_command_line_counts_what_library_shows_and_json_marks_it(tmp_path: Path) -> None:
    root = write_project(tmp_path, {"models.py": MODELS, "train.py": TRAIN})
    text = _cli(root)
    assert "models.py:8:" in text.stdout and "models.py:18:" not in text.stdout
    assert "2 findings are in code no step loop of this project runs" in text.stdout
    assert "`--library` shows them." in text.stdout
    shown = json.loads(_cli(root, "--library", "--format", "json").stdout)
    marked = sorted((item["line"], item.get("hypothesis", False)) for item in shown)
    assert marked == [(8, False), (12, False), (18, True), (22, True)]


def test_library_from_the_config_file(tmp_path: Path) -> None:
    root = write_project(tmp_path, {"models.py": MODELS})
    (root / "pyproject.toml").write_text("[project]\nname = 'p'\n\n[tool.torchperf-lint]\nlibrary = true\n")
    assert "models.py:18:" in _cli(root).stdout


def test_a_fix_leaves_code_hot_only_by_assumption_alone(tmp_path: Path) -> None:
    root = write_project(tmp_path, {"models.py": MODELS, "train.py": TRAIN})
    _cli(root, "--fix", "--unsafe-fixes")
    fixed = (root / "models.py").read_text().splitlines()
    assert "device=" in fixed[11] and "device=" not in fixed[21]


def test_a_chain_of_parts_deeper_than_the_stack_is_followed(tmp_path: Path) -> None:
    depth = 1500  # each class holds the next as an attribute: more than Python's recursion limit
    parts = [
        f"class Part{i}(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        f"        self.inner = Part{i + 1}()\n"
        for i in range(depth)
    ]
    last = (
        f"class Part{depth}(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.conv = nn.Conv2d(3, 8, 3)\n        self.bn = nn.BatchNorm2d(8)\n\n"
        "    def forward(self, x):\n        return self.bn(self.conv(x))\n"
    )
    models = "import torch\nfrom torch import nn\n\n\n" + "\n\n".join([*reversed(parts), last]) + "\n"
    root = write_project(tmp_path, {"models.py": models, "train.py": TRAIN.replace("Net", "Part0")})
    path = root / "models.py"
    found = lint_source(path.read_text(), str(path), select=["TPL401"])
    assert [f.code for f in found] == ["TPL401"]


_METRICS = """
import torch
from torch import nn


class Metric(nn.Module):
    def forward(self, *args):
        self.update(*args)
        return self.compute()


class Embedded(Metric):
    def update(self, loader, model):
        for batch in loader:  # the project's own loop: it runs Embedded's methods
            self.value = model(batch.cuda())

    def compute(self):
        return self.value + torch.zeros(4).cuda()


class Curve(Metric):
    def update(self, preds):
        self.preds = preds

    def compute(self):
        return self.preds + torch.zeros(4).cuda()
"""


def test_a_base_method_runs_the_overrides_of_the_subclass_that_steps(tmp_path: Path) -> None:
    # Metric.forward is reached from Embedded.update's loop: it calls Embedded's compute, not Curve's
    root = write_project(tmp_path, {"metrics.py": _METRICS})
    assert _lines(root, "metrics.py") == [(17, "TPL101")]
    assert _lines(root, "metrics.py", library=True) == [(17, "TPL101"), (25, "TPL101")]


def test_a_program_that_builds_the_other_subclass_steps_it_too(tmp_path: Path) -> None:
    script = """
    import torch
    from metrics import Curve

    def evaluate(loader, model):
        curve = Curve().cuda()
        for batch in loader:
            print(curve(model(batch.cuda())))
    """
    root = write_project(tmp_path, {"metrics.py": _METRICS, "evaluate.py": script})
    assert _lines(root, "metrics.py") == [(17, "TPL101"), (25, "TPL101")]


_WRAPPER = """
from metrics import Curve, Metric


class Running(Metric):
    def __init__(self, base_metric):
        super().__init__()
        self.base_metric = base_metric

    def update(self, *args):
        self.base_metric.forward(*args)


class RunningCurve(Running):
    def __init__(self):
        super().__init__(base_metric=Curve())
"""


def test_a_method_called_on_an_attribute_runs_on_what_the_attribute_holds(tmp_path: Path) -> None:
    # torchmetrics' Running wrappers hold the metric their subclass builds (`super().__init__(
    # base_metric=MeanMetric())`): `self.base_metric.forward()` runs Metric.forward on that metric,
    # not on Embedded, whose loop steps Metric.forward; Curve's compute stays hot by assumption
    root = write_project(tmp_path, {"metrics.py": _METRICS, "running.py": _WRAPPER})
    assert _lines(root, "metrics.py") == [(17, "TPL101")]
    assert _lines(root, "metrics.py", library=True) == [(17, "TPL101"), (25, "TPL101")]

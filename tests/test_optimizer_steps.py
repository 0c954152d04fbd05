"""What steps an optimizer: `<name>.step()` where the name is named like one or bound to a
constructed optimizer class. The project pass reads the bindings (project/summary.py,
Function.optimizers); the file pass asks it for the scope whose binding is visible at the call
(analysis/hotpath.py), so a loop that only steps such an optimizer is a step loop."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from torchperf_lint.api import lint_source

from .helpers import write_project

HEADER = """
import torch

model = torch.nn.Linear(4, 1).cuda()
"""

# steps `sgd` once per iteration and reads the loss on the host
STEPS = """
for i in range(100):
    loss = ((model(x) - y) ** 2).mean()
    sgd.step(lambda: loss)
    print(loss.item())
"""
IN_FUNCTION = textwrap.indent(STEPS, "    ")

LOCAL = "def fit(x, y):\n    sgd = {bound}" + IN_FUNCTION
GLOBAL_READ_IN_FUNCTION = "sgd = {bound}\n\n\ndef fit(x, y):" + IN_FUNCTION
TOP_LEVEL = "sgd = {bound}" + STEPS
# the function's own binding hides the module's optimizer
SHADOWED = "sgd = torch.optim.SGD(model.parameters())\n\n\n" + LOCAL

OPTIMIZERS = ["torch.optim.LBFGS(model.parameters())", "optim.SGD(model.parameters(), lr=0.1)"]
NOT_OPTIMIZERS = ["torch.optim.lr_scheduler.StepLR(opt, 10)", "make_stepper(model)", "schedule"]


def syncs(body: str, bound: str) -> list[int]:
    source = HEADER + "from torch import optim\n" + textwrap.dedent(body).replace("{bound}", bound)
    return [f.line for f in lint_source(source, path="train.py", select=["TPL107"])]


@pytest.mark.parametrize("body", [LOCAL, GLOBAL_READ_IN_FUNCTION, TOP_LEVEL])
@pytest.mark.parametrize("bound", OPTIMIZERS)
def test_a_loop_that_steps_a_name_bound_to_an_optimizer_is_a_step_loop(body: str, bound: str) -> None:
    assert len(syncs(body, bound)) == 1


@pytest.mark.parametrize("body", [LOCAL, GLOBAL_READ_IN_FUNCTION, TOP_LEVEL, SHADOWED])
@pytest.mark.parametrize("bound", NOT_OPTIMIZERS)
def test_a_step_of_a_name_bound_otherwise_is_not_an_optimizer_step(body: str, bound: str) -> None:
    """A scheduler's or another object's `step()`; in SHADOWED the function's own binding hides
    the module's optimizer."""
    assert syncs(body, bound) == []


ACCUMULATING = """
import torch


def train(model, ema, batches, accumulate):
    sgd = torch.optim.SGD(model.parameters())
    for i, (x, y) in enumerate(batches):
        loss = model(x.cuda()).sum()
        if (i + 1) % accumulate == 0:
            sgd.step(lambda: loss)
            for e, p in zip(ema.parameters(), model.parameters()):
                e.mul_(0.99).add_(p, alpha=0.01)
"""


def test_the_branch_that_steps_a_bound_optimizer_is_the_step_not_a_periodic_extra(tmp_path: Path) -> None:
    """`if (i + 1) % accumulate == 0:` around the step is gradient accumulation: the EMA it
    updates one tensor at a time runs every optimizer step (the project's reading of one module;
    the same without the optimizer binding is a periodic branch of a loop that steps nothing)."""
    renamed = ACCUMULATING.replace("sgd = torch.optim.SGD(model.parameters())", "sgd = make(model)")
    root = write_project(
        tmp_path, {"pyproject.toml": "[project]\nname = 'p'\n", "train.py": ACCUMULATING, "other.py": renamed}
    )
    for name, expected in [("train.py", [10]), ("other.py", [])]:
        path = root / name
        findings = lint_source(path.read_text(), str(path), select=["TPL204"])
        assert [f.line for f in findings] == expected, name

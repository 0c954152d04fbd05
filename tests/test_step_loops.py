"""Which loop is the step loop (RULES.md, "hot paths"): the loop whose own body steps the optimizer
runs once per step even around an inner loop of gradient accumulation (lucidrains' trainers:
`while self.step < self.train_num_steps:` around `for _ in range(self.gradient_accumulate_every):`),
read the same by the file's walk and by the project pass (a helper in another module)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from torchperf_lint.api import lint_source

pytestmark = pytest.mark.usefixtures("precision_off_rules_on")  # TPL101 is off by default

_TRAINER = """
    import torch
    from helpers import noise_like

    class Trainer:
        def train(self):
            while self.step < self.train_num_steps:
                for _ in range(self.gradient_accumulate_every):
                    data = next(self.dl).to(self.device)
                    loss = self.model(data)
                    loss.backward()
                jitter = torch.randn(8).cuda()
                self.model.bias.data += noise_like(jitter)
                self.opt.step()
                self.opt.zero_grad()
                self.step += 1
    """
_HELPERS = """
    import torch

    def noise_like(x):
        return x * torch.rand(8).cuda()
    """
_EPOCHS = """
    import torch

    def train(model, loader, optimizer, epochs):
        for epoch in range(epochs):
            for x in loader:
                model(x.cuda()).sum().backward()
                optimizer.step()
            mark = torch.zeros(8).cuda()
    """


def _lint(root: Path, files: dict[str, str], target: str) -> list[int]:
    files = {"pyproject.toml": "[project]\nname = 'p'\n", **files}
    for name, text in files.items():
        (root / name).write_text(textwrap.dedent(text).lstrip("\n"))
    path = root / target
    return [f.line for f in lint_source(path.read_text(), str(path), select=["TPL101"])]


def test_the_loop_that_steps_the_optimizer_around_gradient_accumulation_is_the_step_loop(
    tmp_path: Path,
) -> None:
    files = {"trainer.py": _TRAINER, "helpers.py": _HELPERS}
    assert _lint(tmp_path, files, "trainer.py") == [11]


def test_the_project_pass_calls_its_helpers_once_per_step(tmp_path: Path) -> None:
    files = {"trainer.py": _TRAINER, "helpers.py": _HELPERS}
    assert _lint(tmp_path, files, "helpers.py") == [4]


@pytest.mark.parametrize("scheduler", ["", "scheduler.step()"])
def test_an_epoch_loop_around_the_step_loop_stays_cold(tmp_path: Path, scheduler: str) -> None:
    # a learning-rate scheduler's step() runs once per epoch: it does not make the epoch loop step
    epochs = _EPOCHS.replace(
        "mark = torch.zeros(8).cuda()", f"mark = torch.zeros(8).cuda()\n            {scheduler}"
    )
    epochs = epochs.replace(
        "def train(", "scheduler = torch.optim.lr_scheduler.StepLR(None, 10)\n\n    def train("
    )
    assert _lint(tmp_path, {"train.py": epochs}, "train.py") == []


def test_a_function_that_runs_its_own_step_loop_is_not_made_hot_by_its_callers(tmp_path) -> None:
    from tests.helpers import finding_lines, write_project

    explainer = """
        import torch
        from torch import nn


        class Explainer(nn.Module):
            def fit(self, model, x):
                self.mask = torch.zeros(int(x.sum().item()))  # line 7: once per explanation
                opt = torch.optim.Adam([self.mask])
                for _ in range(100):
                    loss = model(x * self.mask).sum()
                    loss.backward()
                    opt.step()
                return self.mask

            def forward(self, model, x):
                return self.fit(model, x)
    """
    root = write_project(tmp_path, {"explainer.py": explainer})
    assert finding_lines(root, "explainer.py", "TPL105") == []
    write_project(
        tmp_path,
        {
            "explainer.py": explainer.replace("                    loss.backward()\n", "").replace(
                "                    opt.step()\n", ""
            )
        },
    )
    assert finding_lines(root, "explainer.py", "TPL105") == [7]

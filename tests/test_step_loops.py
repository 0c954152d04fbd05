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


_LEAVING = """
    import torch
    from helpers import noise_like

    def train(model, loader, optimizer, max_steps):
        for step, x in enumerate(loader):
            model(x.cuda()).sum().backward()
            optimizer.step()
            if step >= max_steps:
                last = noise_like(torch.zeros(8).cuda())
                break
    """


@pytest.mark.parametrize("leave", ["break", "return last", "raise StopIteration"])
def test_a_branch_that_leaves_the_step_loop_runs_once(tmp_path: Path, leave: str) -> None:
    # the body ends the training: it runs on the last step only, in the file and through a helper
    files = {"train.py": _LEAVING.replace("break", leave), "helpers.py": _HELPERS}
    assert _lint(tmp_path, files, "train.py") == []
    assert _lint(tmp_path, files, "helpers.py") == []


@pytest.mark.parametrize(
    "variant",
    [
        # `continue` skips one step: the body runs on every skipped step
        ("break", "continue"),
        # the break leaves an inner loop of gradient accumulation, once per step
        (
            "            if step >= max_steps:\n",
            "            for _ in range(4):\n                if step >= max_steps:\n",
        ),
    ],
)
def test_a_branch_that_stays_in_the_step_loop_stays_hot(tmp_path: Path, variant: tuple[str, str]) -> None:
    source = _LEAVING.replace(*variant)
    if "range(4)" in source:
        source = source.replace("                last = ", "                    last = ").replace(
            "                break", "                    break"
        )
    files = {"train.py": source, "helpers.py": _HELPERS}
    assert _lint(tmp_path, files, "train.py") == [9 + ("range(4)" in source)]
    assert _lint(tmp_path, files, "helpers.py") == [4]


def test_a_break_out_of_a_loop_in_forward_stays_hot(tmp_path: Path) -> None:
    model = """
        import torch
        from torch import nn

        class Net(nn.Module):
            def forward(self, x):
                for block in self.blocks:
                    if block.last:
                        x = x + torch.zeros(8).cuda()
                        break
                    x = block(x)
                return x
        """
    assert _lint(tmp_path, {"net.py": model}, "net.py") == [8]


_CPU_DEMO = """
    import torch

    def has_overflow(params):
        return any(float(p.grad.sum()) != float(p.grad.sum()) for p in params)

    if __name__ == "__main__":
        w = torch.randn(10, 1, requires_grad=True)
        optimizer = torch.optim.SGD([w], lr=0.1)
        for t in range(500):
            loss = (torch.randn(64, 10) @ w).pow(2).sum()
            loss.backward()
            if not has_overflow([w]):
                optimizer.step()
    """


def test_a_module_level_loop_of_a_file_without_cuda_is_a_cpu_demo(tmp_path: Path) -> None:
    from tests.helpers import finding_lines, write_project

    on_gpu = ("requires_grad=True)", "requires_grad=True, device='cuda')")
    # a usage example under __main__ over CPU tensors (tacotron2's loss_scaler.py): no GPU step
    root = write_project(tmp_path / "cpu", {"loss_scaler.py": _CPU_DEMO})
    assert finding_lines(root, "loss_scaler.py", "TPL107") == []
    root = write_project(tmp_path / "gpu", {"loss_scaler.py": _CPU_DEMO.replace(*on_gpu)})
    assert finding_lines(root, "loss_scaler.py", "TPL107") == [4, 4]
    # the same through a helper of another module (the project pass)
    helper, main = _CPU_DEMO.split("    if __name__")
    demo = "import torch\nfrom scaling import has_overflow\n\n" + textwrap.dedent("    if __name__" + main)
    root = write_project(tmp_path / "cpu2", {"demo.py": demo, "scaling.py": helper})
    assert finding_lines(root, "scaling.py", "TPL107") == []
    root = write_project(tmp_path / "gpu2", {"demo.py": demo.replace(*on_gpu), "scaling.py": helper})
    assert finding_lines(root, "scaling.py", "TPL107") == [4, 4]

"""torch.compile in the analysis: TPL703's silence where anything is compiled or decided (here,
in another module, or by the torch the project runs), and the graph break that sync findings name
inside compiled code."""

from __future__ import annotations

import textwrap
from pathlib import Path

from torchperf_lint.api import lint_source
from torchperf_lint.settings import Settings

from .helpers import finding_lines, write_project

_SCRIPT = """
    import torch

    def main(model, loader, optimizer):
        model.cuda()
        for x, y in loader:
            loss = model(x.cuda(), y.cuda())
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
    """


def _lint(source: str, code: str, settings: Settings | None = None) -> list[tuple[int, str]]:
    text = textwrap.dedent(source).lstrip("\n")
    return [(f.line, f.message) for f in lint_source(text, path="train.py", settings=settings, select=[code])]


def test_eager_script_is_reported_at_the_model_move() -> None:
    ((line, message),) = _lint(_SCRIPT, "TPL703")
    assert line == 4
    assert "try model = torch.compile(model)" in message


def test_runtime_older_than_torch_2_has_no_compile() -> None:
    old = Settings(torch_version=(1, 13), torch_version_source="--torch-version 1.13")
    assert _lint(_SCRIPT, "TPL703", old) == []


def test_model_compiled_in_another_module_is_compiled(tmp_path: Path) -> None:
    model = """
        import torch

        def build(net):
            return torch.compile(net)
        """
    root = write_project(tmp_path, {"train.py": _SCRIPT, "model.py": model})
    assert finding_lines(root, "train.py", "TPL703") == []


def test_command_line_flag_is_a_decision() -> None:
    source = _SCRIPT.replace(
        "def main(", 'parser.add_argument("--compile", action="store_true")\n\n    def main('
    )
    assert _lint(source, "TPL703") == []


def test_regex_compile_is_not_torch_compile() -> None:
    source = _SCRIPT.replace(
        "import torch\n", "import re\n    import torch\n\n    PATTERN = re.compile('x')\n"
    )
    assert [line for line, _ in _lint(source, "TPL703")] == [7]


def test_script_without_optimizer_is_silent() -> None:
    assert _lint(_SCRIPT.replace("optimizer.step()", "pass"), "TPL703") == []


_COMPILED_STEP = """
    import torch

    @torch.compile
    def train_step(model, x, y, optimizer):
        loss = model(x, y)
        loss.backward()
        optimizer.step()
        assert torch.isfinite(loss).all()
        return loss

    def main(model, loader, optimizer):
        model.cuda()
        for x, y in loader:
            loss = train_step(model, x.cuda(), y.cuda(), optimizer)
            assert torch.isfinite(loss).all()
    """


def test_sync_inside_compiled_code_says_it_breaks_the_graph() -> None:
    findings = _lint(_COMPILED_STEP, "TPL104")
    inside = [message for line, message in findings if line == 8]
    outside = [message for line, message in findings if line == 15]
    assert inside and inside[0].endswith("; inside torch.compile'd code it also breaks the graph")
    assert outside and "breaks the graph" not in outside[0]


def test_forward_of_a_compiled_instance_is_compiled_code() -> None:
    source = """
        import torch
        import torch.nn as nn

        class Net(nn.Module):
            def forward(self, x):
                assert (x > 0).all()
                return x

        model = torch.compile(Net().cuda())
        """
    ((_, message),) = _lint(source, "TPL104")
    assert message.endswith("it also breaks the graph")


def test_layout_conversion_is_not_the_move_to_the_device() -> None:
    source = _SCRIPT.replace(
        "model.cuda()", "model = model.to(memory_format=torch.channels_last)\n        model.cuda()"
    )
    assert [line for line, _ in _lint(source, "TPL703")] == [5]


def test_step_through_a_grad_scaler_of_any_name_is_a_training_step() -> None:
    """Pytorch-UNet: `grad_scaler.step(optimizer)`."""
    source = _SCRIPT.replace(
        "optimizer.step()", "grad_scaler.scale(loss)\n            grad_scaler.step(optimizer)"
    )
    assert [line for line, _ in _lint(source, "TPL703")] == [4]

"""TPL107 beyond its examples: a sync tested before a flag that is off in a training step, the
message and the fix that swaps the operands (RULES.md, TPL107)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from torchperf_lint.api import fix_source, lint_source

LOOP = """
import torch

def train(model, loader, optimizer, debug=False):
    for x, y in loader:
        out = model(x.cuda())
        if {test}:
            raise FloatingPointError("nan in the output")
        out.mean().backward()
        optimizer.step()
"""


def _source(test: str) -> str:
    return textwrap.dedent(LOOP).lstrip("\n").format(test=test)


@pytest.mark.parametrize(
    "test, fixed",
    [
        ("torch.isnan(out).any() and self.debug", "self.debug and torch.isnan(out).any()"),
        ("out.isnan().any() or not self.verbose", "not self.verbose or out.isnan().any()"),
    ],
)
def test_a_flag_tested_second_is_tested_first(test: str, fixed: str) -> None:
    (finding,) = lint_source(_source(test), path="t.py", select=["TPL107"])
    flag = fixed.split(" and ")[0].split(" or ")[0]
    assert finding.message.endswith(
        f"; test {flag} first: the tensor is then read only when the flag does not decide"
    )
    assert f"if {fixed}:" in fix_source(_source(test), path="t.py", select=["TPL107"])


def test_no_fix_where_the_tensor_test_has_side_effects() -> None:
    source = _source("out.clamp_(0, 1).isnan().any() and self.debug")
    (finding,) = lint_source(source, path="t.py", select=["TPL107"])
    assert finding.fix is None and "test self.debug first" in finding.message


def test_a_flag_that_is_on_keeps_the_usual_advice() -> None:
    (finding,) = lint_source(
        _source("torch.isnan(out).any() and self.enabled"), path="t.py", select=["TPL107"]
    )
    assert finding.fix is None
    assert finding.message.endswith("; keep running values on the device and read them every N steps")


def test_a_value_reassigned_after_its_first_read_is_read_again() -> None:
    source = textwrap.dedent(
        """
        import torch

        def train(model, loader, optimizer, history):
            for x, y in loader:
                loss = model(x.cuda(), y.cuda())
                history.append(loss.item())
                loss = loss * 2
                print(loss.item())
                loss.backward()
                optimizer.step()
        """
    ).lstrip("\n")
    assert [f.line for f in lint_source(source, path="t.py", select=["TPL107"])] == [6, 8]


def test_a_read_after_synchronize_with_work_between_is_reported() -> None:
    source = textwrap.dedent(
        """
        import torch

        def train(model, loader, optimizer):
            for x, y in loader:
                torch.cuda.synchronize()
                for _ in range(2):
                    loss = model(x.cuda(), y.cuda())
                print(loss.item())
                loss.backward()
                optimizer.step()
        """
    ).lstrip("\n")
    assert [f.line for f in lint_source(source, path="t.py", select=["TPL107"])] == [8]


def test_a_read_of_a_value_computed_from_a_rebound_name_is_a_new_read() -> None:
    """DCGAN: `D_x = output.mean().item()`, then `output = model(fake)`, then
    `D_G_z1 = output.mean().item()` reads new values."""
    source = textwrap.dedent(
        """
        import torch

        def train(model, loader, optimizer, fake):
            for x, y in loader:
                output = model(x.cuda())
                d_x = output.mean().item()
                output = model(fake)
                d_g = output.mean().item()
                output.sum().backward()
                optimizer.step()
        """
    ).lstrip("\n")
    assert [f.line for f in lint_source(source, path="t.py", select=["TPL107"])] == [6, 8]


def test_a_second_read_after_the_backward_and_the_step_waits_for_them() -> None:
    """pytorch/examples' super_resolution: `epoch_loss += loss.item()` before the backward, then
    `print(... loss.item())` after `optimizer.step()`: the second read waits for both."""
    source = textwrap.dedent(
        """
        import torch

        def train(model, loader, optimizer, criterion):
            for x, y in loader:
                loss = criterion(model(x.cuda()), y.cuda())
                total = loss.item()
                loss.backward()
                optimizer.step()
                print("loss", loss.item())
        """
    ).lstrip("\n")
    assert [f.line for f in lint_source(source, path="t.py", select=["TPL107"])] == [6, 9]


STEP = """
import logging
import torch

log = logging.getLogger(__name__)

def train(model, loader, optimizer, unet_number, dt):
    for step, (x, y) in enumerate(loader):
        loss = model(x.cuda(non_blocking=True), y.cuda(non_blocking=True))
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        {line}
"""


def _step(line: str) -> list[int]:
    source = textwrap.dedent(STEP).lstrip("\n").format(line=line)
    return [f.line for f in lint_source(source, path="t.py", select=["TPL107"])]


@pytest.mark.parametrize(
    "line",
    [
        "print(norm)",  # the norm clipping hands back lives on the device
        "norm.item()",
        'log.info(f"loss {loss:.3f}")',
        'log.info("loss %.3f" % loss)',
        'log.info("norm %.3f, loss %.3f" % (norm, loss))',
        'log.info("loss {}".format(loss))',
        'print("norm {:.6f}".format(norm))',
        'print("loss %.3f" % loss.mean())',
    ],
)
def test_each_way_of_reading_a_device_value_into_text_is_one_sync(line: str) -> None:
    assert _step(line) == [12]


@pytest.mark.parametrize(
    "line",
    [
        "print(step)",  # enumerate's counter is an int, not a batch
        'log.info(f"step {step}")',
        'log.info("optim%d" % (unet_number - 1))',  # a tensor only if the parameter were one
        'log.info(f"{dt[-1]:10.2f} ms")',
        'log.info("loss %s", loss)',  # formatted only when the record is emitted: not built here
        'log.info("shape {}".format(tuple(x.shape)))',
    ],
)
def test_host_values_in_text_read_nothing_back(line: str) -> None:
    assert _step(line) == []


def test_a_format_call_that_print_shows_is_reported_once() -> None:
    (finding,) = lint_source(
        textwrap.dedent(STEP).lstrip("\n").format(line='print("loss {:.3f}".format(loss))'),
        path="t.py",
        select=["TPL107"],
    )
    assert finding.message.startswith("print() of a tensor")


VALIDATION = """
import torch
from metrics import Evaluator

class Trainer:
    def __init__(self, model, loader, args):
        self.model, self.loader, self.args = model, loader, args
        self.evaluator = Evaluator(21)

    def validation(self):
        for i, sample in enumerate(self.loader):
            image, target = sample["image"], sample["label"]
            if self.args.cuda:
                image, target = image.cuda(), target.cuda()
            with torch.no_grad():
                output = self.model(image)
            pred = output.data.cpu().numpy()
            target = target.cpu().numpy()
            self.evaluator.add_batch(target, pred)
"""


def test_a_batch_moved_under_a_cuda_switch_is_read_back_from_the_device(tmp_path: Path) -> None:
    # pytorch-deeplab-xception's validation(): a CUDA run takes the branch that moves the batch, so
    # target.cpu() copies it back, and the evaluator is the project's own class, not a runtime
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (tmp_path / "metrics.py").write_text(
        "class Evaluator:\n    def add_batch(self, gt, pred):\n        pass\n"
    )
    path = tmp_path / "trainer.py"
    path.write_text(VALIDATION.lstrip("\n"))

    def lines() -> list[int]:
        return [f.line for f in lint_source(path.read_text(), str(path), select=["TPL107"])]

    assert lines() == [16, 17]
    # the move outside a device switch may not run: the batch read may be the host one
    path.write_text(VALIDATION.lstrip("\n").replace("if self.args.cuda:", "if i % 2:"))
    assert lines() == [16]
    # an else branch that binds the batch anew: the host batch reaches the read
    path.write_text(
        VALIDATION.lstrip("\n").replace(
            "image.cuda(), target.cuda()\n",
            "image.cuda(), target.cuda()\n            else:\n                target = sample['label']\n",
        )
    )
    assert lines() == [18]

"""TPL701 and a precision decision only an opt-in option takes (RULES.md, "Values that travel":
a branch taken only under an option that is off by default is cold). The default run of
pytorch-unet, ConvNeXt, tacotron2 and pytorch_resnet_cifar10 trains in full fp32: autocast,
loss scaling or `.half()` sit behind `--amp`, `--use_amp`, `fp16_run` or `--half`, all off by
default. Look-alikes stay silent: an option on by default, one a caller leaves open, and a
library class whose users choose its `amp` keyword."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import write_project
from torchperf_lint.api import lint_source
from torchperf_lint.rules.precision.tpl701_fp32_training import Fp32Training

_TRAIN = """
    import torch


    def train_model(model, loader, amp: bool = False):
        optimizer = torch.optim.RMSprop(model.parameters(), lr=1e-5, foreach=True)
        grad_scaler = torch.cuda.amp.GradScaler(enabled=amp)
        for images, masks in loader:
            with torch.autocast("cuda", enabled=amp):
                loss = model(images.cuda(), masks.cuda())
            grad_scaler.scale(loss).backward()  # line 10
            grad_scaler.step(optimizer)
            grad_scaler.update()
"""

_MAIN = """
    import argparse

    import torch
    from train import train_model

    parser = argparse.ArgumentParser()
    parser.add_argument("--amp", action="store_true", default=False)
    args = parser.parse_args()
    model = torch.nn.Linear(3, 3).cuda()
    train_model(model, loader, amp=args.amp)
"""


def _findings(root: Path, target: str) -> list[tuple[int, str]]:
    path = root / target
    return [(f.line, f.message) for f in lint_source(path.read_text(), str(path), select=["TPL701"])]


def test_autocast_every_caller_switches_off_by_an_opt_in_option(tmp_path: Path) -> None:
    root = write_project(tmp_path, {"main.py": _MAIN, "train.py": _TRAIN})
    [(line, message)] = _findings(root, "train.py")
    assert line == 10
    assert message.endswith("the reduced precision at line 6 is opt-in, off on the default run")


def test_an_amp_option_on_by_default_keeps_the_file_silent(tmp_path: Path) -> None:
    on = _MAIN.replace('action="store_true", default=False', 'action="store_false", default=True')
    root = write_project(tmp_path, {"main.py": on, "train.py": _TRAIN})
    assert _findings(root, "train.py") == []


def test_a_caller_that_leaves_amp_open_keeps_the_file_silent(tmp_path: Path) -> None:
    other = _MAIN + "\ndef sweep(flag):\n    train_model(model, loader, amp=flag)\n"
    root = write_project(tmp_path, {"main.py": other, "train.py": _TRAIN})
    assert _findings(root, "train.py") == []


# the rule's own look-alike, a class whose `amp` keyword its users set
_FINDER = Fp32Training.GOOD["library-class-with-an-amp-keyword"]


def test_a_library_class_whose_users_choose_amp_stays_silent(tmp_path: Path) -> None:
    """monai's LearningRateFinder(amp=False): a package exports it, so its users build it, and
    its `amp` keyword is theirs to set; the library offers the switch, which is a decision."""
    files = {"lib/__init__.py": "from .finder import RangeFinder\n", "lib/finder.py": _FINDER}
    root = write_project(tmp_path, files)
    assert _findings(root, "lib/finder.py") == []

"""A project helper that copies its argument to the host on every return (pytorch-yolov3's
`def to_cpu(tensor): return tensor.detach().cpu()`): a call of it handed a device tensor in a
step reads the device there, a sync at the call (TPL107), wherever the helper is defined.
Look-alikes stay silent: a helper that copies only on some paths, one that rebinds its
parameter first, a method, and a call handed a batch still on the host."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import finding_lines, write_project

pytestmark = pytest.mark.usefixtures("precision_off_rules_on")  # TPL107 is off by default

_TRAIN = """
    import torch
    from utils import to_cpu


    def train(model, loader, optimizer, log):
        for images, targets in loader:
            images = images.cuda(non_blocking=True)
            loss = model(images).mean()
            loss.backward()
            optimizer.step()
            log.append(to_cpu(loss))  # line 11
            log.append(to_cpu(targets))  # a batch still on the host: no sync
"""

_COPIES = """
    def to_cpu(tensor):
        return tensor.detach().cpu()
"""


def _lines(root: Path, helper: str) -> list[int]:
    return finding_lines(write_project(root, {"train.py": _TRAIN, "utils.py": helper}), "train.py", "TPL107")


def test_a_helper_copying_its_argument_to_the_host_syncs_at_the_call(tmp_path: Path) -> None:
    assert _lines(tmp_path, _COPIES) == [11]


@pytest.mark.parametrize(
    "helper",
    [
        "def to_cpu(tensor):\n    if tensor.is_cuda:\n        return tensor.cpu()\n    return tensor\n",
        "def to_cpu(path):\n    path = load(path)\n    return path.cpu()\n",
        "class Logger:\n    def to_cpu(self, tensor):\n        return tensor.cpu()\n\nto_cpu = Logger().to_cpu\n",
        "def to_cpu(tensor):\n    return tensor.detach()\n",
    ],
    ids=["copies-on-one-path", "rebinds-its-parameter", "a-method", "no-copy"],
)
def test_helpers_that_do_not_copy_their_argument_on_every_return_stay_silent(
    tmp_path: Path, helper: str
) -> None:
    assert _lines(tmp_path, helper) == []

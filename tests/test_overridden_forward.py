"""A model's `forward` that never runs (project/graph.py, `roots()`): its class is never
constructed in the project, not handed on, not exported by a package, and every project subclass
defines its own `forward` (segmentation-models-pytorch's `Xception`, used only as the base of
`XceptionEncoder`). What it calls is hot only through other routes."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import finding_lines, write_project

PER_CALL = "TPL302"  # `nn.ReLU()(x)` built in hot code

_BASE = """
    from torch import nn


    class Backbone(nn.Module):
        def __init__(self):
            super(Backbone, self).__init__()
            self.conv = nn.Conv2d(3, 8, 3)

        def logits(self, x):
            return nn.ReLU(inplace=True)(x)  # line 10

        def forward(self, x):
            return self.logits(self.conv(x))
"""

_ENCODER = """
    from base import Backbone


    class Encoder(Backbone):
        def forward(self, x):
            return self.conv(x)
"""

_TRAIN = """
    import torch
    from encoder import Encoder

    model = Encoder().cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x in torch.utils.data.DataLoader(range(4)):
        loss = model(x).sum()
        loss.backward()
        opt.step()
"""


def _lines(tmp_path: Path, files: dict[str, str]) -> list[int]:
    project = {"base.py": _BASE, "encoder.py": _ENCODER, "train.py": _TRAIN, **files}
    root = write_project(tmp_path, project)
    return finding_lines(root, "base.py", PER_CALL)


def test_a_forward_every_subclass_overrides_of_a_class_never_built_is_not_a_root(tmp_path: Path) -> None:
    assert _lines(tmp_path, {}) == []


@pytest.mark.parametrize(
    "files",
    [
        {"other.py": "from base import Backbone\n\nnet = Backbone()\n"},  # built somewhere
        {"other.py": "from base import Backbone\n\nclass Plain(Backbone):\n    pass\n"},  # inherits forward
        {"pkg/__init__.py": "from base import Backbone\n"},  # exported: users may build it
        {"other.py": "from base import Backbone\n\nREGISTRY = {'b': Backbone}\n"},  # handed on
    ],
)
def test_a_forward_that_may_run_stays_a_root(tmp_path: Path, files: dict[str, str]) -> None:
    assert _lines(tmp_path, files) == [10]

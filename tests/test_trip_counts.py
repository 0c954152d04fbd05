"""Context.data_sized: does a loop's trip count grow with the data (analysis/trip_counts.py)?"""

from __future__ import annotations

import textwrap
from typing import Optional

import libcst as cst
import pytest

from torchperf_lint.config import Settings
from torchperf_lint.engine.context import Context
from torchperf_lint.syntax.walker import walk


def _data_sized(source: str) -> Optional[str]:
    """What the first loop of `source` walks, as data_sized says it."""
    source = textwrap.dedent(source).lstrip("\n")
    facts = walk(cst.parse_module(source), frozenset({cst.Call}))
    ctx = Context("example.py", source, facts, Settings())
    return ctx.data_sized(facts.loops[0])


@pytest.mark.parametrize(
    "source, expected",
    [
        ("def f(train_loader):\n    for x, y in train_loader:\n        pass", "train_loader"),
        ("def f(ds):\n    for i, item in enumerate(tqdm(self.dataset)):\n        pass", "self.dataset"),
        ("def f(x: Tensor):\n    for row in x:\n        pass", "the rows of x"),
        ("def f(x: Tensor):\n    for part in x.split(64):\n        pass", "the pieces of x.split()"),
        ("def f(x: Tensor):\n    for i in range(x.shape[0]):\n        pass", "a dimension of x"),
        ("def f(n):\n    for i in range(n):\n        pass", "range(n)"),
        ("def f(masks):\n    for i in range(masks.size(0)):\n        pass", "a dimension of masks"),
        ("def f():\n    for i in range(1000):\n        pass", "range()"),
        ("def f(a, loader):\n    for x, b in zip(a, loader):\n        pass", "loader"),
        (
            "def f(step_losses):\n    return [l.item() for l in step_losses]\n    for l in step_losses:\n        pass",
            "step_losses",
        ),
        ("def f():\n    for path in sorted(glob.glob('*.pt')):\n        pass", "the files of glob.glob()"),
        ("def f(x):\n    while x.norm() > 1:\n        x = x / 2", "a while loop"),
        (
            "def f(n, v):\n    it = tqdm(range(n)) if v else iter(range(n))\n    for i in it:\n        pass",
            "range(n)",
        ),
    ],
)
def test_loops_over_data_are_data_sized(source: str, expected: str) -> None:
    assert _data_sized(source) == expected


@pytest.mark.parametrize(
    "source",
    [
        "def f(keyframes):\n    for frame in keyframes:\n        pass",  # a handful, handed in
        "def f(keyframes):\n    for i in range(len(keyframes)):\n        pass",
        "def f():\n    for i in range(3):\n        pass",
        "def f():\n    for scale in (1, 2, 4):\n        pass",
        "def f(self):\n    for i in range(self.num_layers):\n        pass",  # configuration
        "def f(conditions):\n    for name, c in conditions.items():\n        pass",
    ],
)
def test_a_handful_is_not_data_sized(source: str) -> None:
    assert _data_sized(source) is None

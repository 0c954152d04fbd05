"""Generators that hand on a parameter's items (analysis/item_generators.py): one reading on
`ast`, asked by the project pass (a loop over the generator walks the argument) and, by
position, by the file pass (`next(...)` of it draws the argument's batches)."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from tests.helpers import write_project
from tests.test_values_that_travel import routes
from torchperf_lint.analysis.item_generators import yielded_parameter
from torchperf_lint.project.summary import summarize


@pytest.mark.parametrize(
    ("code", "param"),
    [
        ("def cycle(dl):\n    while True:\n        for data in dl:\n            yield data\n", "dl"),
        ("def repeat(n, loader):\n    while True:\n        yield from loader\n", "loader"),
        ("def log_every(self, iterable, freq):\n    for obj in iterable:\n        t = 1\n        yield obj\n", "iterable"),
        ("def pairs(dl):\n    for a in dl:\n        yield a, a\n", ""),  # not the item as it is
        ("def doubled(dl):\n    yield from (2 * x for x in dl)\n", ""),  # another iterable
        ("def outer(dl):\n    def inner():\n        yield from dl\n    return inner\n", ""),  # a nested one's
        ("def take(dl):\n    for x in dl:\n        return x\n", ""),  # no generator
    ],
)
def test_the_parameter_a_generator_hands_on(code: str, param: str) -> None:
    function = ast.parse(code).body[0]
    assert isinstance(function, ast.FunctionDef)
    assert yielded_parameter(function) == param
    summary = summarize(code)
    assert summary is not None and summary.functions[0].yields_items_of == param


_DRAWN = """
import torch
from torch.utils.data import DataLoader


def repeat(times, loader):
    while True:
        yield from loader


def train(model, dataset, optimizer, device):
    batches = repeat(3, DataLoader(dataset, batch_size=64, num_workers=4))
    for step in range(1000):
        x, y = next(batches)
        loss = model(x.to(device)).sum()
        loss.backward()
        optimizer.step()
"""


@pytest.mark.parametrize(
    ("variant", "reported"),
    [
        (("", ""), True),
        (("repeat(3, DataLoader(", "repeat(times=3, loader=DataLoader("), True),  # by keyword
        (("yield from loader", "yield from (x for x in loader)"), False),  # not its items as they are
        (("repeat(3, DataLoader(", "repeat(3, *[DataLoader("), False),  # unpacked: not known where
    ],
)
def test_a_batch_drawn_from_a_generator_over_a_loader_is_a_batch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], variant: tuple[str, str], reported: bool
) -> None:
    text = _DRAWN.replace(*variant)
    if variant[1].endswith("*[DataLoader("):
        text = text.replace("num_workers=4))", "num_workers=4)])")
    root = write_project(tmp_path, {"train.py": text})
    line = textwrap.dedent(_DRAWN).lstrip("\n").splitlines().index("        loss = model(x.to(device)).sum()") + 1
    assert routes(capsys, root, "train.py", "TPL106") == ([line] if reported else [])

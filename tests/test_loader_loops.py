"""Whether a loop walks a DataLoader, and which (analysis/loader_loops.py): one reading that both
passes ask, the project pass with the function's bindings (project/summary.py, Loop.loader) and
the file pass with the bindings libcst's scopes show at the loop (analysis/hotpath.py)."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from torchperf_lint.config import Settings
from torchperf_lint.engine.context import Context
from torchperf_lint.project.summary import summarize
from torchperf_lint.syntax.walker import walk

LOOPS = """
import torch
from torch.utils.data import DataLoader


def train(model, dataset, val_set, logger, other):
    loader = DataLoader(dataset, batch_size=8)
    pbar = tqdm(loader, desc=f"epoch {0}")
    for x, y in pbar:
        pass
    for i, (x, y) in enumerate(train_loader):
        pass
    for batch in logger.log_every(self.val_dataloader, 10):
        pass
    for a, b in zip(train_loader, val_loader):
        pass
    for row in other:
        pass
    for x in DataLoader(val_set):
        pass
    for x in [DataLoader(val_set)]:
        pass
    it = wrap(it)
    for x in it:
        pass
    for x in make_loader()():
        pass
"""
EXPECTED = [
    "loader",  # through `pbar`, bound to a call that is handed the loader
    "train_loader",
    "self.val_dataloader",
    "train_loader",  # the first in source order (the file pass took the last before they shared this)
    None,
    "DataLoader",
    None,  # a list holding one: not walked as a loader
    None,
    None,
]


def _file_pass(source: str) -> list[str | None]:
    facts = walk(cst.parse_module(source), frozenset({cst.Call}))
    ctx = Context("example.py", source, facts, Settings())
    return [ctx.hot.iterates_loader(loop) for loop in facts.loops]


def test_both_passes_read_which_loader_a_loop_walks_alike() -> None:
    source = textwrap.dedent(LOOPS)
    summary = summarize(source)
    assert summary is not None
    assert [loop.loader or None for loop in summary.loops] == EXPECTED
    assert _file_pass(source) == EXPECTED


@pytest.mark.parametrize(
    ("iterable", "held_out"),
    [
        ("val_loader", "val_loader"),
        ("enumerate(tqdm(self.testloader))", "self.testloader"),
        ("DataLoader(test_set, batch_size=4)", "a DataLoader over test_set"),
        ("DataLoader(dataset=holdout)", "a DataLoader over holdout"),
        ("DataLoader(*parts)", None),
        ("train_loader", None),
    ],
)
def test_a_loop_over_held_out_data_is_told_by_its_loader_or_dataset(
    iterable: str, held_out: str | None
) -> None:
    source = f"for x in {iterable}:\n    pass\n"
    facts = walk(cst.parse_module(source), frozenset({cst.Call}))
    ctx = Context("example.py", source, facts, Settings())
    [loop] = facts.loops
    assert isinstance(loop, cst.For)
    assert ctx.hot.held_out_loader(loop.iter) == held_out

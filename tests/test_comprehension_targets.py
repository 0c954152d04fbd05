"""What a comprehension's target holds (RULES.md, "Values that travel": `zip`/`enumerate`/
comprehensions): each name `zip(a, b)` or `enumerate(a)` hands a target takes the items of its own
iterable, so DETR's `{target["image_id"].item(): output for target, output in zip(targets, results)}`
reads a device tensor per image of every evaluation batch (TPL107). A comprehension's targets are
its own: a loop after it that reuses the name does not see them (Python 3 scoping)."""

from __future__ import annotations

import textwrap

import pytest

from torchperf_lint.api import lint_source

pytestmark = pytest.mark.usefixtures("precision_off_rules_on")  # TPL107 is off by default

_EVALUATE = """
import torch


@torch.no_grad()
def evaluate(model, loader, device, postprocess, evaluator):
    for samples, targets in loader:
        samples = samples.to(device)
        targets = [{{k: v.to(device) for k, v in t.items()}} for t in targets]
        results = postprocess(model(samples))
        {line}
        evaluator.update(res)
"""


def _lines(line: str) -> list[int]:
    source = textwrap.dedent(_EVALUATE).lstrip("\n").format(line=line)
    return [f.line for f in lint_source(source, path="engine.py", select=["TPL107"])]


@pytest.mark.parametrize(
    "line",
    [
        'res = {target["image_id"].item(): output for target, output in zip(targets, results)}',
        'res = {target["image_id"].item(): output for output, target in zip(results, targets)}',
        'res = [target["image_id"].item() for i, target in enumerate(targets)]',
        'res = [t["image_id"].item() for i, (o, t) in enumerate(zip(results, targets))]',
    ],
    ids=["zip-first", "zip-second", "enumerate", "enumerate-zip"],
)
def test_an_item_drawn_through_zip_or_enumerate_is_the_iterables(line: str) -> None:
    assert _lines(line) == [10]


@pytest.mark.parametrize(
    "line",
    [
        "res = {i: output for i, output in enumerate(names)}",  # the counter, and host names
        "res = [int(i) for i, target in enumerate(targets)]",  # the counter is an int
        "res = {n.upper(): o for n, o in zip(names, results)}",  # a host list of names
    ],
    ids=["enumerate-of-host-names", "enumerate-counter", "zip-of-host-names"],
)
def test_items_of_other_iterables_stay_silent(line: str) -> None:
    assert _lines(f"names = ['a', 'b']\n        {line}") == []


def test_a_loop_after_a_comprehension_does_not_see_its_target() -> None:
    """DETR's panoptic branch: `for i, target in enumerate(targets): target["image_id"]`
    after the comprehension above it. The loop's `target` is its own: a dict, not a tensor."""
    later = (
        'res = {target["image_id"].item(): output for target, output in zip(targets, results)}\n'
        "        for i, target in enumerate(names):\n"
        "            print(target.item())"
    )
    assert _lines(later) == [10]

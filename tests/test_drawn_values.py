"""What a name holds where it is drawn from an iterable (RULES.md,
"Values that travel": `zip`/`enumerate`/comprehensions). Each name `zip(a, b)` or `enumerate(a)`
hands a comprehension's target takes the items of its own iterable, so DETR's
`{target["image_id"].item(): output for target, output in zip(targets, results)}` reads a device
tensor per image of every evaluation batch (TPL107). A comprehension's targets are its own: a loop
after it that reuses the name does not see them (Python 3 scoping). A type test alone does not
make a value a tensor: what callers pass, or the value a function computes, decides."""

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


_HELPERS = """
from typing import Any

import torch


def ensure_number(x: Any):
    if isinstance(x, torch.Tensor):
        x = x.item()
    return x


def scale(frames):
    factor = 1.0 + 1.0 * (frames.size(2) > 1)
    if isinstance(factor, torch.Tensor):
        factor = factor.item()
    return factor


def train(model, loader, optimizer, size):
    for x, y in loader:
        loss = model(x.cuda(non_blocking=True), y.cuda(non_blocking=True)) * scale(x)
        loss.backward()
        optimizer.step(ensure_number(size))
"""


def test_a_type_test_does_not_override_what_callers_pass_or_the_value_itself() -> None:
    """monai's `ensure_tuple_rep(tup: Any, dim)` and diffusers' `time_factor = 1.0 + 1.0 * (...)`:
    a parameter (what its callers pass, unknown here) and a value the function computes say more
    than a test that accepts many types; the branch does not run on a device tensor. (Reading
    `isinstance(v, torch.Tensor)` as "v is a tensor" found DETR's per-step `MetricLogger.update`,
    and also made these two findings.)"""
    source = textwrap.dedent(_HELPERS).lstrip("\n")
    assert lint_source(source, path="t.py", select=["TPL105", "TPL107"]) == []


_SAMPLER = """
import torch


def sample(net, latents, num_steps=18):
    t_steps = torch.linspace(80.0, 0.0, num_steps, device=latents.device){host}
    x = latents
    {loop}
        if {test}:
            x = x * 2
        x = net(x)
    return x


def main():
    net = torch.nn.Linear(2, 2).cuda()
    for seed in range(10):
        sample(net, torch.randn(2, 2, device="cuda"))
"""


@pytest.mark.parametrize(
    "loop, test",
    [
        ("for t_cur in t_steps:", "t_cur > 1.0"),
        ("for t_cur, t_next in zip(t_steps[:-1], t_steps[1:]):", "t_next > 1.0"),
        ("for i, t_cur in enumerate(t_steps):", "t_cur > 1.0"),
    ],
    ids=["plain", "zip", "enumerate"],
)
def test_a_loop_target_drawn_from_a_device_tensor_is_one(loop: str, test: str) -> None:
    """edm's sampler: each noise level of a device schedule is a 0-d device tensor, so testing
    it reads the device every step; the same loop over the schedule read once to the host, or
    testing enumerate's counter, reads nothing."""

    def lines(host: str, loop: str, test: str) -> list[int]:
        source = textwrap.dedent(_SAMPLER).lstrip("\n").format(host=host, loop=loop, test=test)
        return [f.line for f in lint_source(source, path="sampling.py", select=["TPL107"])]

    assert lines("", loop, test) == [8]
    assert lines(".tolist()", loop, test) == []
    assert lines("", "for i, t_cur in enumerate(t_steps):", "i > 1") == []


def test_the_rows_of_an_inner_loop_stay_unknown() -> None:
    """ultralytics' `get_visuals`: an inner loop over a tensor's rows (`for idx, mask in
    zip(inverse_indices, masks)`) in a host-side helper a predictor calls per batch; where the
    rows live is not known, and a loop over rows is TPL201's finding as a whole. Only a step's own
    value, drawn by the step or inference loop, is taken from its tensor."""
    inner = "for t_cur in t_steps:\n        for row in t_steps.view(-1, 1):"
    source = textwrap.dedent(_SAMPLER).lstrip("\n").format(host="", loop=inner, test="{test}")
    source = source.replace(
        "        if {test}:\n            x = x * 2", "            if {test}:\n                x = x * 2"
    )
    assert [
        f.line for f in lint_source(source.format(test="row > 1.0"), path="s.py", select=["TPL107"])
    ] == []
    assert [
        f.line for f in lint_source(source.format(test="t_cur > 1.0"), path="s.py", select=["TPL107"])
    ] == [9]

"""Code that runs only while scripting, tracing or exporting (analysis/hotpath.py,
`runs_only_in_special_mode`): an export traces it once. From real code: torchvision's
`_onnx_paste_masks_in_image_loop`, called only under `if torchvision._is_tracing():`."""

from __future__ import annotations

import textwrap

from torchperf_lint.api import lint_source

GROWN = "TPL202"  # reported in a data-sized loop, hot or not: the special mode is what silences it

HELPER = """
import torch

def {name}(masks, h, w):
    out = torch.zeros(0, h, w)
    for i in range(masks.size(0)):
        out = torch.cat((out, masks[i].unsqueeze(0)))
    return out
"""


def lint(source: str) -> list[int]:
    return [f.line for f in lint_source(textwrap.dedent(source), path="m.py", select=[GROWN])]


def test_a_private_helper_called_only_while_tracing_is_silent() -> None:
    caller = """
def paste(masks, h, w):
    if torch.jit.is_tracing():
        return _paste_loop(masks, h, w)
    return torch.stack(list(masks))
"""
    assert lint(HELPER.format(name="_paste_loop") + caller) == []


def test_a_loop_in_the_tracing_branch_itself_is_silent() -> None:
    source = """
import torch

def paste(masks, h, w):
    out = torch.zeros(0, h, w)
    if not torch.onnx.is_in_onnx_export():
        return torch.stack(list(masks))
    else:
        for i in range(masks.size(0)):
            out = torch.cat((out, masks[i].unsqueeze(0)))
    return out
"""
    assert lint(source) == []


def test_a_helper_also_called_in_eager_mode_is_reported() -> None:
    caller = """
def paste(masks, h, w):
    if torch.jit.is_tracing():
        return _paste_loop(masks, h, w)
    return _paste_loop(masks, h, w)
"""
    assert lint(HELPER.format(name="_paste_loop") + caller) == [7]


def test_a_public_helper_may_be_called_from_other_modules_and_is_reported() -> None:
    caller = """
def paste(masks, h, w):
    if torch.jit.is_tracing():
        return paste_loop(masks, h, w)
    return torch.stack(list(masks))
"""
    assert lint(HELPER.format(name="paste_loop") + caller) == [7]


def test_a_helper_chosen_when_not_tracing_is_reported() -> None:
    caller = """
def paste(masks, h, w):
    if masks.numel() > 1000 and not torch.jit.is_tracing():
        return _paste_loop(masks, h, w)
    return torch.stack(list(masks))
"""
    assert lint(HELPER.format(name="_paste_loop") + caller) == [7]

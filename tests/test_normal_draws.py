"""`torch.normal(mean, std)` without a size draws on the device of its tensor argument: only the
form with two numbers takes a size (analysis/devices.py `draws_around_tensor`). From real code:
cleanrl's DDPG and TD3 exploration noise, `torch.normal(0, actor.action_scale * sigma)` with
`action_scale` a buffer on the GPU."""

from __future__ import annotations

import textwrap

from torchperf_lint.api import lint_source

FORWARD = """
import torch
from torch import nn

class Noisy(nn.Module):
    def forward(self, x):
        noise = {draw}
        if noise.max().item() > 3:
            x = x * 0.5
        return x.cuda() + noise
"""


def lint(draw: str, select: str) -> list[int]:
    source = textwrap.dedent(FORWARD.format(draw=draw))
    return [f.line for f in lint_source(source, path="m.py", select=[select])]


def test_a_draw_around_a_tensor_is_made_on_its_device() -> None:
    assert lint("torch.normal(0, self.scale * x)", "TPL101") == []
    assert lint("torch.normal(x, 1.0)", "TPL101") == []
    assert lint("torch.normal(mean=x, std=0.1)", "TPL101") == []


def test_a_draw_of_two_numbers_with_a_size_is_made_on_the_host() -> None:
    assert lint("torch.normal(0.0, 1.0, size=(4,))", "TPL101") == [7]
    assert lint("torch.normal(0.0, 1.0, (4,))", "TPL101") == [7]


def test_reading_a_draw_around_a_device_tensor_syncs() -> None:
    # the host form is read without waiting for the device; the draw around `x` is not
    assert lint("torch.normal(0.0, 1.0, size=(4,))", "TPL105") == []
    assert lint("torch.normal(x, 1.0)", "TPL105") == [8]

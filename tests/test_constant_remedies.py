"""TPL102's advice names where the tensor should live (RULES.md, TPL102): a non-persistent buffer of
the module whose method copies it, an attribute of a class that is not a module, or a variable
before the step loop, named by its line."""

from __future__ import annotations

import textwrap

from torchperf_lint.api import lint_source

SOURCE = textwrap.dedent(
    """
    import torch
    from torch import nn

    class Loss(nn.Module):
        def forward(self, x, t):
            w = torch.tensor([0.1, 0.9]).cuda()
            return x * w

    class Sampler:
        def __init__(self):
            self.values = [1.0, 2.0]

        def step(self, x):
            return x * torch.tensor(self.values).to(x.device)

    def train(model, loader, opt):
        sampler = Sampler()
        for x, t in loader:
            w = torch.tensor([1.0, 2.0]).cuda()
            model(x).mul(w).sum().backward()
            sampler.step(x.cuda())
            opt.step()
    """
).lstrip("\n")


def _remedies() -> dict[int, str]:
    findings = lint_source(SOURCE, path="train.py", select=["TPL102"])
    return {f.line: f.message.split("; ", 1)[1] for f in findings}


def test_a_module_gets_a_non_persistent_buffer() -> None:
    assert _remedies()[6] == (
        "build it once in __init__ with self.register_buffer(name, tensor, persistent=False) "
        "(a buffer follows .to(device); persistent=False leaves checkpoints' keys unchanged)"
    )


def test_a_class_that_is_not_a_module_gets_an_attribute_built_once_on_the_device() -> None:
    assert _remedies()[14] == "keep it as an attribute built once on the device"


def test_the_step_loop_is_named_by_its_line() -> None:
    assert _remedies()[19] == "build it on the device once, before the loop at line 18"

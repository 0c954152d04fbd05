"""Host arrays built once (analysis/constants.py): the values TPL102 follows across statements
and through the calls of a helper."""

from __future__ import annotations

import textwrap

import libcst as cst

from torchperf_lint.api import lint_source
from torchperf_lint.config import Settings
from torchperf_lint.engine.context import Context
from torchperf_lint.syntax.walker import walk


def _context(source: str) -> Context:
    source = textwrap.dedent(source).lstrip("\n")
    facts = walk(cst.parse_module(source), frozenset({cst.Call}))
    return Context("example.py", source, facts, Settings())


def _arrays(source: str, function: str) -> dict[str, bool]:
    """Each argument of each `use(...)` call inside `function`: is it a host array built once?"""
    ctx = _context(source)
    found = {}
    for call in ctx.nodes(cst.Call):
        assert isinstance(call, cst.Call)
        enclosing = ctx.enclosing_function(call)
        if ctx.code(call.func) == "use" and enclosing is not None and enclosing.name.value == function:
            for arg in call.args:
                found[ctx.code(arg.value)] = ctx.is_host_array(arg.value)
    return found


_DIFFUSION = """
    import numpy as np
    import torch
    from torch import nn

    TABLE = np.linspace(0.0, 1.0, 10)

    def helper(arr, t):
        use(arr, t)

    class Model(nn.Module):
        def __init__(self, betas, weights):
            super().__init__()
            self.alphas = np.cumprod(1.0 - np.asarray(betas))
            self.values = [float(w) for w in weights]
            self.logvar = torch.full((1000,), 0.0)
            self.on_device = torch.zeros(1000, device="cuda")
            self.buffered = None
            self.register_buffer("buffered", torch.zeros(3))
            self.count = 3
            self.rebuilt = np.zeros(3)

        def forward(self, x, t):
            self.rebuilt = np.ones(3)
            helper(self.alphas, t)
            helper(1.0 - self.alphas, t)
            use(self.alphas, self.values, self.logvar, TABLE, self.on_device, self.buffered, self.count,
                self.rebuilt, x, self.logvar[t])
"""


def test_arrays_bound_at_set_up_are_host_arrays_built_once() -> None:
    assert _arrays(_DIFFUSION, "forward") == {
        "self.alphas": True,
        "self.values": True,
        "self.logvar": True,
        "TABLE": True,
        "self.on_device": False,  # built on the device
        "self.buffered": False,  # a registered buffer moves with the module
        "self.count": False,  # a number, not an array
        "self.rebuilt": False,  # rebuilt at every call
        "x": False,
        "self.logvar[t]": False,  # the lookup changes with t
    }


def test_a_helper_parameter_is_an_array_when_every_caller_passes_one() -> None:
    assert _arrays(_DIFFUSION, "helper") == {"arr": True, "t": False}


def test_one_caller_with_per_step_data_makes_the_parameter_change() -> None:
    source = _DIFFUSION + "\n    def train_step(model, x, t):\n        helper(x.numpy(), t)\n"
    assert _arrays(source, "helper") == {"arr": False, "t": False}


def test_a_helper_without_callers_in_the_file_is_not_followed() -> None:
    source = """
        import torch

        def extract(arr, t):
            use(arr, t)
    """
    assert _arrays(source, "extract") == {"arr": False, "t": False}


def test_literal_lists_moved_with_a_device_keyword_are_reported() -> None:
    source = textwrap.dedent(
        """
        import torch
        from torch import nn

        class Loss(nn.Module):
            def forward(self, pred, target):
                weight = torch.tensor([1.0, 2.0], device=pred.device)
                zero = torch.tensor(0.0, device=pred.device)
                return nn.functional.cross_entropy(pred, target, weight=weight) + zero
        """
    )
    findings = [(f.line, f.code) for f in lint_source(source, select=["TPL102"])]
    assert findings == [(7, "TPL102")]  # the scalar is a 4-byte write, not host data

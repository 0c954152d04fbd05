"""Where autograd is off: with blocks, decorators, set_grad_enabled statements, callers."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from torchperf_lint.config import Settings
from torchperf_lint.engine.context import Context
from torchperf_lint.syntax.walker import walk


def _grad_disabled_at(source: str, callee: str) -> bool:
    """Whether the first call of `callee` in `source` runs without grad."""
    source = textwrap.dedent(source)
    module = cst.parse_module(source)
    facts = walk(module, frozenset({cst.Call}))
    ctx = Context("example.py", source, facts, Settings())
    for call in ctx.nodes(cst.Call):
        assert isinstance(call, cst.Call)
        if ctx.code(call.func) == callee:
            return ctx.grad_disabled(call)
    raise AssertionError(f"no call of {callee}")


@pytest.mark.parametrize(
    "source",
    [
        """
        import torch
        with torch.no_grad():
            model(x)
        """,
        """
        import torch as th
        def f(model, x):
            with th.inference_mode(), open("log") as log:
                return model(x)
        """,
        """
        from torch import no_grad
        @no_grad()
        def f(model, x):
            return [model(v) for v in x]
        """,
        """
        import torch
        @torch.inference_mode
        def f(model, x):
            return model(x)
        """,
        """
        import torch
        def f(model, x):
            torch.set_grad_enabled(False)
            return model(x)
        """,
        """
        import torch
        def helper(model, x):
            return model(x)
        def evaluate(model, x):
            with torch.no_grad():
                return helper(model, x)
        """,
    ],
    ids=[
        "with-no-grad",
        "aliased-inference-mode",
        "imported-decorator",
        "bare-decorator",
        "set-grad-enabled-statement",
        "only-caller-disables",
    ],
)
def test_model_call_runs_without_grad(source: str) -> None:
    assert _grad_disabled_at(source, "model")


@pytest.mark.parametrize(
    "source",
    [
        """
        import torch
        def f(model, x):
            return model(x)
        """,
        """
        import torch
        with torch.no_grad():
            with torch.enable_grad():
                model(x)
        """,
        """
        import torch
        with torch.inference_mode(False):
            model(x)
        """,
        """
        import torch
        def f(model, x):
            torch.set_grad_enabled(False)
            torch.set_grad_enabled(True)
            return model(x)
        """,
        """
        import torch
        def helper(model, x):
            return model(x)
        def evaluate(model, x):
            with torch.no_grad():
                helper(model, x)
            return helper(model, x)
        """,
        """
        import torch
        with torch.no_grad():
            def later(model, x):
                return model(x)
        """,
    ],
    ids=[
        "plain",
        "enable-grad-inside",
        "inference-mode-false",
        "switched-back-on",
        "one-caller-with-grad",
        "defined-not-called-under-no-grad",
    ],
)
def test_model_call_runs_with_grad(source: str) -> None:
    assert not _grad_disabled_at(source, "model")

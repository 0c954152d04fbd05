"""TPL603 gradcheck-outside-tests: gradcheck called outside the tests."""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from ...engine.context import Context
from ...engine.findings import Report, Safety
from ..base import Rule

_GRADCHECKS = {
    "torch.autograd.gradcheck": "gradcheck",
    "torch.autograd.gradgradcheck": "gradgradcheck",
    "torch.autograd.gradcheck.gradcheck": "gradcheck",
    "torch.autograd.gradcheck.gradgradcheck": "gradgradcheck",
}


class GradcheckOutsideTests(Rule):
    """## What it does
    Flags calls to `torch.autograd.gradcheck` and `torch.autograd.gradgradcheck` (however they
    are imported) outside test files.

    ## Why it is slow
    gradcheck compares analytical gradients with finite differences: it runs the function twice
    per input element, usually in float64. It belongs in a test suite; in a training or library
    module it runs with the program. There is no benchmark: the cost is the whole check, which
    has nothing to compare against.

    ## Fix safety
    No automatic fix: move the check into a test (a file matching `test-file-patterns`).

    ## When it stays silent
    Test files (`test_*.py`, `*_test.py`, `tests/`, `conftest.py`, or the configured
    `test-file-patterns`); a wrapper function of the same name (`def gradcheck(fn, inputs):`
    setting defaults for a test suite), whose callers run the check; functions of other
    libraries with the same name; references that do not call it.
    """

    code = "TPL603"
    name = "gradcheck-outside-tests"
    summary = "gradcheck called outside the tests"
    message = (
        "torch.autograd.{what}() evaluates the function twice per input element; move the check into a test"
    )
    fix_safety = Safety.NONE
    where = "outside test files"
    node_types = (cst.Call,)
    benchmark = None

    BAD = {
        "gradcheck-in-training-script": """
            import torch

            def main(layer):
                x = torch.randn(8, 4, dtype=torch.double, requires_grad=True)
                assert torch.autograd.gradcheck(layer, (x,))  # expect: TPL603
            """,
        "imported-from-gradcheck-module": """
            import torch
            from torch.autograd.gradcheck import gradgradcheck

            x = torch.randn(3, dtype=torch.double, requires_grad=True)
            gradgradcheck(torch.sin, (x,))  # expect: TPL603
            """,
        "aliased-autograd-in-forward": """
            import torch
            from torch import autograd as ag
            from torch import nn

            class Checked(nn.Module):
                def forward(self, x):
                    ag.gradcheck(torch.tanh, (x.double(),))  # expect: TPL603
                    return torch.tanh(x)
            """,
    }
    GOOD = {
        "reference-without-call": """
            import torch

            CHECKS = {"first": torch.autograd.gradcheck, "second": torch.autograd.gradgradcheck}
            """,
        "same-name-from-another-library": """
            import torch
            from mylib.checks import gradcheck

            gradcheck(torch.sin)
            """,
        "local-function-named-gradcheck": """
            import torch

            def gradcheck(fn, x):
                return fn(x).isfinite().all()

            gradcheck(torch.sin, torch.randn(3))
            """,
        "same-name-wrapper-with-defaults": """
            import torch

            def gradcheck(fn, inputs, **kwargs):
                kwargs.setdefault("fast_mode", True)
                return torch.autograd.gradcheck(fn, inputs, **kwargs)
            """,
        "gradient-norm-check": """
            import torch

            def check(model):
                return torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            """,
    }

    def check(self, node: cst.Call, ctx: Context) -> Iterator[Report]:
        what = _GRADCHECKS.get(ctx.qualified_name(node) or "")
        if what is None or ctx.is_test_file:
            return
        function = ctx.enclosing_function(node)
        if function is not None and function.name.value in _GRADCHECKS.values():
            return  # a same-name wrapper (defaults for a test suite): its callers run the check
        yield self.report(node, reason=ctx.hot_reason(node), what=what)

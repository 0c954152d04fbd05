"""The fallback for an empty accumulator is cold (analysis/accumulators.py): it runs only when the
loop over the function's data appended nothing, an empty batch. A loop over configuration (a
`self.` attribute) or an accumulator filled outside a loop keeps its fallback hot."""

from __future__ import annotations

import textwrap

import pytest

from torchperf_lint.api import lint_source

pytestmark = pytest.mark.usefixtures("precision_off_rules_on")

_HEAD = """
import torch
from torch import nn


class Curves(nn.Module):
    def forward(self, preds, sizes, k):
"""


def _lines(body: str) -> list[int]:
    source = _HEAD + textwrap.indent(textwrap.dedent(body).lstrip("\n"), " " * 8)
    return [f.line for f in lint_source(source, "curves.py", select=["TPL101"])]


def test_the_fallback_of_an_accumulator_filled_per_query_is_cold() -> None:
    assert (
        _lines("""
        precisions, recalls = [], []
        for mini in torch.split(preds, sizes):
            if mini.sum():
                precisions.append(mini.cumsum(0))
        precision = torch.stack(precisions) if precisions else torch.zeros(k).cuda()
        return precision
        """)
        == []
    )


def test_an_early_return_for_an_empty_accumulator_is_cold() -> None:
    assert (
        _lines("""
        curves = []
        for mini in preds.split(sizes):
            curves.append(mini)
        if not curves:
            return torch.zeros(k).cuda()
        return torch.stack(curves)
        """)
        == []
    )


def test_the_side_with_data_stays_hot() -> None:
    assert _lines("""
        curves = []
        for mini in preds.split(sizes):
            curves.append(mini)
        if len(curves) > 0:
            return torch.stack(curves) + torch.zeros(k).cuda()
        return preds
        """) == [12]


def test_the_same_test_inside_the_filling_loop_stays_hot() -> None:
    # both tests read `if not curves:`; the first runs round the loop that fills the list, so the
    # project's answer for that text is not one answer, and neither fallback is taken for cold
    assert _lines("""
        curves = []
        for mini in preds.split(sizes):
            if not curves:
                preds = preds + torch.zeros(k).cuda()
            curves.append(mini)
        if not curves:
            return torch.zeros(k).cuda()
        return torch.stack(curves)
        """) == [11, 14]


def test_a_loop_over_configuration_keeps_the_fallback_hot() -> None:
    # a model built without heads takes the fallback at every step
    assert _lines("""
        losses = []
        for head in self.heads:
            losses.append(head(preds))
        return sum(losses) if losses else torch.zeros(1).cuda()
        """) == [11]


def test_an_accumulator_filled_outside_a_loop_keeps_the_fallback_hot() -> None:
    assert _lines("""
        extra = []
        if k > 2:
            extra.append(preds)
        return torch.cat(extra) if extra else torch.zeros(k).cuda()
        """) == [11]


def test_a_list_that_starts_with_values_keeps_the_fallback_hot() -> None:
    assert _lines("""
        curves = [preds]
        for mini in preds.split(sizes):
            curves.append(mini)
        return torch.stack(curves) if curves else torch.zeros(k).cuda()
        """) == [11]


def test_a_helper_only_the_fallback_calls_is_cold_in_both_passes(tmp_path) -> None:
    from .helpers import finding_lines, write_project

    helpers = """
        import torch


        def empty_curve(k):
            return torch.zeros(k).cuda()


        def full_curve(curves, k):
            return torch.stack(curves) + torch.zeros(k).cuda()
        """
    model = """
        import torch
        from torch import nn
        from helpers import empty_curve, full_curve


        class Curves(nn.Module):
            def forward(self, preds, sizes, k):
                curves = []
                for mini in preds.split(sizes):
                    curves.append(mini)
                return full_curve(curves, k) if curves else empty_curve(k)
        """
    root = write_project(tmp_path, {"helpers.py": helpers, "model.py": model})
    assert finding_lines(root, "helpers.py", "TPL101") == [9]

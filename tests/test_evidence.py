"""Defaults follow evidence (RULES.md): a rule on by default has a measured gain and at least 90%
TRUE findings in the ecosystem check's labelled sample; the published tables say which."""

from __future__ import annotations

import pytest

from torchperf_lint import evidence
from torchperf_lint.docs import render_rule_page
from torchperf_lint.rules import ALL_RULES

ON = [rule for rule in ALL_RULES if rule.default_on]


@pytest.mark.parametrize("rule", ON, ids=lambda rule: rule.code)
def test_every_default_rule_meets_both_bars(rule) -> None:
    assert evidence.why_off(rule.code, rule.benchmark is not None) is None


def test_the_ecosystem_check_tracks_every_default_rule() -> None:
    tracked = set(evidence.precision_table()["rules"])
    assert {rule.code for rule in ON} <= tracked


@pytest.mark.parametrize(
    "row, meets",
    [
        (evidence.Precision(30, 20, 18, 1, 1), True),
        (evidence.Precision(30, 20, 17, 3, 0), False),  # DEBATABLE counts against the rule
        (evidence.Precision(4, 0, 0, 0, 0), True),  # nothing labelled is no evidence against it
    ],
)
def test_precision_bar_counts_debatable_against_the_rule(row, meets) -> None:
    assert row.meets_bar is meets


def test_a_rule_below_the_bar_says_so_on_its_page(monkeypatch) -> None:
    rule = next(r for r in ALL_RULES if r.code == "TPL503")
    monkeypatch.setattr(
        evidence,
        "precision_table",
        lambda: {"corpus": "two projects", "rules": {"TPL503": {"findings": 5, "labelled": 5, "true": 2, "debatable": 1, "false": 2}}},
    )
    monkeypatch.setattr(rule, "default_on", False)
    page = render_rule_page(rule)
    assert "off (enable with `--extend-select TPL503`)" in page
    assert "2 TRUE, 1 DEBATABLE, 2 FALSE of 5 labelled findings (40% TRUE" in page
    assert "the bar is 90%" in page


def test_memory_cut_counts_as_a_gain(monkeypatch) -> None:
    rows = {"TPL999": [{"speedup": 1.0, "ci": [0.99, 1.01], "note": "x: peak memory 3.04 GB before, 1.16 GB after"}]}
    monkeypatch.setattr(evidence, "measured", lambda: rows)
    assert evidence.speed_evidence("TPL999")
    rows["TPL999"][0]["note"] = "x: peak memory 153 MB before, 158 MB after"
    assert not evidence.speed_evidence("TPL999")

"""Defaults follow evidence (RULES.md): a rule on by default has a measured gain and meets the precision
bars of both populations of the ecosystem check (training code: TRUE+SMALL at least 90% and FALSE at
most 5% of the labelled findings; libraries: FALSE at most 10%, DEBATABLE+FALSE at most 30%)."""

from __future__ import annotations

import pytest

from torchperf_lint import evidence
from torchperf_lint.docs import render_rule_page
from torchperf_lint.rules import ALL_RULES

ON = [rule for rule in ALL_RULES if rule.default_on]
Precision = evidence.Precision


@pytest.mark.parametrize("rule", ON, ids=lambda rule: rule.code)
def test_every_default_rule_meets_every_bar(rule) -> None:
    assert evidence.why_off(rule.code, rule.benchmark is not None) is None


@pytest.mark.parametrize("population", evidence.POPULATIONS)
def test_the_ecosystem_check_tracks_every_rule_in_both_populations(population) -> None:
    tracked = set(evidence.precision_table()["populations"][population]["rules"])
    assert {rule.code for rule in ALL_RULES} <= tracked


@pytest.mark.parametrize("rule", ON, ids=lambda rule: rule.code)
def test_a_default_rule_meets_each_populations_bar(rule) -> None:
    for population in evidence.POPULATIONS:
        row = evidence.precision_of(rule.code, population)
        assert row is not None and row.misses(population) is None, (population, row)


@pytest.mark.parametrize(
    "row, population, missed",
    [
        # training code: right findings (TRUE+SMALL) at least 90%, FALSE at most 5%
        (Precision(30, 20, 12, 6, 1, 1), "training", None),
        (Precision(30, 20, 12, 5, 3, 0), "training", "the bar is 90% TRUE+SMALL"),  # DEBATABLE counts against
        (Precision(40, 40, 30, 7, 0, 3), "training", "the bar is at most 5% FALSE"),
        # libraries: FALSE at most 10%, DEBATABLE+FALSE at most 30%; SMALL never counts against a rule
        (Precision(30, 20, 5, 10, 4, 1), "library", None),
        (Precision(30, 20, 14, 0, 3, 3), "library", "the bar is at most 10% FALSE"),
        (Precision(30, 20, 13, 0, 5, 2), "library", "the bar is at most 30% DEBATABLE+FALSE"),
        (Precision(4, 0, 0, 0, 0, 0), "training", None),  # nothing labelled is no evidence against it
    ],
)
def test_precision_bars_per_population(row, population, missed) -> None:
    assert row.misses(population) == missed


def _table(training: dict, library: dict) -> dict:
    return {
        "populations": {
            "training": {"corpus": "two training repositories", "rules": {"TPL503": training}},
            "library": {"corpus": "three libraries", "rules": {"TPL503": library}},
        }
    }


def test_a_rule_below_a_bar_says_which_on_its_page(monkeypatch) -> None:
    rule = next(r for r in ALL_RULES if r.code == "TPL503")
    training = {"findings": 5, "labelled": 5, "true": 2, "small": 1, "debatable": 1, "false": 1}
    library = {"findings": 8, "labelled": 4, "true": 4, "small": 0, "debatable": 0, "false": 0}
    monkeypatch.setattr(evidence, "precision_table", lambda: _table(training, library))
    monkeypatch.setattr(rule, "default_on", False)
    page = render_rule_page(rule)
    assert "off (enable with `--extend-select TPL503`)" in page
    assert (
        "on training code 2 TRUE, 1 SMALL, 1 DEBATABLE, 1 FALSE of 5 labelled findings (60% TRUE+SMALL"
        in page
    )
    assert "the bar is 90% TRUE+SMALL" in page
    assert "- Training code (two training repositories): 2 TRUE" in page
    assert "- Libraries (three libraries): 4 TRUE, 0 SMALL, 0 DEBATABLE, 0 FALSE of 4" in page
    assert not evidence.meets_precision("TPL503")


def test_small_findings_keep_a_rule_on(monkeypatch) -> None:
    training = {"findings": 20, "labelled": 20, "true": 8, "small": 11, "debatable": 1, "false": 0}
    library = {"findings": 10, "labelled": 10, "true": 2, "small": 6, "debatable": 2, "false": 0}
    monkeypatch.setattr(evidence, "precision_table", lambda: _table(training, library))
    assert evidence.meets_precision("TPL503")
    assert evidence.why_off("TPL503", has_benchmark=False) is None


def test_memory_cut_counts_as_a_gain(monkeypatch) -> None:
    rows = {
        "TPL999": [
            {"speedup": 1.0, "ci": [0.99, 1.01], "note": "x: peak memory 3.04 GB before, 1.16 GB after"}
        ]
    }
    monkeypatch.setattr(evidence, "measured", lambda: rows)
    assert evidence.speed_evidence("TPL999")
    rows["TPL999"][0]["note"] = "x: peak memory 153 MB before, 158 MB after"
    assert not evidence.speed_evidence("TPL999")

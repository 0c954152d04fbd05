"""Every rule's BAD, GOOD and FIXED examples, turned into tests: a rule cannot exist without
tested examples."""

from __future__ import annotations

import textwrap

import pytest

from torchperf_lint.api import fix_source, lint_source
from torchperf_lint.engine.findings import Safety
from torchperf_lint.rules import ALL_RULES
from torchperf_lint.rules.base import Rule
from torchperf_lint.settings import Settings

from .helpers import example_source, expected_findings

pytestmark = pytest.mark.stepping_evidence  # settings_for: examples are shown as --library shows them


def _cases(kind: str) -> list[pytest.param]:
    return [
        pytest.param(rule, label, id=f"{rule.code}-{label}")
        for rule in ALL_RULES
        for label in getattr(rule, kind)
    ]


def settings_for(rule: type[Rule]) -> Settings:
    """An example is a fragment without the step loop that would run it: a rule whose default form
    asks for one (`Rule.stepping_evidence`) is shown its examples as --library shows them;
    tests/test_stepping.py holds the default form."""
    return Settings(library=rule.stepping_evidence)


def _lint(rule: type[Rule], source: str) -> list[tuple[int, str]]:
    # Exact selection, so off-by-default rules run too; TPL000 would show a broken example.
    findings = lint_source(source, path="example.py", settings=settings_for(rule), select=[rule.code])
    return sorted((f.line, f.code) for f in findings)


@pytest.mark.parametrize("rule, label", _cases("BAD"))
def test_bad_example_reports_exactly_the_marked_lines(rule: type[Rule], label: str) -> None:
    code = rule.BAD[label]
    expected = expected_findings(code)
    assert expected, "a BAD example must mark at least one finding"
    assert _lint(rule, example_source(code)) == expected


@pytest.mark.parametrize("rule, label", _cases("GOOD"))
def test_good_example_stays_silent(rule: type[Rule], label: str) -> None:
    assert _lint(rule, example_source(rule.GOOD[label])) == []


@pytest.mark.parametrize("rule, label", _cases("FIXED"))
def test_fixed_example_is_what_fix_produces(rule: type[Rule], label: str) -> None:
    assert label in rule.BAD, "a FIXED example must fix a BAD example of the same label"
    fixed = fix_source(
        example_source(rule.BAD[label]),
        "example.py",
        unsafe=True,
        settings=settings_for(rule),
        select=[rule.code],
    )
    assert fixed == textwrap.dedent(rule.FIXED[label]).lstrip("\n")


@pytest.mark.parametrize("rule, label", _cases("FIXED"))
def test_fixed_example_is_clean_and_stable(rule: type[Rule], label: str) -> None:
    fixed = textwrap.dedent(rule.FIXED[label]).lstrip("\n")
    settings = settings_for(rule)
    remaining = lint_source(fixed, path="example.py", settings=settings, select=[rule.code])
    assert [f for f in remaining if f.fix is not None] == []
    assert fix_source(fixed, "example.py", unsafe=True, settings=settings, select=[rule.code]) == fixed


@pytest.mark.parametrize("rule", ALL_RULES, ids=lambda r: r.code)
def test_rule_ships_enough_examples(rule: type[Rule]) -> None:
    assert len(rule.BAD) >= 3, "at least three distinct bad shapes"
    assert len(rule.GOOD) >= 4, "at least four traps that must stay silent"
    if rule.fix_safety is not Safety.NONE:
        assert rule.FIXED, "a fixable rule shows its fixed form"

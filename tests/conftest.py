"""Shared pytest configuration: hypothesis profiles, and no result cache in tests.

The normal run uses a few examples per property (`ci`); set TORCHPERF_HYPOTHESIS_PROFILE=long for a
longer search (e.g. before a release or after touching the engine)."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

_QUIET = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]

settings.register_profile(
    "ci", max_examples=30, deadline=None, suppress_health_check=_QUIET, database=None, print_blob=True
)
settings.register_profile(
    "long", max_examples=1000, deadline=None, suppress_health_check=_QUIET, database=None, print_blob=True
)
settings.load_profile(os.environ.get("TORCHPERF_HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(autouse=True)
def _no_result_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """In-process CLI runs must not read results cached by another test (or write a cache into
    the working tree); tests of the cache remove the variable themselves."""
    monkeypatch.setenv("TORCHPERF_LINT_NO_CACHE", "1")


# The rules of the design card that are off by default (for their real-code precision, or until
# their evidence is in: evidence.py, precision.json). Tests of the engine's routes (flake8, the
# language server, notebooks, SARIF, the project pass) were written with them on, as the rules to
# watch; those tests turn them back on, since what they check does not depend on which rules the
# evidence keeps on (tests/test_evidence.py does). Rules designed off (RULES.md's "on" column says
# no: TPL107, TPL403, TPL602, TPL703) and rules added after those tests stay as the defaults leave them.
DESIGNED_OFF = frozenset({"TPL107", "TPL403", "TPL602", "TPL703"})
ADDED_LATER = frozenset({"TPL204", "TPL404", "TPL405", "TPL406"})


def _below_the_bar() -> frozenset[str]:
    from torchperf_lint.catalog import RULES

    return frozenset(code for code, _, on in RULES if not on) - DESIGNED_OFF - ADDED_LATER


PRECISION_OFF = _below_the_bar()


def turn_on(monkeypatch: pytest.MonkeyPatch, codes: frozenset[str], on: bool = True) -> None:
    """Make `codes` default-on for one test (default-off with `on=False`), in the catalog selection
    reads and on the classes."""
    import torchperf_lint.catalog as catalog
    from torchperf_lint.rules import BY_CODE

    table = tuple((code, name, (on if code in codes else default)) for code, name, default in catalog.RULES)
    monkeypatch.setattr(catalog, "RULES", table)
    for code in codes:
        if code in BY_CODE:
            monkeypatch.setattr(BY_CODE[code], "default_on", on)
    from torchperf_lint.flake8_plugin import TorchPerfPlugin
    from torchperf_lint.rules import select_rules

    monkeypatch.setattr(TorchPerfPlugin, "_rules", select_rules(None, ()))  # chosen at import


@pytest.fixture
def precision_off_rules_on(monkeypatch: pytest.MonkeyPatch) -> None:
    turn_on(monkeypatch, PRECISION_OFF)


@pytest.fixture
def hot_rules_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """TPL101 and TPL103 on by default, for tests of selection and output that use them as the
    default-on rules: which rules the evidence keeps on (tests/test_evidence.py) is another matter."""
    turn_on(monkeypatch, frozenset({"TPL101", "TPL103"}))


@pytest.fixture(autouse=True)
def _hot_by_assumption(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests of the engine's routes, fixes and rules were written on snippets without a step loop,
    with TPL101, TPL104 or TPL401 as the rules to watch: what they check is how a finding is found,
    placed, fixed and reported, not whether the project's loops run its code. In process they see
    every rule's broad form (as `--library` does); whether code is stepped, and what the default
    form leaves out, is tested where a test asks for it with `@pytest.mark.stepping_evidence`
    (tests/test_stepping.py, tests/test_rule_examples.py). A subprocess run is the product as
    shipped: such tests pass `--library` where their snippet has no step loop."""
    if request.node.get_closest_marker("stepping_evidence") is not None:
        return
    from torchperf_lint.rules import ALL_RULES

    for rule in ALL_RULES:
        if rule.stepping_evidence:
            monkeypatch.setattr(rule, "stepping_evidence", False)

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


@pytest.fixture
def hot_rules_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """TPL101 and TPL103 on by default, for tests of selection and output that use them as the
    default-on rules: which rules the evidence keeps on (tests/test_evidence.py) is another matter."""
    from torchperf_lint.rules import BY_CODE

    for code in ("TPL101", "TPL103"):
        monkeypatch.setattr(BY_CODE[code], "default_on", True)

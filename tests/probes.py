"""Probe rules for CLI, config and flake8 tests: an off-by-default rule and a file-scope rule that
exist only while a test installs them, so the tests do not depend on which real rules exist."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst
import pytest

import torchperf_lint.catalog
import torchperf_lint.rules
from torchperf_lint.engine.context import Context
from torchperf_lint.engine.findings import Report
from torchperf_lint.rules.base import Rule


class OffByDefaultProbe(Rule):
    """Flags every call to `slow_probe()`; off by default, like TPL107."""

    code = "TPL199"
    name = "off-by-default-probe"
    summary = "probe"
    message = "slow_probe() is slow; do not call it"
    default_on = False
    node_types = (cst.Call,)

    def check(self, node: cst.Call, ctx: Context) -> Iterator[Report]:
        if isinstance(node.func, cst.Name) and node.func.value == "slow_probe":
            yield self.report(node, reason=ctx.hot_reason(node))


class FileScopeProbe(Rule):
    """One finding per file that mentions `FILE_PROBE`, on the module (no hot region)."""

    code = "TPL198"
    name = "file-scope-probe"
    summary = "probe"
    message = "this file has a FILE_PROBE; remove it"

    def check_file(self, ctx: Context) -> Iterator[Report]:
        if "FILE_PROBE" in ctx.source:
            yield self.report(ctx.facts.module)


PROBES = (FileScopeProbe, OffByDefaultProbe)


def install(monkeypatch: pytest.MonkeyPatch) -> None:
    """Add the probes to the registry everywhere it is read, for one test."""
    rules = sorted([*torchperf_lint.rules.ALL_RULES, *PROBES], key=lambda rule: rule.code)
    monkeypatch.setattr(torchperf_lint.rules, "ALL_RULES", rules)
    monkeypatch.setattr(torchperf_lint.rules, "BY_CODE", {rule.code: rule for rule in rules})
    monkeypatch.setattr(torchperf_lint.rules, "BY_NAME", {rule.name: rule for rule in rules})
    table = tuple((rule.code, rule.name, rule.default_on) for rule in rules)
    monkeypatch.setattr(torchperf_lint.catalog, "RULES", table)

"""Findings counted per rule, for --statistics."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence

from ..engine.findings import Finding, allowed


@dataclasses.dataclass(frozen=True)
class RuleCount:
    code: str
    name: str
    count: int
    fixable: int  # how many of them a fix at the run's safety level would remove


def count_by_rule(findings: Sequence[Finding], unsafe_fixes: bool) -> list[RuleCount]:
    counts = Counter((f.code, f.name) for f in findings)
    fixable = Counter((f.code, f.name) for f in findings if allowed(f.fix, unsafe_fixes))
    return [
        RuleCount(code, name, count, fixable[code, name]) for (code, name), count in sorted(counts.items())
    ]

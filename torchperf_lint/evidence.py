"""Whether a rule has earned its place in the default selection (RULES.md, "Defaults follow
evidence"): a measured gain (measured.json, published from benchmarks/results/) and at least 90%
TRUE findings in the labelled sample of the real-code ecosystem check (precision.json, published by
`python -m benchmarks.ecosystem --publish-precision`). The rule pages quote both; a test holds
every default-on rule to them."""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from importlib import resources
from typing import Any, Optional

PRECISION_BAR = 0.9
SPEEDUP_BAR = 1.05  # the low end of the 95% interval of the best case
MEMORY_BAR = 0.95  # or peak memory after the change at most this share of before
_PEAK = re.compile(r"peak memory ([\d.]+) (GB|MB) before, ([\d.]+) (GB|MB) after")
_UNIT = {"MB": 1.0, "GB": 1024.0}


@functools.lru_cache(maxsize=None)  # read once per process: a page, a row, a test each ask
def _read(name: str) -> Any:
    try:
        text = resources.files("torchperf_lint").joinpath(name).read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    return json.loads(text)


def measured() -> dict[str, list[dict[str, Any]]]:
    """Speedups measured by the benchmark suite, keyed by rule code."""
    data: dict[str, list[dict[str, Any]]] = _read("measured.json")
    return data


def precision_table() -> dict[str, Any]:
    """The ecosystem check's labelled findings per rule, and the corpus they come from."""
    data: dict[str, Any] = _read("precision.json")
    return data


@dataclasses.dataclass(frozen=True)
class Precision:
    findings: int
    labelled: int
    true: int
    debatable: int
    false: int

    @property
    def share(self) -> Optional[float]:
        """TRUE over labelled; a DEBATABLE finding counts against the rule."""
        return self.true / self.labelled if self.labelled else None

    @property
    def meets_bar(self) -> bool:
        """No labelled finding is no evidence against the rule."""
        return self.share is None or self.share >= PRECISION_BAR

    def describe(self) -> str:
        if not self.labelled:
            return f"{self.findings} findings on the corpus, none labelled"
        return (
            f"{self.true} TRUE, {self.debatable} DEBATABLE, {self.false} FALSE of {self.labelled} "
            f"labelled findings ({self.share:.0%} TRUE; {self.findings} findings in all)"
        )


def precision_of(code: str) -> Optional[Precision]:
    """The rule's row in precision.json, or None when the ecosystem check does not track it."""
    row = precision_table().get("rules", {}).get(code)
    if row is None:
        return None
    return Precision(row["findings"], row["labelled"], row["true"], row["debatable"], row["false"])


def _cuts_memory(row: dict[str, Any]) -> bool:
    match = _PEAK.search(row.get("note", ""))
    if match is None:
        return False
    before = float(match.group(1)) * _UNIT[match.group(2)]
    after = float(match.group(3)) * _UNIT[match.group(4)]
    return after <= MEMORY_BAR * before


def speed_evidence(code: str) -> bool:
    """Some measured case gains at least 5% with the low end of its 95% interval at 1.05x or
    above, or cuts peak memory."""
    for row in measured().get(code, []):
        low = (row.get("ci") or [row["speedup"]])[0]
        if low >= SPEEDUP_BAR or _cuts_memory(row):
            return True
    return False


def why_off(code: str, has_benchmark: bool) -> Optional[str]:
    """The evidence that keeps a rule out of the default selection, or None when it has none
    against it (a rule can still be off for reasons of its own, which its page gives)."""
    reasons = []
    if has_benchmark and not speed_evidence(code):
        reasons.append("no measured case gains 5% (the low end of its 95% interval under 1.05x) or cuts peak memory")
    precision = precision_of(code)
    if precision is not None and not precision.meets_bar:
        reasons.append(
            f"on the real-code ecosystem check {precision.describe()}, and the bar is {PRECISION_BAR:.0%} TRUE"
        )
    return "; ".join(reasons) if reasons else None

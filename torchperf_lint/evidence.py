"""Whether a rule has earned its place in the default selection (RULES.md, "Defaults follow
evidence"): a measured gain (measured.json, published from benchmarks/results/) and precision on both
populations of the ecosystem check (precision.json, published by `python -m benchmarks.ecosystem
--publish-precision`): on training code, whose authors the linter serves, TRUE+SMALL at least 90% of
the labelled findings and FALSE at most 5%; on libraries, FALSE at most 10% and DEBATABLE+FALSE at most
30%. The rule pages and `--list-rules` quote both; a test holds every default-on rule to them."""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from importlib import resources
from typing import Any, Optional

TRAINING = "training"
LIBRARY = "library"
POPULATIONS = (TRAINING, LIBRARY)
POPULATION_NAMES = {TRAINING: "training code", LIBRARY: "libraries"}
TRAINING_GOOD_BAR = 0.90  # TRUE+SMALL share, at least
TRAINING_FALSE_BAR = 0.05  # FALSE share, at most
LIBRARY_FALSE_BAR = 0.10
LIBRARY_NOISE_BAR = 0.30  # DEBATABLE+FALSE share, at most
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
    """The ecosystem check's labelled findings per population and rule, and the corpus of each."""
    data: dict[str, Any] = _read("precision.json")
    return data


def tracked_codes() -> frozenset[str]:
    """The rules the ecosystem check has precision figures for, in either population."""
    populations = precision_table().get("populations", {})
    return frozenset(code for table in populations.values() for code in table.get("rules", {}))


def corpus(population: str) -> str:
    return str(
        precision_table()
        .get("populations", {})
        .get(population, {})
        .get("corpus", POPULATION_NAMES[population])
    )


@dataclasses.dataclass(frozen=True)
class Precision:
    findings: int
    labelled: int
    true: int
    small: int
    debatable: int
    false: int

    def _share(self, count: int) -> Optional[float]:
        return count / self.labelled if self.labelled else None

    @property
    def good_share(self) -> Optional[float]:
        """TRUE+SMALL over labelled: right findings, worth the change or free to fix."""
        return self._share(self.true + self.small)

    @property
    def false_share(self) -> Optional[float]:
        return self._share(self.false)

    @property
    def noise_share(self) -> Optional[float]:
        """DEBATABLE+FALSE over labelled: what a reader must silence."""
        return self._share(self.debatable + self.false)

    def misses(self, population: str) -> Optional[str]:
        """Which bar of `population` the labels miss, or None (no labelled finding is no evidence
        against the rule)."""
        if not self.labelled:
            return None
        if population == TRAINING:
            if self.true + self.small < TRAINING_GOOD_BAR * self.labelled:
                return f"the bar is {TRAINING_GOOD_BAR:.0%} TRUE+SMALL"
            if self.false > TRAINING_FALSE_BAR * self.labelled:
                return f"the bar is at most {TRAINING_FALSE_BAR:.0%} FALSE"
            return None
        if self.false > LIBRARY_FALSE_BAR * self.labelled:
            return f"the bar is at most {LIBRARY_FALSE_BAR:.0%} FALSE"
        if self.debatable + self.false > LIBRARY_NOISE_BAR * self.labelled:
            return f"the bar is at most {LIBRARY_NOISE_BAR:.0%} DEBATABLE+FALSE"
        return None

    def describe(self) -> str:
        if not self.labelled:
            return f"{self.findings} findings, none labelled"
        return (
            f"{self.true} TRUE, {self.small} SMALL, {self.debatable} DEBATABLE, {self.false} FALSE of "
            f"{self.labelled} labelled findings ({self.good_share:.0%} TRUE+SMALL, {self.false_share:.0%} "
            f"FALSE; {self.findings} findings in all)"
        )

    def cell(self) -> str:
        """A table cell: TRUE+SMALL and FALSE shares of the labelled findings."""
        if not self.labelled:
            return f"{self.findings} found, 0 labelled" if self.findings else "no finding"
        return f"{self.good_share:.0%} right, {self.false_share:.0%} FALSE of {self.labelled}"


def bars(population: str) -> str:
    """The precision bars of a population, in words."""
    if population == TRAINING:
        return (
            f"TRUE+SMALL at least {TRAINING_GOOD_BAR:.0%} and FALSE at most {TRAINING_FALSE_BAR:.0%} "
            "of the labelled findings"
        )
    return (
        f"FALSE at most {LIBRARY_FALSE_BAR:.0%} and DEBATABLE+FALSE at most {LIBRARY_NOISE_BAR:.0%} "
        "of the labelled findings"
    )


def precision_of(code: str, population: str, library: bool = False) -> Optional[Precision]:
    """The rule's row for one population in precision.json (what a run without --library reports), or
    None when the check does not track it; with `library`, the row of what only --library adds (code
    no step loop of the project runs), or None when there is none."""
    row = precision_table().get("populations", {}).get(population, {}).get("rules", {}).get(code)
    if row is not None and library:
        row = row.get("library")
    if row is None:
        return None
    return Precision(
        row["findings"], row["labelled"], row["true"], row.get("small", 0), row["debatable"], row["false"]
    )


def meets_precision(code: str) -> bool:
    """Whether the labels of both populations leave the rule on (RULES.md's bars 2 and 3)."""
    for population in POPULATIONS:
        row = precision_of(code, population)
        if row is not None and row.misses(population):
            return False
    return True


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
        reasons.append(
            "no measured case gains 5% (the low end of its 95% interval under 1.05x) or cuts peak memory"
        )
    for population in POPULATIONS:
        precision = precision_of(code, population)
        missed = None if precision is None else precision.misses(population)
        if precision is not None and missed:
            reasons.append(f"on {POPULATION_NAMES[population]} {precision.describe()}, and {missed}")
    return "; ".join(reasons) if reasons else None

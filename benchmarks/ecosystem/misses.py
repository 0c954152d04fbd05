"""The reading set (misses.csv): every per-step problem a performance engineer listed after reading a
training script end to end, with the rule that should report it, and the recall of the linter over it.

A row names a problem by (project, path, line, code): it is *reported* when the run has a finding of that
code on that line. Rows are judged on the training population only; a project not run this time is left out.
"""

from __future__ import annotations

import csv
import dataclasses
from collections.abc import Iterable, Sequence
from pathlib import Path

from .lint import Finding

COLUMNS = ("project", "path", "line", "code", "problem", "reader")


@dataclasses.dataclass(frozen=True)
class Problem:
    project: str
    path: str
    line: int
    code: str
    problem: str
    reader: str = ""

    @property
    def place(self) -> tuple[str, str, int, str]:
        return (self.project, self.path, self.line, self.code)


def load_problems(path: Path) -> list[Problem]:
    """The rows of `path`; a malformed row raises ValueError naming its line."""
    if not path.exists():
        return []
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        missing = [c for c in COLUMNS if c not in (reader.fieldnames or ())]
        if missing:
            raise ValueError(f"{path}: missing column(s) {', '.join(missing)}")
        problems = []
        for number, row in enumerate(reader, start=2):
            try:
                problems.append(
                    Problem(
                        row["project"],
                        row["path"],
                        int(row["line"]),
                        row["code"],
                        row["problem"],
                        row["reader"],
                    )
                )
            except (TypeError, ValueError) as error:
                raise ValueError(f"{path}:{number}: {error}") from None
    return problems


@dataclasses.dataclass(frozen=True)
class Recall:
    reported: list[Problem]
    missed: list[Problem]

    @property
    def share(self) -> float | None:
        total = len(self.reported) + len(self.missed)
        return len(self.reported) / total if total else None


def recall(problems: Iterable[Problem], findings: Iterable[Finding], projects: Sequence[str]) -> Recall:
    """Which of the problems of `projects` (the ones run) a finding reports."""
    places = {(f.project, f.path, f.line, f.code) for f in findings}
    judged = [p for p in problems if p.project in projects]
    return Recall(
        reported=[p for p in judged if p.place in places],
        missed=[p for p in judged if p.place not in places],
    )

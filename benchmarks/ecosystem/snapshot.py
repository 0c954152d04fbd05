"""The committed snapshot of the last run's findings (one JSON object a line), and the diff
against it."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from .lint import Finding, Key

FIELDS = ("project", "version", "path", "line", "code", "source")


def dumps(findings: Iterable[Finding]) -> str:
    rows = sorted(findings, key=lambda f: (f.key, f.source))
    return "".join(json.dumps({name: getattr(f, name) for name in FIELDS}) + "\n" for f in rows)


def loads(text: str) -> list[Finding]:
    findings = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                row = json.loads(line)
                findings.append(Finding(*(row[name] for name in FIELDS)))
            except (json.JSONDecodeError, KeyError, TypeError) as error:
                raise ValueError(f"snapshot line {number}: {error}") from None
    return findings


def read(path: Path) -> list[Finding] | None:
    """The snapshot's findings; None when there is none yet."""
    if not path.exists():
        return None
    return loads(path.read_text(encoding="utf-8"))


def updated(old: list[Finding] | None, new: list[Finding], run: set[str]) -> list[Finding]:
    """The snapshot after a run over the projects in `run`: their findings replaced, the others kept."""
    kept = [f for f in old or [] if f.project not in run]
    return kept + new


def diff(old: list[Finding], new: list[Finding]) -> tuple[list[Finding], list[Finding]]:
    """(added, removed) findings, matched by key as multisets: two findings of one rule on one line
    are two findings. Only the projects present in `new` should be passed in `old`."""
    old_keys, new_keys = Counter(f.key for f in old), Counter(f.key for f in new)
    added_left: Counter[Key] = new_keys - old_keys
    removed_left: Counter[Key] = old_keys - new_keys
    added, removed = [], []
    for finding in new:
        if added_left[finding.key] > 0:
            added_left[finding.key] -= 1
            added.append(finding)
    for finding in old:
        if removed_left[finding.key] > 0:
            removed_left[finding.key] -= 1
            removed.append(finding)
    return added, removed

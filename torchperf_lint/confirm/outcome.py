"""What the run says about each static finding (seen at every step, at some, not seen) and what it
saw at lines no finding names. Findings come as the linter's JSON objects; events as the probe's."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Sequence
from typing import Any

HOST_READS = frozenset({"item", "tolist", "cpu", "numpy", "bool", "float", "int", "print", "sync"})
WAITS = frozenset({"sync", "synchronize", "empty-cache"})
ANY = None  # a rule whose pattern is work at its lines, of whatever kind

# The events that show each rule's pattern at run time. A rule absent here is a setting (a DataLoader
# argument, a conv's bias, a dtype) whose cost confirm cannot see per step: "not-checked".
KINDS_OF_RULE: dict[str, frozenset[str] | None] = {
    "TPL101": frozenset({"factory", "copy"}),
    "TPL102": frozenset({"factory", "copy"}),
    "TPL103": frozenset({"host-index"}),
    "TPL104": HOST_READS,
    "TPL105": HOST_READS,
    "TPL106": frozenset({"copy"}),
    "TPL107": HOST_READS,
    "TPL201": ANY,
    "TPL202": ANY,
    "TPL203": ANY,
    "TPL204": ANY,
    "TPL301": ANY,
    "TPL302": frozenset({"module"}),
    "TPL303": ANY,
    "TPL304": ANY,
    "TPL305": ANY,
    "TPL306": ANY,
    "TPL604": WAITS,
}


@dataclasses.dataclass(frozen=True)
class Event:
    """What the probe saw at one line, of one kind: how often in each window (window k: from the end
    of step k-1 to the end of step k, so window 1 holds the setup), its details, host seconds (--profile)."""

    path: str
    line: int
    kind: str
    by_step: dict[int, int]
    details: tuple[str, ...]
    seconds: dict[int, float]

    @classmethod
    def read(cls, data: dict[str, Any]) -> Event:
        by_step = {int(step): count for step, count in data["by_step"].items()}
        seconds = {int(step): value for step, value in data["seconds"].items()}
        return cls(data["path"], data["line"], data["kind"], by_step, tuple(data["details"]), seconds)


def measured_windows(done: int) -> range:
    """The windows that count as steps. The first holds the setup and one-time work: a warm-up. The
    others each hold one whole turn of the loop (what follows step k-1 and what leads to step k),
    whatever the loop does before and after its step() call. A program that ended by itself leaves a
    last window without a step (what it does after training): not a step either."""
    if done <= 1:
        return range(1, done + 1)
    return range(2, done + 1)


@dataclasses.dataclass(frozen=True)
class Seen:
    """How often something was seen over the run's steps."""

    steps: int  # the run's steps
    at_steps: int  # the steps it was seen at
    count: int  # the events within the steps
    seconds: float
    outside: int  # the events before the steps (setup, the warm-up step) or after them

    @property
    def status(self) -> str:
        if self.at_steps == 0:
            return "not-seen"
        return "every-step" if self.at_steps == self.steps else "some-steps"

    @property
    def per_step(self) -> float:
        return self.count / self.steps if self.steps else 0.0

    def as_dict(self, profile: bool) -> dict[str, Any]:
        timing = {"seconds_per_step": self.seconds / self.steps if self.steps else 0.0} if profile else {}
        outside = {"outside_steps": self.outside} if self.outside else {}
        return {
            "status": self.status,
            "steps_seen": self.at_steps,
            "per_step": self.per_step,
            **timing,
            **outside,
        }


def seen_over(events: Iterable[Event], windows: range) -> Seen:
    """The steps any of the events was seen at; as count, that of its most frequent kind (an
    .item() on CUDA is both a host read and a sync, a randperm(n).to(dev) a factory and a copy:
    one thing each); the seconds of them all."""
    at: set[int] = set()
    counts: dict[str, int] = {}
    outside = 0
    seconds = 0.0
    for event in events:
        for window, n in event.by_step.items():
            if window in windows:
                at.add(window)
                counts[event.kind] = counts.get(event.kind, 0) + n
            else:
                outside += n
        seconds += sum(value for window, value in event.seconds.items() if window in windows)
    return Seen(len(windows), len(at), max(counts.values(), default=0), seconds, outside)


def _lines(finding: dict[str, Any]) -> range:
    return range(finding["line"], max(finding["line"], finding.get("end_line") or 0) + 1)


def _absolute(path: str, cwd: str) -> str:
    return os.path.realpath(os.path.join(cwd, path))


def _costly(event: Event, cuda: bool) -> bool:
    """Events worth naming when no finding does: waits, host-built indices, host reads (of a device
    tensor, in a program that uses CUDA; of any tensor on a CPU run, where they show what would wait
    on a GPU), copies that block or come from pageable memory, host factories in a program that uses
    CUDA, and modules built again after the first step."""
    if event.kind in WAITS | {"host-index"}:
        return True
    if event.kind in HOST_READS:
        return not cuda or any(not d.endswith("on cpu") for d in event.details)
    if event.kind == "copy":
        return any("pageable" in d or "blocking" in d.split(", ") for d in event.details)
    if event.kind == "factory":
        return cuda and any(d.endswith("on cpu") for d in event.details)
    if event.kind == "module":
        return any(step > 1 for step in event.by_step)
    return False


def confirm_findings(
    findings: Sequence[dict[str, Any]], report: dict[str, Any], cwd: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Each finding with what the run saw at its lines; and the per-step events no finding names."""
    steps = measured_windows(report["steps"])
    profile = bool(report.get("profile"))
    events = [Event.read(data) for data in report["events"]]
    by_line: dict[tuple[str, int], list[Event]] = {}
    for event in events:
        by_line.setdefault((event.path, event.line), []).append(event)
    named: set[tuple[str, int, str]] = set()
    confirmed = []
    for finding in findings:
        path = _absolute(finding["path"], cwd)
        at_lines = [e for line in _lines(finding) for e in by_line.get((path, line), [])]
        entry = {key: finding.get(key) for key in ("path", "line", "col", "code", "name", "message")}
        if finding["code"] not in KINDS_OF_RULE:
            entry.update(status="not-checked", steps_seen=0, per_step=0.0)
            entry["why"] = "a setting, not a per-step event: confirm cannot see its cost"
            confirmed.append(entry)
            continue
        kinds = KINDS_OF_RULE[finding["code"]]
        if kinds is ANY:
            matching = [e for e in at_lines if e.line == finding["line"]] or at_lines
            named.update((e.path, e.line, e.kind) for e in at_lines if e.line == finding["line"])
        else:
            matching = [e for e in at_lines if e.kind in kinds]
            named.update((e.path, e.line, e.kind) for e in matching)
        seen = seen_over(matching, steps)
        entry.update(seen.as_dict(profile))
        entry["kinds"] = sorted({e.kind for e in matching})
        entry["details"] = sorted({d for e in matching for d in e.details})
        if seen.at_steps == 0:
            ran = seen_over(at_lines, steps)
            if ran.at_steps:
                entry["line_ran_steps"] = ran.at_steps  # the line ran, without the event the rule names
        confirmed.append(entry)
    unreported = []
    for event in events:
        if (event.path, event.line, event.kind) in named or not _costly(event, bool(report.get("cuda"))):
            continue
        seen = seen_over([event], steps)
        if seen.at_steps < min(2, len(steps)):
            continue  # once, in the first step's window: setup, not a step's work
        unreported.append(
            {
                "path": _shown(event.path, cwd),
                "line": event.line,
                "kind": event.kind,
                **seen.as_dict(profile),
                "details": list(event.details),
            }
        )
    return confirmed, unreported


def _shown(path: str, cwd: str) -> str:
    """A path as the linter prints it: relative to the working directory when under it."""
    relative = os.path.relpath(path, cwd)
    return path if relative.startswith(os.pardir) else relative

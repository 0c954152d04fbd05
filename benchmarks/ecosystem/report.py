"""The report: the projects, findings per rule, the diff against the snapshot, precision per rule
over the labels, and the fix check; as plain text or as markdown."""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Sequence

from torchperf_lint.evidence import POPULATION_NAMES, POPULATIONS, TRAINING, bars

from .fixcheck import FixCheck
from .labels import Label, forms_per_rule
from .lint import Finding, Key
from .misses import Problem, recall
from .projects import Project
from .snapshot import diff

_NUMBER = re.compile(r"-?[\d.]+%?|-")


@dataclasses.dataclass
class ProjectRun:
    project: Project
    files: int
    lines: int
    seconds: float
    findings: list[Finding]
    failure: str | None = None


@dataclasses.dataclass
class Report:
    runs: list[ProjectRun]
    not_fetched: list[tuple[Project, str]]
    rules: list[tuple[str, str]]  # (code, name) of the tracked rules
    snapshot: list[Finding] | None  # of the projects run; None when there is no snapshot yet
    labels: list[Label]  # of the projects run
    fix_checks: list[FixCheck] | None  # None: --no-fix-check
    seconds: float
    checkout: str = ""  # which linter produced the findings
    default_on: frozenset[str] | None = None  # codes on by default; None: not known
    population: str = ""  # the population this report is a part of; "" for a whole run
    problems: list[Problem] = dataclasses.field(default_factory=list)  # the reading set (misses.csv)

    def part(self, population: str) -> Report:
        """The runs, snapshot, labels and fix checks of one population's projects."""
        names = {r.project.name for r in self.runs if r.project.population == population}
        names |= {p.name for p, _ in self.not_fetched if p.population == population}
        return dataclasses.replace(
            self,
            runs=[r for r in self.runs if r.project.name in names],
            not_fetched=[(p, why) for p, why in self.not_fetched if p.name in names],
            snapshot=None if self.snapshot is None else [f for f in self.snapshot if f.project in names],
            labels=[label for label in self.labels if label.project in names],
            fix_checks=None
            if self.fix_checks is None
            else [c for c in self.fix_checks if c.project in names],
            population=population,
            problems=[p for p in self.problems if p.project in names],
        )

    @property
    def findings(self) -> list[Finding]:
        return [f for run in self.runs for f in run.findings]

    @property
    def fix_failures(self) -> int:
        return sum(len(check.failures) for check in self.fix_checks or [])


def table(headers: Sequence[str], rows: Sequence[Sequence[object]], markdown: bool) -> list[str]:
    cells = [[str(cell) for cell in row] for row in rows]
    if markdown:
        lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
        return lines + ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in cells]
    widths = [max([len(h)] + [len(row[i]) for row in cells]) for i, h in enumerate(headers)]

    def line(row: Sequence[str]) -> str:
        return "  ".join(
            c.rjust(w) if _NUMBER.fullmatch(c) else c.ljust(w) for c, w in zip(row, widths, strict=True)
        ).rstrip()

    return [line(headers), line(["-" * w for w in widths]), *map(line, cells)]


def heading(title: str, markdown: bool, population: str = "") -> list[str]:
    if population:
        title = f"{title}: {POPULATION_NAMES[population]}"
    return ["", f"## {title}", ""] if markdown else ["", title, "=" * len(title)]


def block(lines: list[str], markdown: bool) -> list[str]:
    """Code lines (diff entries, failures): fenced in markdown so nothing in them is formatting."""
    return ["```", *lines, "```"] if markdown and lines else lines


def _totals(report: Report) -> str:
    files = sum(run.files for run in report.runs)
    lines = sum(run.lines for run in report.runs)
    return f"{len(report.runs)} projects, {files} files, {lines} lines; {len(report.findings)} findings"


def summary(report: Report, markdown: bool) -> list[str]:
    out = ["# Ecosystem check" if markdown else "Ecosystem check", ""]
    if report.checkout:
        out += [report.checkout, ""]
    return out + [f"{_totals(report)}; wall time {report.seconds:.0f} s"]


def projects(report: Report, markdown: bool) -> list[str]:
    out = heading("Projects", markdown, report.population) + [_totals(report), ""]
    rows = [
        [r.project.name, r.project.version, r.files, r.lines, len(r.findings), f"{r.seconds:.1f}"]
        for r in report.runs
    ]
    out += table(["project", "version", "files", "lines", "findings", "lint s"], rows, markdown)
    problems = [f"{p.label}: not fetched: {why}" for p, why in report.not_fetched]
    problems += [f"{r.project.label}: not linted: {r.failure}" for r in report.runs if r.failure]
    return out + ([""] + block(problems, markdown) if problems else [])


def per_rule(report: Report, markdown: bool) -> list[str]:
    names = dict(report.rules)
    findings = report.findings
    for f in findings:
        names.setdefault(f.code, "")
    counts = Counter(f.code for f in findings)
    files = Counter(code for code, _, _ in {(f.code, f.project, f.path) for f in findings})
    projects = Counter(code for code, _ in {(f.code, f.project) for f in findings})
    rows = [[code, names[code], counts[code], files[code], projects[code]] for code in sorted(names)]
    rows.append(["all", "", len(findings), len({(f.project, f.path) for f in findings}), ""])
    return heading("Findings per rule", markdown, report.population) + table(
        ["code", "name", "findings", "files", "projects"], rows, markdown
    )


def _entry(sign: str, f: Finding) -> str:
    return f"{sign} {f.code} {f.where}  {f.source}"


def snapshot_diff(report: Report, markdown: bool) -> list[str]:
    out = heading("Changes since the snapshot", markdown, report.population)
    if report.snapshot is None:
        return out + ["No snapshot yet: --update-snapshot writes one."]
    added, removed = diff(report.snapshot, report.findings)
    if not added and not removed:
        return out + ["No change."]
    out.append(f"{len(added)} added, {len(removed)} removed.")
    entries = [_entry("+", f) for f in added] + [_entry("-", f) for f in removed]
    return out + [""] + block(entries, markdown)


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def precision(report: Report, markdown: bool) -> list[str]:
    out = heading("Precision per rule (labels.csv)", markdown, report.population)
    if not report.labels:
        out += ["No labels yet for these projects; --labels-template writes the findings to label.", ""]

    def default(code: str) -> str:
        return "?" if report.default_on is None else ("on" if code in report.default_on else "off")

    population = report.population or TRAINING
    rows = []
    for row, form in forms_per_rule(report.findings, report.labels, [code for code, _ in report.rules]):
        counts = row.evidence()
        missed = counts.misses(population)
        rows.append(
            [
                row.code + form,
                "with --library" if form else default(row.code),
                row.findings,
                row.labelled,
                row.true,
                row.small,
                row.debatable,
                row.false,
                _percent(counts.good_share),
                _percent(counts.false_share),
                _percent(counts.noise_share),
                "-" if not row.labelled else ("meets" if missed is None else "misses"),
                f"{row.false}/{row.false_total}",
                row.gone,
            ]
        )
    headers = [
        "code",
        "default",
        "findings",
        "labelled",
        "TRUE",
        "SMALL",
        "DEBATABLE",
        "FALSE",
        "right",
        "FALSE%",
        "DEB+FALSE%",
        "bar",
        "FALSE firing",
        "gone",
    ]
    out += table(headers, rows, markdown)
    out += [
        "",
        f"right: TRUE+SMALL. bar: {bars(population)}. A rule whose default form asks for a step loop of "
        "the project has a second row: its findings in code no step loop runs, which only --library shows.",
    ]
    if report.default_on is not None:
        firing = {f.key for f in report.findings if f.code in report.default_on and not f.hypothesis}
        found = {f.key for f in report.findings}
        labelled = [label for label in report.labels if label.key in found]
        false = [label for label in report.labels if label.verdict == "FALSE"]
        shown = sum(1 for label in false if label.key in firing)
        reported = sum(1 for label in labelled if label.key in firing)
        out += [
            f"FALSE-labelled findings a default run still reports: {shown} of {len(false)} "
            f"({shown} of the {reported} labelled findings a default run reports)."
        ]
    out += _still_firing(report)
    return out


def _still_firing(report: Report) -> list[str]:
    """How many of the findings ever labelled FALSE, and TRUE, every rule still reports: with
    --extend-select ALL (code hot only by assumption left out) and with --library too."""
    every = {f.key for f in report.findings if not f.hypothesis}
    library = {f.key for f in report.findings}

    def share(verdict: str, firing: set[Key]) -> str:
        labels = [label for label in report.labels if label.verdict == verdict]
        shown = sum(1 for label in labels if label.key in firing)
        return f"{shown} of {len(labels)} ({_percent(shown / len(labels) if labels else None)})"

    return [
        f"Every rule on, labelled findings still reported: FALSE {share('FALSE', every)}, "
        f"TRUE {share('TRUE', every)}; with --library too: FALSE {share('FALSE', library)}, "
        f"TRUE {share('TRUE', library)}."
    ]


def fix_check(report: Report, markdown: bool) -> list[str]:
    out = heading("Fix check (--fix --unsafe-fixes)", markdown, report.population)
    if report.fix_checks is None:
        return out + ["Skipped (--no-fix-check)."]
    rows = [[c.project, c.changed, len(c.failures), f"{c.seconds:.1f}"] for c in report.fix_checks]
    out += table(["project", "files fixed", "failures", "fix check s"], rows, markdown)
    failures = [
        f"{f.project}:{f.path or '(run)'}: {f.problem}" for c in report.fix_checks for f in c.failures
    ]
    verdict = (
        f"FAILED: {len(failures)} problems."
        if failures
        else "Passed: every fixed file compiles, adds no pyflakes message and is fixed in one run."
    )
    return out + ["", verdict] + ([""] + block(failures, markdown) if failures else [])


def reading_set(report: Report, markdown: bool) -> list[str]:
    """Recall over misses.csv: the per-step problems read by hand that a finding of the expected rule reports,
    with every rule on and in a default run."""
    if not report.problems:
        return []
    ran = [run.project.name for run in report.runs if run.failure is None]
    every = recall(report.problems, report.findings, ran)
    default_on = report.default_on
    by_default = None
    if default_on is not None:
        shown = [f for f in report.findings if f.code in default_on and not f.hypothesis]
        by_default = recall(report.problems, shown, ran)
    out = heading("Recall over the reading set (misses.csv)", markdown, report.population)
    total = len(every.reported) + len(every.missed)
    out.append(
        f"Every rule on: {len(every.reported)} of {total} problems reported ({_percent(every.share)})."
    )
    if by_default is not None:
        out.append(
            f"Default run: {len(by_default.reported)} of {total} reported ({_percent(by_default.share)})."
        )
    rows = []
    for project in sorted({p.project for p in every.reported + every.missed}):
        found = sum(p.project == project for p in every.reported)
        missed = sum(p.project == project for p in every.missed)
        rows.append((project, found + missed, found, missed))
    out += [""] + table(("project", "problems", "reported", "missed"), rows, markdown)
    if every.missed:
        missed_lines = [f"- {p.code} {p.project}:{p.path}:{p.line}  {p.problem}" for p in every.missed]
        out += ["", "Missed:", ""] + block(missed_lines, markdown)
    return out


def render(report: Report, markdown: bool = False) -> str:
    """The header, then every table once per population (training code first), each population's
    findings, diff, precision and fix check on their own."""
    lines = summary(report, markdown)
    for population in POPULATIONS:
        part = report.part(population)
        if not part.runs and not part.not_fetched:
            continue
        for section in (projects, per_rule, snapshot_diff, precision, reading_set, fix_check):
            lines += section(part, markdown)
    return "\n".join(lines) + "\n"

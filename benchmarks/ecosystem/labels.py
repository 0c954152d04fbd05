"""Hand labels of findings (labels.csv) and the precision per rule they give.

A label names a finding by (project, version, path, line, code) and judges it, with a one-line reason
(RULES.md, "Defaults follow evidence"): TRUE (a performance engineer would make the change there),
SMALL (right, the fix free and safe, the gain there small), DEBATABLE (a real cost nobody can or should
remove there) or FALSE (wrong). A non-TRUE reason starts with a class tag in brackets (`[checkpoint]`).
A label whose finding no longer fires is "gone": the rule stopped reporting it, which is a fixed false
positive when it was FALSE and a lost true one when it was TRUE.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

from torchperf_lint.evidence import LIBRARY, POPULATIONS, TRAINING, Precision

from .lint import Finding, Key
from .projects import Project

CORPUS = {
    TRAINING: "{count} training repositories (the training corpus, pinned in its PINS.tsv)",
    LIBRARY: "{count} libraries and tools from PyPI (benchmarks/ecosystem/projects.toml)",
}

COLUMNS = ("project", "version", "path", "line", "code", "verdict", "reason")
VERDICTS = ("TRUE", "SMALL", "DEBATABLE", "FALSE")
# The template adds what a labeller reads to judge; extra columns are ignored when labels are loaded,
# so filled-in template rows can be moved into labels.csv as they are.
TEMPLATE_COLUMNS = (*COLUMNS, "source", "context", "message")


@dataclasses.dataclass(frozen=True)
class Label:
    project: str
    version: str
    path: str
    line: int
    code: str
    verdict: str
    reason: str

    @property
    def key(self) -> Key:
        return (self.project, self.version, self.path, self.line, self.code)


def parse_labels(text: str, where: str = "labels.csv") -> list[Label]:
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in COLUMNS if c not in (reader.fieldnames or ())]
    if missing:
        raise ValueError(f"{where}: missing columns: {', '.join(missing)}")
    labels: list[Label] = []
    seen: set[Key] = set()
    for row in reader:
        at = f"{where}:{reader.line_num}"
        verdict = (row["verdict"] or "").strip().upper()
        if verdict not in VERDICTS:
            raise ValueError(f"{at}: verdict must be one of {', '.join(VERDICTS)}, got {row['verdict']!r}")
        try:
            line = int(row["line"])
        except ValueError:
            raise ValueError(f"{at}: line must be a number, got {row['line']!r}") from None
        label = Label(
            row["project"].strip(),
            row["version"].strip(),
            row["path"].strip(),
            line,
            row["code"].strip().upper(),
            verdict,
            (row["reason"] or "").strip(),
        )
        if label.key in seen:
            raise ValueError(f"{at}: a second label for {':'.join(map(str, label.key))}")
        seen.add(label.key)
        labels.append(label)
    return labels


def load_labels(path: Path) -> list[Label]:
    if not path.exists():
        return []
    return parse_labels(path.read_text(encoding="utf-8"), str(path))


@dataclasses.dataclass
class RulePrecision:
    code: str
    findings: int = 0
    labelled: int = 0  # labels whose finding fires now
    true: int = 0
    small: int = 0
    debatable: int = 0
    false: int = 0  # labelled FALSE and still firing
    false_total: int = 0  # labelled FALSE, firing or gone
    gone: int = 0  # labels whose finding no longer fires

    def evidence(self) -> Precision:
        """The counts the default policy (torchperf_lint/evidence.py) judges."""
        return Precision(self.findings, self.labelled, self.true, self.small, self.debatable, self.false)


def precision_per_rule(
    findings: Iterable[Finding], labels: Iterable[Label], codes: Iterable[str] = ()
) -> list[RulePrecision]:
    """One row per rule that has findings or labels (and per code in `codes`), by code. Labels are
    matched on the key; a label counts once however many findings share its key."""
    findings = list(findings)
    firing = {f.key for f in findings}
    rows: dict[str, RulePrecision] = {code: RulePrecision(code) for code in codes}
    for code, count in Counter(f.code for f in findings).items():
        rows.setdefault(code, RulePrecision(code)).findings = count
    for label in labels:
        row = rows.setdefault(label.code, RulePrecision(label.code))
        if label.verdict == "FALSE":
            row.false_total += 1
        if label.key not in firing:
            row.gone += 1
            continue
        row.labelled += 1
        if label.verdict == "TRUE":
            row.true += 1
        elif label.verdict == "SMALL":
            row.small += 1
        elif label.verdict == "DEBATABLE":
            row.debatable += 1
        else:
            row.false += 1
    return [rows[code] for code in sorted(rows)]


LIBRARY_FORM = " (library)"  # the row of a rule's findings that only --library shows


def forms_per_rule(
    findings: Iterable[Finding], labels: Iterable[Label], codes: Sequence[str] = ()
) -> list[tuple[RulePrecision, str]]:
    """The rows of `precision_per_rule` for what a run without --library reports, and after each
    rule with findings in code no step loop runs (`Finding.hypothesis`), a row for those, marked
    LIBRARY_FORM. A label belongs to the row of the finding with its key."""
    findings, labels = list(findings), list(labels)
    assumed = [f for f in findings if f.hypothesis]
    assumed_keys = {f.key for f in assumed}
    evidence = precision_per_rule(
        [f for f in findings if not f.hypothesis], [x for x in labels if x.key not in assumed_keys], codes
    )
    library = {
        row.code: row
        for row in precision_per_rule(assumed, [x for x in labels if x.key in assumed_keys])
        if row.findings
    }
    rows: list[tuple[RulePrecision, str]] = []
    for row in evidence:
        rows.append((row, ""))
        if row.code in library:
            rows.append((library.pop(row.code), LIBRARY_FORM))
    return rows + [(row, LIBRARY_FORM) for row in library.values()]


def template(findings: Iterable[Finding], labels: Iterable[Label]) -> str:
    """A CSV of the findings that have no label yet, verdict and reason left empty."""
    labelled = {label.key for label in labels}
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(TEMPLATE_COLUMNS)
    written: set[Key] = set()
    for f in sorted(findings, key=lambda f: f.key):
        if f.key in labelled or f.key in written:
            continue
        written.add(f.key)
        writer.writerow([*f.key, "", "", f.source, f.context, f.message])
    return out.getvalue()


def published(
    findings: Iterable[Finding],
    labels: Iterable[Label],
    rules: Iterable[tuple[str, str]],
    projects: Sequence[Project],
) -> str:
    """precision.json: the labelled findings per tracked rule and population, as the rule pages, the
    rule list and the default policy read them: what a run without --library reports, and under
    "library" what only --library adds (findings in code no step loop of the project runs)."""
    findings, labels, codes = list(findings), list(labels), [code for code, _ in rules]
    table: dict[str, object] = {}
    for population in POPULATIONS:
        names = {p.name for p in projects if p.population == population}
        if not names:
            continue
        rules: dict[str, dict[str, object]] = {}
        for row, form in forms_per_rule(
            [f for f in findings if f.project in names],
            [label for label in labels if label.project in names],
            codes,
        ):
            if row.code not in codes:
                continue
            counts: dict[str, object] = {
                "findings": row.findings,
                "labelled": row.labelled,
                "true": row.true,
                "small": row.small,
                "debatable": row.debatable,
                "false": row.false,
            }
            if form:
                rules[row.code]["library"] = counts
            else:
                rules[row.code] = counts
        table[population] = {"corpus": CORPUS[population].format(count=len(names)), "rules": rules}
    return json.dumps({"populations": table}, indent=2, sort_keys=True) + "\n"

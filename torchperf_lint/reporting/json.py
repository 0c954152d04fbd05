"""A JSON list of finding objects (1-based lines and columns); with --show-context, the notes of
rules that stayed silent among them, marked `"kind": "note"`."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..engine.findings import Finding
from .statistics import count_by_rule

if TYPE_CHECKING:
    from . import ReportOptions


def finding_to_dict(finding: Finding) -> dict[str, Any]:
    fix = None
    if finding.fix is not None:
        fix = {"safety": finding.fix.safety.value, "description": finding.fix.description}
    kind = {"kind": "note"} if finding.note else {}  # present only where notes were asked for
    # present only with --library, on code no step loop of the project runs
    hypothesis = {"hypothesis": True} if finding.unstepped else {}
    return {
        "path": finding.path,
        "cell": finding.cell,
        "line": finding.line,
        "col": finding.col,
        "end_line": finding.end_line,
        "end_col": finding.end_col,
        "code": finding.code,
        "name": finding.name,
        "message": finding.message,
        "context": finding.context,
        "fix": fix,
        **kind,
        **hypothesis,
    }


def render_json(findings: Sequence[Finding], options: ReportOptions) -> str:
    """The findings; with --statistics, the counts per rule instead (as ruff does)."""
    if options.statistics:
        rows = [dataclasses.asdict(row) for row in count_by_rule(findings, options.unsafe_fixes)]
        return json.dumps(rows, indent=2) + "\n"
    shown = sorted([*findings, *options.notes], key=Finding.sort_key) if options.notes else findings
    return json.dumps([finding_to_dict(f) for f in shown], indent=2) + "\n"

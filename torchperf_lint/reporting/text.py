"""`path:line:col: CODE message`, the form flake8 prints and editors parse."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..engine.errors import ERROR_CODE
from ..engine.findings import Finding, allowed
from .statistics import count_by_rule

if TYPE_CHECKING:
    from . import ReportOptions


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def _line(finding: Finding, options: ReportOptions) -> str:
    mark = " note:" if finding.note else " [*]" if allowed(finding.fix, options.unsafe_fixes) else ""
    cell = f"cell {finding.cell}:" if finding.cell is not None else ""
    return f"{finding.path}:{cell}{finding.line}:{finding.col}: {finding.code}{mark} {finding.message}"


def _statistics(findings: Sequence[Finding], options: ReportOptions) -> list[str]:
    """The table alone, as ruff prints it: a count per rule, those of the rules off by default
    marked. A file that could not be checked is no row: its TPL000 line comes first."""
    lines = [_line(f, options) for f in findings if f.code == ERROR_CODE]
    problems = [f for f in findings if f.code != ERROR_CODE]
    for row in count_by_rule(problems, options.unsafe_fixes):
        lines.append(f"{row.count:<5} {row.code} {row.name}")
    for row in count_by_rule(options.hidden, options.unsafe_fixes):
        lines.append(f"{row.count:<5} {row.code} {row.name} (off by default)")
    return lines


def render_text(findings: Sequence[Finding], options: ReportOptions) -> str:
    if options.statistics:
        table = _statistics(findings, options)
        return "\n".join(table) + ("\n" if table else "")
    lines: list[str] = []
    # a note reads as a compiler's `note:`, at the candidate the rule stayed silent on
    shown = sorted([*findings, *options.notes], key=Finding.sort_key) if options.notes else findings
    for finding in shown:
        lines.append(_line(finding, options))
        if options.show_context and finding.context:
            lines.append(f"    hot: {finding.context}")
    # a file that could not be checked is said apart: it is no finding
    problems = [f for f in findings if f.code != ERROR_CODE]
    unchecked = len({f.path for f in findings if f.code == ERROR_CODE})
    if problems:
        fixable = sum(1 for f in problems if allowed(f.fix, options.unsafe_fixes))
        summary = f"Found {_count(len(problems), 'finding')}"
        if fixable:
            summary += f" ({fixable} fixable with --fix"
            summary += " --unsafe-fixes)" if options.unsafe_fixes else ")"
        lines.append(summary + ".")
        hidden = sum(1 for f in problems if f.fix is not None and not allowed(f.fix, options.unsafe_fixes))
        if hidden:
            lines.append(f"{hidden} more fixable with --fix --unsafe-fixes.")
    if unchecked:
        lines.append(f"{_count(unchecked, 'file')} could not be checked.")
    if options.hidden:
        more = "more" if problems else ("finding" if len(options.hidden) == 1 else "findings")
        lines.append(f"{len(options.hidden)} {more} from rules that are off by default: --extend-select ALL.")
    lines.extend(options.torch_lines)
    return "\n".join(lines) + ("\n" if lines else "")

"""`path:line:col: CODE message`, the form flake8 prints and editors parse."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..engine.findings import Finding, allowed
from .statistics import count_by_rule

if TYPE_CHECKING:
    from . import ReportOptions


def render_text(findings: Sequence[Finding], options: ReportOptions) -> str:
    lines: list[str] = []
    # a note reads as a compiler's `note:`, at the candidate the rule stayed silent on
    shown = sorted([*findings, *options.notes], key=Finding.sort_key) if options.notes else findings
    for finding in shown:
        mark = " note:" if finding.note else " [*]" if allowed(finding.fix, options.unsafe_fixes) else ""
        cell = f"cell {finding.cell}:" if finding.cell is not None else ""
        lines.append(
            f"{finding.path}:{cell}{finding.line}:{finding.col}: {finding.code}{mark} {finding.message}"
        )
        if options.show_context and finding.context:
            lines.append(f"    hot: {finding.context}")
    if options.statistics:
        for row in count_by_rule(findings, options.unsafe_fixes):
            lines.append(f"{row.count:<5} {row.code} {row.name}")
        for row in count_by_rule(options.hidden, options.unsafe_fixes):
            lines.append(f"{row.count:<5} {row.code} {row.name} (off by default)")
    # TPL000 lines count too: the summary counts every line printed above it, as ruff's does
    problems = list(findings)
    if problems:
        fixable = sum(1 for f in problems if allowed(f.fix, options.unsafe_fixes))
        noun = "finding" if len(problems) == 1 else "findings"
        summary = f"Found {len(problems)} {noun}"
        if fixable:
            summary += f" ({fixable} fixable with --fix"
            summary += " --unsafe-fixes)" if options.unsafe_fixes else ")"
        lines.append(summary + ".")
        hidden = sum(1 for f in problems if f.fix is not None and not allowed(f.fix, options.unsafe_fixes))
        if hidden:
            lines.append(f"{hidden} more fixable with --fix --unsafe-fixes.")
    if options.hidden:
        more = "more" if problems else ("finding" if len(options.hidden) == 1 else "findings")
        lines.append(f"{len(options.hidden)} {more} from rules that are off by default: --extend-select ALL.")
    return "\n".join(lines) + ("\n" if lines else "")

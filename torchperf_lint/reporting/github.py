"""GitHub Actions workflow commands: one `::warning` annotation per finding."""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from ..engine.findings import Finding

if TYPE_CHECKING:
    from . import ReportOptions


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def render_github(findings: Sequence[Finding], options: ReportOptions) -> str:
    lines = []
    for f in findings:
        level = "error" if f.code == "TPL000" else "warning"
        properties = (
            f"file={_escape_property(f.path)},line={f.line},col={f.col},"
            f"endLine={f.end_line},endColumn={f.end_col},title={f.code}"
        )
        lines.append(f"::{level} {properties}::{_escape_data(f.message)}")
    return "\n".join(lines) + ("\n" if lines else "")

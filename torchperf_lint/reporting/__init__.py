"""Output formats. Each reporter turns findings into text for a stream."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..engine.findings import Finding
from .github import render_github
from .json import render_json
from .sarif import render_sarif
from .text import render_text

Reporter = Callable[[Sequence[Finding], "ReportOptions"], str]


class ReportOptions:
    def __init__(
        self, show_context: bool = False, unsafe_fixes: bool = False, statistics: bool = False
    ) -> None:
        self.show_context = show_context
        self.unsafe_fixes = unsafe_fixes
        self.statistics = statistics


STATISTICS_FORMATS = ("text", "json")  # the formats that can carry --statistics

REPORTERS: dict[str, Reporter] = {
    "text": render_text,
    "json": render_json,
    "sarif": render_sarif,
    "github": render_github,
}

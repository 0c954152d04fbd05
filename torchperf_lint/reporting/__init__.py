"""Output formats. Each reporter turns findings into text for a stream; a run imports only the
one it reports in (SARIF's loads every rule class for the rule descriptions)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..engine.findings import Finding

Reporter = Callable[[Sequence["Finding"], "ReportOptions"], str]


class ReportOptions:
    def __init__(
        self,
        show_context: bool = False,
        unsafe_fixes: bool = False,
        statistics: bool = False,
        hidden: Sequence[Finding] = (),
        notes: Sequence[Finding] = (),
        torch_lines: Sequence[str] = (),
    ) -> None:
        self.show_context = show_context
        self.unsafe_fixes = unsafe_fixes
        self.statistics = statistics
        self.hidden = hidden  # findings of rules off by default: the text summary counts them
        # why rules stayed silent (--show-context): text and JSON show them among the findings,
        # never counted; SARIF and GitHub annotations leave them out
        self.notes = notes
        # which torch the run assumed, and what the project's pin hides: the text summary says it
        self.torch_lines = torch_lines


FORMATS = ("github", "json", "sarif", "text")
STATISTICS_FORMATS = ("text", "json")  # the formats that can carry --statistics


def reporter(name: str) -> Reporter:
    """The renderer of one of FORMATS."""
    if name == "github":
        from .github import render_github

        return render_github
    if name == "json":
        from .json import render_json

        return render_json
    if name == "sarif":
        from .sarif import render_sarif

        return render_sarif
    if name == "text":
        from .text import render_text

        return render_text
    raise ValueError(f"unknown output format {name!r}")

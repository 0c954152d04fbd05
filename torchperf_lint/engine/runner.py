"""Lint one file: parse once, walk once, run the rules, then place and filter findings."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Optional, Sequence, Union

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from ..config import Settings
from .context import Context
from .findings import Finding, Report
from .noqa import NoqaIndex
from .paths import matches_path
from .walker import walk

if TYPE_CHECKING:
    from ..rules.base import Rule

ERROR_CODE = "TPL000"
ISSUES_URL = "https://github.com/torchperf-lint/torchperf-lint/issues"


@dataclasses.dataclass
class FileResult:
    path: str
    findings: list[Finding]
    module: Optional[cst.Module] = None  # None when the file did not parse (or was skipped)
    parents: Optional[dict[cst.CSTNode, cst.CSTNode]] = None  # the walk's parent map, for fixes

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.code == ERROR_CODE]


def error_finding(path: str, what: str, line: int = 1, col: int = 1) -> Finding:
    return Finding(ERROR_CODE, "error", what, path, line, col, line, col)


def parse(data: Union[bytes, str], path: str) -> tuple[Optional[cst.Module], Optional[Finding]]:
    """The module, or a TPL000 finding saying why it could not be parsed."""
    try:
        return cst.parse_module(data), None
    except cst.ParserSyntaxError as error:
        message = error.message.splitlines()[0] if error.message else "invalid syntax"
        return None, error_finding(
            path, f"could not parse: {message}", error.raw_line, error.raw_column + 1
        )
    except RecursionError:
        return None, error_finding(path, "could not parse: nesting too deep for the parser")
    except (UnicodeError, LookupError, SyntaxError, ValueError) as error:
        return None, error_finding(path, f"could not decode: {error}")


def run_rules(
    module: cst.Module, source: str, path: str, rules: Sequence[Rule], settings: Settings
) -> tuple[list[Finding], dict[cst.CSTNode, cst.CSTNode]]:
    """Findings of `rules` on a parsed module, placed and filtered by noqa and per-file-ignores."""
    interest = frozenset(t for rule in rules for t in rule.node_types)
    facts = walk(module, interest)
    ctx = Context(path, source, facts, settings)
    reports: list[Report] = []
    failures: list[Report] = []
    for rule in rules:
        try:
            for kind in rule.node_types:
                for node in facts.collected.get(kind, ()):
                    reports.extend(rule.check(node, ctx))
            reports.extend(rule.check_file(ctx))
        except Exception as error:  # a bug in one rule must not hide the others' findings
            failures.append(
                Report(
                    ERROR_CODE,
                    "internal-error",
                    module,
                    f"internal error in {rule.code} ({type(error).__name__}: {error}); "
                    f"please report it at {ISSUES_URL}",
                )
            )
    if not reports and not failures:
        return [], facts.parents
    return _place(module, source, path, reports + failures, settings), facts.parents


def _place(
    module: cst.Module, source: str, path: str, reports: list[Report], settings: Settings
) -> list[Finding]:
    # Positions cost a second pass over the tree, so only files with findings pay it.
    positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    noqa = NoqaIndex(source)
    exempt = noqa.file_is_exempt()
    ignored = tuple(
        code
        for pattern, codes in settings.per_file_ignores
        if matches_path(path, pattern)
        for code in codes
    )

    def line_of(node: cst.CSTNode) -> int:
        return positions[node].start.line

    findings: list[Finding] = []
    seen: set[tuple[str, int, int]] = set()
    for report in reports:
        where = positions.get(report.node)
        start_line, start_col = (where.start.line, where.start.column) if where else (1, 0)
        end_line, end_col = (where.end.line, where.end.column) if where else (1, 0)
        if report.code != ERROR_CODE:
            if exempt or noqa.suppresses(start_line, report.code):
                continue
            if ignored and report.code.startswith(ignored):
                continue
        key = (report.code, start_line, start_col)
        if key in seen:
            continue
        seen.add(key)
        context = report.reason.render(line_of) if report.reason is not None else None  # type: ignore[attr-defined]
        findings.append(
            Finding(
                report.code,
                report.name,
                report.message,
                path,
                start_line,
                start_col + 1,
                end_line,
                end_col + 1,
                context,
                report.fix,
                report.node,
            )
        )
    findings.sort(key=Finding.sort_key)
    return findings


def lint_bytes(
    data: Union[bytes, str], path: str, rules: Sequence[Rule], settings: Settings
) -> FileResult:
    """Lint one file's bytes (or its decoded text, as flake8 hands it). Never raises."""
    marker: Union[bytes, str] = b"torch" if isinstance(data, bytes) else "torch"
    if not settings.lint_all_files and marker not in data:  # type: ignore[operator]
        return FileResult(path, [])  # cannot hold a PyTorch pattern: skip the parse
    module, error = parse(data, path)
    if module is None:
        assert error is not None
        return FileResult(path, [error])
    try:
        source = data.decode(module.encoding) if isinstance(data, bytes) else data
        findings, parents = run_rules(module, source, path, rules, settings)
    except RecursionError:
        return FileResult(path, [error_finding(path, "could not analyse: nesting too deep")])
    return FileResult(path, findings, module, parents)

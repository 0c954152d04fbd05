"""Lint one file: parse once, walk once, run the rules, then place and filter findings."""

from __future__ import annotations

import ast
import codecs
import dataclasses
import re
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar, Protocol

import libcst as cst

from ..analysis.entry import NO_FACTS, EntryFacts
from ..analysis.torch_apis import EVERY_API, shown
from ..paths import matches_path
from ..settings import Settings
from ..syntax.parsing import parse_module
from ..syntax.positions import node_ranges
from ..syntax.walker import FileFacts, walk
from .context import Context
from .errors import ERROR_CODE, deep_recursion, error_finding, internal_error
from .findings import Finding, Fix, Report, Safety, TextEdit
from .noqa import NoqaIndex


class RunnableRule(Protocol):
    """What the runner asks of a rule (rules/base.py's `Rule` has it): the engine runs the rules
    without importing them, as it sits below them."""

    code: ClassVar[str]
    node_types: ClassVar[tuple[type[cst.CSTNode], ...]]
    stepping_evidence: ClassVar[bool]

    def check(self, node: Any, ctx: Context) -> Iterator[Report]: ...

    def check_file(self, ctx: Context) -> Iterator[Report]: ...


@dataclasses.dataclass
class FileResult:
    path: str
    findings: list[Finding]
    module: cst.Module | None = None  # None when the file did not parse (or was skipped)
    parents: dict[cst.CSTNode, cst.CSTNode] | None = None  # the walk's parent map, for fixes

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.code == ERROR_CODE]


def parse(data: bytes | str, path: str) -> tuple[cst.Module | None, Finding | None]:
    """The module, or a TPL000 finding saying why it could not be parsed."""
    try:
        return parse_module(data), None
    except cst.ParserSyntaxError as error:
        return None, _syntax_error(data, path, error)
    except RecursionError:
        return None, error_finding(path, "could not parse: nesting too deep for the parser")
    except (UnicodeError, LookupError, SyntaxError, ValueError) as error:
        return None, _decode_error(data, path, error)


EXCLUDE_HINT = "; if it is not meant to be checked, add it to extend-exclude"


def _with_exclude_hint(error: Finding) -> Finding:
    """A file that cannot be parsed is often no Python at all (a template, a Python 2 script):
    its TPL000 line says how to skip it."""
    if not error.message.startswith("could not parse"):
        return error
    return dataclasses.replace(error, message=error.message + EXCLUDE_HINT)


def _position(data: bytes | str, offset: int) -> tuple[int, int]:
    """1-based line and column of a byte (or character) offset."""
    newline: bytes | str = b"\n" if isinstance(data, bytes) else "\n"
    line_start = data.rfind(newline, 0, offset) + 1  # type: ignore[arg-type]
    return data.count(newline, 0, offset) + 1, offset - line_start + 1  # type: ignore[arg-type]


def _nul_byte(data: bytes | str, path: str) -> Finding | None:
    offset = data.find(b"\0" if isinstance(data, bytes) else "\0")  # type: ignore[arg-type]
    if offset < 0:
        return None
    return error_finding(
        path, "could not parse: contains a NUL byte (a binary file?)", *_position(data, offset)
    )


def _syntax_error(data: bytes | str, path: str, error: cst.ParserSyntaxError) -> Finding:
    """CPython's own message where it has one (`Missing parentheses in call to 'print'`), else
    libcst's, at the position of the error."""
    nul = _nul_byte(data, path)
    if nul is not None:
        return nul
    try:
        compile(data, path, "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as python_error:
        if python_error.lineno and python_error.msg:
            column = max(python_error.offset or 1, 1)  # characters, like every other column
            return error_finding(path, f"could not parse: {python_error.msg}", python_error.lineno, column)
    except Exception:  # noqa: BLE001, S110 - only a better message was at stake
        pass
    message = error.message.splitlines()[0] if error.message else "invalid syntax"
    return error_finding(path, f"could not parse: {message}", error.raw_line, error.raw_column + 1)


_CODING = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)")


def _declared_encoding(data: bytes) -> tuple[int, str] | None:
    """The line (1 or 2) and name of a PEP 263 coding declaration."""
    head = data.removeprefix(codecs.BOM_UTF8)
    for number, line in enumerate(head.splitlines()[:2], start=1):
        match = _CODING.match(line)
        if match:
            return number, match.group(1).decode("ascii", "replace")
        if line.strip() and not line.lstrip().startswith(b"#"):
            break
    return None


def _decode_error(data: bytes | str, path: str, error: Exception) -> Finding:
    """Where and why the bytes are not text in the file's encoding."""
    nul = _nul_byte(data, path)
    if nul is not None:
        return nul
    if not isinstance(data, bytes):
        return error_finding(path, f"could not decode: {error}")
    declared = _declared_encoding(data)
    encoding = declared[1] if declared else "utf-8"
    try:
        codecs.lookup(encoding)
    except LookupError:
        assert declared is not None
        return error_finding(
            path, f"could not decode: unknown encoding {encoding!r} declared", declared[0], 1
        )
    if data.startswith(codecs.BOM_UTF8) and declared and codecs.lookup(encoding).name != "utf-8":
        return error_finding(
            path,
            f"could not decode: a UTF-8 byte order mark and a {encoding!r} declaration disagree",
            declared[0],
            1,
        )
    try:
        data.decode(encoding)
    except UnicodeDecodeError as bad:
        line, column = _position(data, bad.start)
        byte = data[bad.start : bad.start + 1].hex()
        where = f"the declared encoding {encoding!r}" if declared else "utf-8 (no encoding declared)"
        return error_finding(path, f"could not decode: byte 0x{byte} is not valid in {where}", line, column)
    return error_finding(path, f"could not decode: {error}")


def _not_text(data: bytes | str, path: str) -> Finding | None:
    """A NUL byte, or bytes that do not decode in the file's encoding: found without a parse, for
    files the torch prefilter skips (a decode costs a fraction of a parse)."""
    nul = _nul_byte(data, path)
    if nul is not None or not isinstance(data, bytes):
        return nul
    declared = _declared_encoding(data)
    encoding = declared[1] if declared else "utf-8"
    try:
        name = codecs.lookup(encoding).name
        if data.startswith(codecs.BOM_UTF8) and name != "utf-8":
            raise ValueError("a UTF-8 byte order mark and another declared encoding")
        data.decode(encoding)
    except (LookupError, ValueError) as error:  # UnicodeDecodeError is a ValueError
        return _decode_error(data, path, error)
    return None


def run_rules(
    module: cst.Module,
    source: str,
    path: str,
    rules: Sequence[RunnableRule],
    settings: Settings,
    entry: EntryFacts = NO_FACTS,
) -> tuple[list[Finding], dict[cst.CSTNode, cst.CSTNode]]:
    """Findings of `rules` on a parsed module, placed and filtered by noqa and per-file-ignores.
    `entry` holds what the project pass knows about this module from the others."""
    interest = frozenset(t for rule in rules for t in rule.node_types)
    facts = walk(module, interest)
    if not entry.matches(len(facts.functions), len(facts.class_of), len(facts.loops)):
        entry = NO_FACTS  # the project read another version of this file
    ctx = Context(path, source, facts, settings, entry)
    if ctx.is_test_file:
        # test code does not train or serve a model: what it does once per test costs nothing
        return [], facts.parents
    reports: list[Report] = []
    failures: list[Report] = []
    asked: list[RunnableRule] = []  # the rules that asked which torch the file runs on
    for rule in rules:
        questions = ctx.torch_questions
        try:
            _run_rule(rule, facts, ctx, reports)
        except RecursionError:
            raise  # the file is too deeply nested for every rule, not a bug in this one
        except Exception as error:  # noqa: BLE001 - a bug in one rule must not hide the others
            failures.append(Report(ERROR_CODE, "internal-error", module, internal_error(rule.code, error)))
            continue
        if ctx.torch_questions > questions:
            asked.append(rule)
    if settings.newer_torch and asked and ctx.limited_by_declared_torch():
        reports += _hidden_by_torch(asked, facts, ctx, reports)
    if not settings.notes:
        reports = [report for report in reports if not report.note]  # before positions are paid for
    # what only an opt-in option runs is not the code users run (RULES.md, "Values that travel")
    reports = [report for report in reports if ctx.runs_by_default(report.node)]
    reports = _by_stepping_evidence(reports, rules, ctx, settings)
    if not reports and not failures:
        return [], facts.parents
    return _place(module, source, path, reports + failures, settings), facts.parents


def _by_stepping_evidence(
    reports: list[Report], rules: Sequence[RunnableRule], ctx: Context, settings: Settings
) -> list[Report]:
    """The findings of rules that ask for evidence of stepping, in code no step loop of the project
    runs, marked `unstepped`: shown with `Settings.library`, kept to be counted with
    `Settings.unstepped`, dropped otherwise."""
    asking = {rule.code for rule in rules if rule.stepping_evidence}
    if not asking:
        return reports
    kept: list[Report] = []
    for report in reports:
        if report.code in asking and not report.note and not ctx.stepped(report.node):
            if not (settings.library or settings.unstepped):
                continue
            report = dataclasses.replace(report, unstepped=True)
        kept.append(report)
    return kept


def _run_rule(rule: RunnableRule, facts: FileFacts, ctx: Context, reports: list[Report]) -> None:
    for kind in rule.node_types:
        for node in facts.collected.get(kind, ()):
            reports.extend(rule.check(node, ctx))
    reports.extend(rule.check_file(ctx))


def _hidden_by_torch(
    rules: Sequence[RunnableRule], facts: FileFacts, ctx: Context, found: Sequence[Report]
) -> list[Report]:
    """What `rules` report on the torch that has every API they recommend, and not on the torch
    the project declares: the findings its requirement hides, marked to be counted, never shown.
    A rule that fails on that torch hides nothing (its failure is the one reported already)."""
    newest = ctx.on_torch(EVERY_API, f"--torch-version {shown(EVERY_API)}")
    seen = {(report.code, report.node) for report in found if not report.note}
    newer: list[Report] = []
    for rule in rules:
        try:
            _run_rule(rule, facts, newest, newer)
        except Exception:  # noqa: BLE001 - a count, not a check: the first run reported the failure
            continue
    return [
        dataclasses.replace(report, newer_torch=True)
        for report in newer
        if not report.note and (report.code, report.node) not in seen
    ]


def _place(
    module: cst.Module, source: str, path: str, reports: list[Report], settings: Settings
) -> list[Finding]:
    # Positions cost a code generation of the tree, so only files with findings pay it, and only
    # for the nodes that findings and their reasons point at.
    placed: list[cst.CSTNode] = [report.node for report in reports]

    def wanted(node: cst.CSTNode) -> int:
        placed.append(node)
        return 0

    for report in reports:
        if report.reason is not None:
            report.reason.render(wanted)  # type: ignore[attr-defined]
    positions = node_ranges(module, placed)
    noqa = NoqaIndex(source) if settings.noqa else None
    exempt = noqa is not None and noqa.file_is_exempt()
    ignored = tuple(
        code for pattern, codes in settings.per_file_ignores if matches_path(path, pattern) for code in codes
    )

    def line_of(node: cst.CSTNode) -> int:
        return positions[node].start.line

    findings: list[Finding] = []
    seen: set[tuple[str, int, int, bool]] = set()
    for report in reports:
        where = positions.get(report.node)
        start_line, start_col = (where.start.line, where.start.column) if where else (1, 0)
        end_line, end_col = (where.end.line, where.end.column) if where else (1, 0)
        if report.code != ERROR_CODE:
            if exempt or (noqa is not None and noqa.suppresses(start_line, report.code)):
                continue
            if ignored and report.code.startswith(ignored):
                continue
        key = (report.code, start_line, start_col, report.note or report.newer_torch or report.unstepped)
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
                edits=_text_edits(report.fix, module, source) if settings.text_edits else (),
                note=report.note,
                newer_torch=report.newer_torch,
                unstepped=report.unstepped,
            )
        )
    findings.sort(key=Finding.sort_key)
    return findings


def _text_edits(fix: Fix | None, module: cst.Module, source: str) -> tuple[TextEdit, ...]:
    """A safe fix as one text edit, for reporters that carry fixes (SARIF): the span where the
    module's code with the fix applied differs from the source. A fix that adds an import or
    removes statements stays node-only."""
    if fix is None or fix.safety is not Safety.SAFE or fix.needs_torch_import:
        return ()
    fixed = module
    for old, new in fix.replacements:
        if not isinstance(new, cst.CSTNode):
            return ()
        fixed = fixed.deep_replace(old, new)  # type: ignore[arg-type]  # libcst types new_node as the root type
    after = fixed.code
    if after == source:
        return ()
    start = 0
    while start < min(len(source), len(after)) and source[start] == after[start]:
        start += 1
    end_old, end_new = len(source), len(after)
    while end_old > start and end_new > start and source[end_old - 1] == after[end_new - 1]:
        end_old, end_new = end_old - 1, end_new - 1
    (line, col), (end_line, end_col) = _line_col(source, start), _line_col(source, end_old)
    return (TextEdit(line, col, end_line, end_col, after[start:end_new]),)


def _line_col(source: str, offset: int) -> tuple[int, int]:
    """1-based line and column of a character offset, counting Python's line breaks only."""
    before = source[:offset]
    line = 1 + len(re.findall(r"\r\n|\r|\n", before))
    last_break = max(before.rfind("\n"), before.rfind("\r"))
    return line, offset - last_break


def lint_bytes(
    data: bytes | str,
    path: str,
    rules: Sequence[RunnableRule],
    settings: Settings,
    entry: EntryFacts = NO_FACTS,
) -> FileResult:
    """Lint one file's bytes (or its decoded text, as flake8 hands it). Never raises: what
    cannot be checked, including a bug in the engine, is a TPL000 finding."""
    marker: bytes | str = b"torch" if isinstance(data, bytes) else "torch"
    if not settings.lint_all_files and marker not in data and not entry.reaches_hot_code:  # type: ignore[operator]
        # cannot hold a PyTorch pattern, unless the project runs its code per step: skip the
        # parse, but still name a file that is not text
        unreadable = _not_text(data, path)
        return FileResult(path, [_with_exclude_hint(unreadable)] if unreadable else [])
    with deep_recursion():
        try:
            module, error = parse(data, path)
            if module is None:
                assert error is not None
                return FileResult(path, [_with_exclude_hint(error)])
            source = data.decode(module.encoding) if isinstance(data, bytes) else data
            findings, parents = run_rules(module, source, path, rules, settings, entry)
        except RecursionError:
            return FileResult(path, [error_finding(path, "could not analyse: nesting too deep")])
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as error:  # noqa: BLE001 - a Rust panic in libcst is a BaseException
            return FileResult(path, [error_finding(path, internal_error("the engine", error))])
    return FileResult(path, findings, module, parents)

"""Apply the fixes findings carry: non-overlapping ones in one transform per pass, passes
repeated until nothing changes, every pass re-parsed. libcst keeps every byte it was not asked
to change, so encoding, BOM, newline style and formatting survive."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Union

import libcst as cst

from ..analysis.entry import NO_FACTS, EntryFacts
from ..settings import Settings
from ..syntax.parsing import parse_module
from .findings import Finding, Fix, Replacement, allowed
from .runner import FileResult, RunnableRule, lint_bytes

MAX_PASSES = 10


@dataclasses.dataclass
class FixOutcome:
    original: bytes
    fixed: bytes
    applied: int
    result: FileResult  # the lint of the fixed code: what remains
    original_findings: list[Finding] = dataclasses.field(default_factory=list)  # the lint before fixing

    @property
    def changed(self) -> bool:
        return self.fixed != self.original


class _Replace(cst.CSTTransformer):
    def __init__(self, replacements: dict[cst.CSTNode, Replacement]) -> None:
        self._replacements = replacements

    def on_leave(  # type: ignore[override]  # libcst's generic signature cannot express "any node"
        self, original_node: cst.CSTNode, updated_node: cst.CSTNode
    ) -> cst.CSTNode | cst.RemovalSentinel | cst.FlattenSentinel[cst.CSTNode]:
        if original_node in self._replacements:
            return self._replacements[original_node]
        if isinstance(original_node, (cst.Module, cst.IndentedBlock)):
            assert isinstance(updated_node, (cst.Module, cst.IndentedBlock))
            return _keep_layout(original_node, updated_node, self._replacements)
        return updated_node


def _is_blank(line: cst.EmptyLine) -> bool:
    return line.comment is None


def _blank_run_end(lines: Sequence[cst.EmptyLine]) -> int:
    """How many blank lines `lines` starts with."""
    return next((i for i, line in enumerate(lines) if not _is_blank(line)), len(lines))


def _last_comment_end(lines: Sequence[cst.EmptyLine]) -> int:
    """The length of `lines` without the blank lines it ends with."""
    return next((i for i in range(len(lines), 0, -1) if not _is_blank(lines[i - 1])), 0)


def _join_lines(upper: Sequence[cst.EmptyLine], lower: Sequence[cst.EmptyLine]) -> list[cst.EmptyLine]:
    """The lines above a removed statement followed by the lines below it. Where the two meet, the
    blank lines of either side become one run as long as the longer of the two: a statement removed
    between two one-line gaps leaves one gap, not two, and never none."""
    above, below = _last_comment_end(upper), _blank_run_end(lower)
    if len(upper) - above >= below:
        return [*upper, *lower[below:]]
    return [*upper[:above], *lower]


_Block = Union[cst.Module, cst.IndentedBlock]


def _leading_lines(statement: cst.CSTNode) -> Sequence[cst.EmptyLine]:
    """A statement's `leading_lines` (every statement has them; libcst's base class does not say so)."""
    return getattr(statement, "leading_lines", ())


def _keep_layout(original: _Block, updated: _Block, replacements: dict[cst.CSTNode, Replacement]) -> _Block:
    """A removed statement owned the blank lines and comments above it (libcst's `leading_lines`);
    they go to the statement that follows, so removing a statement never pulls the next one up
    against the imports (isort wants its blank line after them) or drops a comment. The statement
    that becomes the first of its block keeps no blank line above it, and at the end of the block
    only the comments stay, in the block's footer."""
    if not any(replacements.get(s) is cst.RemovalSentinel.REMOVE for s in original.body):
        return updated
    produced = iter(updated.body)
    body: list[Any] = []
    carried: list[cst.EmptyLine] = []
    removed = False
    for statement in original.body:
        replacement = replacements.get(statement)
        if replacement is cst.RemovalSentinel.REMOVE:
            carried = _join_lines(carried, _leading_lines(statement))
            removed = True
            continue
        count = len(replacement.nodes) if isinstance(replacement, cst.FlattenSentinel) else 1
        for _ in range(count):
            node = next(produced)
            if removed:
                lines = _leading_lines(node)
                joined = _join_lines(carried, lines) if body else [*carried, *lines[_blank_run_end(lines) :]]
                node = node.with_changes(leading_lines=joined)
                carried, removed = [], False
            body.append(node)
    return updated.with_changes(body=body, footer=[*carried[: _last_comment_end(carried)], *updated.footer])


def _choose(findings: Sequence[Finding], parents: dict[cst.CSTNode, cst.CSTNode], unsafe: bool) -> list[Fix]:
    """Fixes whose nodes neither contain nor sit inside another chosen fix's nodes."""
    chosen: list[Fix] = []
    taken: set[cst.CSTNode] = set()
    covered: set[cst.CSTNode] = set()  # taken nodes and all their ancestors
    for finding in findings:
        fix = finding.fix
        if fix is None or not allowed(fix, unsafe):
            continue
        olds = [old for old, _ in fix.replacements]
        chains = []
        for old in olds:
            chain = [old]
            node = parents.get(old)
            while node is not None:
                chain.append(node)
                node = parents.get(node)
            chains.append(chain)
        if any(old in covered for old in olds) or any(n in taken for c in chains for n in c):
            continue  # overlaps: left for the next pass
        chosen.append(fix)
        taken.update(olds)
        for chain in chains:
            covered.update(chain)
    return chosen


def _add_torch_import(module: cst.Module) -> cst.Module:
    """`import torch` after the docstring and `from __future__` imports."""
    body = list(module.body)
    index = 0
    if body and isinstance(body[0], cst.SimpleStatementLine):
        first = body[0].body[0] if body[0].body else None
        if isinstance(first, cst.Expr) and isinstance(
            first.value, (cst.SimpleString, cst.ConcatenatedString)
        ):
            index = 1
    while index < len(body):
        statement = body[index]
        if not (
            isinstance(statement, cst.SimpleStatementLine)
            and any(
                isinstance(s, cst.ImportFrom)
                and s.module is not None
                and isinstance(s.module, cst.Name)
                and s.module.value == "__future__"
                for s in statement.body
            )
        ):
            break
        index += 1
    new = cst.parse_statement("import torch" + module.default_newline, config=module.config_for_parsing)
    body.insert(index, new)
    return module.with_changes(body=body)


def _apply(module: cst.Module, fixes: Sequence[Fix]) -> bytes:
    """The bytes of `module` with `fixes` (non-overlapping) applied in one transform."""
    mapping: dict[cst.CSTNode, Replacement] = {}
    for fix in fixes:
        mapping.update(fix.replacements)
    fixed = module.visit(_Replace(mapping))
    if any(fix.needs_torch_import for fix in fixes):
        fixed = _add_torch_import(fixed)
    return fixed.bytes


def _render(module: cst.Module, fixes: Sequence[Fix]) -> bytes | None:
    """The fixed bytes, or None when a replacement cannot be rendered or the result does not
    parse."""
    try:
        candidate = _apply(module, fixes)
        parse_module(candidate)
    except Exception:  # noqa: BLE001 - any failure means "do not hand this back"
        return None
    return candidate


def apply_fix(module: cst.Module, fix: Fix) -> bytes | None:
    """The bytes of `module` with this one fix applied, as a pass of `fix_bytes` applies it;
    None when it cannot be applied (the editor's quick fix for one finding)."""
    return _render(module, [fix])


def _apply_checked(module: cst.Module, fixes: Sequence[Fix]) -> tuple[bytes, int] | None:
    """Apply `fixes` and say how many went in. If the result does not parse, keep only the
    fixes that parse on their own (a bad fix must not block the others), or only the first
    of them if they fail only together. None when no fix can be applied."""
    candidate = _render(module, fixes)
    if candidate is not None:
        return candidate, len(fixes)
    if len(fixes) == 1:
        return None
    good = [fix for fix in fixes if _render(module, [fix]) is not None]
    if len(good) == len(fixes):
        good = good[:1]
    return _apply_checked(module, good) if good else None


def fix_bytes(
    data: bytes,
    path: str,
    rules: Sequence[RunnableRule],
    settings: Settings,
    unsafe: bool = False,
    entry: EntryFacts = NO_FACTS,
) -> FixOutcome:
    """The fixed bytes of one file and what remains. A file that does not parse is returned
    unchanged with its TPL000 finding. Fixes on nested nodes go in successive passes: a pass
    applies only fixes whose nodes neither contain nor sit inside each other, and the next
    pass re-lints the result."""
    current = data
    applied = 0
    result = lint_bytes(current, path, rules, settings, entry)
    original_findings = result.findings
    for _ in range(MAX_PASSES):
        if result.module is None or result.parents is None:
            break
        fixes = _choose(result.findings, result.parents, unsafe)
        if not fixes:
            break
        outcome = _apply_checked(result.module, fixes)
        if outcome is None or outcome[0] == current:
            break  # nothing applicable, or fixes that change nothing: stop rather than loop
        candidate, count = outcome
        reparsed = lint_bytes(candidate, path, rules, settings, entry)
        if reparsed.errors and reparsed.module is None:
            break  # never hand back code that does not parse
        current, result = candidate, reparsed
        applied += count
    return FixOutcome(data, current, applied, result, original_findings)

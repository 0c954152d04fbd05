"""The rule API: one class per rule carries its code, docs, examples and check."""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any, ClassVar, Iterator, Optional

import libcst as cst

from ..engine.findings import Fix, Report, Safety

if TYPE_CHECKING:
    from ..analysis.hotpath import Reason
    from ..engine.context import Context


class Rule:
    """Base class. Subclasses set the class attributes and implement `check` (per node of
    `node_types`, after the walk) and/or `check_file` (once per file).

    The docstring is the rule's page: sections `## What it does`, `## Why it is slow`,
    `## Fix safety`, `## When it stays silent`. BAD/GOOD/FIXED map example labels to code;
    `# expect: CODE` marks the first line of each expected finding in BAD.
    """

    code: ClassVar[str]
    name: ClassVar[str]
    summary: ClassVar[str]
    message: ClassVar[str]
    default_on: ClassVar[bool] = True
    # the default form reports only code the project's own step loops run (RULES.md, "Defaults
    # follow evidence"); code hot only by hypothesis is shown with `--library`
    stepping_evidence: ClassVar[bool] = False
    fix_safety: ClassVar[Safety] = Safety.NONE
    where: ClassVar[str] = "hot code"
    node_types: ClassVar[tuple[type[cst.CSTNode], ...]] = ()
    benchmark: ClassVar[Optional[str]] = None  # the case in benchmarks/cases that measures it
    BAD: ClassVar[dict[str, str]] = {}
    GOOD: ClassVar[dict[str, str]] = {}
    FIXED: ClassVar[dict[str, str]] = {}

    def check(self, node: Any, ctx: Context) -> Iterator[Report]:
        return iter(())

    def check_file(self, ctx: Context) -> Iterator[Report]:
        return iter(())

    def report(
        self,
        node: cst.CSTNode,
        *,
        reason: Optional[Reason] = None,
        fix: Optional[Fix] = None,
        **message_args: object,
    ) -> Report:
        return Report(self.code, self.name, node, self.message.format(**message_args), reason, fix)

    def note(self, node: cst.CSTNode, why: str) -> Report:
        """Why the rule stays silent on a candidate at `node`; shown only where asked for
        (`--show-context`), never counted as a finding."""
        return Report(self.code, self.name, node, why, note=True)

    @classmethod
    def explanation(cls) -> str:
        return inspect.cleandoc(cls.__doc__ or "")


def hot_place(node: cst.CSTNode, ctx: Context) -> str:
    """`forward()`, `the step loop` or `the inference loop`: where in the message."""
    reason = ctx.hot_reason(node)
    if reason is not None and reason.loop is not None and reason.caller is None:
        return "the inference loop" if reason.inference_only else "the step loop"
    function = ctx.enclosing_function(node)
    return f"{function.name.value}()" if function is not None else "hot code"

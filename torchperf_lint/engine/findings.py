"""What a rule reports: a finding, and the fix it may carry."""

from __future__ import annotations

import dataclasses
import enum
from typing import TYPE_CHECKING, NamedTuple, Union

if TYPE_CHECKING:  # findings read back from the cache are reported without importing libcst
    import libcst as cst

Replacement = Union["cst.CSTNode", "cst.RemovalSentinel", "cst.FlattenSentinel"]


class Safety(enum.Enum):
    """How much a fix can be trusted: `SAFE` fixes never change what the program computes."""

    SAFE = "safe"
    UNSAFE = "unsafe"
    NONE = "none"


def allowed(fix: Fix | None, unsafe: bool) -> bool:
    """Whether a fix applies at this safety level (--unsafe-fixes or not)."""
    if fix is None:
        return False
    return fix.safety is Safety.SAFE or (unsafe and fix.safety is Safety.UNSAFE)


@dataclasses.dataclass(frozen=True)
class Fix:
    """Node replacements applied together; nodes are matched by identity in the parsed tree.

    `needs_torch_import` asks the fixer to add `import torch` because the replacement
    spells `torch.` and the file has no alias for it.
    """

    replacements: tuple[tuple[cst.CSTNode, Replacement], ...]
    safety: Safety
    description: str
    needs_torch_import: bool = False

    @classmethod
    def replace(
        cls,
        old: cst.CSTNode,
        new: Replacement,
        safety: Safety,
        description: str,
        needs_torch_import: bool = False,
    ) -> Fix:
        return cls(((old, new),), safety, description, needs_torch_import)


class TextEdit(NamedTuple):
    """A fix as text: replace the 1-based, end-exclusive range with `text` (for SARIF `fixes`)."""

    start_line: int
    start_col: int
    end_line: int
    end_col: int
    text: str


@dataclasses.dataclass(frozen=True)
class Report:
    """What a rule yields: the node and message; the engine adds positions and renders the reason.
    A note (`note=True`) says why the rule stays silent on a candidate: see `Finding.note`."""

    code: str
    name: str
    node: cst.CSTNode
    message: str
    reason: object | None = None  # an analysis.hotpath.Reason, rendered once positions exist
    fix: Fix | None = None
    note: bool = False
    newer_torch: bool = False  # see `Finding.newer_torch`
    unstepped: bool = False  # see `Finding.unstepped`


@dataclasses.dataclass(frozen=True)
class Finding:
    """One reported problem. Line and column are 1-based; `node` is the tree node it points at.

    A note is no problem: it says why a rule stays silent on a candidate (TPL401 keeps the bias of a
    model whose weights are published). The engine drops notes unless `Settings.notes` asks for them
    (`--show-context`); the command line sets them apart from findings, so they never count.

    A `newer_torch` finding is one the project's torch requirement hides (the API its advice needs
    is newer than the pin): found only where `Settings.newer_torch` asks, and only counted.

    An `unstepped` finding is one of a rule whose default form asks for evidence of stepping
    (`Rule.stepping_evidence`), in code no step or inference loop of the project runs: hot by
    hypothesis (a library's forward). `Settings.library` shows it, marked; otherwise it is found only
    where `Settings.unstepped` asks, and only counted.
    """

    code: str
    name: str
    message: str
    path: str
    line: int = 0
    col: int = 0
    end_line: int = 0
    end_col: int = 0
    context: str | None = None
    fix: Fix | None = None
    node: cst.CSTNode | None = dataclasses.field(default=None, compare=False, repr=False)
    cell: int | None = None  # notebooks: the cell (1-based); line and col are within it
    edits: tuple[TextEdit, ...] = ()  # the fix as text edits, when it can be expressed as such
    note: bool = False
    newer_torch: bool = False
    unstepped: bool = False

    @property
    def fixable(self) -> bool:
        return self.fix is not None

    def sort_key(self) -> tuple[str, int, int, int, str]:
        return (self.path, self.cell or 0, self.line, self.col, self.code)

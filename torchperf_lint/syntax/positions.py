"""Source ranges of a few nodes, as libcst's PositionProvider gives them, for the cost of one
code generation.

PositionProvider tracks the line and column of every token and records a range for every node
(and `MetadataWrapper.resolve` then visits the whole tree once more for batched providers it does
not have). A file's findings need the ranges of a handful of nodes: this codegen state records
token indices for those nodes only, stops once they are all placed, and turns the indices into
lines and columns at the end. The rules for which tokens a node's range spans (the syntactic
positions that some nodes hoist from their first and last children) are libcst's own, since
libcst's code generation calls them.
"""

from __future__ import annotations

import bisect
import contextlib
import itertools
import re
from collections.abc import Iterable, Iterator
from typing import Optional

import libcst as cst
from libcst._nodes.internal import CodegenState
from libcst.metadata import CodePosition, CodeRange

_NEWLINE = re.compile(r"\r\n?|\n")


class _Placed(Exception):
    """Every wanted node has its range: the rest of the code generation is not needed."""


class _RecordingState(CodegenState):
    """Code generation that notes the token indices where wanted nodes start and end."""

    def __init__(self, module: cst.Module, wanted: Iterable[cst.CSTNode]) -> None:
        super().__init__(default_indent=module.default_indent, default_newline=module.default_newline)
        self.wanted = {id(node) for node in wanted}
        self.starts: dict[int, int] = {}  # id -> token index (whitespace included)
        self.spans: dict[int, tuple[int, int]] = {}  # id -> (start, end) token indices

    def before_codegen(self, node: cst.CSTNode) -> None:
        if id(node) in self.wanted:
            self.starts[id(node)] = len(self.tokens)

    def after_codegen(self, node: cst.CSTNode) -> None:
        key = id(node)
        if key in self.wanted:
            # a syntactic range recorded inside the node's code generation wins, as in libcst
            if key not in self.spans:
                self.spans[key] = (self.starts[key], len(self.tokens))
            if len(self.spans) == len(self.wanted):
                raise _Placed

    def pop_trailing_newline(self) -> None:
        pass  # PositionProvider counts the popped newline too: keep it, so the indices agree

    @contextlib.contextmanager
    def record_syntactic_position(
        self,
        node: cst.CSTNode,
        *,
        start_node: Optional[cst.CSTNode] = None,
        end_node: Optional[cst.CSTNode] = None,
    ) -> Iterator[None]:
        key = id(node)
        if key not in self.wanted:
            yield
            return
        # the hoisted children are generated inside this block: want them too
        for child in (start_node, end_node):
            if child is not None:
                self.wanted.add(id(child))
        start = len(self.tokens)
        try:
            yield
        finally:
            end = len(self.tokens)
            if start_node is not None:
                start = self.spans[id(start_node)][0]
            if end_node is not None:
                end = self.spans[id(end_node)][1]
            self.spans[key] = (start, end)


def node_ranges(module: cst.Module, nodes: Iterable[cst.CSTNode]) -> dict[cst.CSTNode, CodeRange]:
    """The range PositionProvider gives each of `nodes` (nodes of `module`); a node that is not
    in the module is left out."""
    wanted = {id(node): node for node in nodes}
    if not wanted:
        return {}
    state = _RecordingState(module, wanted.values())
    try:
        module._codegen(state)
    except _Placed:
        pass
    tokens = state.tokens
    offsets = [0, *itertools.accumulate(map(len, tokens))]
    code = "".join(tokens)
    if "\r" in code:
        line_col = _per_token(tokens, {i for span in state.spans.values() for i in span})
    else:
        breaks = [m.end() for m in _NEWLINE.finditer(code)]

        def position(index: int) -> CodePosition:
            offset = offsets[index]
            line = bisect.bisect_right(breaks, offset)
            return CodePosition(line + 1, offset - (breaks[line - 1] if line else 0))

        line_col = {i: position(i) for span in state.spans.values() for i in span}
    return {
        node: CodeRange(line_col[state.spans[key][0]], line_col[state.spans[key][1]])
        for key, node in wanted.items()
        if key in state.spans
    }


def _per_token(tokens: list[str], indices: set[int]) -> dict[int, CodePosition]:
    """Positions at token boundaries counted token by token, as PositionProvider counts them
    (a "\\r" ending one token and a "\\n" starting the next are two line breaks there)."""
    found: dict[int, CodePosition] = {}
    line, column = 1, 0
    for index, token in enumerate(tokens):
        if index in indices:
            found[index] = CodePosition(line, column)
        segments = _NEWLINE.split(token)
        if len(segments) == 1:
            column += len(token)
        else:
            line += len(segments) - 1
            column = len(segments[-1])
    if len(tokens) in indices:
        found[len(tokens)] = CodePosition(line, column)
    return found

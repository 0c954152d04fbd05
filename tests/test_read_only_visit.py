"""syntax/walker.py's `visit` and `children` read a tree as libcst's `node.visit(visitor)` and
`node.children` do, without the copy of every node libcst makes: the visitors of the analysis and the
rules see the same nodes in the same order, punctuation aside."""

from __future__ import annotations

from pathlib import Path

import libcst as cst

from torchperf_lint.syntax.walker import children, descendants, visit

SOURCE = (Path(__file__).resolve().parent.parent / "torchperf_lint" / "analysis" / "hotpath.py").read_bytes()


class _Recorder(cst.CSTVisitor):
    """What the visitors of the package look at: statements, calls, names, subscripts, their
    leaving, and a scope it does not enter."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def _note(self, event: str, node: cst.CSTNode) -> None:
        self.seen.append((event, type(node).__name__))

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        self._note("visit", node)
        return node.name.value != "_crosses_cold_branch"  # a scope left unread, as visitors do

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._note("leave", node)

    def visit_Call(self, node: cst.Call) -> None:
        self._note("visit", node)

    def visit_Name(self, node: cst.Name) -> None:
        self.seen.append(("name", node.value))

    def visit_Return(self, node: cst.Return) -> None:
        self._note("visit", node)

    def visit_SubscriptElement(self, node: cst.SubscriptElement) -> None:
        self._note("visit", node)

    def leave_SubscriptElement(self, node: cst.SubscriptElement) -> None:
        self._note("leave", node)


def test_visit_makes_libcst_s_calls_in_libcst_s_order() -> None:
    module = cst.parse_module(SOURCE)
    by_libcst, by_walker = _Recorder(), _Recorder()
    module.visit(by_libcst)
    visit(module, by_walker)
    assert len(by_walker.seen) > 3000
    assert by_walker.seen == by_libcst.seen


def test_children_are_libcst_s_children_in_order_without_punctuation() -> None:
    module = cst.parse_module(SOURCE)
    for node in descendants(module):
        found, expected = children(node), node.children
        left_out = [c for c in expected if not any(c is f for f in found)]
        # the nodes it keeps, in libcst's order; the ones it leaves out, punctuation
        remaining = iter(expected)
        assert all(any(f is e for e in remaining) for f in found), type(node).__name__
        assert all(type(c).__module__ in _PUNCTUATION_MODULES or type(c) in _BRACKETS for c in left_out)


_PUNCTUATION_MODULES = ("libcst._nodes.whitespace", "libcst._nodes.op")
_BRACKETS = (
    cst.LeftParen,
    cst.RightParen,
    cst.LeftSquareBracket,
    cst.RightSquareBracket,
    cst.LeftCurlyBrace,
    cst.RightCurlyBrace,
)

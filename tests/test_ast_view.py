"""syntax/ast_view.py gives, for a libcst expression, the tree `ast.parse` gives for its code: the
file pass judges tests and targets with the project pass's `ast` readings (analysis/branch_sides.py,
analysis/cache_misses.py, analysis/accumulators.py), so any difference would make the passes disagree."""

from __future__ import annotations

import ast
from pathlib import Path

import hypothesis.strategies as st
import hypothesmith
import libcst as cst
import pytest
from hypothesis import HealthCheck, given, settings

from torchperf_lint.syntax.ast_view import as_ast

_CODE = cst.Module([])


def _parsed(code: str) -> str:
    return ast.dump(ast.parse(f"(\n{code}\n)", mode="eval").body)


def _expressions(node: cst.CSTNode) -> list[cst.BaseExpression]:
    found: list[cst.BaseExpression] = []
    todo: list[cst.CSTNode] = [node]
    while todo:
        current = todo.pop()
        if isinstance(current, cst.BaseExpression) and not isinstance(current, cst.StarredElement):
            found.append(current)
        todo.extend(current.children)
    return found


def _mismatches(module: cst.Module) -> list[str]:
    wrong = []
    for expression in _expressions(module):
        code = _CODE.code_for_node(expression)
        try:
            expected = _parsed(code)
        except SyntaxError:
            continue  # a starred item or a keyword's value alone: parsed only inside its display
        converted = as_ast(expression)
        if converted is None or ast.dump(converted) != expected:
            wrong.append(code)
    return wrong


@pytest.mark.parametrize(
    "code",
    [
        "a and b and c",
        "(a and b) and c",
        "a or b and not c",
        "x.device.type == 'cuda' and x.dtype in (torch.float32, torch.float64)",
        "a < b <= c is not None",
        "step % 10 == 0",
        "-1 + +2 ** ~3",
        "x[1:2, ::3]",
        "x[a,]",
        "x[()]",
        "x[*a]",
        "f(*args, key=1, **kwargs)",
        "[1, *rest], (1,), ()",
        "None if True else False",
        "b'raw' + 'text' + u'x'",
        "0x1F + 1e3 + 2j",
        "f'{x!r:>{w}}'",
        "lambda q: q.item()",
        "{k: v for k, v in d.items()}",
        "len(self.cache) == 0",
        "key not in self.cache[i].shape[2:4]",
    ],
)
def test_an_expression_converts_as_cpython_parses_it(code: str) -> None:
    assert _mismatches(cst.parse_module(code + "\n")) == []


def test_every_expression_of_the_linters_own_hot_path_module_converts_exactly() -> None:
    source = Path(__file__).resolve().parent.parent / "torchperf_lint" / "analysis" / "hotpath.py"
    module = cst.parse_module(source.read_bytes())
    assert len(_expressions(module)) > 1000
    assert _mismatches(module) == []


def test_a_starred_element_alone_is_none_not_an_error() -> None:
    element = cst.parse_expression("[*rest]").elements[0]
    assert isinstance(element, cst.StarredElement)
    assert as_ast(element) is None


@pytest.mark.filterwarnings("ignore::SyntaxWarning")
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(hypothesmith.from_grammar(start="eval_input"), st.just(None))
def test_generated_expressions_convert_as_cpython_parses_them(source: str, _: None) -> None:
    try:
        module = cst.parse_module(source.strip() + "\n")
        compile(source, "<expr>", "eval")
    except (cst.ParserSyntaxError, SyntaxError, ValueError, RecursionError, MemoryError):
        return  # valid for the grammar, refused by one of the parsers: nothing to compare
    assert _mismatches(module) == []

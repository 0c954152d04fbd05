"""syntax/parsing.py: libcst's parse without per-node validation gives the same tree, the same
errors, and leaves validation on for every node built afterwards (the fixer's)."""

import libcst as cst
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesmith import from_grammar

from torchperf_lint.syntax.parsing import parse_module

SOURCE = """\
import torch

class Net(torch.nn.Module):
    def forward(self, x, *, scale: float = 1.0):
        return (x @ x.T) * scale if self.training else x[..., ::2]

async def run(loader):
    async for x, y in loader:
        yield {**x, "y": [y for _ in range(3)]}
"""


def test_the_tree_is_the_validated_parse():
    tree = parse_module(SOURCE)
    assert tree.deep_equals(cst.parse_module(SOURCE))
    assert tree.code == SOURCE


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(from_grammar())
def test_any_source_parses_to_the_validated_tree(source):
    try:
        expected = cst.parse_module(source)
    except Exception as error:  # noqa: BLE001 - the same failure is expected
        with pytest.raises(type(error)):
            parse_module(source)
        return
    assert parse_module(source).deep_equals(expected)


def test_a_syntax_error_is_libcsts():
    with pytest.raises(cst.ParserSyntaxError):
        parse_module("def f(:\n")


def test_nodes_built_after_a_parse_are_validated():
    parse_module(SOURCE)
    with pytest.raises(cst.CSTValidationError):
        cst.Name("not a name")


def test_nodes_built_after_a_failed_parse_are_validated():
    with pytest.raises(cst.ParserSyntaxError):
        parse_module("x = (\n")
    with pytest.raises(cst.CSTValidationError):
        cst.Name("1x")

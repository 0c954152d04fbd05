"""What the engine does to be fast must not change what it finds: ranges of reported nodes are
libcst's PositionProvider's, and linting a file leaves no reference cycle that keeps its tree
alive until the garbage collector's next full pass."""

from __future__ import annotations

import gc
import random

import hypothesmith
import libcst as cst
import pytest
from hypothesis import given
from libcst.metadata import MetadataWrapper, PositionProvider

from torchperf_lint.config import Settings
from torchperf_lint.engine.runner import lint_bytes
from torchperf_lint.rules import select_rules
from torchperf_lint.syntax.positions import node_ranges

SOURCES = [
    "",
    "\n",
    "x = 1",
    "x = 1\n",
    "import torch\n\n\nclass M(torch.nn.Module):\n    def forward(self, x):\n        return x.cpu()  # c\n",
    "if a:\n    pass\nelif b:\n    f(x,\n      y)\nelse:\n    g()\n",
    "def f(a, *, b=2, **k):\n    '''doc\n    string'''\n    for i in range(3):\n        yield i\n    else:\n        pass\n",
    "try:\n    a()\nexcept E as e:\n    b()\nelse:\n    c()\nfinally:\n    d()\n",
    "with a as b, c:\n    x = [i for i in y if i]\n\n# trailing comment\n",
    "x = 1\r\ny = (2,\r\n     3)\r\nif x:\r\n    z = y\r\n",
    "x = 1\ry = 2\rdef f():\r    return x\r",
    "a = 1\n\x0c\nb = f(a)\\\n  + 2\n",
    "async def f():\n    async with a:\n        await b\n    async for c in d:\n        pass\n",
    "match x:\n    case [1, *rest]:\n        pass\n    case {'k': v}:\n        pass\n",
    "x = f'{a!r:>{w}}' 'b'\nlambda: (yield)\n",
    "from . import (a,\n    b)\nimport c.d as e\n",
    "class C: pass\ndef g(): return 1\n",
]


def _libcst_parses(source: str) -> bool:
    try:
        cst.parse_module(source)
    except cst.ParserSyntaxError:
        return False
    return True


# The property is about modules libcst parses: hypothesmith also writes some that only CPython
# accepts (a backslash continuation before a final CRLF, 'A\n\\\r\n'), which a lint reports as TPL000.
LIBCST_MODULES = hypothesmith.from_grammar().filter(_libcst_parses)


def _assert_ranges_match(source: str) -> None:
    module = cst.parse_module(source)
    expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    nodes = list(expected.keys())
    assert node_ranges(module, nodes) == dict(expected)
    for node in random.Random(0).sample(nodes, min(25, len(nodes))):
        assert node_ranges(module, [node]) == {node: expected[node]}


@pytest.mark.parametrize("source", SOURCES)
def test_node_ranges_are_position_providers(source: str) -> None:
    _assert_ranges_match(source)


@pytest.mark.filterwarnings("ignore::SyntaxWarning")
@given(LIBCST_MODULES)
def test_node_ranges_are_position_providers_on_any_module(source: str) -> None:
    _assert_ranges_match(source)


def test_node_ranges_leave_out_nodes_not_in_the_module() -> None:
    module = cst.parse_module("x = 1\n")
    stranger = cst.Name("y")
    assert node_ranges(module, [stranger]) == {}
    assert node_ranges(module, []) == {}


def test_linting_leaves_no_tree_in_reference_cycles() -> None:
    settings = Settings()
    rules = select_rules(settings.select, settings.ignore, settings.extend_select)
    source = (
        b"import torch\nfrom torch import nn\n\n\nclass M(nn.Module):\n"
        b"    def __init__(self):\n        super().__init__()\n        self.l = nn.Linear(2, 2)\n\n"
        b"    def forward(self, x):\n        y = torch.zeros(3)\n        assert x.sum() > 0\n"
        b"        for i in range(x.shape[0]):\n            y = y + x[i]\n        return y.item()\n\n\n"
        b"def train(model, loader, opt):\n    for batch in loader:\n        loss = model(batch.cuda())\n"
        b"        loss.backward()\n        opt.step()\n        opt.zero_grad()\n        print(loss.item())\n"
    )
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        result = lint_bytes(source, "model.py", rules, settings)
        assert result.findings
        del result
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        leaked = [o for o in gc.garbage if isinstance(o, cst.CSTNode)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if was_enabled:
            gc.enable()
    assert leaked == []


def test_modules_libcst_rejects_are_outside_the_property() -> None:
    source = "A\n\\\r\n"
    compile(source, "<cpython accepts it>", "exec")
    assert not _libcst_parses(source)
    assert _libcst_parses("x = 1 + \\\n2\n")

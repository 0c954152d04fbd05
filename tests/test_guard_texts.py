"""The text the project pass keeps of a guard (project/summary.py's `source_text`) reads back, with
analysis/arguments.py's `parse_test`, to the test it was taken from: a slice of the source where
the lines are ASCII, `ast.unparse` elsewhere."""

from __future__ import annotations

import ast

from torchperf_lint.analysis.arguments import parse_test
from torchperf_lint.project.summary import summarize

SOURCE = """\
def helper(x):
    return x


def step(x, mode, flags, name):
    if mode == "train":
        helper(x)
    if not all(f.enabled for f in flags):
        helper(x)
    if (mode == 'eval'  # a comment inside the test
            and name is not None):
        helper(x)
    if name == "µ-param" or mode in ("a",
                                     "b"):
        helper(x)
    if mode: helper(x)
"""

TESTS = [
    'mode == "train"',
    "not all(f.enabled for f in flags)",
    "mode == 'eval' and name is not None",
    'name == "µ-param" or mode in ("a", "b")',
    "mode",
]


def test_each_guard_text_reads_back_to_its_test() -> None:
    summary = summarize(SOURCE)
    [function] = [f for f in summary.functions if f.name == "step"]
    texts = [guard[0] for call in function.calls if call.target == "helper" for guard in call.guards]
    assert [ast.dump(parse_test(text)) for text in texts] == [  # type: ignore[arg-type]
        ast.dump(ast.parse(test, mode="eval").body) for test in TESTS
    ]

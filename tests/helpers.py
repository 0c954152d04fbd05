"""Shared test helpers: turning rule examples into lint inputs and expectations."""

from __future__ import annotations

import re
import textwrap

from torchperf_lint.docs import EXPECT_MARK, strip_expectations

_EXPECT = re.compile(r"#\s*expect:\s*([A-Z0-9, ]+)")


def example_source(code: str) -> str:
    """The example as a file: dedented, `# expect:` markers removed."""
    return strip_expectations(textwrap.dedent(code).lstrip("\n"))


def expected_findings(code: str) -> list[tuple[int, str]]:
    """(line, code) pairs from `# expect: CODE[,CODE]` markers."""
    expected = []
    for number, line in enumerate(textwrap.dedent(code).lstrip("\n").splitlines(), start=1):
        if EXPECT_MARK.strip() in line:
            match = _EXPECT.search(line)
            assert match, f"malformed expectation on line {number}: {line!r}"
            expected.extend((number, c.strip()) for c in match.group(1).split(",") if c.strip())
    return sorted(expected)

"""Shared test helpers: turning rule examples into lint inputs and expectations, and writing
small multi-module projects to lint."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

from torchperf_lint.api import lint_source
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


def write_project(root: Path, files: dict[str, str]) -> Path:
    """A project under `root`: a pyproject.toml that marks its root, and each file (dedented)."""
    for name, text in {"pyproject.toml": "[project]\nname = 'p'\n", **files}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))
    return root


def finding_lines(root: Path, target: str, code: str) -> list[int]:
    """The lines of `code`'s findings in the project file `target`, linted as the editor does."""
    path = root / target
    return [f.line for f in lint_source(path.read_text(), str(path), select=[code])]

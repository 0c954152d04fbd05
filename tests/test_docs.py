"""The committed rule pages and the README's speedup table are generated: they must be current."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchperf_lint.docs import README_END, README_START, expected_pages, readme_with_summary
from torchperf_lint.rules import ALL_RULES

ROOT = Path(__file__).resolve().parent.parent
REGENERATE = "docs are stale: run `python -m torchperf_lint.docs` and commit the result"


@pytest.mark.parametrize("name, text", sorted(expected_pages().items()))
def test_committed_rule_page_is_current(name: str, text: str) -> None:
    path = ROOT / "docs" / "rules" / name
    assert path.is_file(), REGENERATE
    assert path.read_text(encoding="utf-8") == text, REGENERATE


def test_no_page_for_a_rule_that_does_not_exist() -> None:
    committed = {p.name for p in (ROOT / "docs" / "rules").glob("*.md")}
    assert committed == set(expected_pages())


def test_readme_speedup_table_is_current() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert README_START in readme and README_END in readme
    assert readme_with_summary(readme) == readme, REGENERATE


def test_every_page_quotes_a_measurement_or_says_why_not() -> None:
    for rule in ALL_RULES:
        page = expected_pages()[f"{rule.code}.md"]
        assert "## Measured" in page
        assert "| case | regime | device |" in page or "No GPU measurement" in page

"""The committed rule pages and the README's generated parts (the speedup table, the rules on by
default, the console transcripts) must be current."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from torchperf_lint.docs import (
    DEFAULT_ON_END,
    DEFAULT_ON_START,
    README_END,
    README_START,
    TRANSCRIPT,
    expected_pages,
    readme_with_summary,
    readme_with_transcripts,
    render_default_on,
)
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


def _readme() -> str:
    return (ROOT / "README.md").read_text(encoding="utf-8")


def test_readme_names_every_rule_on_by_default() -> None:
    readme = _readme()
    listed = readme[readme.index(DEFAULT_ON_START) : readme.index(DEFAULT_ON_END)]
    assert render_default_on() in listed, REGENERATE
    on = {rule.code for rule in ALL_RULES if rule.default_on}
    named = set(re.findall(r"TPL\d{3}", listed))
    assert named == on, REGENERATE


def test_default_on_sentence_keeps_the_case_of_names() -> None:
    sentence = render_default_on()
    assert "(DataLoader loads" in sentence and "(CUDA training" in sentence and "(tensor indexed" in sentence
    assert "(Python loop over" in sentence


def test_readme_transcripts_show_what_the_tool_prints() -> None:
    """Each `$ torchperf-lint ...` console block is what that command prints today."""
    readme = _readme()
    commands = [match[1] for match in TRANSCRIPT.finditer(readme)]
    assert len(commands) >= 3  # the example script, the example project, the default rules alone
    assert readme_with_transcripts(readme) == readme, REGENERATE


def test_a_drifted_transcript_is_rewritten() -> None:
    stale = "text\n```console\n$ torchperf-lint x.py\nx.py:1:1: TPL101 old\nFound 1 finding.\n```\nmore\n"
    assert readme_with_transcripts(stale, lambda command: f"ran {command}\n") == (
        "text\n```console\n$ torchperf-lint x.py\nran torchperf-lint x.py\n```\nmore\n"
    )


def test_other_console_blocks_are_left_alone() -> None:
    block = "```console\n$ pip install -e .\nSuccessfully installed\n```\n"
    assert readme_with_transcripts(block, lambda command: "never") == block

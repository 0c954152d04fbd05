"""The registry and the rule classes' contract."""

from __future__ import annotations

import re
import string

import pytest

from torchperf_lint.rules import ALL_RULES, BY_CODE
from torchperf_lint.rules.base import Rule

FAMILY_MODULES = {
    "1": "transfer",
    "2": "loops",
    "3": "training",
    "4": "modules",
    "5": "data",
    "6": "debug",
    "7": "precision",
}


def _kebab(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "-", name).lower()


def test_codes_are_unique_and_sorted() -> None:
    codes = [rule.code for rule in ALL_RULES]
    assert len(codes) == len(set(codes))
    assert codes == sorted(codes)
    assert set(BY_CODE) == set(codes)


@pytest.mark.parametrize("rule", ALL_RULES, ids=lambda r: r.code)
def test_rule_lives_in_its_own_module_named_by_its_code(rule: type[Rule]) -> None:
    assert re.fullmatch(r"TPL[1-7]\d\d", rule.code)
    module = f"{rule.code.lower()}_{rule.name.replace('-', '_')}"
    assert rule.__module__ == f"torchperf_lint.rules.{FAMILY_MODULES[rule.code[3]]}.{module}"


@pytest.mark.parametrize("rule", ALL_RULES, ids=lambda r: r.code)
def test_name_is_kebab_case_class_name(rule: type[Rule]) -> None:
    assert rule.name == _kebab(rule.__name__)


@pytest.mark.parametrize("rule", ALL_RULES, ids=lambda r: r.code)
def test_page_has_the_required_sections(rule: type[Rule]) -> None:
    page = rule.explanation()
    for heading in ("## What it does", "## Why it is slow", "## Fix safety", "## When it stays silent"):
        assert heading in page, heading


@pytest.mark.parametrize("rule", ALL_RULES, ids=lambda r: r.code)
def test_message_is_one_sentence_naming_cause_and_fix(rule: type[Rule]) -> None:
    assert "; " in rule.message, "cause; fix"
    assert not rule.message.rstrip().endswith(".")
    assert rule.message[0] not in string.whitespace
    assert rule.node_types or rule.check_file is not Rule.check_file, "a rule must look at something"

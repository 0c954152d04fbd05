"""What the information options print, as text or as JSON (`--format json`)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

_SHARE_WIDTH = 18  # "100%/100% of 1234" and a space


def rule_table(as_json: bool) -> str:
    """--list-rules: every rule with its default, the best safety of its fixes, and its precision on the
    ecosystem check's two populations: right (TRUE+SMALL) / FALSE shares of the labelled findings on
    training code and on libraries, each with the number of labelled findings it is a share of
    (`75%/25% of 4`; `--explain CODE` gives the counts)."""
    from .evidence import POPULATIONS, precision_of
    from .rules import ALL_RULES  # the rule classes: only --list-rules needs them here

    def precision(code: str, population: str) -> dict[str, int] | None:
        row = precision_of(code, population)
        return None if row is None else dataclasses.asdict(row)

    if as_json:
        rows: list[dict[str, Any]] = [
            {
                "code": rule.code,
                "name": rule.name,
                "default_on": rule.default_on,
                "fix": rule.fix_safety.value,
                "summary": rule.summary,
                "precision": {population: precision(rule.code, population) for population in POPULATIONS},
            }
            for rule in ALL_RULES
        ]
        return json.dumps(rows, indent=2) + "\n"

    def cell(code: str, population: str) -> str:
        row = precision_of(code, population)
        if row is None or not row.labelled:
            return "-"
        return f"{row.good_share:.0%}/{row.false_share:.0%} of {row.labelled}"

    shares = "".join(f"{population:<{_SHARE_WIDTH}}" for population in POPULATIONS)
    lines = [f"{'code':<8}{'name':<38}{'default':<9}{'fix':<8}{shares}summary"]
    for rule in ALL_RULES:
        default = "on" if rule.default_on else "off"
        lines.append(
            f"{rule.code:<8}{rule.name:<38}{default:<9}{rule.fix_safety.value:<8}"
            + "".join(f"{cell(rule.code, population):<{_SHARE_WIDTH}}" for population in POPULATIONS)
            + rule.summary
        )
    return "\n".join(lines) + "\n"


def file_list(paths: Sequence[str], as_json: bool) -> str:
    """--show-files: the files a run would check, in the order it checks them."""
    if as_json:
        return json.dumps(list(paths), indent=2) + "\n"
    return "".join(f"{path}\n" for path in paths)


def settings_table(rows: Sequence[tuple[str, object, str]], as_json: bool) -> str:
    """--show-settings: each setting as `key = value  # where it came from` (values in JSON), or
    a JSON list of {key, value, source}."""
    if as_json:
        return json.dumps([{"key": k, "value": v, "source": s} for k, v, s in rows], indent=2) + "\n"
    lines = []
    for key, value, source in rows:
        shown = json.dumps(list(value) if isinstance(value, tuple) else value)
        lines.append(f"{key} = {shown}  # {source}")
    return "\n".join(lines) + "\n"

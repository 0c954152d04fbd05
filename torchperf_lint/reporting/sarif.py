"""SARIF 2.1.0, as GitHub code scanning reads it. No `informationUri` or `helpUri`: the project has
no published home to link to, and each rule's `help` carries its whole page."""

from __future__ import annotations

import json
import os
from pathlib import PurePath
from typing import TYPE_CHECKING, Any, Sequence

from .. import __version__
from ..engine.findings import Finding, Safety

if TYPE_CHECKING:
    from . import ReportOptions

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
ERROR_RULE = {
    "id": "TPL000",
    "name": "CouldNotCheck",
    "shortDescription": {"text": "A file that could not be checked"},
    "help": {"text": "The file could not be read, decoded or parsed, or a rule failed on it."},
    "defaultConfiguration": {"level": "error"},
}


def _pascal(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("-"))


def _rule_descriptors() -> list[dict[str, Any]]:
    from ..docs import render_rule_page  # the rules' pages: only SARIF output needs the rule classes
    from ..rules import ALL_RULES

    rules = [ERROR_RULE]
    for rule in ALL_RULES:
        page = render_rule_page(rule)
        rules.append(
            {
                "id": rule.code,
                "name": _pascal(rule.name),
                "shortDescription": {"text": rule.summary},
                "fullDescription": {
                    "text": rule.explanation().split("\n\n")[1]
                    if "\n\n" in rule.explanation()
                    else rule.summary
                },
                "help": {"text": page, "markdown": page},
                "defaultConfiguration": {"level": "warning", "enabled": rule.default_on},
            }
        )
    return rules


def relative_uri(path: str) -> str:
    """A relative, forward-slash URI: code scanning rejects absolute paths."""
    if os.path.isabs(path):
        try:
            path = os.path.relpath(path)
        except ValueError:  # another drive on Windows
            pass
    posix = PurePath(path).as_posix()
    while posix.startswith("./"):
        posix = posix[2:]
    return posix.lstrip("/")


def _fixes(finding: Finding) -> dict[str, Any]:
    """Safe fixes that can be written as text edits, as SARIF `fixes` (code scanning shows them)."""
    if finding.fix is None or finding.fix.safety is not Safety.SAFE or not finding.edits:
        return {}
    replacements = [
        {
            "deletedRegion": {
                "startLine": edit.start_line,
                "startColumn": edit.start_col,
                "endLine": edit.end_line,
                "endColumn": edit.end_col,
            },
            "insertedContent": {"text": edit.text},
        }
        for edit in finding.edits
    ]
    change = {
        "artifactLocation": {"uri": relative_uri(finding.path), "uriBaseId": "%SRCROOT%"},
        "replacements": replacements,
    }
    return {"fixes": [{"description": {"text": finding.fix.description}, "artifactChanges": [change]}]}


def _properties(finding: Finding) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    if finding.context:
        properties["hotContext"] = finding.context
    if finding.cell is not None:
        properties["notebookCell"] = finding.cell  # the region's lines count within this cell
    return {"properties": properties} if properties else {}


def render_sarif(findings: Sequence[Finding], options: ReportOptions) -> str:
    descriptors = _rule_descriptors()
    index = {d["id"]: i for i, d in enumerate(descriptors)}
    results = []
    for finding in findings:
        results.append(
            {
                "ruleId": finding.code,
                "ruleIndex": index.get(finding.code, 0),
                "level": "error" if finding.code == "TPL000" else "warning",
                "message": {"text": finding.message},
                "locations": [
                    {
                        "physicalLocation": {
                            "artifactLocation": {"uri": relative_uri(finding.path), "uriBaseId": "%SRCROOT%"},
                            "region": {
                                "startLine": finding.line,
                                "startColumn": finding.col,
                                "endLine": max(finding.end_line, finding.line),
                                "endColumn": finding.end_col
                                if finding.end_line > finding.line
                                else max(finding.end_col, finding.col),
                            },
                        }
                    }
                ],
                **_fixes(finding),
                **_properties(finding),
            }
        )
    document = {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "torchperf-lint",
                        "version": __version__,
                        "rules": descriptors,
                    }
                },
                "columnKind": "unicodeCodePoints",
                "results": results,
            }
        ],
    }
    return json.dumps(document, indent=2) + "\n"

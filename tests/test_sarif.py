"""SARIF 2.1.0 and GitHub annotation output, checked field by field."""

from __future__ import annotations

import json
import os

import pytest

from torchperf_lint.api import fix_source
from torchperf_lint.cli import main
from torchperf_lint.engine.findings import Finding, Fix, Safety
from torchperf_lint.reporting import ReportOptions
from torchperf_lint.reporting.github import render_github
from torchperf_lint.reporting.sarif import relative_uri, render_sarif
from torchperf_lint.rules import ALL_RULES

pytestmark = pytest.mark.usefixtures("precision_off_rules_on")  # conftest.PRECISION_OFF

FINDINGS = [
    Finding(
        "TPL103",
        "python-range-indexing",
        "range() index is built on the host; use torch.arange",
        "pkg/train.py",
        12,
        9,
        12,
        30,
        "in Net.forward",
    ),
    Finding("TPL000", "error", "could not parse: bad input", os.path.abspath("broken.py"), 3, 1, 3, 1),
]


def test_sarif_document_has_the_structure_code_scanning_reads() -> None:
    document = json.loads(render_sarif(FINDINGS, ReportOptions()))
    assert document["version"] == "2.1.0"
    assert document["$schema"].endswith("sarif-2.1.0.json")
    (run,) = document["runs"]
    driver = run["tool"]["driver"]
    # no address: the project has no published home, and each rule's help is its whole page
    assert driver["name"] == "torchperf-lint" and driver["version"] and "informationUri" not in driver
    ids = [rule["id"] for rule in driver["rules"]]
    assert ids == ["TPL000"] + [rule.code for rule in ALL_RULES]
    for descriptor in driver["rules"]:
        assert descriptor["name"] and descriptor["shortDescription"]["text"] and descriptor["help"]["text"]
        assert "helpUri" not in descriptor
    first, second = run["results"]
    assert first["ruleId"] == "TPL103" and ids[first["ruleIndex"]] == "TPL103"
    assert first["level"] == "warning" and first["message"]["text"].startswith("range()")
    location = first["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == "pkg/train.py"
    assert location["region"] == {"startLine": 12, "startColumn": 9, "endLine": 12, "endColumn": 30}
    assert second["level"] == "error" and ids[second["ruleIndex"]] == "TPL000"


def test_sarif_uris_are_relative_and_forward_slashed() -> None:
    document = json.loads(render_sarif(FINDINGS, ReportOptions()))
    for result in document["runs"][0]["results"]:
        uri = result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
        assert not uri.startswith("/") and "\\" not in uri and ":" not in uri
    assert relative_uri("./a/b.py") == "a/b.py"


def test_sarif_columns_and_lines_are_one_based() -> None:
    zero = Finding("TPL101", "cpu-factory-in-hot-path", "m", "a.py", 1, 1, 1, 1)
    region = json.loads(render_sarif([zero], ReportOptions()))["runs"][0]["results"][0]["locations"][0][
        "physicalLocation"
    ]["region"]
    assert (
        region["startLine"] >= 1
        and region["startColumn"] >= 1
        and region["endColumn"] >= region["startColumn"]
    )


def test_github_annotations_are_workflow_commands() -> None:
    text = render_github(FINDINGS[:1], ReportOptions())
    assert text == (
        "::warning file=pkg/train.py,line=12,col=9,endLine=12,endColumn=30,title=TPL103::"
        "range() index is built on the host; use torch.arange\n"
    )


def test_github_annotations_escape_newlines_and_commas() -> None:
    odd = Finding("TPL000", "error", "could not parse: a\nb 100%", "dir,x/a:b.py", 1, 1, 1, 1)
    assert render_github([odd], ReportOptions()) == (
        "::error file=dir%2Cx/a%3Ab.py,line=1,col=1,endLine=1,endColumn=1,title=TPL000::"
        "could not parse: a%0Ab 100%25\n"
    )


def _apply_sarif_fixes(source: str, results: list[dict]) -> str:
    lines = source.splitlines(keepends=True)
    edits = []
    for result in results:
        for fix in result.get("fixes", []):
            for change in fix["artifactChanges"]:
                for replacement in change["replacements"]:
                    region = replacement["deletedRegion"]
                    edits.append((region, replacement["insertedContent"]["text"]))
    # apply from the end so earlier positions stay valid
    for region, text in sorted(edits, key=lambda e: (e[0]["startLine"], e[0]["startColumn"]), reverse=True):
        start = sum(len(line) for line in lines[: region["startLine"] - 1]) + region["startColumn"] - 1
        end = sum(len(line) for line in lines[: region["endLine"] - 1]) + region["endColumn"] - 1
        joined = "".join(lines)
        lines = (joined[:start] + text + joined[end:]).splitlines(keepends=True)
    return "".join(lines)


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_sarif_fixes_are_the_safe_fixes_as_text_edits(tmp_path, capsys, newline: str) -> None:
    source = newline.join(
        [
            "import torch",
            "from torch import nn",
            "from torch.utils.data import DataLoader",
            "",
            "class Net(nn.Module):",
            "    def forward(self, x):",
            "        noise = torch.zeros(x.shape[0],",
            "                            16).cuda()  # a comment",
            "        return x[range(4)] + noise + torch.ones(3).cuda()",
            "",
            "loader = DataLoader(range(10), batch_size=2)",
            "",
        ]
    )
    path = tmp_path / "model.py"
    path.write_bytes(source.encode())
    main(["--no-cache", "--format", "sarif", "--extend-select", "TPL502", str(path)])
    results = json.loads(capsys.readouterr().out)["runs"][0]["results"]
    assert sum(1 for r in results if "fixes" in r) == 3  # two TPL101 and the TPL502; TPL103's is unsafe
    fixed = fix_source(source.encode(), path=str(path), select=["TPL1", "TPL502"])
    assert _apply_sarif_fixes(source, results) == fixed


def test_a_fix_that_adds_an_import_has_no_sarif_fix() -> None:
    finding = Finding(
        "TPL103",
        "python-range-indexing",
        "m",
        "a.py",
        1,
        1,
        1,
        2,
        fix=Fix((), Safety.SAFE, "use torch.arange", needs_torch_import=True),
    )
    result = json.loads(render_sarif([finding], ReportOptions()))["runs"][0]["results"][0]
    assert "fixes" not in result

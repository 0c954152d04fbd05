"""The JSON output matches its documented schema (docs/json-output.schema.json)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jsonschema
import pytest

from torchperf_lint.cli import main

pytestmark = pytest.mark.usefixtures("precision_off_rules_on")  # conftest.PRECISION_OFF

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = json.loads((ROOT / "docs" / "json-output.schema.json").read_text(encoding="utf-8"))


def test_schema_is_a_valid_json_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


def test_output_over_every_example_matches_the_schema(tmp_path: Path, capsys) -> None:
    for example in (ROOT / "examples").glob("*.py"):
        shutil.copy(example, tmp_path)
    (tmp_path / "broken.py").write_text("import torch\ndef f(:\n")
    (tmp_path / "nb.ipynb").write_text(
        json.dumps(
            {
                "cells": [
                    {
                        "cell_type": "code",
                        "metadata": {},
                        "outputs": [],
                        "execution_count": None,
                        "source": [
                            "import torch\n",
                            "for x in train_loader:\n",
                            "    x.cuda()[[0, 2, 1]].sum().backward()\n",
                        ],
                    }
                ],
                "metadata": {},
                "nbformat": 4,
                "nbformat_minor": 5,
            }
        )
    )
    assert (
        main(
            [
                "--format",
                "json",
                "--extend-select",
                "TPL102,TPL107,TPL403,TPL502,TPL602,TPL604",
                str(tmp_path),
            ]
        )
        == 2
    )
    findings = json.loads(capsys.readouterr().out)
    jsonschema.validate(findings, SCHEMA)
    codes = {f["code"] for f in findings}
    assert "TPL000" in codes and len(codes) > 20
    assert any(f["cell"] == 1 for f in findings)  # the notebook's finding


def test_schema_rejects_what_the_output_must_not_contain() -> None:
    bad = [
        {
            "path": "a.py",
            "cell": None,
            "line": 0,
            "col": 1,
            "end_line": 1,
            "end_col": 1,
            "code": "TPL101",
            "name": "x",
            "message": "m",
            "context": None,
            "fix": None,
        }
    ]
    validator = jsonschema.Draft202012Validator(SCHEMA)
    assert not validator.is_valid(bad)  # lines are 1-based

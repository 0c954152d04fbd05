"""External validation: our SARIF against the official SARIF 2.1.0 JSON schema.

The schema is not on PyPI; it ships in the npm package @microsoft/jest-sarif (pinned), which this test
fetches from the npm registry with `npm pack` (CI machines have node and npm and reach the registry)."""

from __future__ import annotations

import json
import shutil
import subprocess
import tarfile
from pathlib import Path

import jsonschema
import pytest

from torchperf_lint.cli import main

pytestmark = pytest.mark.usefixtures("precision_off_rules_on")  # conftest.PRECISION_OFF

PACKAGE = "@microsoft/jest-sarif@1.0.0-beta.0"
MEMBER = "package/lib/schemas/sarif-2.1.0-rtm.5.json"


def _official_schema(directory: Path) -> dict:
    npm = shutil.which("npm")
    assert npm, "npm is needed to fetch the official SARIF 2.1.0 schema"
    subprocess.run(
        [npm, "pack", PACKAGE, "--pack-destination", str(directory), "--silent"],
        check=True,
        capture_output=True,
        timeout=180,
    )
    (archive,) = directory.glob("*.tgz")
    with tarfile.open(archive) as tar:
        stream = tar.extractfile(MEMBER)
        assert stream is not None
        return json.load(stream)


def test_sarif_output_validates_against_the_official_schema(tmp_path: Path, capsys) -> None:
    schema = _official_schema(tmp_path)
    examples = Path(__file__).resolve().parent.parent / "examples"
    for example in examples.glob("*.py"):
        shutil.copy(example, tmp_path)
    (tmp_path / "broken.py").write_text("import torch\ndef f(:\n")
    main(["--no-cache", "--format", "sarif", str(tmp_path)])
    document = json.loads(capsys.readouterr().out)
    assert len(document["runs"][0]["results"]) > 20
    assert any("fixes" in result for result in document["runs"][0]["results"])
    jsonschema.Draft4Validator(schema).validate(document)

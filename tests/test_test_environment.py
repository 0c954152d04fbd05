"""The test environment the `test` extra installs: torch imports there without warnings (it warns
"Failed to initialize NumPy" when numpy is missing, in every test run that imports it)."""

from __future__ import annotations

import configparser
import subprocess
import sys
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
NUMPY_WARNING = "Failed to initialize NumPy"


def _import_torch(before: str = "") -> str:
    """What importing torch in a fresh interpreter of this environment prints on stderr."""
    result = subprocess.run(
        [sys.executable, "-W", "default", "-c", f"{before}import torch"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return result.stderr


def _test_extra() -> dict[str, Requirement]:
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg", encoding="utf-8")
    lines = config["options.extras_require"]["test"].split("\n")
    return {req.name: req for req in (Requirement(line) for line in lines if line.strip())}


def test_the_test_extra_installs_numpy_and_keeps_torch_pinned() -> None:
    extra = _test_extra()
    assert "numpy" in extra
    assert str(extra["torch"].specifier) == "==2.13.0"


def test_torch_imports_without_the_numpy_warning() -> None:
    assert NUMPY_WARNING not in _import_torch()


def test_the_warning_is_seen_where_numpy_cannot_be_imported() -> None:
    # the check above can fail: an interpreter that cannot import numpy gets the warning
    assert NUMPY_WARNING in _import_torch("import sys; sys.modules['numpy'] = None; ")

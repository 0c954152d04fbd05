"""Start-up: --version, --help and a run whose files are all cached load neither libcst, the rules
nor the project pass (issue 17, item 13), nor start a pool of workers (issue 27, item 6); they are
imported only when a file must be parsed or a project has changed. Checked on the modules a fresh
interpreter holds at the end of the command, never on timings."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from torchperf_lint import catalog
from torchperf_lint.docs import CATALOG, render_catalog
from torchperf_lint.rules import ALL_RULES

REPO = Path(__file__).resolve().parents[1]
HEAVY = (  # and their submodules
    "libcst",
    "torchperf_lint.rules",
    "torchperf_lint.engine.runner",
    "torchperf_lint.project.graph",
    "torchperf_lint.project.summary",
    "multiprocessing",  # a pool of workers
    "concurrent.futures",
)

# Runs the command in this interpreter, then prints (as the last line of stderr) the modules of
# HEAVY that it loaded; SystemExit (--version, --help) ends the command, not the script.
PROBE = f"""
import json, sys
from torchperf_lint.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as exit:
    code = exit.code
sys.stdout.flush()
heavy = sorted(m for m in sys.modules if m in {HEAVY!r} or m.startswith({tuple(f"{m}." for m in HEAVY)!r}))
print(json.dumps(heavy), file=sys.stderr)
sys.exit(code)
"""

HOT = """\
import torch
from torch import nn


class Net(nn.Module):
    def forward(self, x):
        return x + torch.randn(3)
"""


def loaded(*args: str, cwd: Path) -> tuple[int, str, list[str]]:
    """Exit status, stdout and the heavy modules of one command in a fresh interpreter."""
    result = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={
            **{k: v for k, v in os.environ.items() if k != "TORCHPERF_LINT_NO_CACHE"},
            "PYTHONPATH": str(REPO),
        },
        check=False,
    )
    *_, last = result.stderr.splitlines() or [""]
    try:
        modules = json.loads(last)
    except ValueError:
        pytest.fail(f"the probe did not finish:\n{result.stderr}")
    return result.returncode, result.stdout, modules


@pytest.mark.parametrize("option", ["--version", "--help"])
def test_version_and_help_load_neither_libcst_nor_the_rules(tmp_path: Path, option: str) -> None:
    code, out, modules = loaded(option, cwd=tmp_path)
    assert code == 0 and out.startswith(("torchperf-lint ", "usage: torchperf-lint"))
    assert modules == []


@pytest.mark.parametrize(
    "output", [[], ["--format", "json"], ["--statistics"]], ids=["text", "json", "statistics"]
)
def test_a_fully_cached_run_loads_neither_libcst_the_rules_nor_the_project_pass(
    tmp_path: Path, output: list[str]
) -> None:
    (tmp_path / "pyproject.toml").write_text(
        # HOT has no step loop: linted as a library, its forward is hot by assumption
        '[tool.torchperf-lint]\nextend-select = ["TPL101", "TPL103"]\nignore = ["TPL401"]\nlibrary = true\n'
    )
    (tmp_path / "model.py").write_text(HOT)
    (tmp_path / "plain.py").write_text("print('no torch here')\n")
    command = ["--jobs", "1", *output, "."]  # one process: what it parses, it imports
    cold_code, cold_out, cold_modules = loaded(*command, cwd=tmp_path)
    # the probe sees a parse and a project pass
    assert cold_code == 1 and {"libcst", "torchperf_lint.project.graph"} <= set(cold_modules)
    warm_code, warm_out, warm_modules = loaded(*command, cwd=tmp_path)
    assert (warm_code, warm_out) == (cold_code, cold_out)
    assert warm_modules == []


def test_a_fully_cached_run_starts_no_pool_of_workers(tmp_path: Path) -> None:
    """With several processes (the default on a machine of several cores), the cache is read before
    a pool starts: the files that all hit it need none."""
    for name in ("model.py", "loss.py", "data.py"):
        (tmp_path / name).write_text(HOT)
    cold_code, cold_out, cold_modules = loaded(
        "--jobs", "2", "--extend-select", "TPL101", "--library", ".", cwd=tmp_path
    )
    assert cold_code == 1 and "multiprocessing" in cold_modules  # the files were parsed in a pool
    assert loaded("--jobs", "2", "--extend-select", "TPL101", "--library", ".", cwd=tmp_path) == (
        cold_code,
        cold_out,
        [],
    )


def test_an_edited_file_is_parsed_again(tmp_path: Path) -> None:
    (tmp_path / "model.py").write_text(HOT)
    loaded("--jobs", "1", ".", cwd=tmp_path)
    (tmp_path / "model.py").write_text(HOT + "\n")
    assert {"libcst", "torchperf_lint.project.graph"} <= set(loaded("--jobs", "1", ".", cwd=tmp_path)[2])


def test_an_edit_to_another_module_runs_the_project_pass_again(tmp_path: Path) -> None:
    (tmp_path / "model.py").write_text(HOT)
    (tmp_path / "other.py").write_text("import torch\n")
    command = ("--jobs", "1", "--extend-select", "TPL101", "--library", "model.py")
    first = loaded(*command, cwd=tmp_path)
    (tmp_path / "other.py").write_text("import torch\n\n")
    code, out, modules = loaded(*command, cwd=tmp_path)
    # what model.py is handed may have changed: the pass runs, and model.py's result, keyed on
    # the same facts, still comes from the cache
    assert (code, out) == first[:2] and "TPL101" in out
    assert "torchperf_lint.project.graph" in modules and "libcst" not in modules


def test_a_run_that_lints_does_not_load_libcst_matchers(tmp_path: Path) -> None:
    """Importing `libcst.matchers` builds a matcher class for every node type, about half a second
    per process: more than linting a small file, paid again by every editor and pre-commit run."""
    (tmp_path / "net.py").write_text(HOT)
    code, out, modules = loaded("--no-cache", "--library", "net.py", cwd=tmp_path)
    assert "TPL" in out and "torchperf_lint.rules" in modules  # the file was linted
    assert [m for m in modules if m.startswith("libcst.matchers")] == []


def test_the_rule_catalog_is_current() -> None:
    assert CATALOG.read_text(encoding="utf-8") == render_catalog(), (
        "torchperf_lint/catalog.py is stale: run `python -m torchperf_lint.docs` and commit the result"
    )
    assert catalog.RULES == tuple((rule.code, rule.name, rule.default_on) for rule in ALL_RULES)

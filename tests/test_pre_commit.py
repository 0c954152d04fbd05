"""The hooks in .pre-commit-hooks.yaml, run by the real pre-commit (`pre-commit try-repo`) in a
throw-away git repository. pre-commit builds a virtualenv and pip-installs this repository into it,
so these tests take some seconds each."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from pre_commit.clientlib import load_manifest

ROOT = Path(__file__).resolve().parent.parent
MANIFEST = ROOT / ".pre-commit-hooks.yaml"

# what pip needs to install the package, and the manifest pre-commit reads
_INSTALL_FILES = (
    "setup.cfg",
    "pyproject.toml",
    "setup.py",
    "README.md",
    "LICENSE",
    "MANIFEST.in",
    ".pre-commit-hooks.yaml",
)

BAD = """import torch
from torch import nn


class Net(nn.Module):
    def forward(self, x, n):
        return x + torch.zeros(n).cuda()
"""
FIXED = BAD.replace("torch.zeros(n).cuda()", 'torch.zeros(n, device="cuda")')
# TPL103's fix is unsafe here (`pred` is only assumed to be a tensor): the fix hook cannot remove it
UNFIXABLE = """import torch
from torch import nn


class Loss(nn.Module):
    def forward(self, pred, t, n):
        return pred[range(n), t].mean()
"""
NOTEBOOK = {
    "cells": [
        {"cell_type": "markdown", "metadata": {}, "source": ["# Model\n"]},
        {
            "cell_type": "code",
            "execution_count": None,
            "metadata": {},
            "outputs": [],
            "source": BAD.splitlines(keepends=True),
        },
    ],
    "metadata": {},
    "nbformat": 4,
    "nbformat_minor": 5,
}


def _git(*args: str, cwd: Path, env: dict[str, str]) -> None:
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    home = tmp_path_factory.mktemp("pre-commit-home")
    values = dict(os.environ)
    values.update(
        PRE_COMMIT_HOME=str(home / "cache"),
        GIT_AUTHOR_NAME="test",
        GIT_AUTHOR_EMAIL="test@example.com",
        GIT_COMMITTER_NAME="test",
        GIT_COMMITTER_EMAIL="test@example.com",
        GIT_CONFIG_NOSYSTEM="1",
        HOME=str(home),  # no user git config or hooks leak in
        PRE_COMMIT_COLOR="never",
    )
    return values


@pytest.fixture(scope="module")
def hook_repo(tmp_path_factory: pytest.TempPathFactory, env: dict[str, str]) -> Path:
    """A committed copy of this working tree's package and manifest: try-repo installs what is
    committed (a dirty repo only contributes tracked changes), so the hooks under test are the
    ones in this checkout, committed or not."""
    snapshot = tmp_path_factory.mktemp("hook-repo")
    for name in _INSTALL_FILES:
        if (ROOT / name).is_file():
            shutil.copy2(ROOT / name, snapshot / name)
    shutil.copytree(
        ROOT / "torchperf_lint",
        snapshot / "torchperf_lint",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
    )
    _git("init", "-q", cwd=snapshot, env=env)
    _git("add", "-A", cwd=snapshot, env=env)
    _git("commit", "-q", "-m", "snapshot", cwd=snapshot, env=env)
    return snapshot


@pytest.fixture
def user_repo(tmp_path: Path, env: dict[str, str]) -> Path:
    repo = tmp_path / "project"
    repo.mkdir()
    (repo / "net.py").write_text(BAD)
    (repo / "notes.txt").write_text("torch.zeros(n).cuda()\n")  # not Python: the hooks skip it
    # the project turns on the two (off by default) rules these files exercise; its net has no step
    # loop, so it is linted as a library (code hot only by assumption is reported)
    (repo / "pyproject.toml").write_text(
        '[tool.torchperf-lint]\nextend-select = ["TPL101", "TPL103"]\nlibrary = true\n'
    )
    _git("init", "-q", cwd=repo, env=env)
    _git("add", "-A", cwd=repo, env=env)
    return repo


def try_repo(hook: str, repo: Path, hook_repo: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", "try-repo", str(hook_repo), hook, "--all-files"],
        cwd=repo,
        env=env,
        capture_output=True,
        check=False,
        text=True,
        timeout=600,
    )


def test_manifest_declares_a_check_hook_and_a_fix_hook() -> None:
    hooks = {hook["id"]: hook for hook in load_manifest(str(MANIFEST))}
    assert set(hooks) == {"torchperf-lint", "torchperf-lint-fix"}
    for hook in hooks.values():
        assert hook["language"] == "python"
        assert hook["types"] == ["file"]  # pre-commit's default: types_or alone chooses the files
        assert hook["types_or"] == ["python", "pyi", "jupyter"]
        assert hook["require_serial"] is True
    assert hooks["torchperf-lint"]["entry"] == "torchperf-lint"
    assert hooks["torchperf-lint-fix"]["entry"] == "torchperf-lint --fix"
    # the fix hook says both ways it fails
    description = hooks["torchperf-lint-fix"]["description"]
    assert "fails when it changed a file" in description and "when findings remain" in description


def test_check_hook_fails_on_a_finding_and_leaves_the_file(user_repo: Path, hook_repo: Path, env) -> None:
    run = try_repo("torchperf-lint", user_repo, hook_repo, env)
    output = run.stdout + run.stderr
    assert run.returncode == 1, output
    assert "torchperf-lint..." in output and "Failed" in output
    assert "net.py:7:20: TPL101 [*] " in output
    assert "notes.txt" not in output.split("Using config:")[-1].split("=" * 79)[-1]
    assert (user_repo / "net.py").read_text() == BAD


def test_fix_hook_fixes_the_file_fails_once_then_passes(user_repo: Path, hook_repo: Path, env) -> None:
    first = try_repo("torchperf-lint-fix", user_repo, hook_repo, env)
    output = first.stdout + first.stderr
    assert first.returncode == 1, output
    assert "files were modified by this hook" in output
    assert (user_repo / "net.py").read_text() == FIXED
    assert (user_repo / "notes.txt").read_text() == "torch.zeros(n).cuda()\n"

    second = try_repo("torchperf-lint-fix", user_repo, hook_repo, env)
    output = second.stdout + second.stderr
    assert second.returncode == 0, output
    assert "Passed" in output
    assert (user_repo / "net.py").read_text() == FIXED


def test_check_hook_checks_notebooks(user_repo: Path, hook_repo: Path, env) -> None:
    (user_repo / "train.ipynb").write_text(json.dumps(NOTEBOOK, indent=1) + "\n")
    _git("add", "-A", cwd=user_repo, env=env)
    run = try_repo("torchperf-lint", user_repo, hook_repo, env)
    output = run.stdout + run.stderr
    assert run.returncode == 1, output
    assert "train.ipynb:cell 2:7:20: TPL101 [*] " in output
    assert "net.py:7:20: TPL101 [*] " in output


def test_fix_hook_fails_while_findings_remain_that_it_cannot_fix(
    user_repo: Path, hook_repo: Path, env
) -> None:
    (user_repo / "net.py").write_text(UNFIXABLE)
    _git("add", "-A", cwd=user_repo, env=env)
    run = try_repo("torchperf-lint-fix", user_repo, hook_repo, env)
    output = run.stdout + run.stderr
    assert run.returncode == 1, output
    assert "files were modified by this hook" not in output
    assert "net.py:7:16: TPL103 " in output
    assert (user_repo / "net.py").read_text() == UNFIXABLE

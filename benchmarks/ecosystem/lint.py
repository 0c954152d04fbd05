"""Running this checkout's linter on a project in a subprocess, and the findings it reports."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .projects import Project

REPO_ROOT = Path(__file__).resolve().parents[2]
ERROR_CODE = "TPL000"  # a file the linter could not check (docs/json-output.schema.json)

Key = tuple[str, str, str, int, str]


@dataclasses.dataclass(frozen=True)
class Finding:
    """One finding, identified by `key`; `source` is its line, stripped, so that a reader of a
    diff or a label sees the code without opening the file."""

    project: str
    version: str
    path: str  # relative to the project root, '/'-separated
    line: int
    code: str
    source: str
    message: str = ""
    context: str = ""  # why the line counts as hot, when the rule says
    # in code no step loop of the project runs, of a rule whose default form asks for one: only
    # `--library` shows it (the ecosystem check lints with it, and a default run leaves it out)
    hypothesis: bool = False

    @property
    def key(self) -> Key:
        return (self.project, self.version, self.path, self.line, self.code)

    @property
    def where(self) -> str:
        return f"{self.project}:{self.path}:{self.line}"


@dataclasses.dataclass
class LintRun:
    findings: list[Finding]
    seconds: float
    failure: str | None = None  # the linter itself did not finish: no findings can be trusted


def linter_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "torchperf_lint", *args]


def linter_env() -> dict[str, str]:
    """The environment that makes `-m torchperf_lint` import this checkout, not an installed copy."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    return env


def run_linter(args: Sequence[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(linter_command(*args), cwd=cwd, env=linter_env(), capture_output=True, text=True)


def trouble(done: subprocess.CompletedProcess[str]) -> str | None:
    """Why a linter run did not finish properly, or None. Exit 2 with TPL000 findings is a file that
    could not be checked, which the findings report; a traceback or another status is a crash."""
    if done.returncode in (0, 2) and "Traceback (most recent call last)" not in done.stderr:
        return None
    lines = [line.strip() for line in done.stderr.splitlines() if line.strip()]
    return f"linter exited with {done.returncode}: {lines[-1] if lines else 'no message'}"


def source_line(root: Path, path: str, line: int, cache: dict[str, list[str]]) -> str:
    if path not in cache:
        try:
            cache[path] = (root / path).read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            cache[path] = []
    lines = cache[path]
    return lines[line - 1].strip() if 0 < line <= len(lines) else ""


def findings_from_json(items: list[dict[str, Any]], project: Project, root: Path) -> list[Finding]:
    """The linter's JSON findings as ecosystem findings, with paths relative to the project root."""
    lines: dict[str, list[str]] = {}
    findings = []
    for item in items:
        path = Path(os.path.relpath(Path(root, item["path"]), root)).as_posix()
        findings.append(
            Finding(
                project.name,
                project.version,
                path,
                item["line"],
                item["code"],
                source_line(root, path, item["line"], lines),
                item["message"],
                item.get("context") or "",
                bool(item.get("hypothesis")),
            )
        )
    return sorted(findings, key=lambda f: f.key)


def lint_project(project: Project, root: Path, rules: Sequence[tuple[str, str]] | None = None) -> LintRun:
    """The tracked rules over the whole project root, as one project, in one linter process."""
    rules = tracked_rules() if rules is None else rules
    start = time.perf_counter()
    # the cache of unpacked projects usually sits in a gitignored folder of a git work tree
    args = ["--format", "json", "--no-cache", "--no-respect-gitignore", "--exit-zero", "--library"]
    args += selection(rules)
    done = run_linter([*args, str(root)], cwd=root)
    seconds = time.perf_counter() - start
    failure = trouble(done)
    if failure is not None:
        return LintRun([], seconds, failure)
    try:
        items = json.loads(done.stdout)
    except json.JSONDecodeError as error:
        return LintRun([], seconds, f"linter output is not JSON: {error}")
    return LintRun(findings_from_json(items, project, root), seconds)


PRECISION = REPO_ROOT / "torchperf_lint" / "precision.json"


def listed_rules() -> list[tuple[str, str, bool]]:
    """(code, name, on by default) of every rule, from `--list-rules`."""
    done = run_linter(["--list-rules"], cwd=REPO_ROOT)
    rules = []
    for line in done.stdout.splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 3 and fields[2] in ("on", "off"):
            rules.append((fields[0], fields[1], fields[2] == "on"))
    return rules


def tracked_rules(listed: Sequence[tuple[str, str, bool]] | None = None) -> list[tuple[str, str]]:
    """(code, name) of the rules the check lints with: every rule, on by default or not, so each one's
    evidence is current and a rule off by default can earn its way on. `listed`: `listed_rules()`, when
    the caller has it already."""
    rules = listed_rules() if listed is None else listed
    return [(code, name) for code, name, _ in rules]


def selection(rules: Sequence[tuple[str, str]]) -> list[str]:
    """The linter arguments that select exactly `rules`."""
    return ["--select", ",".join(code for code, _ in rules)]


def describe_checkout() -> str:
    """Which linter ran, on what: the checkout's commit (marked when it has uncommitted changes),
    Python and the CPU count, so a report can be compared with the right earlier one."""

    def git(*args: str) -> str:
        try:
            done = subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, text=True)
        except OSError:
            return ""
        return done.stdout.strip() if done.returncode == 0 else ""

    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    if git("status", "--porcelain", "--untracked-files=no"):
        commit += " with uncommitted changes"
    python = ".".join(map(str, sys.version_info[:3]))
    return f"Linter: this checkout at {commit}; Python {python}; {os.cpu_count()} CPUs."

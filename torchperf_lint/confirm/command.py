"""`torchperf-lint confirm [OPTIONS] -- COMMAND...`: lint the project of a training script, run the
script a few steps under the probe, and say per finding what happened. Imported only when the
command line starts with `confirm`: a plain lint never loads it."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..console import EXIT_CLEAN, EXIT_FINDINGS, comma_list, emit, positive_int, usage_error
from .launcher import main_report, run_instrumented
from .outcome import confirm_findings, measured_windows
from .render import render_json, render_text

DEFAULT_STEPS = 20
ERROR_CODE = "TPL000"


def _steps(text: str) -> int:
    return positive_int(text, "a run of no steps confirms nothing")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="torchperf-lint confirm",
        usage="torchperf-lint confirm [OPTIONS] -- COMMAND...",
        description="Lint the project of a training script, run the script (COMMAND: python train.py ARGS, "
        "python -m PKG, torchrun ... train.py) for a few steps with light instrumentation, and say for "
        "each finding whether the run saw it at every step, at some, or not at all, and what it saw "
        "every step that no finding names. A step is an optimizer.step() call (of the first optimizer "
        "that steps), or a backward() in a program without an optimizer. It runs the program with your "
        "torch, in your environment; the program's own output goes to stderr.",
        epilog="Exit status: 0 the run made its steps or ended by itself; 1 the command failed after "
        "its first step (what it saw is reported); 2 a usage error, or the command did not start or "
        "failed before its first step (its last lines are shown).",
    )
    parser.add_argument(
        "--steps",
        type=_steps,
        default=DEFAULT_STEPS,
        metavar="N",
        help=f"steps to run (default: {DEFAULT_STEPS})",
    )
    parser.add_argument(
        "--project",
        action="append",
        metavar="PATH",
        help="the files or directories to lint and to watch (default: the script's directory; the "
        "working directory for python -m); repeat for more",
    )
    parser.add_argument(
        "--findings",
        metavar="FILE",
        help="read the findings from this file (torchperf-lint --format json output, paths relative to "
        "the working directory) instead of linting: for a machine without libcst",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="time every recorded call (host seconds per step; on CUDA that includes the wait)",
    )
    parser.add_argument("--format", choices=("text", "json"), default="text")
    select = parser.add_argument_group(
        "rule selection (as for a lint; without --select every rule is checked, those off by default too)"
    )
    select.add_argument("--select", type=comma_list, help="only these rules")
    select.add_argument("--extend-select", type=comma_list, default=[], help="add rules")
    select.add_argument("--ignore", type=comma_list, default=[], help="rules to skip")
    select.add_argument("--extend-ignore", type=comma_list, default=[], help="rules to skip as well")
    select.add_argument("--config", metavar="FILE", help="read the settings from this file")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command to run, after --")
    return parser


def _interpreter(word: str) -> bool:
    name = os.path.basename(word)
    return name.startswith("python") or os.path.realpath(word) == os.path.realpath(sys.executable)


# interpreter options that take a value (python -W error -X dev train.py)
_VALUED = {"-W", "-X", "--check-hash-based-pycs"}


def script_of(command: Sequence[str]) -> tuple[str | None, bool]:
    """The script a command runs, and whether it runs a module (python -m): the first existing *.py
    argument after the interpreter's options (torchrun's and other launchers' options included)."""
    words = list(command[1:]) if _interpreter(command[0]) else list(command)
    skip = False
    for word in words:
        if skip:
            skip = False
            continue
        if word in _VALUED:
            skip = True
        elif word in ("-m", "--module") or (word.startswith("-m") and len(word) > 2 and word[2] != "-"):
            return None, True
        elif word == "-c":
            return None, False
        elif word.endswith(".py") and os.path.isfile(word):
            return word, False
    return None, False


def _syntax_problem(script: str) -> str | None:
    try:
        source = Path(script).read_bytes()
    except OSError as error:
        return f"{script}: cannot read: {error.strerror or error}"
    try:
        compile(source, script, "exec", dont_inherit=True)
    except SyntaxError as error:
        return f"{script}:{error.lineno}:{error.offset}: syntax error: {error.msg}"
    except ValueError as error:  # a NUL byte
        return f"{script}: cannot compile: {error}"
    return None


def _lint(args: argparse.Namespace, paths: Sequence[str]) -> tuple[list[dict[str, Any]], list[str]]:
    """The linter's JSON findings for the project (in a child process: the same linter, options and
    config as a plain run), and the lines of what could not be checked."""
    options = ["--format", "json", "--exit-zero"]
    if args.select is not None:
        options += ["--select", ",".join(args.select)]
    else:
        options += ["--extend-select", "ALL"]
    for name in ("extend_select", "ignore", "extend_ignore"):
        if getattr(args, name):
            options += [f"--{name.replace('_', '-')}", ",".join(getattr(args, name))]
    if args.config:
        options += ["--config", args.config]
    result = subprocess.run(
        [sys.executable, "-m", "torchperf_lint", *options, "--", *paths],
        capture_output=True,
        text=True,
        check=False,
    )
    try:
        found = json.loads(result.stdout or "[]")
    except ValueError:
        last = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise LintFailed(f"the lint of {', '.join(paths)} failed: {last}") from None
    problems = [
        f"{f['path']}:{f['line']}:{f['col']}: {f['message']}" for f in found if f["code"] == ERROR_CODE
    ]
    return [f for f in found if f["code"] != ERROR_CODE], problems


class LintFailed(Exception):
    pass


def _read_findings(path: str) -> list[dict[str, Any]]:
    try:
        found = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise LintFailed(
            f"cannot read the findings in {path}: {getattr(error, 'strerror', None) or error}"
        ) from None
    if not isinstance(found, list) or not all(
        isinstance(f, dict) and {"path", "line", "code"} <= set(f) for f in found
    ):
        raise LintFailed(f"{path} does not hold torchperf-lint --format json findings")
    return [f for f in found if f["code"] != ERROR_CODE]


def run(argv: Sequence[str]) -> int:
    args = build_parser().parse_args(argv)
    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        return usage_error("confirm needs a command to run after --, e.g. confirm -- python train.py")
    if shutil.which(command[0]) is None:
        return usage_error(f"command not found: {command[0]}")
    script, module = script_of(command)
    if script is not None:
        problem = _syntax_problem(script)
        if problem is not None:
            return usage_error(problem)
    roots = args.project or [os.path.dirname(script) or "." if script else "."]
    missing = [root for root in roots if not os.path.exists(root)]
    if missing:
        return usage_error(f"path not found: {', '.join(missing)}")
    problems: list[str] = []
    try:
        if args.findings:
            findings = _read_findings(args.findings)
        else:
            findings, problems = _lint(args, roots)
    except LintFailed as error:
        return usage_error(str(error))
    for line in problems:
        emit(sys.stderr, f"torchperf-lint: not checked: {line}\n")
    try:
        ran = run_instrumented(command, args.steps, roots, args.profile)
    except OSError as error:
        return usage_error(f"cannot run {command[0]}: {error.strerror or error}")
    report = main_report(ran.reports)
    done = report["steps"] if report else 0
    if done == 0 and ran.status != 0:
        last = "\n".join(f"    {line}" for line in ran.stderr_tail[-5:])
        reached = "failed before its first step" if report else "failed before it imported torch"
        return usage_error(f"the command {reached} (exit status {ran.status}):\n{last}")
    if report is None:
        return usage_error("the command ended without importing torch: nothing to confirm")
    confirmed, unreported = confirm_findings(findings, report, os.getcwd())
    steps = len(measured_windows(done))
    ended = {
        "command": command,
        "steps": steps,
        "asked_steps": args.steps,
        "steps_run": done,
        "step_kind": report["step_kind"],
        "ended": "stopped" if report["stopped"] else ("by itself" if ran.status == 0 else "failed"),
        "exit_status": ran.status,
        "cuda": report["cuda"],
        "profile": args.profile,
    }
    text = (
        render_json(ended, confirmed, unreported)
        if args.format == "json"
        else render_text(ended, confirmed, unreported)
    )
    emit(sys.stdout, text)
    if ended["ended"] == "failed":
        last = ran.stderr_tail[-1] if ran.stderr_tail else ""
        emit(
            sys.stderr,
            f"torchperf-lint: the command failed after step {done} (exit status {ran.status}): {last}\n",
        )
        return EXIT_FINDINGS
    return EXIT_CLEAN

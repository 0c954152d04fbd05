"""Runs the user's command with the probe installed before their code: a temporary directory holds
a copy of probe.py and a `sitecustomize` that starts it (and then the `sitecustomize` it shadows),
put first on PYTHONPATH. Nothing is written into the user's files; the directory goes at the end."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import threading
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from . import probe

PROBE_MODULE = "_torchperf_lint_probe"
SITECUSTOMIZE = f"""\
import os as _os
import sys as _sys

import {PROBE_MODULE}

{PROBE_MODULE}.start()
# the sitecustomize this one shadows (a distribution's, a virtualenv's) still runs
_here = _os.path.dirname(_os.path.abspath(__file__))
_sys.path[:] = [p for p in _sys.path if _os.path.abspath(p or ".") != _here]
_self = _sys.modules.pop("sitecustomize")
try:
    import sitecustomize  # noqa: F401
except ImportError:
    pass
# the import system looks this module up once it has run
_sys.modules.setdefault("sitecustomize", _self)
"""
TAIL_LINES = 12


@dataclasses.dataclass
class Run:
    """How the command ended, and what its instrumented processes reported."""

    status: int
    reports: list[dict[str, Any]]
    stderr_tail: list[str]


def _relay(stream: IO[str], target: IO[str], tail: deque[str]) -> None:
    """Pass the program's output through to our stderr (stdout is the report's), keeping its last
    lines for a failure's message."""
    for line in stream:
        tail.append(line.rstrip("\n"))
        try:
            target.write(line)
            target.flush()
        except (OSError, ValueError):
            pass


def run_instrumented(command: Sequence[str], steps: int, roots: Sequence[str], profile: bool) -> Run:
    """Run the command to its end or to its `steps`-th step; OSError when it cannot start."""
    with tempfile.TemporaryDirectory(prefix="torchperf-lint-confirm-") as scratch:
        site = Path(scratch, "site")
        out = Path(scratch, "reports")
        site.mkdir()
        out.mkdir()
        (site / f"{PROBE_MODULE}.py").write_text(
            Path(probe.__file__).read_text(encoding="utf-8"), encoding="utf-8"
        )
        (site / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(site), *filter(None, [env.get("PYTHONPATH")])])
        env[probe.OUT_VARIABLE] = str(out)
        env[probe.STEPS_VARIABLE] = str(steps)
        env[probe.ROOTS_VARIABLE] = json.dumps([os.path.realpath(root) for root in roots])
        env[probe.PROFILE_VARIABLE] = "1" if profile else "0"
        env["PYTHONUNBUFFERED"] = "1"  # the program's output and ours interleave in order
        tail: deque[str] = deque(maxlen=TAIL_LINES)
        process = subprocess.Popen(
            list(command),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
        )
        assert process.stdout is not None
        relay = threading.Thread(target=_relay, args=(process.stdout, sys.stderr, tail), daemon=True)
        relay.start()
        try:
            status = process.wait()
        except KeyboardInterrupt:
            process.terminate()
            status = process.wait()
        relay.join(timeout=5)
        reports = []
        for path in sorted(out.glob("report-*.json")):
            try:
                reports.append(json.loads(path.read_text(encoding="utf-8")))
            except (OSError, ValueError):
                continue  # a process killed while writing: its report is lost, not the run
        return Run(status, reports, list(tail))


def main_report(reports: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The report of the process that trained: rank 0 (or no rank) with the most steps; under
    torchrun the launcher itself never steps."""
    ranked = [r for r in reports if r.get("rank") in (None, "0")] or list(reports)
    if not ranked:
        return None
    return max(ranked, key=lambda r: (r["steps"], -r["pid"]))  # a tie: the earlier process

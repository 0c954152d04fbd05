"""`torchperf-lint confirm` on the benchmark cases' bad variants: does each finding the linter makes on a
bad variant happen at every step when the variant runs, and what did the run see that no finding names?

    python -m benchmarks.confirm_corpus prepare       # here: lint the bad variants (needs libcst)
    python -m benchmarks.confirm_corpus run --out DIR [--device cuda] [--profile] [--jobs 4] [--only ...]

`prepare` writes benchmarks/confirm_findings.json: the linter's JSON findings on every bad variant,
with the hash of each variant's source, so that `run` needs neither libcst nor flake8 (a GPU machine
with torch only) and refuses findings that no longer match their source. `run` writes each bad
variant to DIR/work/cases/NAME.py and runs a driver (DIR/work/drive.py) that builds the case as the
benchmark does (its first size, or its smoke size with --smoke) and calls it over and over; a call is
a step unless the case's own optimizer steps within it (then its steps are). Each run is
`torchperf-lint confirm --findings ... --project cases/NAME.py -- python drive.py NAME`; its JSON
goes to DIR/confirm/NAME.json and the table of every finding, with the benchmark's committed
measurement of the same case beside it, to DIR/confirm_corpus.md and DIR/confirm_corpus.json."""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FINDINGS = Path(__file__).resolve().parent / "confirm_findings.json"
MEASURED = ROOT / "torchperf_lint" / "measured.json"
# the runnable examples: (script, the project confirm lints and watches)
EXAMPLES = (
    ("examples/training.py", "examples/training.py"),
    ("examples/slow_training.py", "examples/slow_training.py"),
    ("examples/transfer_syncs.py", "examples/transfer_syncs.py"),
    ("examples/loops.py", "examples/loops.py"),
    ("examples/project/train.py", "examples/project"),
)

DRIVER = """\
import sys
from pathlib import Path

sys.path.insert(0, {root!r})
import torch

from benchmarks.cases import all_cases
from benchmarks.harness import cpu_stand_ins, isolated_global_state, load_module, seed_everything

name, device, size_kind, calls = sys.argv[1], torch.device(sys.argv[2]), sys.argv[3], int(sys.argv[4])
case = next(case for case in all_cases() if case.name == name)
size = (case.smoke_sizes if size_kind == "smoke" else case.sizes)[0]
path = Path("cases", name + ".py").resolve()
# one step per call, unless the case's own optimizer steps first (confirm counts the first that steps)
marker = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.0)
with isolated_global_state(), cpu_stand_ins(device):
    module = load_module(path.read_text(encoding="utf-8"), str(path), name)
    seed_everything(0)
    call = case.make(module, size, device)
    for _ in range(calls):
        call()
        marker.step()
"""


def _cases() -> list[Any]:
    from .cases import all_cases

    return [case for case in all_cases() if case.gpus == 1]


def _digest(source: str) -> str:
    return hashlib.sha256(source.encode("utf-8")).hexdigest()


def _lint_json(target: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """This checkout's linter on `target` (relative to `cwd`), every rule on, with --library, as JSON."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "torchperf_lint",
            "--format",
            "json",
            "--extend-select",
            "ALL",
            "--library",  # what a run confirms is every claim, code hot only by assumption too
            "--no-cache",
            target,
        ],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def prepare(target: Path) -> int:
    """Lint every bad variant (as one project of unrelated modules, every rule on) and keep the
    findings with the hashes of the sources they were found in."""
    cases = _cases()
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch, "cases")
        folder.mkdir()
        for case in cases:
            (folder / f"{case.name}.py").write_text(case.bad, encoding="utf-8")
        result = _lint_json("cases", Path(scratch))
    examples = {}
    for script, project in EXAMPLES:
        found = _lint_json(project, ROOT)
        examples[script] = {
            "project": project,
            "source": _project_digest(project),
            "findings": _kept(found.stdout),
        }
    data = {
        "sources": {f"cases/{case.name}.py": _digest(case.bad) for case in cases},
        "findings": _kept(result.stdout),
        "examples": examples,
    }
    target.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    print(
        f"{len(data['findings'])} findings on {len(cases)} bad variants and {len(examples)} examples -> {target}"
    )
    return 0


def _kept(output: str) -> list[dict[str, Any]]:
    fields = ("path", "line", "col", "end_line", "end_col", "code", "name", "message")
    return [{k: f[k] for k in fields} for f in json.loads(output)]


def _project_digest(project: str, base: Path = ROOT) -> str:
    """The hash of a file, or of every Python file under a directory (the findings' sources), with
    their paths relative to `base`."""
    path = base / project
    files = [path] if path.is_file() else sorted(path.rglob("*.py"))
    return _digest("".join(f"{file.relative_to(base)}\0{file.read_text(encoding='utf-8')}" for file in files))


def _measured(case: Any, size: dict) -> dict[str, Any] | None:
    """The benchmark's committed measurement of this case at this size (bad, good, speedup)."""
    try:
        rows = json.loads(MEASURED.read_text(encoding="utf-8")).get(case.code, [])
    except (OSError, ValueError):
        return None
    wanted = f"{case.title} [{size['label']}]"
    return next((row for row in rows if row.get("case") == wanted), None)


@dataclasses.dataclass
class Target:
    """One program to confirm: a bad variant under the driver, or an example script."""

    name: str
    cwd: Path
    findings: str  # relative to cwd
    project: str
    program: list[str]
    case: Any = None  # the benchmark case, for its committed measurement
    timeout: int | None = None  # seconds, when shorter than --timeout


def _confirm(target: Target, out: Path, args: argparse.Namespace) -> dict[str, Any]:
    profile = ["--profile"] if args.profile else []
    # a case whose every call is an epoch with fresh workers (TPL501's JPEG sweep): two are enough
    steps = min(args.steps, 2) if target.case is not None and not target.case.warmup else args.steps
    command = [
        *(sys.executable, "-m", "torchperf_lint", "confirm", "--steps", str(steps), "--format", "json"),
        *("--findings", target.findings, "--project", target.project, *profile, "--", *target.program),
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    timeout = target.timeout or args.timeout
    # a session of its own: on a timeout the program under confirm goes too, not only confirm
    with subprocess.Popen(
        command,
        cwd=target.cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    ) as process:
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            stdout, stderr = process.communicate()
            (out / f"{target.name}.log").write_text(stderr, encoding="utf-8")
            return {"error": f"no report within {timeout} s"}
    (out / f"{target.name}.log").write_text(stderr, encoding="utf-8")
    if not stdout.strip():
        last = (stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"exit {process.returncode}: {last}"}
    (out / f"{target.name}.json").write_text(stdout, encoding="utf-8")
    return {"report": json.loads(stdout)}


def _cost(entry: dict[str, Any]) -> float | None:
    return round(entry["seconds_per_step"] * 1e3, 4) if "seconds_per_step" in entry else None


def _rows(target: Target, outcome: dict[str, Any], smoke: bool) -> list[dict[str, Any]]:
    gain = None
    if target.case is not None:
        measured = _measured(target.case, (target.case.smoke_sizes if smoke else target.case.sizes)[0])
        if measured:
            gain = f"{measured['bad']} -> {measured['good']} ({measured['speedup']}x, {measured['device']})"
    base = {"target": target.name, "benchmark": gain}
    if "error" in outcome:
        return [{**base, "finding": "-", "status": outcome["error"]}]
    report = outcome["report"]
    rows = [
        {
            **base,
            "finding": f"{finding['code']} {finding['path']}:{finding['line']}",
            "status": finding["status"],
            "per_step": finding["per_step"],
            "ms_per_step": _cost(finding),
        }
        for finding in report["findings"]
    ]
    for event in report["unreported"]:
        where = f"{event['path']}:{event['line']}"
        rows.append(
            {
                **base,
                "finding": f"unreported {event['kind']} {where} ({', '.join(event['details'])})",
                "status": event["status"],
                "per_step": event["per_step"],
                "ms_per_step": _cost(event),
            }
        )
    if report["steps"] == 0:
        rows.append(
            {**base, "finding": "-", "status": f"no step ({report['ended']}, exit {report['exit_status']})"}
        )
    return rows or [{**base, "finding": "no finding", "status": "-"}]


def _markdown(rows: list[dict[str, Any]], args: argparse.Namespace) -> str:
    sizes = "smoke" if args.smoke else "first"
    lines = [
        f"# confirm on the benchmark cases' bad variants and the examples ({args.device}, {sizes} sizes, "
        f"{args.steps} steps{', --profile' if args.profile else ''})",
        "",
        "| program | finding | status | per step | ms/step | benchmark (bad -> good) |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        ms = row.get("ms_per_step")
        lines.append(
            f"| {row['target']} | {row['finding']} | {row['status']} | {row.get('per_step', '')} | "
            f"{'' if ms is None else ms} | {row.get('benchmark') or ''} |"
        )
    return "\n".join(lines) + "\n"


def _targets(
    data: dict[str, Any], work: Path, args: argparse.Namespace
) -> tuple[list[Target], dict[str, str]]:
    """The programs to run (the bad variants written under work/), and those skipped with why."""
    wanted = {item.strip().upper() for item in (args.only or "").split(",") if item.strip()}
    stale = "its findings are stale: run `python -m benchmarks.confirm_corpus prepare`"
    targets: list[Target] = []
    skipped: dict[str, str] = {}
    size = "smoke" if args.smoke else "size"
    for case in _cases():
        if wanted and case.code not in wanted and case.name.upper() not in wanted:
            continue
        path = f"cases/{case.name}.py"
        if data["sources"].get(path) != _digest(case.bad):
            skipped[case.name] = stale
        elif case.missing_modules():
            skipped[case.name] = f"needs {', '.join(case.missing_modules())}"
        else:
            (work / path).write_text(case.bad, encoding="utf-8")
            own = [finding for finding in data["findings"] if finding["path"] == path]
            (work / "findings" / f"{case.name}.json").write_text(json.dumps(own), encoding="utf-8")
            program = [sys.executable, "drive.py", case.name, args.device, size, str(args.steps + 2)]
            targets.append(Target(case.name, work, f"findings/{case.name}.json", path, program, case))
    for script, entry in data["examples"].items():
        name = "example_" + script.removeprefix("examples/").removesuffix(".py").replace("/", "_")
        if args.no_examples or (wanted and "EXAMPLES" not in wanted and name.upper() not in wanted):
            continue
        if entry["source"] != _project_digest(entry["project"]):
            skipped[name] = stale
            continue
        findings = work / "findings" / f"{name}.json"
        findings.write_text(json.dumps(entry["findings"]), encoding="utf-8")
        targets.append(Target(name, ROOT, str(findings), entry["project"], [sys.executable, script]))
    return targets, skipped


def run(args: argparse.Namespace) -> int:
    data = json.loads(FINDINGS.read_text(encoding="utf-8"))
    out = Path(args.out).resolve()
    work = out / "work"
    reports = out / "confirm"
    for folder in (work / "cases", work / "findings", reports):
        folder.mkdir(parents=True, exist_ok=True)
    (work / "drive.py").write_text(DRIVER.format(root=str(ROOT)), encoding="utf-8")
    targets, skipped = _targets(data, work, args)
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        outcomes = list(pool.map(lambda target: _confirm(target, reports, args), targets))
    rows = []
    for target, outcome in zip(targets, outcomes, strict=True):
        rows.extend(_rows(target, outcome, args.smoke))
    for name, why in skipped.items():
        rows.append({"target": name, "finding": "-", "status": f"skipped: {why}"})
    (out / "confirm_corpus.json").write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    (out / "confirm_corpus.md").write_text(_markdown(rows, args), encoding="utf-8")
    print(_markdown(rows, args))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.confirm_corpus", description=__doc__.split("\n\n")[0]
    )
    commands = parser.add_subparsers(dest="command", required=True)
    ready = commands.add_parser("prepare", help="lint the bad variants into benchmarks/confirm_findings.json")
    ready.add_argument("--findings", default=str(FINDINGS), help=argparse.SUPPRESS)
    running = commands.add_parser("run", help="confirm each bad variant's findings by running it")
    running.add_argument("--out", required=True, help="where the reports and the table go")
    running.add_argument("--device", default="cuda" if _cuda() else "cpu")
    running.add_argument("--smoke", action="store_true", help="the cases' smoke sizes (a CPU run)")
    running.add_argument("--steps", type=int, default=5)
    running.add_argument("--profile", action="store_true", help="host time per line (confirm --profile)")
    running.add_argument("--jobs", type=int, default=1, help="cases run at once (timings share the machine)")
    running.add_argument("--timeout", type=int, default=120, help="seconds per case")
    running.add_argument(
        "--only", help="codes, case names or example_NAME, comma separated (EXAMPLES: every example)"
    )
    running.add_argument("--no-examples", action="store_true", help="the bad variants only")
    args = parser.parse_args(argv)
    if args.command == "prepare":
        return prepare(Path(args.findings))
    return run(args)


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


if __name__ == "__main__":
    sys.exit(main())

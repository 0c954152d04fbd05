"""Lint throughput: torchperf-lint against the bare libcst parse and TorchFix, in one run, on two
corpora.

    python benchmarks/lint_speed.py [--timm DIR] [--corpus DIR ...] [--torchfix PATH] [--repeat N]
                                    [--torchfix-runs N] [--previous CHECKOUT] [--out DIR]

The corpora: torch.nn, torch.optim and torch.utils.data of the installed torch (72k lines with
torch 2.13), and the same plus timm's sources (213k lines): the installed timm's, or `--timm DIR`
(`pip download timm --no-deps`, then unzip the wheel). `--corpus` names one corpus of its own
instead. TorchFix (`torchfix==0.7.0`, which pins libcst<1.6) must live in a virtualenv of its own:
pass its `torchfix` executable with `--torchfix`. Every tool runs on the same files; the headline
is the ratio of lines per second against TorchFix and against the bare parse, and of a fully
cached run against a cold one.

The machine this runs on is often shared: the cold `--jobs 1` run, the cached run and TorchFix
are timed alternately, `--repeat` times (TorchFix `--torchfix-runs` times: it is 10x slower),
and each row reports its median and its range, each ratio its median and the range of the
ratios of the same repetition.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

REPOSITORY = Path(__file__).resolve().parents[1]
# The children time this checkout's linter (not whichever one is installed), with its bytecode
# compiled as an installed tool has it (pip compiles it): a child that may not write bytecode
# would compile every module of the linter again in every timed run.
CHILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
CHILD_ENV["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPOSITORY), os.environ.get("PYTHONPATH")]))


def default_corpus() -> list[Path]:
    import torch  # only to find its sources; the linter itself never imports torch

    root = Path(torch.__file__).parent
    return [root / "nn", root / "optim", root / "utils" / "data"]


def python_files(roots: list[Path]) -> list[Path]:
    files: list[Path] = []
    for root in roots:
        files.extend(sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts))
    return files


def run_command(command: list[str], cwd: Optional[Path] = None) -> tuple[float, int]:
    """Wall time and the child's peak RSS in MB (`/usr/bin/time` when present)."""
    wrapper = ["/usr/bin/time", "-f", "%M"] if Path("/usr/bin/time").exists() else []
    start = time.perf_counter()
    done = subprocess.run(wrapper + command, cwd=cwd, capture_output=True, text=True, env=CHILD_ENV)
    elapsed = time.perf_counter() - start
    peak = 0
    if wrapper:
        tail = done.stderr.strip().splitlines()
        peak = int(tail[-1]) // 1024 if tail and tail[-1].isdigit() else 0
    else:
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return elapsed, peak


def internal(mode: str, listing: Path) -> None:
    """Time parsing (and walking) every listed file in this fresh process; print the seconds."""
    import libcst

    from torchperf_lint.rules import select_rules
    from torchperf_lint.syntax.walker import walk

    interest = frozenset(t for r in select_rules(None, (), ("ALL",)) for t in r.node_types)
    datas = [Path(p).read_bytes() for p in listing.read_text().splitlines()]
    start = time.perf_counter()
    for data in datas:  # one tree alive at a time, as in a linter
        module = libcst.parse_module(data)
        if mode == "walk":
            walk(module, interest)
    print(time.perf_counter() - start)


def timm_sources(given: Optional[Path]) -> Optional[Path]:
    if given is not None:
        return given
    try:
        import timm  # only to find its sources
    except ImportError:
        return None
    return Path(timm.__file__).parent


class Rows:
    """Timed rows of one corpus: each run's seconds, reported as the median and the range."""

    def __init__(self, files: int, lines: int) -> None:
        self.files, self.lines = files, lines
        self.runs: dict[str, list[float]] = {}
        self.peaks: dict[str, int] = {}

    def record(self, name: str, seconds: float, peak_mb: int = 0) -> float:
        self.runs.setdefault(name, []).append(seconds)
        self.peaks[name] = max(self.peaks.get(name, 0), peak_mb)
        print(f"{name:<44} {seconds:8.2f} s {self.lines / seconds:10.0f} lines/s", flush=True)
        return seconds

    def median(self, name: str) -> float:
        return statistics.median(self.runs[name])

    def table(self) -> dict[str, dict[str, object]]:
        rows: dict[str, dict[str, object]] = {}
        for name, runs in self.runs.items():
            seconds = statistics.median(runs)
            rows[name] = {
                "seconds": round(seconds, 3),
                "runs": [round(r, 3) for r in runs],
                "files_per_s": round(self.files / seconds, 1),
                "lines_per_s": round(self.lines / seconds),
                "peak_rss_mb": self.peaks[name],
            }
        return rows


def ratio(values: list[float], digits: int) -> dict[str, object]:
    return {
        "median": round(statistics.median(values), digits),
        "range": [round(min(values), digits), round(max(values), digits)],
    }


def measure(name: str, roots: list[Path], args: argparse.Namespace) -> dict[str, object]:
    print(f"== {name}", flush=True)
    files = python_files(roots)
    datas = [f.read_bytes() for f in files]
    lines = sum(d.count(b"\n") for d in datas)
    work = Path(tempfile.mkdtemp(prefix="lint-speed-"))
    listing = [str(f) for f in files]
    rows = Rows(len(files), lines)

    # The floor and the walk run in fresh processes, as the CLI does: this process imported torch (to
    # find the corpus), and its large heap slows the garbage collector during parsing.
    listing_file = work / "files.txt"
    listing_file.write_text("\n".join(listing))
    for row, mode in (
        ("bare libcst.parse_module (floor)", "parse"),
        ("parse + torchperf-lint walk", "walk"),
    ):
        done = subprocess.run(
            [sys.executable, __file__, "--internal", mode, str(listing_file)],
            capture_output=True,
            text=True,
            env=CHILD_ENV,
        )
        if done.returncode != 0:
            raise SystemExit(done.stderr[-2000:])
        rows.record(row, float(done.stdout.strip().splitlines()[-1]))
    # every rule, not only the default ones: the cost of the whole linter, as on training code
    cli = [
        sys.executable,
        "-m",
        "torchperf_lint",
        "--exit-zero",
        "--lint-all-files",
        "--extend-select",
        "ALL",
    ]
    # The CLI lints the corpus as projects (each root a project, as a user names a directory), from
    # a copy, so that the edit scenarios below can change a file.
    copies = []
    for index, root in enumerate(roots):
        copy = work / f"corpus{index}" / root.name
        shutil.copytree(root, copy, ignore=shutil.ignore_patterns("__pycache__"))
        # a root marker, so that a file named alone below is still checked inside its project
        (copy / "pyproject.toml").write_text("")
        copies.append(str(copy))
    cache = work / "cache"
    cold_row, warm_row, torchfix_row = (
        "torchperf-lint cold --jobs 1",
        "torchperf-lint warm (cache hit)",
        "TorchFix 0.7.0 -j 1",
    )
    # both linters' bytecode compiled before any timed run, as pip leaves an installed tool: a fresh
    # checkout would otherwise pay its compile in the first run timed (the previous release's one)
    for checkout in filter(None, (REPOSITORY, args.previous)):
        subprocess.run(
            [sys.executable, "-m", "compileall", "-q", str(checkout / "torchperf_lint")],
            check=True,
            env=CHILD_ENV,
        )
    run_command(cli + ["--cache-dir", str(cache), "--jobs", "1", *copies])  # fills the cache
    cold_runs, warm_runs, torchfix_runs = [], [], []
    for repetition in range(args.repeat):  # alternately: the machine's load falls on each alike
        cold_runs.append(rows.record(cold_row, *run_command(cli + ["--no-cache", "--jobs", "1", *copies])))
        if args.torchfix and repetition < args.torchfix_runs:
            torchfix_runs.append(
                rows.record(torchfix_row, *run_command([args.torchfix, "-j", "1", *listing]))
            )
        warm_runs.append(
            rows.record(warm_row, *run_command(cli + ["--cache-dir", str(cache), "--jobs", "1", *copies]))
        )
    if args.previous:
        previous = [
            *cli[:1],
            "-c",
            f"import sys; sys.path.insert(0, {str(args.previous)!r}); "
            "from torchperf_lint.cli import main; sys.exit(main())",
            *cli[3:],
        ]
        rows.record(
            "previous release cold --jobs 1", *run_command(previous + ["--no-cache", "--jobs", "1", *copies])
        )
    rows.record("torchperf-lint cold (default jobs)", *run_command(cli + ["--no-cache", *copies]))
    rows.record(
        "torchperf-lint warm (default jobs)", *run_command(cli + ["--cache-dir", str(cache), *copies])
    )
    # An edit in one module, then the whole project again (a warm CI re-run), then that module
    # alone (the editor and pre-commit case), against the same module linted with no project.
    edited = sorted(Path(copies[0]).rglob("*.py"), key=lambda p: -p.stat().st_size)[0]
    edited.write_text(edited.read_text() + "\n# edited\n")
    rows.record(
        "warm re-run after editing one file",
        *run_command(cli + ["--cache-dir", str(cache), "--jobs", "1", *copies]),
    )
    edited.write_text(edited.read_text() + "# edited again\n")
    rows.record(
        "one file inside the warm project", *run_command(cli + ["--cache-dir", str(cache), str(edited)])
    )
    alone = work / "alone"
    alone.mkdir()
    shutil.copy(edited, alone / edited.name)
    rows.record(
        "the same file alone (no project)", *run_command(cli + ["--no-cache", str(alone / edited.name)])
    )
    from torchperf_lint.catalog import RULES

    every_code = ",".join(code for code, _, _ in RULES)  # flake8 enables codes it names exactly
    flake8 = [sys.executable, "-m", "flake8", "--select", every_code, "--exit-zero", "-j", "1"]
    rows.record("flake8 -j 1 (every TPL rule)", *run_command(flake8 + listing))
    shutil.rmtree(work, ignore_errors=True)

    floor = rows.median("bare libcst.parse_module (floor)")
    cold = rows.median(cold_row)
    ratios: dict[str, object] = {
        "cold_jobs1_over_parse": round(cold / floor, 2),
        # a repetition's cached run over the cold run just before it
        "warm_over_cold": ratio([w / c for w, c in zip(warm_runs, cold_runs, strict=True)], 3),
        "warm_default_jobs_over_cold_default_jobs": round(
            rows.median("torchperf-lint warm (default jobs)")
            / rows.median("torchperf-lint cold (default jobs)"),
            3,
        ),
        "warm_after_edit_over_cold": round(rows.median("warm re-run after editing one file") / cold, 3),
        "one_file_in_project_over_alone": round(
            rows.median("one file inside the warm project") / rows.median("the same file alone (no project)"),
            2,
        ),
    }
    if args.previous:
        ratios["cold_over_previous_release"] = round(cold / rows.median("previous release cold --jobs 1"), 2)
    if torchfix_runs:
        # each TorchFix run over the cold run of its repetition
        ratios["throughput_vs_torchfix"] = ratio(
            [t / c for t, c in zip(torchfix_runs, cold_runs[: len(torchfix_runs)], strict=True)], 2
        )
    return {
        "corpus": [str(r) for r in roots],
        "files": len(files),
        "lines": lines,
        "rows": rows.table(),
        "ratios": ratios,
    }


def markdown(name: str, result: dict[str, object]) -> list[str]:
    rows = result["rows"]
    assert isinstance(rows, dict)
    table = [
        f"### {name}: {result['files']} files, {result['lines']} lines",
        "",
        "| tool | seconds (median) | runs | files/s | lines/s | peak RSS MB |",
        "|---|---|---|---|---|---|",
    ]
    for key, row in rows.items():
        runs = row["runs"]
        spread = f"{min(runs)}-{max(runs)} ({len(runs)})" if len(runs) > 1 else ""
        table.append(
            f"| {key} | {row['seconds']} | {spread} | {row['files_per_s']} | {row['lines_per_s']} | {row['peak_rss_mb'] or ''} |"
        )
    ratios = result["ratios"]
    assert isinstance(ratios, dict)
    parts = []
    for key, value in ratios.items():
        if isinstance(value, dict):
            low, high = value["range"]
            parts.append(f"{key} = {value['median']} ({low}-{high})")
        else:
            parts.append(f"{key} = {value}")
    return [*table, "", "ratios: " + ", ".join(parts), ""]


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--corpus", type=Path, action="append", help="one corpus of these trees instead (repeatable)"
    )
    parser.add_argument("--timm", type=Path, help="timm's sources (default: the installed timm's)")
    parser.add_argument("--torchfix", help="the torchfix executable of its own virtualenv")
    parser.add_argument("--repeat", type=int, default=3, help="alternating runs of cold, cached and TorchFix")
    parser.add_argument("--torchfix-runs", type=int, default=1, help="how many of those time TorchFix too")
    parser.add_argument(
        "--previous", type=Path, help="a checkout of the previous release, to time in the same run"
    )
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--suffix", default="", help="added to the result files' names")
    args = parser.parse_args(argv)
    # this checkout's rule catalogue (flake8's row selects every code), installed or not
    sys.path.insert(0, str(REPOSITORY))
    if args.corpus:
        corpora = {"given corpus": list(args.corpus)}
    else:
        torch_roots = default_corpus()
        timm = timm_sources(args.timm)
        if timm is None:
            raise SystemExit("timm's sources are needed for the second corpus: --timm DIR, or install timm")
        corpora = {"torch (nn, optim, utils.data)": torch_roots, "torch + timm": [*torch_roots, timm]}
    results = {name: measure(name, roots, args) for name, roots in corpora.items()}
    stamp = datetime.date.today().isoformat()
    result = {
        "date": stamp,
        "machine": f"{platform.machine()} {os.cpu_count()} cores",
        "python": platform.python_version(),
        "libcst": libcst_version(),
        "repeat": args.repeat,
        "torchfix_runs": args.torchfix_runs if args.torchfix else 0,
        "corpora": results,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    name = f"lint-speed-{stamp}{args.suffix}"
    (args.out / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
    text = [line for corpus, measured in results.items() for line in markdown(corpus, measured)]
    (args.out / f"{name}.md").write_text("\n".join(text))
    print("\n".join(text))
    return 0


def libcst_version() -> str:
    from importlib.metadata import version

    return version("libcst")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--internal":
        internal(sys.argv[2], Path(sys.argv[3]))
        sys.exit(0)
    sys.exit(main())

"""Lint throughput: torchperf-lint against the bare libcst parse and TorchFix, in one run.

    python benchmarks/lint_speed.py [--corpus DIR ...] [--torchfix PATH] [--previous CHECKOUT] [--out DIR]

The default corpus is torch.nn, torch.optim and torch.utils.data of the installed torch, plus
timm's sources when `--corpus` names them (`pip download timm --no-deps`, then unzip). TorchFix
(`torchfix==0.7.0`, which pins libcst<1.6) must live in a virtualenv of its own: pass its
`torchfix` executable with `--torchfix`. Every tool runs on the same files; the headline is the
ratio of lines per second against TorchFix and against the bare parse.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional


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
    done = subprocess.run(wrapper + command, cwd=cwd, capture_output=True, text=True)
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


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--corpus", type=Path, action="append", help="a source tree (repeatable)")
    parser.add_argument("--with-default-corpus", action="store_true", help="add torch's sources to --corpus")
    parser.add_argument("--torchfix", help="the torchfix executable of its own virtualenv")
    parser.add_argument("--previous", type=Path, help="a checkout of the previous release, to time in the same run")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = parser.parse_args(argv)
    roots = list(args.corpus or [])
    if not roots or args.with_default_corpus:
        roots = default_corpus() + roots
    files = python_files(roots)
    datas = [f.read_bytes() for f in files]
    lines = sum(d.count(b"\n") for d in datas)
    work = Path(tempfile.mkdtemp(prefix="lint-speed-"))
    listing = [str(f) for f in files]

    rows: dict[str, dict[str, float]] = {}

    def record(name: str, seconds: float, peak_mb: int = 0) -> None:
        rows[name] = {
            "seconds": round(seconds, 3),
            "files_per_s": round(len(files) / seconds, 1),
            "lines_per_s": round(lines / seconds),
            "peak_rss_mb": peak_mb,
        }
        print(f"{name:<44} {seconds:8.2f} s {lines / seconds:10.0f} lines/s", flush=True)

    # The floor and the walk run in fresh processes, as the CLI does: this process imported torch (to
    # find the corpus), and its large heap slows the garbage collector during parsing.
    listing_file = work / "files.txt"
    listing_file.write_text("\n".join(listing))
    for name, mode in (
        ("bare libcst.parse_module (floor)", "parse"),
        ("parse + torchperf-lint walk", "walk"),
    ):
        done = subprocess.run(
            [sys.executable, __file__, "--internal", mode, str(listing_file)], capture_output=True, text=True
        )
        if done.returncode != 0:
            raise SystemExit(done.stderr[-2000:])
        record(name, float(done.stdout.strip().splitlines()[-1]))
    # every rule, not only the default ones: the cost of the whole linter, as on training code
    cli = [sys.executable, "-m", "torchperf_lint", "--exit-zero", "--lint-all-files", "--extend-select", "ALL"]
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
    record("torchperf-lint cold --jobs 1", *run_command(cli + ["--no-cache", "--jobs", "1", *copies]))
    if args.previous:
        previous = [*cli[:1], "-c", f"import sys; sys.path.insert(0, {str(args.previous)!r}); "
                    "from torchperf_lint.cli import main; sys.exit(main())", *cli[3:]]
        record("previous release cold --jobs 1", *run_command(previous + ["--no-cache", "--jobs", "1", *copies]))
    record("torchperf-lint cold (default jobs)", *run_command(cli + ["--no-cache", *copies]))
    run_command(cli + ["--cache-dir", str(cache), "--jobs", "1", *copies])
    record("torchperf-lint warm (cache hit)", *run_command(cli + ["--cache-dir", str(cache), "--jobs", "1", *copies]))
    # An edit in one module, then the whole project again (a warm CI re-run), then that module
    # alone (the editor and pre-commit case), against the same module linted with no project.
    edited = sorted(Path(copies[0]).rglob("*.py"), key=lambda p: -p.stat().st_size)[0]
    edited.write_text(edited.read_text() + "\n# edited\n")
    record(
        "warm re-run after editing one file",
        *run_command(cli + ["--cache-dir", str(cache), "--jobs", "1", *copies]),
    )
    edited.write_text(edited.read_text() + "# edited again\n")
    record("one file inside the warm project", *run_command(cli + ["--cache-dir", str(cache), str(edited)]))
    alone = work / "alone"
    alone.mkdir()
    shutil.copy(edited, alone / edited.name)
    record("the same file alone (no project)", *run_command(cli + ["--no-cache", str(alone / edited.name)]))
    from torchperf_lint.catalog import RULES

    every_code = ",".join(code for code, _, _ in RULES)  # flake8 enables codes it names exactly
    flake8 = [sys.executable, "-m", "flake8", "--select", every_code, "--exit-zero", "-j", "1"]
    record("flake8 -j 1 (every TPL rule)", *run_command(flake8 + listing))
    if args.torchfix:
        record("TorchFix 0.7.0 -j 1", *run_command([args.torchfix, "-j", "1", *listing]))
    shutil.rmtree(work, ignore_errors=True)

    floor = rows["bare libcst.parse_module (floor)"]["seconds"]
    cold = rows["torchperf-lint cold --jobs 1"]["seconds"]
    ratios = {
        "cold_jobs1_over_parse": round(cold / floor, 2),
        "warm_over_cold": round(rows["torchperf-lint warm (cache hit)"]["seconds"] / cold, 3),
        "warm_after_edit_over_cold": round(rows["warm re-run after editing one file"]["seconds"] / cold, 3),
        "one_file_in_project_over_alone": round(
            rows["one file inside the warm project"]["seconds"] / rows["the same file alone (no project)"]["seconds"], 2
        ),
    }
    if "previous release cold --jobs 1" in rows:
        ratios["cold_over_previous_release"] = round(cold / rows["previous release cold --jobs 1"]["seconds"], 2)
    if "TorchFix 0.7.0 -j 1" in rows:
        ratios["throughput_vs_torchfix"] = round(rows["TorchFix 0.7.0 -j 1"]["seconds"] / cold, 2)
    stamp = datetime.date.today().isoformat()
    result = {
        "date": stamp,
        "machine": f"{platform.machine()} {os.cpu_count()} cores",
        "python": platform.python_version(),
        "libcst": libcst_version(),
        "corpus": [str(r) for r in roots],
        "files": len(files),
        "lines": lines,
        "rows": rows,
        "ratios": ratios,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"lint-speed-{stamp}.json").write_text(json.dumps(result, indent=2) + "\n")
    table = ["| tool | seconds | files/s | lines/s | peak RSS MB |", "|---|---|---|---|---|"]
    table += [
        f"| {k} | {v['seconds']} | {v['files_per_s']} | {v['lines_per_s']} | {v['peak_rss_mb'] or ''} |"
        for k, v in rows.items()
    ]
    table += [
        "",
        f"{len(files)} files, {lines} lines; ratios: " + ", ".join(f"{k} = {v}" for k, v in ratios.items()),
    ]
    (args.out / f"lint-speed-{stamp}.md").write_text("\n".join(table) + "\n")
    print("\n".join(table))
    return 0


def libcst_version() -> str:
    from importlib.metadata import version

    return version("libcst")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--internal":
        internal(sys.argv[2], Path(sys.argv[3]))
        sys.exit(0)
    sys.exit(main())

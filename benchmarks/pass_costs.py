"""What each pass of a cold lint costs, against the bare libcst parse (the floor lint_speed.py
reports ratios to): the stock validating parse, the linter's own parse (no per-node validation),
`ast.parse`, the project pass's summaries (`ast.parse` and the summary walk), and a whole cold
`--jobs 1` run of the CLI with every rule on. Each row is the best of --repeat runs on the same
files, the parses and summaries in this process: a floor lower than lint_speed.py's (one run in a
fresh process), so ratios here run higher than its; compare the rows with each other.

    python -m benchmarks.pass_costs PATH [PATH ...] [--repeat 3] [--out results.json]
"""

from __future__ import annotations

import argparse
import ast
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Optional

import libcst

from torchperf_lint.project.summary import summarize
from torchperf_lint.syntax.parsing import parse_module


def _sources(roots: list[Path]) -> list[str]:
    files = sorted(p for root in roots for p in root.rglob("*.py"))
    return [p.read_text(encoding="utf-8") for p in files]


def _best(step: Callable[[str], object], sources: list[str], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        for source in sources:
            step(source)
        times.append(time.perf_counter() - start)
    return min(times)


def _cold_cli(roots: list[Path], repeat: int) -> float:
    """As lint_speed.py runs it: each root copied, with a root marker of its own, so that the
    project pass reads that corpus and no folder around it."""
    with tempfile.TemporaryDirectory() as work:
        copies = []
        for index, root in enumerate(roots):
            copy = Path(work) / f"corpus{index}" / root.name
            shutil.copytree(root, copy, ignore=shutil.ignore_patterns("__pycache__"))
            (copy / "pyproject.toml").write_text("")
            copies.append(str(copy))
        command = [sys.executable, "-m", "torchperf_lint", "--no-cache", "--jobs", "1", "--exit-zero"]
        command += ["--lint-all-files", "--extend-select", "ALL", *copies]
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
            times.append(time.perf_counter() - start)
    return min(times)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description="What each pass of a cold lint costs, against the bare libcst parse.")
    parser.add_argument("paths", nargs="+", type=Path, help="folders of Python sources (each one project)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, help="also write the rows as JSON here")
    args = parser.parse_args(argv)
    sources = _sources(args.paths)
    rows = {
        "libcst.parse_module (stock, the floor)": _best(libcst.parse_module, sources, args.repeat),
        "the linter's parse (no validation)": _best(parse_module, sources, args.repeat),
        "ast.parse": _best(ast.parse, sources, args.repeat),
        "project pass summaries (ast.parse + walk)": _best(summarize, sources, args.repeat),
        "cold --jobs 1, every rule (CLI)": _cold_cli(args.paths, args.repeat),
    }
    floor = rows["libcst.parse_module (stock, the floor)"]
    lines = sum(source.count("\n") for source in sources)
    print(f"{len(sources)} files, {lines} lines, best of {args.repeat}")
    print("| step | seconds | x the floor |\n|---|---|---|")
    for name, seconds in rows.items():
        print(f"| {name} | {seconds:.3f} | {seconds / floor:.2f} |")
    if args.out:
        data = {"files": len(sources), "lines": lines, "repeat": args.repeat, "seconds": rows}
        args.out.write_text(json.dumps(data, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""`python -m benchmarks [--smoke] [--out DIR] [--only CODE_OR_CASE,...] [--budget S] [--stop-after S] [--list]`:
check and time every case of the CUDA benchmark suite (see benchmarks/README.md)."""

from __future__ import annotations

import argparse
import datetime
import math
import platform
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

from . import report
from .cases import all_cases
from .harness import Budget, Case, run_size

RESULTS = Path(__file__).resolve().parent / "results"
SMOKE_RESULTS = Path(tempfile.gettempdir()) / "torchperf-lint-smoke"  # smoke runs are never committed


def chosen(cases: list[Case], only: str | None) -> list[Case]:
    if not only:
        return cases
    wanted = {item.strip().upper() for item in only.split(",") if item.strip()}
    picked = [case for case in cases if case.code in wanted or case.name.upper() in wanted]
    unknown = wanted - {case.code for case in picked} - {case.name.upper() for case in picked}
    if unknown:
        raise SystemExit(f"--only: no case for {', '.join(sorted(unknown))}")
    return picked


def run_suite(
    cases: list[Case],
    smoke: bool,
    budget_s: float,
    stop_after_s: float = math.inf,
    log: Callable[[str], None] = print,
    on_row: Callable[[dict], None] = lambda results: None,
) -> dict:
    """Check and time every case; the results document (see report.py for its files). Measurements that
    would start after `stop_after_s` are recorded as skipped; `on_row` sees the document after each row."""
    if smoke:
        device = torch.device("cpu")
        name = "smoke-cpu"
    else:
        if not torch.cuda.is_available():
            raise SystemExit("no CUDA device: run with --smoke for the CPU check")
        device = torch.device("cuda")
        name = torch.cuda.get_device_name(device)
    started = time.perf_counter()
    work = [(case, size) for case in cases for size in (case.smoke_sizes if smoke else case.sizes)]
    budget = Budget(budget_s, sum(case.rounds * (2 + len(case.alternatives)) for case, _ in work))
    results = {
        "device": name,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "date": datetime.date.today().isoformat(),
        "smoke": smoke,
        "budget_s": budget_s,
        "complete": False,
        "wall_s": 0.0,
        "results": [],
    }
    threads = torch.get_num_threads()
    if smoke:
        torch.set_num_threads(1)  # tiny tensors: thread wake-ups would cost more than the work
    try:
        for case, size in work:
            if time.perf_counter() - started > stop_after_s:
                row = {"case": case.name, "code": case.code, "title": case.title, "size": size["label"]}
                row.update(
                    status="skipped", detail=f"not started: the run passed --stop-after {stop_after_s:g} s"
                )
            else:
                row = run_size(case, size, device, smoke, budget)
            results["results"].append(row)
            results["wall_s"] = round(time.perf_counter() - started, 1)
            log(report.summary_line(row))
            on_row(results)
    finally:
        torch.set_num_threads(threads)
    results["complete"] = True
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument(
        "--smoke", action="store_true", help="tiny sizes on the CPU: checks harness and equivalence"
    )
    parser.add_argument(
        "--out",
        type=Path,
        help=f"where the JSON, markdown and PNG go (default {RESULTS}; for --smoke, {SMOKE_RESULTS})",
    )
    parser.add_argument("--only", help="comma-separated rule codes or case names")
    parser.add_argument(
        "--budget",
        type=float,
        default=300.0,
        help="seconds of timed sampling for the whole run (default 300)",
    )
    parser.add_argument(
        "--stop-after",
        type=float,
        default=480.0,
        help="start no measurement after this many seconds (default 480: the run ends before 10 minutes)",
    )
    parser.add_argument("--list", action="store_true", help="list the cases and their sizes, run nothing")
    args = parser.parse_args(argv)
    out = args.out or (SMOKE_RESULTS if args.smoke else RESULTS)
    if args.list:
        for case in chosen(all_cases(), args.only):
            sizes = "; ".join(size["label"] for size in case.sizes)
            needs = f" (needs {case.gpus} GPUs)" if case.gpus > 1 else ""
            print(f"{case.code:8} {case.name:28} good: {case.origin:31} sizes: {sizes}{needs}")
        return 0
    results = run_suite(
        chosen(all_cases(), args.only),
        args.smoke,
        args.budget,
        args.stop_after,
        on_row=lambda partial: report.write_all(partial, out, chart=False),  # survives a killed run
    )
    for path in report.write_all(results, out):
        print(f"wrote {path}")
    bad = [row for row in results["results"] if row["status"] in ("mismatch", "error")]
    skipped = [row for row in results["results"] if row["status"] == "skipped"]
    print(
        f"{len(results['results'])} measurements in {results['wall_s']} s; "
        f"{len(bad)} failed, {len(skipped)} skipped"
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

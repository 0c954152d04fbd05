"""Check many files in a process pool; outcomes come back in the order the paths were given."""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Optional

from .checking import Checker, FileOutcome, Job, check_in_worker, init_worker


def default_jobs() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        return os.cpu_count() or 1


def check_paths(
    jobs: Sequence[Job], paths: Sequence[str], processes: int, job_of: Optional[Sequence[int]] = None
) -> list[FileOutcome]:
    """Each path's outcome, in order; path i is checked under `jobs[job_of[i]]` (its nearest
    config's), under `jobs[0]` without `job_of`. One process when there is one process or one
    file: a pool costs more to start than a small run takes."""
    which = list(job_of) if job_of is not None else [0] * len(paths)
    checkers = [Checker(job) for job in jobs]
    # The project pass runs here, once: workers get each file's facts with its path.
    facts = [checkers[index].facts(path) for path, index in zip(paths, which, strict=True)]
    if processes <= 1 or len(paths) < 2:
        return [
            checkers[index].path(path, entry) for path, index, entry in zip(paths, which, facts, strict=True)
        ]
    # fork starts workers in milliseconds with the rules already imported; elsewhere, the default
    context = multiprocessing.get_context("fork") if sys.platform == "linux" else None
    workers = min(processes, len(paths))
    chunk = max(1, len(paths) // (workers * 8))
    with ProcessPoolExecutor(
        workers, mp_context=context, initializer=init_worker, initargs=(tuple(jobs),)
    ) as pool:
        return list(pool.map(check_in_worker, paths, which, facts, chunksize=chunk))

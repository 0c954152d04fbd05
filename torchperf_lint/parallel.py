"""Check many files in a process pool; outcomes come back in the order the paths were given."""

from __future__ import annotations

import gc
import multiprocessing
import os
import sys
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor

from .checking import Checker, FileOutcome, Job, check_in_worker, init_worker


def default_jobs() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        return os.cpu_count() or 1


def check_paths(job: Job, paths: Sequence[str], jobs: int) -> list[FileOutcome]:
    """Each path's outcome, in order. One process when there is one job or one file: a pool
    costs more to start than a small run takes."""
    checker = Checker(job)
    # The project pass runs here, once: workers get each file's facts with its path.
    facts = [checker.facts(path) for path in paths]
    # What lives from here to the end of the run (the project's summaries, the rules) leaves the
    # garbage collector's view: every full collection while files are linted would walk it again.
    gc.freeze()
    if jobs <= 1 or len(paths) < 2:
        return [checker.path(path, entry) for path, entry in zip(paths, facts, strict=True)]
    # fork starts workers in milliseconds with the rules already imported; elsewhere, the default
    context = multiprocessing.get_context("fork") if sys.platform == "linux" else None
    workers = min(jobs, len(paths))
    chunk = max(1, len(paths) // (workers * 8))
    with ProcessPoolExecutor(workers, mp_context=context, initializer=init_worker, initargs=(job,)) as pool:
        return list(pool.map(check_in_worker, paths, facts, chunksize=chunk))

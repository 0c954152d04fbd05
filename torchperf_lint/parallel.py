"""Check many files in a process pool; outcomes come back in the order the paths were given."""

from __future__ import annotations

import contextlib
import gc
import os
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Optional

from .analysis.entry import EntryFacts
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
    with collected_between_files():
        # The project pass runs here, once: workers get each file's facts with its path.
        facts = [checkers[index].facts(path) for path, index in zip(paths, which, strict=True)]
        for checker in checkers:
            checker.projects.save()
        # What lives from here to the end of the run (the project's summaries, the rules) leaves
        # the collector's view, once collected: every full collection would walk it again. The
        # youngest generation holds all the project pass made (the collector was off), so its
        # cycles are all there; the older ones (the imports) need no second walk.
        gc.collect(0)
        gc.freeze()
        if processes <= 1 or len(paths) < 2:
            return [
                _check(checkers[index], path, entry)
                for path, index, entry in zip(paths, which, facts, strict=True)
            ]
        # What the cache holds is read here: the pool (started, and its workers' imports) is for
        # the files that must be parsed, and a run whose files are all cached starts none.
        outcomes = [
            checkers[index].cached(path, entry)
            for path, index, entry in zip(paths, which, facts, strict=True)
        ]
        missed = [number for number, outcome in enumerate(outcomes) if outcome is None]
        if len(missed) < 2:
            for number in missed:
                outcomes[number] = _check(checkers[which[number]], paths[number], facts[number])
        else:
            checked = _in_pool(
                jobs,
                [paths[n] for n in missed],
                [which[n] for n in missed],
                [facts[n] for n in missed],
                processes,
            )
            for number, outcome in zip(missed, checked, strict=True):
                outcomes[number] = outcome
        return [outcome for outcome in outcomes if outcome is not None]


def _in_pool(
    jobs: Sequence[Job], paths: list[str], which: list[int], facts: list[EntryFacts], processes: int
) -> list[FileOutcome]:
    import multiprocessing  # only here: a run that needs no pool does not import it
    from concurrent.futures import ProcessPoolExecutor

    # fork starts workers in milliseconds with the rules already imported; elsewhere, the default
    context = multiprocessing.get_context("fork") if sys.platform == "linux" else None
    workers = min(processes, len(paths))
    chunk = max(1, len(paths) // (workers * 8))
    with ProcessPoolExecutor(
        workers, mp_context=context, initializer=init_worker, initargs=(tuple(jobs),)
    ) as pool:
        return list(pool.map(_check_in_worker, paths, which, facts, chunksize=chunk))


@contextlib.contextmanager
def collected_between_files() -> Iterator[None]:
    """The garbage collector runs once after each file (and once after the project pass) instead
    of every 700 allocations.

    A file's tree and analysis hold no reference cycles (tests/test_engine_speed.py), and neither
    do the project pass's syntax trees, so they are freed as soon as they are done with; the
    collector's passes meanwhile would only walk growing trees and summaries again and again.
    What a file leaves in cycles is collected after it, while it is still young. Forked workers
    inherit this."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _check(checker: Checker, path: str, facts: EntryFacts) -> FileOutcome:
    start = time.perf_counter()
    try:
        outcome = checker.path(path, facts)
    finally:
        gc.collect(1)
    outcome.seconds = time.perf_counter() - start
    return outcome


def _check_in_worker(path: str, which: int, facts: EntryFacts) -> FileOutcome:
    start = time.perf_counter()
    try:
        outcome = check_in_worker(path, which, facts)
    finally:
        gc.collect(1)
    outcome.seconds = time.perf_counter() - start
    return outcome

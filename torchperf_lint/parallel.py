"""Lint many files in a process pool; results come back in the order the files were given.

Workers receive paths and return findings without their tree nodes (nodes do not cross
processes); fixing re-lints in the worker that writes the file, so no fix crosses either.
"""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
from typing import Callable, Iterable, Optional, Sequence, TypeVar

from .config import Settings

Task = TypeVar("Task")
Result = TypeVar("Result")

_state: dict[str, object] = {}


def default_jobs() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        return os.cpu_count() or 1


def _init(settings: Settings, codes: Sequence[str]) -> None:
    _state["settings"] = settings
    _state["codes"] = tuple(codes)


def worker_settings() -> tuple[Settings, tuple[str, ...]]:
    settings = _state["settings"]
    codes = _state["codes"]
    assert isinstance(settings, Settings) and isinstance(codes, tuple)
    return settings, codes


def map_ordered(
    function: Callable[[Task], Result],
    tasks: Sequence[Task],
    jobs: int,
    settings: Settings,
    codes: Sequence[str],
) -> Iterable[Result]:
    """`function` over `tasks`, in a pool of `jobs` processes when that can pay off."""
    if jobs <= 1 or len(tasks) < 2:
        _init(settings, codes)
        return [function(task) for task in tasks]
    chunk = max(1, len(tasks) // (jobs * 8))
    pool: Optional[ProcessPoolExecutor] = ProcessPoolExecutor(
        max_workers=min(jobs, len(tasks)), initializer=_init, initargs=(settings, tuple(codes))
    )
    assert pool is not None
    with pool:
        return list(pool.map(function, tasks, chunksize=chunk))

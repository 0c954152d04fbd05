"""Which files a run lints: explicit files always, directories recursively (`*.py`), minus
excluded names and paths."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator, Sequence

from .engine.paths import matches_path

SOURCE_SUFFIXES = (".py",)


def is_excluded(path: str, patterns: Sequence[str]) -> bool:
    name = os.path.basename(path.rstrip("/\\"))
    for pattern in patterns:
        bare = pattern.rstrip("/")
        if name == bare or matches_path(path, bare):
            return True
    return False


def discover(paths: Sequence[str], exclude: Sequence[str], errors: list[tuple[str, str]]) -> Iterator[str]:
    """Yield the files to lint, sorted within each directory. Unreadable directories are
    recorded in `errors` as (path, message) and skipped."""
    for given in paths:
        if os.path.isfile(given) or not os.path.isdir(given):
            yield given
            continue
        yield from _walk(given, exclude, errors)


def _walk(root: str, exclude: Sequence[str], errors: list[tuple[str, str]]) -> Iterator[str]:
    def on_error(error: OSError) -> None:
        errors.append((error.filename or root, f"could not read directory: {error.strerror or error}"))

    for directory, subdirs, files in os.walk(root, onerror=on_error, followlinks=False):
        subdirs[:] = sorted(d for d in subdirs if not is_excluded(os.path.join(directory, d), exclude))
        for name in sorted(files):
            path = os.path.join(directory, name)
            if name.endswith(SOURCE_SUFFIXES) and not is_excluded(path, exclude):
                yield str(Path(path))

"""Which files a run lints: explicit files always, directories recursively (`*.py`), minus
excluded names and paths and any virtualenv or conda environment inside them."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from .engine.paths import matches_path

SOURCE_SUFFIXES = (".py", ".ipynb")
ENVIRONMENT_MARKERS = ("pyvenv.cfg", "conda-meta")


def is_excluded(path: str, patterns: Sequence[str]) -> bool:
    name = os.path.basename(path.rstrip("/\\"))
    for pattern in patterns:
        bare = pattern.rstrip("/")
        if name == bare or matches_path(path, bare):
            return True
    return False


def is_environment(directory: str) -> bool:
    """A virtualenv (`pyvenv.cfg`) or conda environment (`conda-meta/`), whatever its name."""
    return any(os.path.exists(os.path.join(directory, marker)) for marker in ENVIRONMENT_MARKERS)


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
        subdirs[:] = sorted(
            d
            for d in subdirs
            if not is_excluded(os.path.join(directory, d), exclude)
            and not is_environment(os.path.join(directory, d))
        )
        for name in sorted(files):
            path = os.path.join(directory, name)
            if name.endswith(SOURCE_SUFFIXES) and not is_excluded(path, exclude):
                yield str(Path(path))

"""Which files a run lints: explicit files always, directories recursively (`*.py`, `*.ipynb`),
minus excluded names and paths, what git ignores, and any virtualenv or conda environment inside
them."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Optional

from . import gitignore
from .gitignore import GitIgnore
from .paths import matches_path

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


def discover(
    paths: Sequence[str],
    exclude: Sequence[str],
    errors: list[tuple[str, str]],
    respect_gitignore: bool = True,
    exclude_of: Optional[Callable[[str], Sequence[str]]] = None,
) -> Iterator[str]:
    """Yield the files to lint, sorted within each directory. Unreadable directories are
    recorded in `errors` as (path, message) and skipped. A path named explicitly is linted even
    when it is excluded or ignored by git; what a walk finds is not. `exclude_of(directory)`, when
    given, is what each directory's entries are matched against instead of `exclude` (the
    excludes of the directory's nearest config)."""
    for given in paths:
        if os.path.isfile(given) or not os.path.isdir(given):
            yield given
            continue
        yield from _walk(
            given,
            exclude_of or (lambda directory: exclude),
            errors,
            gitignore.for_directory(given) if respect_gitignore else None,
        )


def _walk(
    root: str,
    exclude_of: Callable[[str], Sequence[str]],
    errors: list[tuple[str, str]],
    ignore: Optional[GitIgnore],
) -> Iterator[str]:
    def on_error(error: OSError) -> None:
        errors.append((error.filename or root, f"could not read directory: {error.strerror or error}"))

    rules = {root: ignore}  # each directory's gitignore rules, set when its parent is walked
    for directory, subdirs, files in os.walk(root, onerror=on_error, followlinks=False):
        current = rules.pop(directory, None)
        exclude = exclude_of(directory)
        subdirs[:] = sorted(
            d
            for d in subdirs
            if not is_excluded(os.path.join(directory, d), exclude)
            and not is_environment(os.path.join(directory, d))
            and not (current is not None and current.ignored(os.path.join(directory, d), is_directory=True))
        )
        for d in subdirs:
            rules[os.path.join(directory, d)] = current.child(os.path.join(directory, d)) if current else None
        for name in sorted(files):
            path = os.path.join(directory, name)
            if (
                name.endswith(SOURCE_SUFFIXES)
                and not is_excluded(path, exclude)
                and not (current is not None and current.ignored(path, is_directory=False))
            ):
                yield str(Path(path))

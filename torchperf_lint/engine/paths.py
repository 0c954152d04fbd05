"""Path patterns as flake8 and pytest users write them."""

from __future__ import annotations

import fnmatch
from pathlib import PurePath


def matches_path(path: str, pattern: str) -> bool:
    """flake8-style path pattern: a glob on the whole path, its tail, or a directory part."""
    posix = PurePath(path).as_posix()
    if pattern.endswith("/"):
        return f"/{pattern}" in f"/{posix}" or posix.startswith(pattern)
    return (
        fnmatch.fnmatch(posix, pattern)
        or fnmatch.fnmatch(posix, f"*/{pattern}")
        or fnmatch.fnmatch(PurePath(posix).name, pattern)
    )

"""Path patterns as flake8 and pytest users write them."""

from __future__ import annotations

import fnmatch
import functools
from pathlib import PurePath


@functools.lru_cache(maxsize=8192)
def _posix(path: str) -> tuple[str, str]:
    """The path with `/` separators (`a\\b.py` is `a/b.py` on every OS), and its last part: once
    per path, not once per pattern (discovery asks every exclude pattern about every file)."""
    posix = PurePath(path.replace("\\", "/")).as_posix()
    return posix, PurePath(posix).name


@functools.lru_cache(maxsize=4096)  # asked per node by rules (ctx.is_test_file): keep it O(1)
def matches_path(path: str, pattern: str) -> bool:
    """flake8-style path pattern: a glob on the whole path, its tail, or a directory part."""
    posix, name = _posix(path)
    if pattern.endswith("/"):
        return f"/{pattern}" in f"/{posix}" or posix.startswith(pattern)
    if "/" not in pattern:
        # a name pattern (`test_*.py`): fnmatch's `*` would cross `/` and match any file under a
        # `test_...` directory
        return fnmatch.fnmatch(name, pattern)
    return (
        fnmatch.fnmatch(posix, pattern)
        or fnmatch.fnmatch(posix, f"*/{pattern}")
        or fnmatch.fnmatch(name, pattern)
    )

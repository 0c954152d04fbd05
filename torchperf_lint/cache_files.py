"""What every cache of the tool shares: the identity of the tool that keys each entry, and atomic
writes under a cache root. The findings cache (cache.py) and the project pass's store of summaries
(project/store.py) both use it; it knows nothing of findings, so the project pass stays below the
engine."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from . import __version__


def source_identity(package: Path) -> str:
    """A digest of the path, size and mtime of every source and data file under `package`."""
    digest = hashlib.sha256()
    for directory, subdirs, files in os.walk(package):
        subdirs[:] = sorted(d for d in subdirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith((".py", ".json")):
                path = os.path.join(directory, name)
                stat = os.stat(path)
                relative = os.path.relpath(path, package)
                digest.update(
                    f"{relative}\0{stat.st_size}\0{stat.st_mtime_ns}\0".encode("utf-8", "surrogateescape")
                )
    return digest.hexdigest()[:16]


@functools.lru_cache(maxsize=None)
def tool_identity() -> str:
    """The tool's version and the identity of its installed sources. A release never changes
    once installed; a checkout someone edits (a rule, the analysis) does, so cached results,
    summaries and project facts of the code before the edit are never served after it."""
    return f"{__version__}+{source_identity(Path(__file__).parent)}"


def write_entry(cache_root: Path, target: Path, data: Any) -> None:
    """Write one cache entry as JSON, atomically (temp file + os.replace), under a cache root
    that holds a `.gitignore` of `*` so users never commit it (as ruff does)."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        ignore = cache_root / ".gitignore"
        if not ignore.exists():
            ignore.write_text("# created by torchperf-lint\n*\n", encoding="utf-8")
        handle, temp = tempfile.mkstemp(dir=target.parent, suffix=".tmp")
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            json.dump(data, stream, separators=(",", ":"))
        os.replace(temp, target)
    except OSError:
        pass  # a cache that cannot be written only costs speed

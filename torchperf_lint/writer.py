"""Write a fixed file atomically, keeping its mode; never write a read-only file."""

from __future__ import annotations

import os
import stat
import tempfile


class NotWritable(Exception):
    pass


def write_atomic(path: str, data: bytes) -> None:
    """Replace `path` with `data` through a temp file in the same directory and `os.replace`.

    The owner's write bit is checked explicitly: as root a write to a read-only file would
    succeed, and a user who made a file read-only does not want it rewritten.
    """
    mode = stat.S_IMODE(os.stat(path).st_mode)
    if not mode & stat.S_IWUSR:
        raise NotWritable("file is read-only; not written")
    directory = os.path.dirname(os.path.abspath(path))
    handle, temp = tempfile.mkstemp(dir=directory, prefix=".torchperf-lint-", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
        os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        if os.path.exists(temp):
            os.unlink(temp)
        raise

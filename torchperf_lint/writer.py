"""Write a fixed file atomically, keeping its mode; never write a read-only file."""

from __future__ import annotations

import os
import stat
import tempfile

TEMP_PREFIX = ".torchperf-lint-"
TEMP_SUFFIX = ".tmp"


class NotWritable(Exception):
    """The file was not written (and is unchanged); the message says why, for a TPL000 line."""


def write_atomic(path: str, data: bytes) -> None:
    """Replace `path` with `data` through a temp file in the same directory and `os.replace`,
    so that a reader sees the old bytes or the new ones, never a partial file.

    The owner's write bit is checked explicitly: as root a write to a read-only file would
    succeed, and a user who made a file read-only does not want it rewritten. A symbolic link
    is written through (the link stays a link). The mode bits (and, where permitted, the owner)
    are kept. Every failure raises `NotWritable` with the file unchanged and no temp file left.
    """
    target = os.path.realpath(path)
    try:
        info = os.stat(target)
    except OSError as error:
        raise NotWritable(f"could not write: {error.strerror or error}; file left unchanged") from error
    mode = stat.S_IMODE(info.st_mode)
    if not mode & stat.S_IWUSR:
        raise NotWritable("file is read-only; not written")
    directory = os.path.dirname(target)
    temp = None
    try:
        handle, temp = tempfile.mkstemp(dir=directory, prefix=TEMP_PREFIX, suffix=TEMP_SUFFIX)
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temp, mode)
        if hasattr(os, "chown") and (info.st_uid, info.st_gid) != _owner(temp):
            try:
                os.chown(temp, info.st_uid, info.st_gid)
            except OSError:
                pass  # not allowed to give the file away: it keeps our ownership
        os.replace(temp, target)
        temp = None
    except OSError as error:
        raise NotWritable(f"could not write: {error.strerror or error}; file left unchanged") from error
    finally:
        if temp is not None:
            try:
                os.unlink(temp)
            except OSError:
                pass


def _owner(path: str) -> tuple[int, int]:
    info = os.stat(path)
    return info.st_uid, info.st_gid

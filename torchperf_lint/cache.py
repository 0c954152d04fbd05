"""A content-addressed cache of lint results: an unchanged file under an unchanged tool and
configuration is not parsed again.

The key hashes the tool (its version and its source files: see `tool_identity`), the effective
settings and enabled rules, the path (findings name it, and some rules look at it) and the file's
bytes, so any change invalidates the entry.
Entries are written atomically (temp file + os.replace), so concurrent runs never read a torn
entry; a corrupt or unreadable entry is a miss.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Optional, Sequence

from . import __version__
from .engine.findings import Finding, Fix, Safety, TextEdit
from .settings import Settings


def _fix_to_dict(fix: Optional[Fix]) -> Optional[dict[str, str]]:
    return None if fix is None else {"safety": fix.safety.value, "description": fix.description}


def finding_to_record(finding: Finding) -> dict[str, Any]:
    record = {
        f.name: getattr(finding, f.name) for f in dataclasses.fields(Finding) if f.name not in ("fix", "node")
    }
    record["fix"] = _fix_to_dict(finding.fix)
    return record


def finding_from_record(record: dict[str, Any]) -> Finding:
    """A finding without its tree node; a fix keeps only its safety and description, enough to
    report it (fixing always re-lints)."""
    record = dict(record)
    fix = record.pop("fix", None)
    light = Fix((), Safety(fix["safety"]), fix["description"]) if fix else None
    edits = tuple(TextEdit(*edit) for edit in record.pop("edits", ()))
    return Finding(**record, fix=light, edits=edits)


class Cache:
    def __init__(
        self, directory: Path, settings: Settings, rule_codes: Sequence[str], extra: str = ""
    ) -> None:
        self.directory = directory / __version__
        identity = {
            "version": __version__,
            "tool": tool_identity(),
            "settings": repr(dataclasses.replace(settings, config_file=None)),
            "rules": sorted(rule_codes),
            "extra": extra,
        }
        self._salt = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()

    def key(self, path: str, data: bytes, facts: str = "") -> str:
        """`facts`: the digest of what the project pass handed the file."""
        digest = hashlib.sha256(self._salt.encode())
        digest.update(path.encode("utf-8", "surrogateescape") + b"\0")
        digest.update(facts.encode() + b"\0")
        digest.update(data)
        return digest.hexdigest()

    def _file(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.json"

    def get(self, key: str) -> Optional[list[Finding]]:
        try:
            records = json.loads(self._file(key).read_text(encoding="utf-8"))
            return [finding_from_record(r) for r in records]
        except (OSError, ValueError, TypeError, KeyError):
            return None

    def put(self, key: str, findings: Sequence[Finding]) -> None:
        write_entry(self.directory.parent, self._file(key), [finding_to_record(f) for f in findings])


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
                digest.update(f"{relative}\0{stat.st_size}\0{stat.st_mtime_ns}\0".encode("utf-8", "surrogateescape"))
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

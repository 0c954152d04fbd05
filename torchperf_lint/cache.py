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
import hashlib
import json
from pathlib import Path
from typing import Any, Optional, Sequence

from . import __version__
from .cache_files import tool_identity, write_entry
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

"""Settings: defaults, then the project's config file, then the command line.

The config lives in `[tool.torchperf-lint]` of `pyproject.toml`, else `[torchperf-lint]` of
`setup.cfg` or `tox.ini`, found by walking up from the first linted path.
"""

from __future__ import annotations

import configparser
import dataclasses
import re
import sys
from pathlib import Path
from typing import Any, Optional

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

DEFAULT_EXCLUDE = (
    ".git",
    ".hg",
    ".svn",
    ".tox",
    ".nox",
    ".venv",
    "venv",
    "env",
    ".eggs",
    "__pycache__",
    "build",
    "dist",
    "node_modules",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
    ".torchperf_lint_cache",
)
DEFAULT_TEST_FILE_PATTERNS = ("test_*.py", "*_test.py", "tests/", "conftest.py")
SECTION = "torchperf-lint"


class ConfigError(Exception):
    """A config file or option that cannot be used; the message names where and why."""


@dataclasses.dataclass(frozen=True)
class Settings:
    select: Optional[tuple[str, ...]] = None  # None: the default rule set
    ignore: tuple[str, ...] = ()
    extend_select: tuple[str, ...] = ()
    exclude: tuple[str, ...] = DEFAULT_EXCLUDE
    extend_exclude: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    torch_version: Optional[tuple[int, int]] = None
    torch_version_source: str = "no torch version given or declared: assuming the newest"
    test_file_patterns: tuple[str, ...] = DEFAULT_TEST_FILE_PATTERNS
    lint_all_files: bool = False
    config_file: Optional[Path] = None

    def replace(self, **changes: Any) -> Settings:
        return dataclasses.replace(self, **changes)


def parse_version(text: str, where: str) -> tuple[int, int]:
    match = re.fullmatch(r"\s*(\d+)\.(\d+)(?:\.\d+)?\s*", text)
    if match is None:
        raise ConfigError(f"{where}: torch-version must look like 2.1, got {text!r}")
    return int(match.group(1)), int(match.group(2))


def _as_list(value: Any, key: str, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        items = [v.strip() for v in re.split(r"[,\n]", value)]
        return tuple(v for v in items if v)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(v.strip() for v in value if v.strip())
    raise ConfigError(f"{where}: {key} must be a list of strings, got {value!r}")


def _per_file_ignores(value: Any, where: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    pairs: list[tuple[str, tuple[str, ...]]] = []
    if isinstance(value, dict):
        for pattern, codes in value.items():
            pairs.append((pattern, _as_list(codes, "per-file-ignores", where)))
    elif isinstance(value, str):
        # flake8's form: "path/pattern.py:TPL101,TPL103" one per line (or space separated)
        for entry in value.split():
            pattern, sep, codes = entry.rpartition(":")
            if not sep or not pattern:
                raise ConfigError(f"{where}: per-file-ignores entry {entry!r} is not PATTERN:CODES")
            pairs.append((pattern, _as_list(codes, "per-file-ignores", where)))
    else:
        raise ConfigError(f"{where}: per-file-ignores must be a table of pattern = [codes]")
    return tuple(pairs)


def apply_values(settings: Settings, raw: dict[str, Any], where: str) -> Settings:
    """Validate a config table (keys as written) and merge it into `settings`."""
    changes: dict[str, Any] = {}
    for key, value in raw.items():
        name = key.replace("_", "-")
        if name in ("select", "ignore", "extend-select", "exclude", "extend-exclude"):
            changes[name.replace("-", "_")] = _as_list(value, name, where)
        elif name == "test-file-patterns":
            changes["test_file_patterns"] = _as_list(value, name, where)
        elif name == "per-file-ignores":
            changes["per_file_ignores"] = _per_file_ignores(value, where)
        elif name == "torch-version":
            if not isinstance(value, str):
                raise ConfigError(f"{where}: torch-version must be a string like \"2.1\"")
            changes["torch_version"] = parse_version(value, where)
            changes["torch_version_source"] = f"torch-version {value} from {where}"
        elif name == "lint-all-files":
            if not isinstance(value, bool) and value not in ("true", "false"):
                raise ConfigError(f"{where}: lint-all-files must be true or false")
            changes["lint_all_files"] = value in (True, "true")
        else:
            raise ConfigError(f"{where}: unknown key {key!r} in [{SECTION}]")
    return settings.replace(**changes)


def _read_ini(path: Path) -> Optional[dict[str, Any]]:
    parser = configparser.RawConfigParser()
    try:
        parser.read(path, encoding="utf-8")
    except (configparser.Error, UnicodeDecodeError) as error:
        raise ConfigError(f"{path}: cannot read: {error}") from None
    if not parser.has_section(SECTION):
        return None
    return dict(parser.items(SECTION))


def _read_pyproject(path: Path) -> Optional[dict[str, Any]]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise ConfigError(f"{path}: invalid TOML: {error}") from None
    table = data.get("tool", {}).get(SECTION)
    if table is None:
        return None
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.{SECTION}] must be a table")
    return table


def find_config(start: Path) -> Optional[tuple[Path, dict[str, Any]]]:
    """The nearest config table at or above `start`."""
    directory = start if start.is_dir() else start.parent
    directory = directory.resolve()
    for folder in (directory, *directory.parents):
        for name, reader in (
            ("pyproject.toml", _read_pyproject),
            ("setup.cfg", _read_ini),
            ("tox.ini", _read_ini),
        ):
            candidate = folder / name
            if candidate.is_file():
                table = reader(candidate)
                if table is not None:
                    return candidate, table
    return None


def load_settings(start: Path, config_file: Optional[Path] = None) -> Settings:
    """Defaults merged with the config found at or above `start` (or with `config_file`)."""
    settings = Settings()
    if config_file is not None:
        if not config_file.is_file():
            raise ConfigError(f"{config_file}: config file not found")
        reader = _read_pyproject if config_file.suffix == ".toml" else _read_ini
        table = reader(config_file)
        found = (config_file, table) if table is not None else None
    else:
        found = find_config(start)
    if found is None:
        return settings
    path, table = found
    return apply_values(settings, table, str(path)).replace(config_file=path)

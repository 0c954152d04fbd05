"""Settings: defaults, then the project's config file, then the command line.

The config lives in `[tool.torchperf-lint]` of `pyproject.toml`, else `[torchperf-lint]` of
`setup.cfg` or `tox.ini`: each file's nearest, found by walking up from its directory.
"""

from __future__ import annotations

import configparser
import difflib
import re
import sys
from pathlib import Path
from typing import Any

from .selection import check_selectors
from .settings import ConfigError, Settings

if sys.version_info >= (3, 11):  # noqa: UP036 - Python 3.10 is supported (setup.cfg)
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

SECTION = "torchperf-lint"


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


def _rule_selectors(codes: tuple[str, ...], key: str, where: str) -> tuple[str, ...]:
    """Codes, code prefixes or rule names that name at least one rule."""
    check_selectors(codes, f"{where}: {key}")
    return codes


def _per_file_ignores(value: Any, where: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    pairs: list[tuple[str, tuple[str, ...]]] = []
    if isinstance(value, dict):
        for pattern, codes in value.items():
            pairs.append((pattern, _as_list(codes, "per-file-ignores", where)))
    elif isinstance(value, str):
        # flake8's form, one `pattern: codes` per line, parsed the way flake8 parses it
        from flake8.exceptions import ExecutionError
        from flake8.utils import parse_files_to_codes_mapping

        try:
            mapping = parse_files_to_codes_mapping(value)
        except (ExecutionError, ValueError):
            raise ConfigError(
                f"{where}: per-file-ignores must be lines of PATTERN:CODES, got {value!r}"
            ) from None
        pairs.extend((pattern, tuple(codes)) for pattern, codes in mapping)
    else:
        raise ConfigError(f"{where}: per-file-ignores must be a table of pattern = [codes]")
    for _, codes in pairs:
        _rule_selectors(codes, "per-file-ignores", where)
    return tuple(pairs)


KEYS = (
    "select",
    "ignore",
    "extend-select",
    "exclude",
    "extend-exclude",
    "per-file-ignores",
    "torch-version",
    "test-file-patterns",
    "lint-all-files",
    "respect-gitignore",
    "library",
    "cache-dir",
    "module-bases",
)
_BOOLEANS = {
    "true": True,
    "yes": True,
    "on": True,
    "1": True,
    "false": False,
    "no": False,
    "off": False,
    "0": False,
}


def section_name(where: str) -> str:
    return f"tool.{SECTION}" if where.endswith(".toml") else SECTION


def apply_values(settings: Settings, raw: dict[str, Any], where: str) -> Settings:
    """Validate a config table (keys as written) and merge it into `settings`. `where` names
    the file for error messages."""
    changes: dict[str, Any] = {}
    for key, value in raw.items():
        name = key.replace("_", "-")
        if name in ("select", "ignore", "extend-select"):
            changes[name.replace("-", "_")] = _rule_selectors(_as_list(value, name, where), name, where)
        elif name in ("exclude", "extend-exclude", "test-file-patterns", "module-bases"):
            changes[name.replace("-", "_")] = _as_list(value, name, where)
        elif name == "per-file-ignores":
            changes["per_file_ignores"] = _per_file_ignores(value, where)
        elif name == "torch-version":
            if not isinstance(value, str):
                raise ConfigError(f'{where}: torch-version must be a string like "2.1", got {value!r}')
            changes["torch_version"] = parse_version(value, where)
            changes["torch_version_source"] = f"torch-version {value} from {where}"
        elif name in ("lint-all-files", "respect-gitignore", "library"):
            flag = value if isinstance(value, bool) else _BOOLEANS.get(str(value).strip().lower())
            if flag is None:
                raise ConfigError(f"{where}: {name} must be true or false, got {value!r}")
            changes[name.replace("-", "_")] = flag
        elif name == "cache-dir":
            if not isinstance(value, str) or not value.strip():
                raise ConfigError(f"{where}: cache-dir must be a directory path, got {value!r}")
            changes["cache_dir"] = str(Path(where).parent / value.strip())
        else:
            close = difflib.get_close_matches(name, KEYS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else f"; known keys: {', '.join(KEYS)}"
            raise ConfigError(f"{where}: unknown key {key!r} in [{section_name(where)}]{hint}")
    return settings.replace(**changes)


def _read_ini(path: Path) -> dict[str, Any] | None:
    parser = configparser.RawConfigParser()
    try:
        parser.read(path, encoding="utf-8")
    except (configparser.Error, UnicodeDecodeError) as error:
        raise ConfigError(f"{path}: cannot read: {error}") from None
    if not parser.has_section(SECTION):
        return None
    return dict(parser.items(SECTION))


def _read_pyproject(path: Path) -> dict[str, Any] | None:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise ConfigError(f"{path}: invalid TOML: {error}") from None
    except OSError as error:
        raise ConfigError(f"{path}: cannot read: {error.strerror or error}") from None
    tool = data.get("tool")
    table = tool.get(SECTION) if isinstance(tool, dict) else None
    if table is None:
        return None
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.{SECTION}] must be a table")
    return table


class ConfigFinder:
    """The nearest config table at or above each directory, each candidate file read once: a run
    asks it for every file it checks, since each file is checked under its nearest config (ruff's
    hierarchical configuration)."""

    def __init__(self) -> None:
        self._found: dict[Path, tuple[Path, dict[str, Any]] | None] = {}

    def nearest(self, start: Path) -> tuple[Path, dict[str, Any]] | None:
        directory = (start if start.is_dir() else start.parent).resolve()
        passed: list[Path] = []
        found: tuple[Path, dict[str, Any]] | None = None
        for folder in (directory, *directory.parents):
            if folder in self._found:
                found = self._found[folder]
                break
            passed.append(folder)
            found = _config_in(folder)
            if found is not None:
                break
        for folder in passed:
            self._found[folder] = found
        return found


def _config_in(folder: Path) -> tuple[Path, dict[str, Any]] | None:
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


def find_config(start: Path) -> tuple[Path, dict[str, Any]] | None:
    """The nearest config table at or above `start`."""
    return ConfigFinder().nearest(start)


def read_config_file(config_file: Path) -> tuple[Path, dict[str, Any]]:
    """The config table of a file named with --config (or an editor's setting)."""
    if not config_file.is_file():
        raise ConfigError(f"{config_file}: config file not found")
    reader = _read_pyproject if config_file.suffix == ".toml" else _read_ini
    table = reader(config_file)
    if table is None:
        raise ConfigError(f"{config_file}: no [{section_name(str(config_file))}] section")
    return config_file, table


def settings_from(found: tuple[Path, dict[str, Any]] | None) -> tuple[Settings, tuple[str, ...]]:
    """Defaults merged with a config table, and the keys the table set (as written there, `-`
    spelled), for --show-settings to say where each value came from."""
    if found is None:
        return Settings(), ()
    path, table = found
    keys = tuple(key.replace("_", "-") for key in table)
    return apply_values(Settings(), table, str(path)).replace(config_file=path), keys


def load_settings(start: Path, config_file: Path | None = None) -> Settings:
    """Defaults merged with the config found at or above `start` (or with `config_file`)."""
    found = read_config_file(config_file) if config_file is not None else find_config(start)
    return settings_from(found)[0]

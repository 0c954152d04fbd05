"""The torch version the linted code targets (RULES.md, TPL301).

`--torch-version` / config `torch-version` wins. Otherwise the linted project's own `torch`
requirement decides: the nearest directory at or above the linted file that holds a
`pyproject.toml`, `setup.cfg` or `requirements*.txt` is the project root, and the lowest version
its requirement admits is the target (`torch>=1.13,<2.1` -> 1.13, `torch==1.12.1` -> 1.12,
`torch~=2.0` -> 2.0, poetry's `^1.13` -> 1.13). A requirement with only an upper bound
(`torch<2`) admits every 1.x release and targets 1.0. A requirement with no bound at all
(`torch`, `torch!=2.0.1`, a URL) installs the newest release, and so does a project that
declares nothing: the target is then the newest.

Specifiers are parsed by hand: `packaging` is not among the linter's dependencies.
"""

from __future__ import annotations

import configparser
import dataclasses
import functools
import re
import sys
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

Version = tuple[int, int]

# The first torch release that anyone still targets; an upper bound alone admits it.
OLDEST = (1, 0)
_NAME = re.compile(r"^\s*torch\s*(\[[^\]]*\])?\s*(?=[<>=!~(;@]|$)", re.IGNORECASE)
_CLAUSE = re.compile(r"^\s*(===|==|~=|!=|<=|>=|<|>|\^|~|=)?\s*v?(\d+)(?:\.(\d+|\*))?[\w.*+!-]*\s*$")


@dataclasses.dataclass(frozen=True)
class Declared:
    """What a project says: the version (None: the newest) and where it says it."""

    version: Optional[Version]
    source: str


def lowest_admitted(specifier: str) -> tuple[Optional[Version], bool]:
    """The lowest (major, minor) a PEP 440 / poetry specifier admits, and whether it could be
    read. `(None, True)` means no bound at all (the newest is installed)."""
    lower: Optional[Version] = None
    upper_only = False
    text = specifier.strip().strip("()")
    if text in ("", "*"):
        return None, True
    for clause in text.split(","):
        if not clause.strip():
            continue
        match = _CLAUSE.match(clause)
        if match is None:
            return None, False
        operator, major_text, minor_text = match.groups()
        version = (int(major_text), 0 if minor_text in (None, "*") else int(minor_text))
        if operator in (None, "=", "==", "===", ">=", ">", "~=", "^", "~"):
            lower = version if lower is None else max(lower, version)
        elif operator in ("<", "<="):
            upper_only = True
    if lower is not None:
        return lower, True
    return (OLDEST, True) if upper_only else (None, True)


def torch_requirement(line: str) -> Optional[str]:
    """The specifier of a PEP 508 `torch` requirement line (`""` when unversioned), else None."""
    line = line.split("#", 1)[0].strip()
    match = _NAME.match(line)
    if match is None:
        return None
    rest = line[match.end() :]
    if rest.startswith("@"):
        return ""  # a direct URL: no version to read
    # pip options (`--hash=...`) and a line continuation may follow the specifier
    return re.split(r"\s--|\s*\\$", rest.split(";", 1)[0])[0].strip()


def _declared(requirement: str, specifier: str, where: str) -> Optional[Declared]:
    version, readable = lowest_admitted(specifier)
    if not readable:
        return None
    shown = requirement.strip()
    if version is None:
        return Declared(None, f"`{shown}` in {where} sets no lower bound: assuming the newest")
    return Declared(version, f"{where} (`{shown}`)")


def _from_lines(lines: Iterator[str], where: str) -> Optional[Declared]:
    for line in lines:
        specifier = torch_requirement(line)
        if specifier is not None:
            return _declared(f"torch{specifier}", specifier, where)
    return None


def _read_pyproject(path: Path) -> Optional[Declared]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    dependencies = data.get("project", {}).get("dependencies", [])
    if isinstance(dependencies, list):
        found = _from_lines((d for d in dependencies if isinstance(d, str)), path.name)
        if found is not None:
            return found
    poetry = data.get("tool", {}).get("poetry", {}).get("dependencies", {})
    if isinstance(poetry, dict):
        value: Any = poetry.get("torch")
        if isinstance(value, dict):
            value = value.get("version")
        if isinstance(value, str):
            return _declared(f"torch = {value!r}", value, path.name)
    return None


def _read_setup_cfg(path: Path) -> Optional[Declared]:
    parser = configparser.RawConfigParser()
    try:
        parser.read(path, encoding="utf-8")
    except (configparser.Error, UnicodeDecodeError):
        return None
    if not parser.has_option("options", "install_requires"):
        return None
    return _from_lines(iter(parser.get("options", "install_requires").splitlines()), path.name)


def _read_requirements(path: Path) -> Optional[Declared]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    return _from_lines(iter(text.splitlines()), path.name)


def _project_files(directory: Path) -> list[tuple[Path, Callable[[Path], Optional[Declared]]]]:
    files: list[tuple[Path, Callable[[Path], Optional[Declared]]]] = []
    if (directory / "pyproject.toml").is_file():
        files.append((directory / "pyproject.toml", _read_pyproject))
    if (directory / "setup.cfg").is_file():
        files.append((directory / "setup.cfg", _read_setup_cfg))
    requirements = sorted(
        directory.glob("requirements*.txt"), key=lambda p: (p.name != "requirements.txt", p.name)
    )
    files.extend((path, _read_requirements) for path in requirements if path.is_file())
    return files


@functools.lru_cache(maxsize=256)
def declared_version(directory: Path) -> Optional[Declared]:
    """The torch requirement of the project that holds `directory` (cached: a project's files
    share it). None when the nearest project root declares no torch requirement."""
    for folder in (directory, *directory.parents):
        files = _project_files(folder)
        if not files:
            continue
        for path, reader in files:
            found = reader(path)
            if found is not None:
                return found
        return None
    return None


def target_version(path: str, given: Optional[Version], given_source: str) -> Declared:
    """The version a file is linted for: the one given, else its project's, else the newest.

    Paths that are not files on disk (`<string>`, stdin, examples) have no project."""
    if given is not None:
        return Declared(given, given_source)
    file = Path(path)
    if file.is_file():
        found = declared_version(file.resolve().parent)
        if found is not None:
            return found
    return Declared(None, given_source)


@dataclasses.dataclass(frozen=True)
class VersionReason:
    """A finding's context when it depends on the target version: renders like a hot-path
    reason (`render(line_of)`), prefixed by the hot-path reason when there is one."""

    declared: Declared
    hot: Optional[Any] = None  # an analysis.hotpath.Reason

    def render(self, line_of: Callable[[Any], int]) -> str:
        version = self.declared.version
        shown = (
            f"torch {version[0]}.{version[1]} from {self.declared.source}"
            if version
            else self.declared.source
        )
        if self.hot is not None:
            return f"{self.hot.render(line_of)}; {shown}"
        return shown

"""Which torch the linted code runs on (RULES.md, "Which torch the code runs on").

A project's `torch` requirement says two things. Its lower bound (`torch>=1.8`) is the oldest
torch the project supports, not the one it runs on: a fix may only write an API that release
has. An upper bound or an exact pin (`torch<2`, `torch==1.13.1`, poetry's `^1.13`) bounds the
runtime: advice that depends on the version (TPL301: `set_to_none=True` is the default from 2.0)
applies only where the runtime may be older than the change. Without an upper bound the
runtime is the newest release. `--torch-version` / config `torch-version` fixes both to one
release.

The nearest directory at or above the linted file that holds a `pyproject.toml`, `setup.cfg`,
`requirements*.txt` or a conda environment file (`environment*.yml`/`.yaml`, `conda.yml`/`.yaml`) is
the project root. A conda file pins torch as a requirements file does: `pytorch=1.7.0` (conda's
`=` admits 1.7.0 and its patch builds), `pytorch==1.7.0`, `pytorch 1.7.0`, or `torch==...` under
its `pip:` list. A requirement with no bound at all (`torch`,
`torch!=2.0.1`, a URL) installs the newest release, and so does a project that declares nothing.

Specifiers are parsed by hand: `packaging` is not among the linter's dependencies.
"""

from __future__ import annotations

import configparser
import dataclasses
import fnmatch
import functools
import os
import re
import sys
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Optional

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

Version = tuple[int, int]

# The first torch release that anyone still targets; an upper bound alone admits it.
OLDEST = (1, 0)
_NAME = re.compile(r"^\s*torch\s*(\[[^\]]*\])?\s*(?=[<>=!~(;@]|$)", re.IGNORECASE)
# a conda dependency line: `- pytorch=1.7.0`, `- pytorch::pytorch>=1.8,<2`, `- pytorch 1.7.0 py3.8_0`
_CONDA_TORCH = re.compile(r"^\s*-\s*(?:[\w.-]+::)?(?:py)?torch(?=[\s<>=!~]|$)(.*)$", re.IGNORECASE)
_CLAUSE = re.compile(
    r"^\s*(===|==|~=|!=|<=|>=|<|>|\^|~|=)?\s*v?(\d+)(?:\.(\d+|\*))?(?:\.(\d+|\*))?[\w.*+!-]*\s*$"
)


@dataclasses.dataclass(frozen=True)
class Declared:
    """What a project says, and where it says it: `version` is the oldest torch it supports (None:
    only the newest), `below` the release the runtime is older than (None: no upper bound, the
    runtime is the newest)."""

    version: Optional[Version]
    source: str
    below: Optional[Version] = None
    requirement: str = ""  # as the project writes it (`torch==1.4.0`), when it wrote one

    def has(self, first: Version) -> bool:
        """An API that arrived in `first` exists in the oldest supported torch: a fix may write it."""
        return self.version is None or self.version >= first

    def may_run(self, first: Version) -> bool:
        """The runtime may be `first` or newer: advice to use an API of `first` can be followed."""
        return self.below is None or self.below > first

    def may_run_older_than(self, change: Version) -> bool:
        """The runtime may be older than `change`: only an upper bound or a pin at or below it
        says so. The runtime is the newest release a requirement admits, so `torch<2.6` (or
        `torch>=1.8,<2.6`) runs 2.5, which has the change. A bound read from the imports alone
        (no oldest release: `torchtext.legacy`) says nothing either."""
        return self.version is not None and not self.may_run(change)


def _next_minor(major: int, minor: int) -> Version:
    return (major, minor + 1)


def admitted_range(specifier: str) -> tuple[Optional[Version], Optional[Version], bool]:
    """(the lowest (major, minor) a PEP 440 / poetry specifier admits, the release every admitted
    version is older than, whether it could be read). `(None, None, True)`: no bound at all."""
    lower: Optional[Version] = None
    below: Optional[Version] = None
    text = specifier.strip().strip("()")
    if text in ("", "*"):
        return None, None, True
    for clause in text.split(","):
        if not clause.strip():
            continue
        match = _CLAUSE.match(clause)
        if match is None:
            return None, None, False
        operator, major_text, minor_text, patch_text = match.groups()
        major = int(major_text)
        minor = 0 if minor_text in (None, "*") else int(minor_text)
        patch = 0 if patch_text in (None, "*") else int(patch_text)
        version = (major, minor)
        bound: Optional[Version] = None
        if operator in (None, "=", "==", "==="):
            bound = (major + 1, 0) if minor_text in (None, "*") else _next_minor(major, minor)
        elif operator == "~=":  # ~=1.13 admits 1.x from 1.13, ~=1.13.1 admits 1.13.x
            bound = _next_minor(major, minor) if patch_text is not None else (major + 1, 0)
        elif operator == "^":  # poetry: up to the next major (next minor for 0.x)
            bound = (major + 1, 0) if major > 0 else _next_minor(major, minor)
        elif operator == "~":  # poetry: up to the next minor
            bound = _next_minor(major, minor)
        elif operator == "<":
            bound = _next_minor(major, minor) if patch > 0 else version
        elif operator == "<=":
            bound = _next_minor(major, minor)
        if operator not in ("<", "<=", "!="):
            lower = version if lower is None else max(lower, version)
        if bound is not None:
            below = bound if below is None else min(below, bound)
    if lower is None and below is not None:
        lower = OLDEST  # an upper bound alone admits every older release
    return lower, below, True


def lowest_admitted(specifier: str) -> tuple[Optional[Version], bool]:
    """The lowest (major, minor) a specifier admits, and whether it could be read."""
    lower, _, readable = admitted_range(specifier)
    return lower, readable


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
    version, below, readable = admitted_range(specifier)
    if not readable:
        return None
    shown = requirement.strip()
    if version is None:
        return Declared(None, f"`{shown}` in {where} sets no lower bound: assuming the newest")
    return Declared(version, f"{where} (`{shown}`)", below, shown)


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


def conda_torch_specifier(line: str) -> Optional[str]:
    """The specifier of a conda environment file's `pytorch` (or pip `torch`) dependency line, in
    PEP 440 words (`""` when unversioned), else None. Conda's `=1.7.0` admits 1.7.0.*, which
    admitted_range reads the same way; a build string after a second `=` or a space is dropped."""
    match = _CONDA_TORCH.match(line.split("#", 1)[0])
    if match is None:
        return None
    spec = match.group(1).strip()
    if not spec:
        return ""
    head = spec.split()[0]
    if head[0].isdigit():  # `pytorch 1.7.0 py3.8_cuda11.0_0`: a version, then a build
        return "==" + head
    if head.startswith("="):  # `=1.7.0`, `==1.7.0`, `=1.7.0=py3.8_0`
        return "==" + head.lstrip("=").split("=")[0]
    return head


def _read_conda(path: Path) -> Optional[Declared]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    in_dependencies = False  # `channels:` lists `pytorch` too, as a channel
    for line in text.splitlines():
        if line[:1].isalpha():
            in_dependencies = line.split(":", 1)[0].strip() == "dependencies"
            continue
        specifier = conda_torch_specifier(line) if in_dependencies else None
        if specifier is not None:
            return _declared(line.strip().lstrip("-").strip(), specifier, path.name)
    return None


_CONDA_FILES = ("environment*.yml", "environment*.yaml", "conda.yml", "conda.yaml")


def _project_files(directory: Path) -> list[tuple[Path, Callable[[Path], Optional[Declared]]]]:
    # the folder is listed once: a lint asks this of every folder above the files, often /tmp or $HOME
    try:
        names = {entry.name for entry in os.scandir(directory) if entry.is_file()}
    except OSError:
        return []
    files: list[tuple[Path, Callable[[Path], Optional[Declared]]]] = []
    if "pyproject.toml" in names:
        files.append((directory / "pyproject.toml", _read_pyproject))
    if "setup.cfg" in names:
        files.append((directory / "setup.cfg", _read_setup_cfg))
    requirements = sorted(
        fnmatch.filter(names, "requirements*.txt"), key=lambda name: (name != "requirements.txt", name)
    )
    files.extend((directory / name, _read_requirements) for name in requirements)
    conda = sorted({name for pattern in _CONDA_FILES for name in fnmatch.filter(names, pattern)})
    files.extend((directory / name, _read_conda) for name in conda)
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


# Modules a torch release (or the domain library released with it) removed: a file that imports one
# runs on an older torch, whatever its requirement says. torchtext 0.12, released with torch 1.11,
# dropped torchtext.legacy; torch 2.0 dropped torch._six.
REMOVED_MODULES: dict[str, Version] = {"torchtext.legacy": (1, 11), "torch._six": (2, 0)}


def bounded_by_imports(declared: Declared, imported: Iterable[str]) -> Declared:
    """`declared`, with the runtime bounded by the removed modules the file imports."""
    for module, gone in REMOVED_MODULES.items():
        if any(name == module or name.startswith(module + ".") for name in imported):
            if declared.below is None or gone < declared.below:
                source = f"{declared.source}; imports {module} (gone in torch {gone[0]}.{gone[1]})"
                declared = dataclasses.replace(declared, below=gone, source=source)
    return declared


def target_version(path: str, given: Optional[Version], given_source: str) -> Declared:
    """The torch a file is linted for: the one given (oldest and runtime alike), else its
    project's requirement, else the newest.

    Paths that are not files on disk (`<string>`, stdin, examples) have no project."""
    if given is not None:
        return Declared(given, given_source, _next_minor(*given))
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

"""Finding a file's project and building its pass: the root, every module under it, their
summaries (cached by content), once per process for each root.

The root is the nearest directory holding `pyproject.toml`, `setup.cfg`, `setup.py` or `tox.ini`,
else the nearest version-control root, else the path given on the command line.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from stat import S_ISREG
from typing import Optional

from .. import __version__
from ..analysis.entry import NO_FACTS, EntryFacts
from ..cache import DEFAULT_DIRECTORY, write_entry
from ..engine.paths import matches_path
from ..files import discover
from ..settings import Settings
from .graph import Module, Project
from .summary import Summary, summarize

ROOT_MARKERS = ("pyproject.toml", "setup.cfg", "setup.py", "tox.ini")
VCS_MARKERS = (".git", ".hg")
_MAX_MODULES = 20_000  # beyond this, a "project" is a home directory or a file system


def find_root(path: Path, given: Optional[Path] = None, exclude: tuple[str, ...] = ()) -> Optional[Path]:
    """The project root of `path`, or None when it has none (the project is then the given
    path: a directory, or the file alone). The search stops below an excluded directory: a
    package installed in `site-packages` is not part of the repository that holds the
    virtualenv."""
    start = path if path.is_dir() else path.parent
    candidates = []
    for directory in (start, *start.parents):
        if directory.name in exclude:
            break
        candidates.append(directory)
    for markers in (ROOT_MARKERS, VCS_MARKERS):
        for directory in candidates:
            if any((directory / marker).exists() for marker in markers):
                return directory
    if given is not None and given.is_dir():
        return given
    return None


def default_cache_dir(settings: Settings, first: Path) -> str:
    """The configured cache directory, else `.torchperf_lint_cache` at the project root of the
    first path (as ruff keeps its cache), so runs from different directories share it."""
    if settings.cache_dir != DEFAULT_DIRECTORY:
        return settings.cache_dir
    first = first.resolve()
    root = find_root(first, first if first.is_dir() else None)
    return str((root or Path.cwd()) / DEFAULT_DIRECTORY)


class Summaries:
    """Module summaries, from memory when the file's size and mtime are unchanged, else from the
    on-disk cache keyed by its bytes, else read anew."""

    def __init__(self, cache_dir: Optional[Path]) -> None:
        self._root = cache_dir
        self._directory = cache_dir / __version__ / "summaries" if cache_dir is not None else None
        self._memory: dict[Path, tuple[int, int, Summary]] = {}

    def of_file(self, path: Path) -> Summary:
        try:
            stat = path.stat()
        except OSError:
            return Summary()
        if not S_ISREG(stat.st_mode):
            return Summary()  # a FIFO named *.py would block the run
        remembered = self._memory.get(path)
        if remembered is not None and remembered[:2] == (stat.st_mtime_ns, stat.st_size):
            return remembered[2]
        try:
            data = path.read_bytes()
        except OSError:
            return Summary()
        summary = self.of_bytes(data)
        self._memory[path] = (stat.st_mtime_ns, stat.st_size, summary)
        return summary

    def of_bytes(self, data: bytes) -> Summary:
        key = hashlib.sha256(data).hexdigest()
        cached = self._load(key)
        if cached is not None:
            return cached
        try:
            source = data.decode("utf-8")
        except UnicodeDecodeError:
            source = data.decode("latin-1")
        summary = summarize(source) or Summary()
        self._store(key, summary)
        return summary

    def _file(self, key: str) -> Optional[Path]:
        return self._directory / key[:2] / f"{key}.json" if self._directory is not None else None

    def _load(self, key: str) -> Optional[Summary]:
        file = self._file(key)
        if file is None:
            return None
        try:
            return Summary.from_json(json.loads(file.read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError, KeyError):
            return None

    def _store(self, key: str, summary: Summary) -> None:
        file = self._file(key)
        if file is not None and self._root is not None:
            write_entry(self._root, file, summary.to_json())


class Projects:
    """The projects of one process (a CLI run, a flake8 worker, the language server)."""

    def __init__(self, settings: Settings, cache_dir: Optional[str] = None) -> None:
        self.settings = settings
        self.summaries = Summaries(Path(cache_dir) if cache_dir else None)
        self._built: dict[Path, Project] = {}
        # each directory's root, looked up once (a run asks for every file of a project)
        self._roots: dict[tuple[Path, Optional[Path], tuple[str, ...]], Optional[Path]] = {}

    def facts_for(self, path: str, source: Optional[str] = None, given: Optional[str] = None) -> EntryFacts:
        """What the project hands the module at `path`. `source` is the module's text when it
        differs from the file (stdin, an editor's buffer); `given` is the command-line path
        that led to it."""
        if path in ("-", "<string>", "<stdin>") or not path:
            if source is None:
                return NO_FACTS
            return self._single(Path("<string>"), source)
        file = Path(os.path.abspath(path))
        exclude = tuple(p.rstrip("/") for p in (*self.settings.exclude, *self.settings.extend_exclude))
        root = self._root(file, Path(os.path.abspath(given)) if given else None, exclude)
        if root is None:
            if source is None and not file.is_file():
                return NO_FACTS
            return self._single(file, source)
        overrides = {file: source} if source is not None else {}
        # an unsaved buffer makes a project of its own, kept only for this call
        project = None if overrides else self._built.get(root)
        if project is None:
            project = self._build(root, overrides)
            if not overrides:
                self._built[root] = project
        module = project.module_at(file)
        if module is None:  # excluded from the project, or a notebook: a module on its own
            return self._single(file, source)
        return project.entry_facts(module)

    def _root(self, file: Path, given: Optional[Path], exclude: tuple[str, ...]) -> Optional[Path]:
        if file.is_dir():
            return find_root(file, given, exclude)
        key = (file.parent, given, exclude)
        if key not in self._roots:
            self._roots[key] = find_root(file, given, exclude)
        return self._roots[key]

    def _single(self, file: Path, source: Optional[str]) -> EntryFacts:
        summary = (
            self.summaries.of_bytes(source.encode("utf-8"))
            if source is not None
            else self.summaries.of_file(file)
        )
        module = Module(file, file.name, summary)
        project = Project(file.parent, [module], self.settings.module_bases)
        return project.entry_facts(module)

    def _build(self, root: Path, overrides: dict[Path, str]) -> Project:
        exclude = (*self.settings.exclude, *self.settings.extend_exclude)
        errors: list[tuple[str, str]] = []
        found = discover([str(root)], exclude, errors, self.settings.respect_gitignore)
        paths = [Path(p) for p in found if p.endswith(".py")]
        if len(paths) > _MAX_MODULES:
            paths = []
        modules = []
        for path in paths:
            file = Path(os.path.abspath(path))
            source = overrides.get(file)
            summary = (
                self.summaries.of_bytes(source.encode("utf-8"))
                if source is not None
                else self.summaries.of_file(file)
            )
            display = file.relative_to(root).as_posix() if file.is_relative_to(root) else file.name
            is_test = any(matches_path(display, p) for p in self.settings.test_file_patterns)
            modules.append(Module(file, display, summary, is_test))
        return Project(root, modules, self.settings.module_bases)

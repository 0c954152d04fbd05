"""Finding a file's project and building its pass: the root, every module under it, their
summaries (cached by content), once per process for each root. With a cache directory, what the
pass handed each module is kept too, keyed by the bytes of every module of the project: a run
over an unchanged project builds no pass at all.

The root is the nearest directory holding `pyproject.toml`, `setup.cfg`, `setup.py` or `tox.ini`,
else the nearest version-control root, else the path given on the command line.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from stat import S_ISREG
from typing import TYPE_CHECKING, Any, Callable, Optional

from .. import __version__
from ..analysis.entry import NO_FACTS, EntryFacts
from ..cache_files import tool_identity, write_entry
from ..files import discover
from ..paths import matches_path
from ..settings import DEFAULT_CACHE_DIRECTORY, Settings

if TYPE_CHECKING:  # the pass itself is imported when one is built: see the module's docstring
    from .graph import Project
    from .summary import Summary

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
    if settings.cache_dir != DEFAULT_CACHE_DIRECTORY:
        return settings.cache_dir
    first = first.resolve()
    root = find_root(first, first if first.is_dir() else None)
    return str((root or Path.cwd()) / DEFAULT_CACHE_DIRECTORY)


class Summaries:
    """Module summaries, from memory when the file's size and mtime are unchanged, else from the
    on-disk cache keyed by its bytes, else read anew (and written there, unless `writes` is
    off: the editor reads what the command line kept, and writes nothing)."""

    def __init__(self, cache_dir: Optional[Path], writes: bool = True) -> None:
        self._root = cache_dir
        self._writes = writes
        self._directory = cache_dir / __version__ / "summaries" if cache_dir is not None else None
        self._memory: dict[Path, tuple[int, int, Summary]] = {}
        self._hashes: dict[Path, tuple[int, int, str]] = {}  # the last bytes read of each file

    def _stat(self, path: Path) -> Optional[tuple[int, int]]:
        """(mtime, size) of a regular file; None for anything else (a FIFO named *.py would
        block the run) or an unreadable path."""
        try:
            stat = path.stat()
        except OSError:
            return None
        return (stat.st_mtime_ns, stat.st_size) if S_ISREG(stat.st_mode) else None

    def hash_of(self, path: Path) -> str:
        """The hash of the file's bytes (from memory while its size and mtime stay); "" when
        it cannot be read."""
        stamp = self._stat(path)
        if stamp is None:
            return ""
        remembered = self._hashes.get(path)
        if remembered is not None and remembered[:2] == stamp:
            return remembered[2]
        read = self._read(path, stamp)
        return read[1] if read is not None else ""

    def _read(self, path: Path, stamp: tuple[int, int]) -> Optional[tuple[bytes, str]]:
        """The file's bytes and their hash, remembered as the last bytes read of it."""
        try:
            data = path.read_bytes()
        except OSError:
            return None
        key = hashlib.sha256(data).hexdigest()
        self._hashes[path] = (*stamp, key)
        return data, key

    def last_hash(self, path: Path) -> str:
        """The hash of the bytes last read of the file, without touching it."""
        remembered = self._hashes.get(path)
        return remembered[2] if remembered is not None else ""

    def of_file(self, path: Path) -> Summary:
        from .summary import Summary

        stamp = self._stat(path)
        if stamp is None:
            return Summary()
        remembered = self._memory.get(path)
        if remembered is not None and remembered[:2] == stamp:
            return remembered[2]
        read = self._read(path, stamp)
        if read is None:
            return Summary()
        summary = self.of_bytes(*read)
        self._memory[path] = (*stamp, summary)
        return summary

    def of_bytes(self, data: bytes, key: Optional[str] = None) -> Summary:
        from .summary import Summary, summarize

        key = key or hashlib.sha256(data).hexdigest()
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
        if self._directory is None:
            return None
        name = hashlib.sha256(f"{tool_identity()}\0{key}".encode()).hexdigest()  # the summariser's code too
        return self._directory / name[:2] / f"{name}.json"

    def _load(self, key: str) -> Optional[Summary]:
        from .summary import Summary

        file = self._file(key)
        if file is None:
            return None
        try:
            return Summary.from_json(json.loads(file.read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError, KeyError):
            return None

    def _store(self, key: str, summary: Summary) -> None:
        file = self._file(key)
        if file is not None and self._root is not None and self._writes:
            write_entry(self._root, file, summary.to_json())


class KnownFacts:
    """What the pass handed the modules of one project in one state, kept on disk under the
    cache directory: one file per project root, valid while every module's bytes, the module
    set and the settings the pass reads are what its key hashes. A run adds the modules it
    asked about; a key that changed starts the file anew."""

    def __init__(self, cache_dir: Path, root: Path, key: str) -> None:
        name = hashlib.sha256(str(root).encode("utf-8", "surrogateescape")).hexdigest()
        self._root = cache_dir
        self.file = cache_dir / __version__ / "projects" / name[:2] / f"{name}.json"
        self.key = key
        self._facts: dict[str, dict[str, Any]] = {}
        self._loaded: dict[str, EntryFacts] = {}
        self.added = False
        try:
            stored = json.loads(self.file.read_text(encoding="utf-8"))
            if stored["key"] == key and isinstance(stored["modules"], dict):
                self._facts = stored["modules"]
        except (OSError, ValueError, TypeError, KeyError):
            pass  # missing, corrupt or of another state: the pass runs

    def get(self, file: Path) -> Optional[EntryFacts]:
        name = str(file)
        facts = self._loaded.get(name)
        if facts is None and name in self._facts:
            try:
                facts = self._loaded[name] = EntryFacts.from_json(self._facts[name])
            except (ValueError, TypeError, KeyError):
                del self._facts[name]  # a corrupt entry is a miss
        return facts

    def add(self, file: Path, facts: EntryFacts) -> None:
        self._facts[str(file)] = facts.to_json()
        self._loaded[str(file)] = facts
        self.added = True

    def save(self) -> None:
        write_entry(self._root, self.file, {"key": self.key, "modules": self._facts})
        self.added = False


class Projects:
    """The projects of one process (a CLI run, a flake8 worker, the language server)."""

    def __init__(
        self, settings: Settings, cache_dir: Optional[str] = None, summaries: Optional[Summaries] = None
    ) -> None:
        """`cache_dir`: where summaries and the passes' results are kept; `summaries`: another
        source of summaries instead (one that outlives this object)."""
        self.settings = settings
        self.cache_dir = Path(cache_dir) if cache_dir else None
        self.summaries = summaries or Summaries(self.cache_dir)
        self._built: dict[Path, Project] = {}
        self._roots: dict[tuple[Path, Optional[str]], Optional[Path]] = {}
        self._listings: dict[Path, list[tuple[Path, str, bool]]] = {}
        self._known: dict[Path, KnownFacts] = {}

    def facts_for(self, path: str, source: Optional[str] = None, given: Optional[str] = None) -> EntryFacts:
        """What the project hands the module at `path`. `source` is the module's text when it
        differs from the file (stdin, an editor's buffer); `given` is the command-line path
        that led to it."""
        if path in ("-", "<string>", "<stdin>") or not path:
            if source is None:
                return NO_FACTS
            return self._single(Path("<string>"), source)
        file = Path(os.path.abspath(path))
        root = self._root(file, given)
        if root is None:
            if source is None and not file.is_file():
                return NO_FACTS
            return self._single(file, source)
        overrides = {file: source} if source is not None else {}
        known = self._known_facts(root) if not overrides else None
        if known is not None and (remembered := known.get(file)) is not None:
            return remembered
        # an unsaved buffer makes a project of its own, kept only for this call
        project = None if overrides else self._built.get(root)
        if project is None:
            project = self._build(root, overrides)
            if not overrides:
                self._built[root] = project
        module = project.module_at(file)
        if module is None:  # excluded from the project, or a notebook: a module on its own
            return self._single(file, source)
        facts = project.entry_facts(module)
        if known is not None:
            known.add(file, facts)
        return facts

    def save(self) -> None:
        """Keep what the passes of this process handed out, for the next run (with a cache
        directory). A module read with other bytes than its project's key hashed (edited
        during the run) leaves its project unsaved: its facts may be of either version."""
        for root, known in self._known.items():
            listing = self._listings[root]
            if known.added and known.key == self._key(root, listing, self.summaries.last_hash):
                known.save()

    def _known_facts(self, root: Path) -> Optional[KnownFacts]:
        if self.cache_dir is None:
            return None
        known = self._known.get(root)
        if known is None:
            key = self._key(root, self._listing(root), self.summaries.hash_of)
            known = self._known[root] = KnownFacts(self.cache_dir, root, key)
        return known

    def _key(self, root: Path, listing: list[tuple[Path, str, bool]], hash_of: Callable[[Path], str]) -> str:
        """The project's state, as far as the pass can tell: its modules' paths and bytes, which
        are tests, and the settings the pass reads."""
        state = (tool_identity(), str(root), self.settings.module_bases)
        digest = hashlib.sha256(repr(state).encode("utf-8", "surrogateescape"))
        for file, display, is_test in listing:
            digest.update(
                f"\0{file}\0{display}\0{is_test}\0{hash_of(file)}".encode("utf-8", "surrogateescape")
            )
        return digest.hexdigest()

    def _root(self, file: Path, given: Optional[str]) -> Optional[Path]:
        """find_root, once per directory: the files of a directory share their root."""
        key = (file.parent, given)
        if key not in self._roots:
            exclude = tuple(p.rstrip("/") for p in (*self.settings.exclude, *self.settings.extend_exclude))
            self._roots[key] = find_root(file, Path(os.path.abspath(given)) if given else None, exclude)
        return self._roots[key]

    def _single(self, file: Path, source: Optional[str]) -> EntryFacts:
        summary = (
            self.summaries.of_bytes(source.encode("utf-8"))
            if source is not None
            else self.summaries.of_file(file)
        )
        from .graph import Module, Project

        module = Module(file, file.name, summary)
        project = Project(file.parent, [module], self.settings.module_bases)
        return project.entry_facts(module)

    def _listing(self, root: Path) -> list[tuple[Path, str, bool]]:
        """The project's modules, found once per process."""
        listing = self._listings.get(root)
        if listing is None:
            listing = self._listings[root] = self._discover(root)
        return listing

    def _discover(self, root: Path) -> list[tuple[Path, str, bool]]:
        """The project's modules: (file, path relative to the root, whether it is a test)."""
        exclude = (*self.settings.exclude, *self.settings.extend_exclude)
        errors: list[tuple[str, str]] = []
        found = discover([str(root)], exclude, errors, self.settings.respect_gitignore)
        paths = [Path(p) for p in found if p.endswith(".py")]
        if len(paths) > _MAX_MODULES:
            paths = []
        listing = []
        for path in paths:
            file = Path(os.path.abspath(path))
            display = file.relative_to(root).as_posix() if file.is_relative_to(root) else file.name
            is_test = any(matches_path(display, p) for p in self.settings.test_file_patterns)
            listing.append((file, display, is_test))
        return listing

    def _build(self, root: Path, overrides: dict[Path, str]) -> Project:
        from .graph import Module, Project

        # an editor's buffer is linted against the files as they are now, new ones included
        listing = self._discover(root) if overrides else self._listing(root)
        modules = []
        for file, display, is_test in listing:
            source = overrides.get(file)
            summary = (
                self.summaries.of_bytes(source.encode("utf-8"))
                if source is not None
                else self.summaries.of_file(file)
            )
            modules.append(Module(file, display, summary, is_test))
        return Project(root, modules, self.settings.module_bases)

"""Check one file as the command line asks (lint, fix or diff; Python or notebook), in this
process or in a worker of the pool. What comes back holds no tree nodes, so it can cross
processes.

libcst, the engine and the rules are imported only where a file must be parsed (a cache miss,
a fix, a notebook): a run whose files are all cached never loads them.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from .analysis.entry import EntryFacts
from .analysis.torch_version import declared_version
from .cache import Cache, finding_from_record, finding_to_record
from .engine.errors import deep_recursion, error_finding, internal_error
from .engine.findings import Finding
from .engine.remap import place_before_fix
from .notebook import Notebook, NotebookError, read_notebook, write_back
from .project.store import Projects
from .settings import Settings
from .writer import NotWritable, write_atomic

if TYPE_CHECKING:
    from .engine.fixer import FixOutcome
    from .rules.base import Rule

NOTEBOOK_SUFFIX = ".ipynb"


@dataclasses.dataclass(frozen=True)
class Job:
    """What the files under one config are checked with (a run has one job per config its files
    are under); picklable, so workers get it once."""

    settings: Settings
    rule_codes: tuple[str, ...]
    fix: bool = False
    diff: bool = False
    unsafe: bool = False
    cache_dir: Optional[str] = None
    given: tuple[str, ...] = ()  # the command line's paths: a project without a root is the one given
    # off-by-default rules run in the same walk, their findings only counted (selection.hidden_codes)
    hidden_codes: tuple[str, ...] = ()


@dataclasses.dataclass
class FileOutcome:
    findings: list[Finding]
    diff: str = ""
    fixed: bool = False
    output: Optional[bytes] = None  # stdin under --fix: the bytes to print
    applied: int = 0  # fixes written (--fix), printed (stdin) or shown (--diff)
    hidden: list[Finding] = dataclasses.field(default_factory=list)  # of the job's hidden rules
    notes: list[Finding] = dataclasses.field(default_factory=list)  # why rules stayed silent (--show-context)
    # what the project's torch requirement hides, of the rules that are on (Settings.newer_torch)
    newer_torch: list[Finding] = dataclasses.field(default_factory=list)
    # what only --library shows, of the rules that are on (Settings.unstepped)
    unstepped: list[Finding] = dataclasses.field(default_factory=list)
    seconds: float = 0.0  # how long the check took (0 when it came from the cache)


def light(finding: Finding) -> Finding:
    """The finding without its tree node and with a fix reduced to safety and description."""
    return finding_from_record(finding_to_record(finding))


def read_file(path: str) -> tuple[Optional[bytes], Optional[Finding]]:
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            # a FIFO or device named *.py would block the run or never end
            what = "a directory" if os.path.isdir(path) else "not a regular file"
            return None, error_finding(path, f"could not read: {what}")
        with open(path, "rb") as stream:
            return stream.read(), None
    except OSError as error:
        return None, error_finding(path, f"could not read: {error.strerror or error}")


def unified_diff(path: str, before: bytes, after: bytes, encoding: str) -> str:
    old = before.decode(encoding, errors="replace").splitlines(keepends=True)
    new = after.decode(encoding, errors="replace").splitlines(keepends=True)
    lines = difflib.unified_diff(old, new, fromfile=f"a/{path}", tofile=f"b/{path}")
    # a last line without a newline gets diff's and git's marker, or it runs into the next line
    return "".join(
        line if line.endswith("\n") else f"{line}\n\\ No newline at end of file\n" for line in lines
    )


class Checker:
    """Checks files for one job; one per process."""

    def __init__(self, job: Job) -> None:
        self.job = job
        self._caches: dict[str, Cache] = {}
        self.projects = Projects(job.settings, job.cache_dir)

    @functools.cached_property
    def rules(self) -> list[Rule]:
        from .rules import select_rules  # lazily, as the engine below: see the module's docstring

        return select_rules(self.job.rule_codes + self.job.hidden_codes, ())

    def _lint_bytes(self, data: bytes, path: str, facts: EntryFacts) -> list[Finding]:
        from .engine.runner import lint_bytes

        return lint_bytes(data, path, self.rules, self.job.settings, facts).findings

    def _fix_bytes(self, data: bytes, path: str, facts: EntryFacts) -> FixOutcome:
        from .engine.fixer import fix_bytes

        return fix_bytes(data, path, self.rules, self.job.settings, unsafe=self.job.unsafe, entry=facts)

    def facts(self, path: str, source: Optional[str] = None) -> EntryFacts:
        """What the file's project knows about it from its other modules."""
        absolute = os.path.abspath(path)
        given = next(
            (
                g
                for g in self.job.given
                if absolute == os.path.abspath(g) or absolute.startswith(os.path.join(os.path.abspath(g), ""))
            ),
            None,
        )
        return self.projects.facts_for(path, source, given)

    def path(self, path: str, facts: Optional[EntryFacts] = None) -> FileOutcome:
        data, unreadable = read_file(path)
        if unreadable is not None:
            return FileOutcome([unreadable])
        assert data is not None
        return self.data(path, data, facts=facts)

    def data(
        self, path: str, data: bytes, stdin: bool = False, facts: Optional[EntryFacts] = None
    ) -> FileOutcome:
        """Never raises: a failure is a TPL000 finding and the file keeps its bytes."""
        try:
            with deep_recursion():
                if path.endswith(NOTEBOOK_SUFFIX):
                    outcome = self._notebook(path, data, stdin)
                else:
                    if facts is None:
                        facts = self.facts(path, _text(data) if stdin else None)
                    outcome = self._python(path, data, stdin, facts)
        except Exception as error:  # noqa: BLE001 - one file's bug must not end the run
            outcome = FileOutcome([error_finding(path, internal_error("torchperf-lint", error))])
            if stdin:
                outcome.output = data  # an editor piping its buffer gets it back unchanged
        outcome.findings = [light(f) for f in outcome.findings]
        return self._hidden_apart(outcome)

    def cached(self, path: str, facts: EntryFacts) -> Optional[FileOutcome]:
        """The file's outcome from the cache alone (its findings are light already), or None
        when it must be checked: a miss, a fix or a diff, a notebook, a file that cannot be read.
        A run whose files are all cached needs no pool of workers."""
        if self.job.fix or self.job.diff or path.endswith(NOTEBOOK_SUFFIX):
            return None
        try:
            cache = self._cache_for(path)
            data, _ = read_file(path)
            if cache is None or data is None:
                return None
            found = cache.get(cache.key(path, data, facts.digest()))
        except Exception:  # noqa: BLE001 - the full check reports it, as a TPL000 finding
            return None
        return None if found is None else self._hidden_apart(FileOutcome(found))

    def _hidden_apart(self, outcome: FileOutcome) -> FileOutcome:
        """The findings of the job's hidden rules (off by default, only counted) set apart, and
        notes, what the torch requirement hides and what only --library shows apart from findings,
        so that they never count; a hidden rule's notes, and what those hide of it, are dropped."""
        hidden = set(self.job.hidden_codes)
        settings = self.job.settings
        if hidden or settings.notes or settings.newer_torch or settings.unstepped:

            def apart(f: Finding) -> bool:
                return f.note or f.newer_torch or (f.unstepped and not settings.library)

            found = [f for f in outcome.findings if f.code not in hidden or not apart(f)]
            outcome.notes = [f for f in found if f.note]
            outcome.newer_torch = [f for f in found if f.newer_torch]
            outcome.unstepped = [f for f in found if apart(f) and not (f.note or f.newer_torch)]
            shown = [f for f in found if not apart(f)]
            outcome.hidden = [f for f in shown if f.code in hidden]
            outcome.findings = [f for f in shown if f.code not in hidden]
        return outcome

    # -- Python files -----------------------------------------------------------------
    def _lint(self, path: str, data: bytes, facts: EntryFacts) -> list[Finding]:
        cache = self._cache_for(path)
        if cache is None:
            return self._lint_bytes(data, path, facts)
        # an edit in another module can change what this one is handed: part of the key
        key = cache.key(path, data, facts.digest())
        found = cache.get(key)
        if found is None:
            found = [light(f) for f in self._lint_bytes(data, path, facts)]
            cache.put(key, found)
        return found

    def _cache_for(self, path: str) -> Optional[Cache]:
        if self.job.cache_dir is None:
            return None
        directory = str(Path(path).parent)
        cache = self._caches.get(directory)
        if cache is None:
            # The torch version a project declares changes findings (TPL301): part of the key.
            declared = None if self.job.settings.torch_version else declared_version(Path(directory))
            extra = repr((declared.version, declared.source)) if declared else ""
            rules = self.job.rule_codes + self.job.hidden_codes  # an entry holds both rules' findings
            cache = Cache(Path(self.job.cache_dir), self.job.settings, rules, extra)
            self._caches[directory] = cache
        return cache

    def _python(self, path: str, data: bytes, stdin: bool, facts: EntryFacts) -> FileOutcome:
        job = self.job
        if not (job.fix or job.diff):
            return FileOutcome(self._lint(path, data, facts))
        outcome = self._fix_bytes(data, path, facts)
        encoding = outcome.result.module.encoding if outcome.result.module else "utf-8"
        remaining = outcome.result.findings
        if job.diff and outcome.changed:  # the file keeps its bytes: point into them
            before, after = data.decode(encoding), outcome.fixed.decode(encoding)
            remaining = place_before_fix(remaining, outcome.original_findings, before, after)
        return self._apply(path, data, outcome.fixed, remaining, encoding, stdin, facts, outcome.applied)

    def _apply(
        self,
        path: str,
        data: bytes,
        fixed: bytes,
        remaining: list[Finding],
        encoding: str,
        stdin: bool,
        facts: EntryFacts,
        applied: int,
    ) -> FileOutcome:
        if fixed == data:
            return FileOutcome(remaining, output=data if stdin else None)
        if self.job.diff:
            return FileOutcome(remaining, diff=unified_diff(path, data, fixed, encoding), applied=applied)
        if stdin:
            return FileOutcome(remaining, output=fixed, applied=applied)
        try:
            write_atomic(path, fixed)
        except (NotWritable, OSError) as error:
            # the file keeps its old bytes, so its old findings still stand
            message = str(error) if isinstance(error, NotWritable) else f"could not write: {error}"
            old = self._findings_of_unchanged(path, data, facts)
            return FileOutcome([error_finding(path, message), *old])
        return FileOutcome(remaining, fixed=True, applied=applied)

    def _findings_of_unchanged(self, path: str, data: bytes, facts: EntryFacts) -> list[Finding]:
        if path.endswith(NOTEBOOK_SUFFIX):
            notebook = read_notebook(data.decode("utf-8"))
            return self._notebook_findings(path, notebook, notebook.module_source(), facts)
        return self._lint_bytes(data, path, facts)

    # -- notebooks ----------------------------------------------------------------------
    def _notebook(self, path: str, data: bytes, stdin: bool) -> FileOutcome:
        try:
            notebook = read_notebook(data.decode("utf-8"))
        except (UnicodeDecodeError, NotebookError) as error:
            return FileOutcome([error_finding(path, f"could not read notebook: {error}")])
        source = notebook.module_source()
        facts = self.facts(path, source)
        if not (self.job.fix or self.job.diff):
            return FileOutcome(self._notebook_findings(path, notebook, source, facts))
        outcome = self._fix_bytes(source.encode("utf-8"), path, facts)
        fixed_source = outcome.fixed.decode("utf-8")
        if fixed_source == source:
            remaining = self._located(notebook, outcome.result.findings)
            return FileOutcome(remaining, output=data if stdin else None)
        try:
            fixed = write_back(notebook, fixed_source).encode("utf-8")
        except NotebookError as error:
            unchanged = self._located(notebook, outcome.original_findings)
            return FileOutcome([error_finding(path, str(error)), *unchanged])
        if self.job.diff:  # the notebook keeps its bytes: point into its cells as they are
            on_disk = place_before_fix(
                outcome.result.findings, outcome.original_findings, source, fixed_source
            )
            remaining = self._located(notebook, on_disk)
        else:
            # A fix that added lines to a cell moved the cells after it: place what remains in the
            # notebook as written (the same findings, linted again as a re-run would lint them).
            written = read_notebook(fixed.decode("utf-8"))
            remaining = self._notebook_findings(path, written, written.module_source(), facts)
        return self._apply(path, data, fixed, remaining, "utf-8", stdin, facts, outcome.applied)

    def _notebook_findings(
        self, path: str, notebook: Notebook, source: str, facts: EntryFacts
    ) -> list[Finding]:
        findings = self._lint_bytes(source.encode("utf-8"), path, facts)
        return self._located(notebook, findings)

    @staticmethod
    def _located(notebook: Notebook, findings: list[Finding]) -> list[Finding]:
        located = []
        for finding in findings:
            cell, line = notebook.locate(finding.line)
            end = finding.end_line - finding.line + line
            located.append(
                dataclasses.replace(
                    finding,
                    cell=cell,
                    line=line,
                    end_line=end,
                    context=notebook.relabel(finding.context),
                    edits=(),  # they count lines of the joined module, not of the cell
                )
            )
        return located


_worker: dict[str, list[Checker]] = {}


def init_worker(jobs: tuple[Job, ...]) -> None:
    _worker["checkers"] = [Checker(job) for job in jobs]


def check_in_worker(path: str, job: int, facts: EntryFacts) -> FileOutcome:
    return _worker["checkers"][job].path(path, facts)


def _text(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")

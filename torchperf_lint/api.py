"""The library entry points: lint or fix source text without the command line."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Iterable, Optional, Union

from .analysis.entry import EntryFacts
from .analysis.torch_version import declared_version
from .config import Settings
from .engine.findings import Finding, allowed
from .engine.fixer import apply_fix, fix_bytes
from .engine.runner import FileResult, lint_bytes
from .project.store import Projects, Summaries, default_cache_dir
from .rules import select_rules
from .settings import cache_turned_off


def _encode(source: Union[str, bytes]) -> bytes:
    return source.encode("utf-8") if isinstance(source, str) else source


# Per process (the language server): each settings' project passes, and the module summaries,
# which depend on a file's bytes only and so outlive a change of config.
_projects: dict[tuple[Settings, Optional[str]], Projects] = {}
_summaries: dict[Optional[str], Summaries] = {}


def _kept_summaries(settings: Settings, path: str) -> Optional[str]:
    """The cache the command line, pre-commit and flake8 keep for `path`, whose summaries spare
    the editor an `ast` parse of every module; read, never written. None under
    TORCHPERF_LINT_NO_CACHE or for text without a file."""
    if cache_turned_off() or path in ("-", "<string>", "<stdin>", ""):
        return None
    return default_cache_dir(settings, Path(path))


def project_facts(source: Union[str, bytes], path: str, settings: Settings) -> EntryFacts:
    """What the project of `path` (read from disk, with `source` for that file) hands it."""
    cache = _kept_summaries(settings, path)
    projects = _projects.get((settings, cache))
    if projects is None:
        summaries = _summaries.get(cache)
        if summaries is None:
            summaries = _summaries[cache] = Summaries(Path(cache) if cache else None, writes=False)
        projects = _projects[(settings, cache)] = Projects(settings, summaries=summaries)
    text = source if isinstance(source, str) else source.decode("utf-8", errors="replace")
    return projects.facts_for(path, text)


def _lint(
    source: Union[str, bytes], path: str, settings: Optional[Settings], select: Optional[Iterable[str]]
) -> FileResult:
    settings = settings or Settings()
    rules = select_rules(
        select if select is not None else settings.select, settings.ignore, settings.extend_select
    )
    return lint_bytes(_encode(source), path, rules, settings, project_facts(source, path, settings))


def lint_source(
    source: Union[str, bytes],
    path: str = "<string>",
    settings: Optional[Settings] = None,
    select: Optional[Iterable[str]] = None,
) -> list[Finding]:
    """Findings for one module's source (TPL000 findings for what could not be checked)."""
    return _lint(source, path, settings, select).findings


@dataclasses.dataclass
class Linted:
    """One lint that keeps its parsed tree, so that each finding's fix can be applied alone."""

    findings: list[Finding]
    result: FileResult

    def fixed(self, finding: Finding, unsafe: bool = False) -> Optional[str]:
        """The source with only the fix of `finding` (one of `findings`) applied: what `--fix`
        (with `--unsafe-fixes` when `unsafe`) writes when it is the only fixable finding and its
        fix leaves nothing new to fix. None when `unsafe` does not allow its fix, or the fixed
        code would not parse."""
        module = self.result.module
        if module is None or finding.fix is None or not allowed(finding.fix, unsafe):
            return None
        data = apply_fix(module, finding.fix)
        return None if data is None else data.decode(module.encoding)


def lint_for_fixes(
    source: Union[str, bytes],
    path: str = "<string>",
    settings: Optional[Settings] = None,
    select: Optional[Iterable[str]] = None,
) -> Linted:
    """The findings of `lint_source`, with the means to apply any one finding's fix."""
    result = _lint(source, path, settings, select)
    return Linted(result.findings, result)


def fix_source(
    source: Union[str, bytes],
    path: str = "<string>",
    unsafe: bool = False,
    settings: Optional[Settings] = None,
    select: Optional[Iterable[str]] = None,
) -> str:
    """The source with the fixes applied (safe ones; unsafe ones too when `unsafe`)."""
    settings = settings or Settings()
    rules = select_rules(
        select if select is not None else settings.select, settings.ignore, settings.extend_select
    )
    entry = project_facts(source, path, settings)
    outcome = fix_bytes(_encode(source), path, rules, settings, unsafe=unsafe, entry=entry)
    module = outcome.result.module
    encoding = module.encoding if module is not None else "utf-8"
    return outcome.fixed.decode(encoding)


def forget_project_files() -> None:
    """Make a long-lived process (the language server) read the project again: the torch
    version a project declares is cached per directory, and each project's pass per process.
    Module summaries stay: they are checked against each file's size and mtime."""
    declared_version.cache_clear()
    _projects.clear()

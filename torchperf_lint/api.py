"""The library entry points: lint or fix source text without the command line."""

from __future__ import annotations

from typing import Iterable, Optional, Union

from .analysis.entry import EntryFacts
from .config import Settings
from .engine.findings import Finding
from .engine.fixer import fix_bytes
from .engine.runner import lint_bytes
from .project.store import Projects
from .rules import select_rules


def _encode(source: Union[str, bytes]) -> bytes:
    return source.encode("utf-8") if isinstance(source, str) else source


_projects: dict[Settings, Projects] = {}


def project_facts(source: Union[str, bytes], path: str, settings: Settings) -> EntryFacts:
    """What the project of `path` (read from disk, with `source` for that file) hands it."""
    projects = _projects.get(settings)
    if projects is None:
        projects = _projects[settings] = Projects(settings)
    text = source if isinstance(source, str) else source.decode("utf-8", errors="replace")
    return projects.facts_for(path, text)


def lint_source(
    source: Union[str, bytes],
    path: str = "<string>",
    settings: Optional[Settings] = None,
    select: Optional[Iterable[str]] = None,
) -> list[Finding]:
    """Findings for one module's source (TPL000 findings for what could not be checked)."""
    settings = settings or Settings()
    rules = select_rules(
        select if select is not None else settings.select, settings.ignore, settings.extend_select
    )
    entry = project_facts(source, path, settings)
    return lint_bytes(_encode(source), path, rules, settings, entry).findings


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

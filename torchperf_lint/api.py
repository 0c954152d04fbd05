"""The library entry points: lint or fix source text without the command line."""

from __future__ import annotations

from typing import Iterable, Optional, Union

from .config import Settings
from .engine.findings import Finding
from .engine.fixer import fix_bytes
from .engine.runner import lint_bytes
from .rules import select_rules


def _encode(source: Union[str, bytes]) -> bytes:
    return source.encode("utf-8") if isinstance(source, str) else source


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
    return lint_bytes(_encode(source), path, rules, settings).findings


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
    outcome = fix_bytes(_encode(source), path, rules, settings, unsafe=unsafe)
    module = outcome.result.module
    encoding = module.encoding if module is not None else "utf-8"
    return outcome.fixed.decode(encoding)

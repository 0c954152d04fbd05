"""The flake8 plugin: a thin adapter over the same engine the CLI runs."""

from __future__ import annotations

import argparse
from collections.abc import Iterator, Sequence
from typing import Any, Optional

from . import __version__
from .config import ConfigError, Settings, parse_version
from .engine.runner import error_finding, internal_error, lint_bytes
from .project.store import Projects
from .rules import ALL_RULES, select_rules
from .rules.base import Rule


class TorchPerfPlugin:
    name = "torchperf-lint"
    version = __version__
    _settings = Settings(noqa=False)  # flake8 applies noqa comments itself, honouring --disable-noqa
    _rules: Sequence[Rule] = select_rules(None, ())
    _project_pass: Optional[Projects] = None

    def __init__(self, tree: Any, filename: str, lines: Sequence[str]) -> None:
        # `tree` makes flake8 run us once per file; we parse with libcst ourselves.
        self.filename = filename
        self.lines = lines

    @classmethod
    def add_options(cls, manager: Any) -> None:
        manager.add_option(
            "--torchperf-torch-version",
            parse_from_config=True,
            default=None,
            help="torch version the code targets (X.Y), for version-dependent TPL rules",
        )
        manager.add_option(
            "--torchperf-test-file-patterns",
            parse_from_config=True,
            comma_separated_list=True,
            default=None,
            help="path patterns of test files (default: pytest's)",
        )

    @classmethod
    def parse_options(cls, options: argparse.Namespace) -> None:
        settings = Settings(noqa=False)
        version = getattr(options, "torchperf_torch_version", None)
        if version:
            try:
                settings = settings.replace(
                    torch_version=parse_version(version, "--torchperf-torch-version"),
                    torch_version_source=f"--torchperf-torch-version {version}",
                )
            except ConfigError as error:
                raise SystemExit(f"flake8: {error}") from None
        patterns = getattr(options, "torchperf_test_file_patterns", None)
        if patterns:
            settings = settings.replace(test_file_patterns=tuple(patterns))
        cls._settings = settings
        # flake8 filters codes itself; off-by-default rules run only when named exactly.
        named: set[str] = set()
        for option in ("select", "extend_select", "enable_extensions"):
            named.update(c.strip().upper() for c in (getattr(options, option, None) or []))
        extra = [rule.code for rule in ALL_RULES if not rule.default_on and rule.code in named]
        cls._rules = select_rules(None, (), extra)

    @classmethod
    def _projects(cls) -> Projects:
        if cls._project_pass is None or cls._project_pass.settings != cls._settings:
            cls._project_pass = Projects(cls._settings, cls._settings.cache_dir)
        return cls._project_pass

    def run(self) -> Iterator[tuple[int, int, str, type]]:
        # flake8 calls us only for files its own parser accepted (it reports E999/E902 for the
        # others), so a TPL000 here is something flake8 cannot see: a file libcst cannot parse,
        # one nested too deeply, or a bug in a rule. Nothing may escape: flake8 would abort the
        # whole run on an exception raised while it iterates over our findings.
        try:
            source = "".join(self.lines)
            # flake8 reads the file from disk, so the project reads it from there too (one
            # project pass per worker process); stdin's text stands in for its file
            stdin = self.filename in ("-", "stdin")
            entry = self._projects().facts_for(self.filename, source if stdin else None)
            findings = lint_bytes(source, self.filename, self._rules, self._settings, entry).findings
        except Exception as error:  # noqa: BLE001 - lint_bytes never raises; this is the last guard
            findings = [error_finding(self.filename, internal_error("the flake8 plugin", error))]
        for finding in findings:
            yield finding.line, finding.col - 1, f"{finding.code} {finding.message}", type(self)

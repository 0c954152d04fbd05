"""The flake8 plugin: a thin adapter over the same engine the CLI runs."""

from __future__ import annotations

import argparse
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Optional

from . import __version__
from .config import ConfigError, Settings, load_settings, parse_version
from .engine.runner import error_finding, internal_error, lint_bytes
from .project.store import Projects, default_cache_dir
from .rules import Selection, lookup, resolve, select_rules
from .rules.base import Rule
from .settings import cache_turned_off


def _config_start(options: argparse.Namespace) -> Path:
    """Where the config search starts: the first path flake8 checks (the display name of
    stdin), else the working directory, as for the command line."""
    for name in getattr(options, "filenames", None) or []:
        if name == "-":
            name = getattr(options, "stdin_display_name", None) or "."
        return Path(name) if name != "stdin" else Path(".")
    return Path(".")


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
        manager.add_option(
            "--torchperf-library",
            parse_from_config=True,
            action="store_true",
            default=False,
            help="lint as a library: also report code hot only by assumption (torchperf-lint --library)",
        )

    @classmethod
    def parse_options(cls, options: argparse.Namespace) -> None:
        """The project's `[tool.torchperf-lint]` (or setup.cfg/tox.ini section), found as the
        command line finds it, so the editor shows what the CLI shows; flake8's own options win
        where given: --torchperf-* over the config's keys (--torchperf-library turns `library` on), a TPL code named exactly in flake8's
        --select, --extend-select or --enable-extensions runs even when the config leaves it out,
        and flake8 applies its --ignore, per-file-ignores and noqa to what the plugin reports."""
        try:
            settings = load_settings(_config_start(options)).replace(noqa=False)
            version = getattr(options, "torchperf_torch_version", None)
            if version:
                settings = settings.replace(
                    torch_version=parse_version(version, "--torchperf-torch-version"),
                    torch_version_source=f"--torchperf-torch-version {version}",
                )
            patterns = getattr(options, "torchperf_test_file_patterns", None)
            if patterns:
                settings = settings.replace(test_file_patterns=tuple(patterns))
            if getattr(options, "torchperf_library", False):
                settings = settings.replace(library=True)
            named: set[str] = set()
            for option in ("select", "extend_select", "enable_extensions"):
                named.update(c.strip().upper() for c in (getattr(options, option, None) or []))
            config = Selection(settings.select, settings.extend_select, settings.ignore)
            exact = sorted(code for code in named if getattr(lookup(code), "code", None) == code)
            flake8 = Selection(extend_select=tuple(exact))
            rules = resolve([config, flake8], str(settings.config_file or "selection"))
        except ConfigError as error:
            raise SystemExit(f"flake8: {error}") from None
        cls._settings = settings
        cls._rules = rules

    @classmethod
    def _projects(cls, filename: str) -> Projects:
        """One project pass per worker process; its summaries cached where the CLI keeps them."""
        if cls._project_pass is None or cls._project_pass.settings != cls._settings:
            cache_dir = None if cache_turned_off() else default_cache_dir(cls._settings, Path(filename))
            cls._project_pass = Projects(cls._settings, cache_dir)
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
            entry = self._projects(self.filename).facts_for(self.filename, source if stdin else None)
            findings = lint_bytes(source, self.filename, self._rules, self._settings, entry).findings
        except Exception as error:  # noqa: BLE001 - lint_bytes never raises; this is the last guard
            findings = [error_finding(self.filename, internal_error("the flake8 plugin", error))]
        for finding in findings:
            yield finding.line, finding.col - 1, f"{finding.code} {finding.message}", type(self)

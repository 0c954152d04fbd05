"""What a file is checked with: the settings every part of the engine reads. Loading them from
config files and the command line is config.py's job; this module imports nothing of the package, so
the engine, the rules and the config loader never import one another in a circle."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

DEFAULT_CACHE_DIRECTORY = ".torchperf_lint_cache"
NO_CACHE_VARIABLE = "TORCHPERF_LINT_NO_CACHE"  # set (not "0"): no cache is read or written, as --no-cache


def cache_turned_off() -> bool:
    """The environment says --no-cache, for CI and tests (the CLI, flake8 and the editor alike)."""
    return os.environ.get(NO_CACHE_VARIABLE, "") not in ("", "0")


DEFAULT_EXCLUDE = (
    ".git",
    ".hg",
    ".svn",
    ".tox",
    ".nox",
    ".venv",
    "venv",
    "site-packages",
    ".eggs",
    "__pycache__",
    "build",
    "dist",
    "node_modules",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
    DEFAULT_CACHE_DIRECTORY,
)
DEFAULT_TEST_FILE_PATTERNS = ("test_*.py", "*_test.py", "tests/", "conftest.py", "testing/", "test_utils/")


class ConfigError(Exception):
    """A config file or option that cannot be used; the message names where and why."""


@dataclasses.dataclass(frozen=True)
class Settings:
    select: tuple[str, ...] | None = None  # None: the default rule set
    ignore: tuple[str, ...] = ()
    extend_select: tuple[str, ...] = ()
    exclude: tuple[str, ...] = DEFAULT_EXCLUDE
    extend_exclude: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    torch_version: tuple[int, int] | None = None
    torch_version_source: str = "no torch version given or declared: assuming the newest"
    test_file_patterns: tuple[str, ...] = DEFAULT_TEST_FILE_PATTERNS
    # classes (or packages, ending in a dot) whose subclasses are models, beyond the built-in table
    module_bases: tuple[str, ...] = ()
    lint_all_files: bool = False
    respect_gitignore: bool = True  # walking a directory skips what git ignores (ruff's default)
    config_file: Path | None = None
    cache_dir: str = DEFAULT_CACHE_DIRECTORY  # at the project root unless configured
    text_edits: bool = False  # express safe fixes as text edits too (SARIF output asks for them)
    noqa: bool = True  # honour noqa comments; the flake8 plugin leaves them to flake8 (--disable-noqa)
    notes: bool = False  # report rules' notes on candidates they stay silent on (--show-context)
    # also find what a declared torch requirement hides, to count it (a text run's summary)
    newer_torch: bool = False
    # report code hot only by hypothesis too (forwards no step loop of the project runs): a library
    library: bool = False
    # also find what only `library` shows, to count it (a text run's summary)
    unstepped: bool = False

    def replace(self, **changes: Any) -> Settings:
        return dataclasses.replace(self, **changes)

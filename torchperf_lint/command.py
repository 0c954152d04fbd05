"""What a parsed command line does: resolve the settings, find the files, check them (in a pool,
from the cache where it can), report, and say how the run went."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Optional

from .analysis.torch_apis import EVERY_API, shown
from .analysis.torch_version import Declared, declared_version
from .checking import Checker, FileOutcome, Job, read_file
from .config import ConfigError, ConfigFinder, Settings, parse_version, read_config_file, settings_from
from .console import EXIT_CLEAN, EXIT_ERROR, EXIT_FINDINGS, emit, usage_error
from .engine.errors import ERROR_CODE, error_finding
from .engine.findings import Finding
from .files import discover
from .listing import file_list, rule_table, settings_table
from .parallel import check_paths, default_jobs
from .project.store import default_cache_dir
from .reporting import STATISTICS_FORMATS, ReportOptions, reporter
from .selection import Selection, hidden_codes, resolve_codes
from .settings import cache_turned_off
from .writer import NotWritable, write_atomic

# the options that change a setting, by setting
_OPTIONS = {
    "exclude": "--exclude",
    "extend_exclude": "--extend-exclude",
    "torch_version": "--torch-version",
    "lint_all_files": "--lint-all-files",
    "library": "--library",
    "respect_gitignore": "--no-respect-gitignore",
}


def _over_command_line(args: argparse.Namespace, settings: Settings) -> Settings:
    """A config's settings with the command line's options over them."""
    changes: dict[str, object] = {}
    if args.exclude is not None:
        changes["exclude"] = tuple(args.exclude)
    if args.extend_exclude:
        changes["extend_exclude"] = settings.extend_exclude + tuple(args.extend_exclude)
    if args.torch_version:
        changes["torch_version"] = parse_version(args.torch_version, "--torch-version")
        changes["torch_version_source"] = f"--torch-version {args.torch_version}"
    if args.lint_all_files:
        changes["lint_all_files"] = True
    if args.library:
        changes["library"] = True
    if args.show_context:
        changes["notes"] = True  # why a rule stays silent is context too
    if args.no_respect_gitignore:
        changes["respect_gitignore"] = False
    if args.format == "sarif":
        changes["text_edits"] = True  # SARIF carries safe fixes as text replacements
    if not (args.fix or args.diff):
        # the text summary says what the torch requirement hides; every format asks, so that they
        # share cache entries, and a fix never sees it; the same for what only --library shows
        changes["newer_torch"] = True
        changes["unstepped"] = True
    return settings.replace(**changes)


class JobsByConfig:
    """Each file's job: the settings of its nearest config (every file's, with --config) under the
    command line's options, the rules they enable and where their results are cached. ruff's
    hierarchical configuration: a monorepo's packages are each checked under their own config,
    whatever the order of the paths. One job per config, built when a file first needs it."""

    def __init__(self, args: argparse.Namespace, paths: Sequence[str], first: Path, cache: bool) -> None:
        self.args = args
        self.paths = tuple(paths)
        self.first = first
        self.cache = cache
        self.finder = ConfigFinder()
        self.explicit = read_config_file(Path(args.config)) if args.config else None
        self.jobs: list[Job] = []
        self.config_keys: list[tuple[str, ...]] = []
        self._index: dict[Path | None, int] = {}
        self._of_directory: dict[str, int] = {}

    def index(self, path: str) -> int:
        """The index in `jobs` of the job that checks `path` (a file or directory; - is stdin)."""
        if path == "-":
            path = self.args.stdin_filename or "."
        directory = path if os.path.isdir(path) else (os.path.dirname(path) or ".")
        index = self._of_directory.get(directory)
        if index is None:
            index = self._of_directory[directory] = self._of_config(Path(directory))
        return index

    def _of_config(self, directory: Path) -> int:
        found = self.explicit or self.finder.nearest(directory)
        config = found[0] if found else None
        index = self._index.get(config)
        if index is None:
            settings, keys = settings_from(found)
            settings = _over_command_line(self.args, settings)
            layers = _selection_layers(self.args, settings)
            rules = resolve_codes(layers, "rule selection")
            hidden = hidden_codes(layers, rules) if _counts_hidden(self.args) else []
            # the cache lives at the project root of the config's directory (as ruff keeps one
            # per package), or of the first path when no config was searched for or found
            anchor = config.parent if config is not None and self.explicit is None else self.first
            cache_dir = (self.args.cache_dir or default_cache_dir(settings, anchor)) if self.cache else None
            args = self.args
            self.jobs.append(
                Job(
                    settings,
                    tuple(rules),
                    args.fix,
                    args.diff,
                    args.unsafe_fixes,
                    cache_dir,
                    self.paths,
                    tuple(hidden),
                )
            )
            self.config_keys.append(keys)
            index = self._index[config] = len(self.jobs) - 1
        return index

    def exclude_of(self, directory: str) -> tuple[str, ...]:
        """What a directory's walk skips: the excludes of its nearest config."""
        settings = self.jobs[self.index(directory)].settings
        return settings.exclude + settings.extend_exclude


def _settings_rows(
    args: argparse.Namespace, jobs: JobsByConfig, first: Path, job_of: Sequence[int]
) -> list[tuple[str, object, str]]:
    """--show-settings: (key, value, where it came from) for every setting of the first path's job,
    then the rules the selection resolves to; as ruff does, the settings of the first path, with
    the other config files that files under the given paths are checked with."""
    index = jobs.index(str(first))
    job, config_keys = jobs.jobs[index], jobs.config_keys[index]
    settings, rules, cache_dir = job.settings, job.rule_codes, job.cache_dir
    where = str(settings.config_file) if settings.config_file else "default"

    def source(field: str) -> str:
        key = field.replace("_", "-")
        given = field in _OPTIONS and (getattr(args, field, None) or getattr(args, f"no_{field}", None))
        if given and field == "extend_exclude" and key in config_keys:
            return f"{where}, then the command line ({_OPTIONS[field]})"
        if given:
            return f"command line ({_OPTIONS[field]})"
        return where if key in config_keys else "default"

    found = "found from the first path" if settings.config_file else "none found from the first path"
    rows: list[tuple[str, object, str]] = [("config-file", where if settings.config_file else None, found)]
    if args.config:
        rows[0] = ("config-file", where, "command line (--config)")
    others = sorted({str(jobs.jobs[i].settings.config_file or "default") for i in set(job_of) if i != index})
    if others:
        rows.append(
            (
                "other-config-files",
                others,
                "the nearest configs of other files under the given paths, each checked under its own "
                "(--show-settings PATH shows one's settings)",
            )
        )
    for field in ("select", "extend_select", "ignore"):
        rows.append((field.replace("_", "-"), getattr(settings, field), source(field)))
    if args.select is not None:
        rows.append(("select", args.select, "command line (--select): replaces the selection above"))
    if args.extend_select:
        rows.append(("extend-select", args.extend_select, "command line (--extend-select)"))
    if args.ignore or args.extend_ignore:
        rows.append(
            ("ignore", [*args.ignore, *args.extend_ignore], "command line (--ignore, --extend-ignore)")
        )
    rows.append(("rules", list(rules), "the selection above, over the default rules"))
    for field in (
        "exclude",
        "extend_exclude",
        "respect_gitignore",
        "lint_all_files",
        "test_file_patterns",
        "library",
    ):
        rows.append((field.replace("_", "-"), getattr(settings, field), source(field)))
    rows.append(
        (
            "per-file-ignores",
            {pattern: list(codes) for pattern, codes in settings.per_file_ignores},
            source("per_file_ignores"),
        )
    )
    version, version_source = settings.torch_version, settings.torch_version_source
    if version is None:
        declared = declared_version((first if first.is_dir() else first.parent).resolve())
        if declared is not None:
            version, version_source = declared.version, declared.source
    shown_version = f"{version[0]}.{version[1]}" if version else None
    rows.append(("torch-version", shown_version, version_source))
    if cache_dir is None:
        rows.append(("cache-dir", None, "off: --no-cache, --fix, --diff or TORCHPERF_LINT_NO_CACHE"))
    elif args.cache_dir:
        rows.append(("cache-dir", cache_dir, "command line (--cache-dir)"))
    else:
        rows.append(("cache-dir", cache_dir, source("cache_dir")))
    return rows


def _counts_hidden(args: argparse.Namespace) -> bool:
    """Whether the run counts the findings of the rules off by default, for the text summary: not
    when `--select` names this run's rules, nor when the run fixes or adds noqa comments."""
    return args.format == "text" and args.select is None and not (args.fix or args.diff or args.add_noqa)


def _selection_layers(args: argparse.Namespace, settings: Settings) -> list[Selection]:
    """The config file's selection, then the command line's over it (ruff's order)."""
    config = Selection(settings.select, settings.extend_select, settings.ignore)
    command_line = Selection(
        None if args.select is None else tuple(args.select),
        tuple(args.extend_select),
        tuple(args.ignore) + tuple(args.extend_ignore),
    )
    return [config, command_line]


def _add_noqa(
    args: argparse.Namespace, files: Sequence[str], outcomes: Sequence[FileOutcome], findings: list[Finding]
) -> int:
    """Write the noqa comments of --add-noqa into each checked file with findings; report what
    could not be checked or written, and how many comments went in."""
    from .add_noqa import NotAdded, add_to_file

    errors = [f for f in findings if f.code == ERROR_CODE]
    added = changed = 0
    for path, outcome in zip(files, outcomes, strict=True):
        if not outcome.findings or any(f.code == ERROR_CODE for f in outcome.findings):
            continue  # nothing to baseline, or a file that did not parse: never touched
        data, unreadable = read_file(path)
        if unreadable is not None:
            errors.append(unreadable)
            continue
        assert data is not None
        try:
            new, count = add_to_file(path, data, outcome.findings)
            if count:
                write_atomic(path, new)
        except (NotAdded, NotWritable) as error:
            errors.append(error_finding(path, str(error)))
            continue
        except OSError as error:
            errors.append(error_finding(path, f"could not write: {error.strerror or error}"))
            continue
        added += count
        changed += bool(count)
    errors.sort(key=Finding.sort_key)
    options = ReportOptions(args.show_context, args.unsafe_fixes, statistics=False)
    report = reporter(args.format)(errors, options)
    emit(sys.stdout, report)
    if args.format == "text":
        emit(sys.stderr, f"Added {_count(added, 'noqa comment')} to {_count(changed, 'file')}.\n")
    return EXIT_ERROR if errors else EXIT_CLEAN


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def _fix_summary(outcomes: Sequence[FileOutcome], remaining: int, would: bool) -> str:
    """How many fixes went in (or would, under --diff), in how many files, and how many findings
    remain: 'Fixed 3 findings in 2 files; 1 finding remains.'"""
    applied = sum(outcome.applied for outcome in outcomes)
    files = sum(1 for outcome in outcomes if outcome.applied)
    where = f" in {_count(files, 'file')}" if files else ""
    verb = "would remain" if would else ("remains" if remaining == 1 else "remain")
    left = f"{_count(remaining, 'finding')} {verb}" if remaining else f"no findings {verb}"
    return f"{'Would fix' if would else 'Fixed'} {_count(applied, 'finding')}{where}; {left}.\n"


# a file that takes longer than this to check is named on stderr, so that a CI log says where the
# time went (a large generated module costs about as long as libcst's parse of it)
SLOW_FILE_SECONDS = 10.0


def slow_file_lines(checked: Sequence[tuple[str, FileOutcome]], threshold: float) -> list[str]:
    return [
        f"torchperf-lint: {path} took {outcome.seconds:.0f} s to check (most of it libcst's parse of a "
        "large module; extend-exclude skips generated code)\n"
        for path, outcome in checked
        if outcome.seconds > threshold
    ]


def _torch_lines(
    jobs: JobsByConfig, checked: Sequence[tuple[str, FileOutcome]], newer: Sequence[Finding]
) -> list[str]:
    """What the run assumed about torch, for the text summary: that a file with fixes runs on torch
    2.x when nothing says which torch it runs on, and how many findings its pinned torch hides."""

    def declared(path: str) -> Optional[Declared]:
        return declared_version(Path(path).resolve().parent)

    def assumed_newest(path: str) -> bool:
        given = jobs.jobs[jobs.index(path)].settings.torch_version is not None
        return not given and declared(path) is None

    lines = []
    fixes = [path for path, outcome in checked if outcome.applied or any(f.fix for f in outcome.findings)]
    if any(assumed_newest(path) for path in fixes):
        lines.append(
            "No torch requirement found: fixes assume torch 2.x; "
            "set torch-version in the config (or pass --torch-version X.Y)."
        )
    if newer:
        pins = sorted({d.requirement for f in newer if (d := declared(f.path)) is not None and d.requirement})
        pinned = f" ({', '.join(pins)})" if pins else ""
        verb = "needs" if len(newer) == 1 else "need"
        lines.append(
            f"{_count(len(newer), 'finding')} {verb} a newer torch than the project's pin{pinned}; "
            f"`--torch-version {shown(EVERY_API)}` shows {'it' if len(newer) == 1 else 'them'}."
        )
    return lines


def _library_lines(unstepped: Sequence[Finding]) -> list[str]:
    """How many findings are in code hot only by assumption, which --library shows."""
    if not unstepped:
        return []
    verb = "is" if len(unstepped) == 1 else "are"
    return [
        f"{_count(len(unstepped), 'finding')} {verb} in code no step loop of this project runs "
        f"(hot only by assumption); `--library` shows {'it' if len(unstepped) == 1 else 'them'}."
    ]


def run(args: argparse.Namespace) -> int:
    """Check, fix or inform, as the parsed command line asks; the exit status."""
    out = sys.stdout
    if args.list_rules:
        out.write(rule_table(as_json=args.format == "json"))
        return EXIT_CLEAN
    if args.explain:
        from .docs import render_rule_page
        from .rules import lookup

        rule = lookup(args.explain)
        if rule is None:
            return usage_error(f"unknown rule {args.explain!r}; see --list-rules")
        out.write(render_rule_page(rule))
        return EXIT_CLEAN
    if args.statistics and args.format not in STATISTICS_FORMATS:
        return usage_error(f"--statistics prints text or json, not {args.format}")
    if args.add_noqa and (args.fix or args.diff):
        return usage_error("--add-noqa cannot be combined with --fix or --diff")
    if args.add_noqa and "-" in (args.paths or []):
        return usage_error("--add-noqa writes files; it cannot read stdin")
    declared_version.cache_clear()  # a long-lived process must see edited requirement files
    paths = args.paths or ["."]
    missing = [path for path in paths if path != "-" and not os.path.lexists(path)]
    if missing:
        return usage_error(f"path not found: {', '.join(missing)}")
    first = next((p for p in paths if p != "-"), args.stdin_filename or ".")
    # Fixing always re-lints what it writes; TORCHPERF_LINT_NO_CACHE=1 is --no-cache for CI and tests.
    no_cache = args.no_cache or args.fix or args.diff or cache_turned_off()
    discovery_errors: list[tuple[str, str]] = []
    stdin_output: bytes | None = None
    files: list[str] = []
    job_of: list[int] = []
    seen: set[str] = set()
    try:
        jobs = JobsByConfig(args, paths, Path(first), cache=not no_cache)
        jobs.index(first)
        for given in paths:
            # a walk skips what each directory's nearest config excludes, and what git ignores
            # when the config of the path named says so
            respect_gitignore = jobs.jobs[jobs.index(given)].settings.respect_gitignore
            for path in discover([given], (), discovery_errors, respect_gitignore, jobs.exclude_of):
                key = os.path.normpath(path)
                if key not in seen:  # named twice, or a file inside a directory also named
                    seen.add(key)
                    files.append(path)
                    job_of.append(jobs.index(path))
    except ConfigError as error:
        return usage_error(str(error))
    if args.show_settings:
        rows = _settings_rows(args, jobs, Path(first), job_of)
        emit(out, settings_table(rows, as_json=args.format == "json"))
        return EXIT_CLEAN
    if args.show_files:
        shown = [(args.stdin_filename or "-") if path == "-" else path for path in files]
        emit(out, file_list(shown, as_json=args.format == "json"))
        for path, message in discovery_errors:
            emit(sys.stderr, f"torchperf-lint: {path}: {message}\n")
        return EXIT_ERROR if discovery_errors else EXIT_CLEAN
    if not files and not discovery_errors:
        emit(
            sys.stderr, "torchperf-lint: warning: no Python files or notebooks found under the given paths\n"
        )
    findings: list[Finding] = []
    diffs: list[str] = []
    outcomes: list[FileOutcome] = []
    checked_paths: list[str] = []  # the path of each outcome
    if "-" in files:
        stdin = files.index("-")
        del files[stdin]
        job = jobs.jobs[job_of.pop(stdin)]
        outcome = Checker(job).data(args.stdin_filename or "-", sys.stdin.buffer.read(), stdin=True)
        outcomes.append(outcome)
        checked_paths.append(args.stdin_filename or "-")
        stdin_output = outcome.output
    outcomes.extend(check_paths(jobs.jobs, files, args.jobs or default_jobs(), job_of))
    checked_paths += files
    hidden: list[Finding] = []
    notes: list[Finding] = []
    newer: list[Finding] = []
    unstepped: list[Finding] = []
    for outcome in outcomes:
        findings.extend(outcome.findings)
        hidden.extend(outcome.hidden)
        notes.extend(outcome.notes)
        newer.extend(outcome.newer_torch)
        unstepped.extend(outcome.unstepped)
        diffs.append(outcome.diff)
    findings.extend(error_finding(path, message) for path, message in discovery_errors)
    if args.add_noqa:
        return _add_noqa(args, files, outcomes, findings)
    findings.sort(key=Finding.sort_key)
    notes.sort(key=Finding.sort_key)
    checked = list(zip(checked_paths, outcomes, strict=True))
    for line in slow_file_lines(checked, SLOW_FILE_SECONDS):
        emit(sys.stderr, line)
    torch_lines = _torch_lines(jobs, checked, newer) + _library_lines(unstepped)
    options = ReportOptions(args.show_context, args.unsafe_fixes, args.statistics, hidden, notes, torch_lines)
    report = reporter(args.format)(findings, options)
    if stdin_output is not None and args.fix:
        sys.stdout.buffer.write(stdin_output)
        sys.stdout.flush()
        emit(sys.stderr, report)
    elif args.output_file:
        try:
            Path(args.output_file).write_text(
                "".join(diffs) + report, encoding="utf-8", errors="backslashreplace"
            )
        except OSError as error:
            return usage_error(f"could not write {args.output_file}: {error.strerror or error}")
    else:
        emit(out, "".join(diffs) + report)
    if (args.fix or args.diff) and args.format == "text":
        emit(sys.stderr, _fix_summary(outcomes, len(findings), would=args.diff))
    if any(f.code == ERROR_CODE for f in findings):
        return EXIT_ERROR
    problems = any(diffs) if args.diff else any(f.code != ERROR_CODE for f in findings)
    return EXIT_CLEAN if args.exit_zero or not problems else EXIT_FINDINGS

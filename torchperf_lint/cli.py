"""The `torchperf-lint` command."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from . import __version__
from .add_noqa import NotAdded, add_to_file
from .analysis.torch_version import declared_version
from .cache import DEFAULT_DIRECTORY
from .checking import Checker, FileOutcome, Job, read_file
from .config import ConfigError, Settings, load_settings_and_keys, parse_version
from .docs import render_rule_page
from .engine.findings import Finding
from .engine.runner import ERROR_CODE, error_finding
from .files import discover
from .listing import file_list, rule_table, settings_table
from .parallel import check_paths, default_jobs
from .project.store import default_cache_dir
from .reporting import REPORTERS, STATISTICS_FORMATS, ReportOptions
from .rules import Selection, lookup, resolve
from .writer import NotWritable, write_atomic

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
EXIT_CLOSED_PIPE = 128 + 13  # what a shell reports for a tool that SIGPIPE ended (`yes | head -1`)
NO_CACHE_VARIABLE = "TORCHPERF_LINT_NO_CACHE"


def _codes(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="torchperf-lint",
        description="Find the PyTorch code that makes GPUs wait, and fix it.",
        epilog="Exit status: 0 no findings, 1 findings (or a --diff to show), 2 usage error or a "
        "file that could not be checked, 141 the reader closed the output pipe early (| head). "
        "`torchperf-lint server` runs the language server for editors.",
    )
    parser.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="files or directories of *.py and *.ipynb (default: .); - reads stdin",
    )
    parser.add_argument("--version", action="version", version=f"torchperf-lint {__version__}")
    select = parser.add_argument_group(
        "rule selection (codes, code prefixes or rule names, comma separated; the more specific "
        "selector wins, and ignore wins a tie)"
    )
    select.add_argument(
        "--select", type=_codes, help="only these rules (replaces the default set and the config's selection)"
    )
    select.add_argument(
        "--extend-select", type=_codes, default=[], help="add rules, e.g. off-by-default ones"
    )
    select.add_argument("--ignore", type=_codes, default=[], help="rules to skip")
    select.add_argument(
        "--extend-ignore",
        type=_codes,
        default=[],
        help="rules to skip as well (as --ignore: neither replaces the config's ignore)",
    )
    files = parser.add_argument_group("files")
    files.add_argument("--exclude", type=_codes, help="names or globs to skip (replaces the defaults)")
    files.add_argument("--extend-exclude", type=_codes, default=[], help="names or globs to skip as well")
    files.add_argument("--stdin-filename", metavar="PATH", help="the path to report for - (stdin)")
    files.add_argument("--config", metavar="FILE", help="read settings from this file instead of searching")
    files.add_argument(
        "--lint-all-files", action="store_true", help="also parse files that never mention torch"
    )
    files.add_argument(
        "--no-respect-gitignore",
        action="store_true",
        help="also walk into what .gitignore files ignore (default: skip it inside a git work tree)",
    )
    speed = parser.add_argument_group("speed")
    speed.add_argument(
        "-j", "--jobs", type=_positive, metavar="N", help="processes to lint with (default: the CPU count)"
    )
    speed.add_argument(
        "--no-cache",
        action="store_true",
        help=f"neither read nor write the result cache (or set {NO_CACHE_VARIABLE}=1)",
    )
    speed.add_argument(
        "--cache-dir", metavar="DIR", help=f"where results are cached (default: {DEFAULT_DIRECTORY})"
    )
    fixing = parser.add_argument_group("fixing")
    fixing.add_argument("--fix", action="store_true", help="apply safe fixes in place")
    fixing.add_argument("--unsafe-fixes", action="store_true", help="with --fix or --diff: unsafe fixes too")
    fixing.add_argument("--diff", action="store_true", help="print the diff --fix would apply; write nothing")
    fixing.add_argument(
        "--add-noqa",
        action="store_true",
        help="add '# noqa: TPLxxx' to every line with a finding (a clean baseline to adopt the linter)",
    )
    output = parser.add_argument_group("output")
    output.add_argument("--format", choices=sorted(REPORTERS), default="text")
    output.add_argument("--show-context", action="store_true", help="say why each line counts as hot")
    output.add_argument(
        "--statistics",
        action="store_true",
        help="count findings per rule (with --format json: a list of counts instead of the findings)",
    )
    output.add_argument("--output-file", metavar="FILE", help="write the report here instead of stdout")
    output.add_argument("--exit-zero", action="store_true", help="exit 0 even with findings (not on errors)")
    info = parser.add_argument_group("information")
    info.add_argument("--explain", metavar="CODE", help="print a rule's page")
    info.add_argument(
        "--show-settings",
        action="store_true",
        help="print the resolved settings and where each came from, and check nothing",
    )
    info.add_argument(
        "--show-files", action="store_true", help="list the files that would be checked, and check none"
    )
    info.add_argument(
        "--list-rules", action="store_true", help="list every rule (as JSON with --format json)"
    )
    parser.add_argument("--torch-version", metavar="X.Y", help="the torch version the code targets")
    return parser


# the options that change a setting, by setting
_OPTIONS = {
    "exclude": "--exclude",
    "extend_exclude": "--extend-exclude",
    "torch_version": "--torch-version",
    "lint_all_files": "--lint-all-files",
    "respect_gitignore": "--no-respect-gitignore",
}


def _settings(args: argparse.Namespace, start: Path) -> tuple[Settings, tuple[str, ...]]:
    """The settings (the config file's, then the command line's over them) and the keys the
    config file set."""
    config = Path(args.config) if args.config else None
    settings, config_keys = load_settings_and_keys(start, config)
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
    if args.no_respect_gitignore:
        changes["respect_gitignore"] = False
    if args.format == "sarif":
        changes["text_edits"] = True  # SARIF carries safe fixes as text replacements
    return settings.replace(**changes), config_keys


def _settings_rows(
    args: argparse.Namespace,
    settings: Settings,
    config_keys: Sequence[str],
    rules: Sequence[str],
    cache_dir: str | None,
    first: Path,
) -> list[tuple[str, object, str]]:
    """--show-settings: (key, value, where it came from) for every setting, then the rules the
    selection resolves to."""
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
    for field in ("exclude", "extend_exclude", "respect_gitignore", "lint_all_files", "test_file_patterns"):
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


def _selection_layers(args: argparse.Namespace, settings: Settings) -> list[Selection]:
    """The config file's selection, then the command line's over it (ruff's order)."""
    config = Selection(settings.select, settings.extend_select, settings.ignore)
    command_line = Selection(
        None if args.select is None else tuple(args.select),
        tuple(args.extend_select),
        tuple(args.ignore) + tuple(args.extend_ignore),
    )
    return [config, command_line]


def _emit(stream: TextIO, text: str) -> None:
    """Write text that may hold a path the terminal's encoding cannot show (a file name with
    undecodable bytes comes back from the OS as surrogates): escape it rather than crash."""
    try:
        stream.write(text)
    except UnicodeEncodeError:
        encoding = getattr(stream, "encoding", None) or "utf-8"
        stream.write(text.encode(encoding, "backslashreplace").decode(encoding))


def _add_noqa(
    args: argparse.Namespace, files: Sequence[str], outcomes: Sequence[FileOutcome], findings: list[Finding]
) -> int:
    """Write the noqa comments of --add-noqa into each checked file with findings; report what
    could not be checked or written, and how many comments went in."""
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
    report = REPORTERS[args.format](errors, options)
    _emit(sys.stdout, report)
    if args.format == "text":
        _emit(sys.stderr, f"Added {_count(added, 'noqa comment')} to {_count(changed, 'file')}.\n")
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


def _usage_error(message: str) -> int:
    """One line on stderr, like argparse's own errors but without the usage block: the problem
    is in a path or a config file, not in how the command was spelled."""
    _emit(sys.stderr, f"torchperf-lint: error: {message}\n")
    return EXIT_ERROR


def _server(argv: Sequence[str]) -> int:
    """`torchperf-lint server`: the language server, on stdin and stdout (pygls is an extra)."""
    argparse.ArgumentParser(
        prog="torchperf-lint server",
        description="Run the language server (LSP over stdin and stdout) that editors start.",
    ).parse_args(argv)
    try:
        from .server import serve
    except ImportError as error:
        if (error.name or "").split(".")[0] not in ("pygls", "lsprotocol"):
            raise
        return _usage_error("the language server needs pygls: pip install 'torchperf-lint[server]'")
    if os.path.exists("server"):
        _emit(
            sys.stderr,
            "torchperf-lint: starting the language server; lint ./server with: torchperf-lint ./server\n",
        )
    return serve()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command. A reader that closes the pipe early (`torchperf-lint . | head -1`) ends
    the run quietly, with the status a Unix tool ended by SIGPIPE has: Python ignores SIGPIPE and
    raises BrokenPipeError instead, which would print a traceback and exit 1."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["server"]:
        return _server(argv[1:])
    try:
        try:
            return _main(argv)
        finally:
            # what is still buffered must reach the pipe here, where a closed one can be caught;
            # --help and --version leave through SystemExit with their text still buffered
            sys.stdout.flush()
    except BrokenPipeError:
        _detach_closed_streams()
        return EXIT_CLOSED_PIPE


def _detach_closed_streams() -> None:
    """Point stdout and stderr at /dev/null, so that the interpreter's own flush at exit does not
    fail on the closed pipe once more and print 'Exception ignored ... BrokenPipeError'."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        try:
            os.dup2(devnull, stream.fileno())
        except (OSError, ValueError, AttributeError):
            pass  # a stream without a file descriptor (a test's capture buffer) has nothing to flush
    os.close(devnull)


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    out = sys.stdout
    if args.list_rules:
        out.write(rule_table(as_json=args.format == "json"))
        return EXIT_CLEAN
    if args.explain:
        rule = lookup(args.explain)
        if rule is None:
            return _usage_error(f"unknown rule {args.explain!r}; see --list-rules")
        out.write(render_rule_page(rule))
        return EXIT_CLEAN
    if args.statistics and args.format not in STATISTICS_FORMATS:
        return _usage_error(f"--statistics prints text or json, not {args.format}")
    if args.add_noqa and (args.fix or args.diff):
        return _usage_error("--add-noqa cannot be combined with --fix or --diff")
    if args.add_noqa and "-" in (args.paths or []):
        return _usage_error("--add-noqa writes files; it cannot read stdin")
    declared_version.cache_clear()  # a long-lived process must see edited requirement files
    paths = args.paths or ["."]
    missing = [path for path in paths if path != "-" and not os.path.lexists(path)]
    if missing:
        return _usage_error(f"path not found: {', '.join(missing)}")
    first = next((p for p in paths if p != "-"), args.stdin_filename or ".")
    try:
        settings, config_keys = _settings(args, Path(first))
        rules = resolve(_selection_layers(args, settings), "rule selection")
    except ConfigError as error:
        return _usage_error(str(error))
    # Fixing always re-lints what it writes; TORCHPERF_LINT_NO_CACHE=1 is --no-cache for CI and tests.
    no_cache = (
        args.no_cache or args.fix or args.diff or os.environ.get(NO_CACHE_VARIABLE, "") not in ("", "0")
    )
    cache_dir = None if no_cache else (args.cache_dir or default_cache_dir(settings, Path(first)))
    if args.show_settings:
        rows = _settings_rows(args, settings, config_keys, [r.code for r in rules], cache_dir, Path(first))
        _emit(out, settings_table(rows, as_json=args.format == "json"))
        return EXIT_CLEAN
    job = Job(
        settings, tuple(r.code for r in rules), args.fix, args.diff, args.unsafe_fixes, cache_dir, tuple(paths)
    )
    discovery_errors: list[tuple[str, str]] = []
    stdin_output: bytes | None = None
    files: list[str] = []
    seen: set[str] = set()
    exclude = settings.exclude + settings.extend_exclude
    for path in discover(paths, exclude, discovery_errors, settings.respect_gitignore):
        key = os.path.normpath(path)
        if key not in seen:  # named twice, or a file inside a directory also named
            seen.add(key)
            files.append(path)
    if args.show_files:
        shown = [(args.stdin_filename or "-") if path == "-" else path for path in files]
        _emit(out, file_list(shown, as_json=args.format == "json"))
        for path, message in discovery_errors:
            _emit(sys.stderr, f"torchperf-lint: {path}: {message}\n")
        return EXIT_ERROR if discovery_errors else EXIT_CLEAN
    if not files and not discovery_errors:
        _emit(
            sys.stderr, "torchperf-lint: warning: no Python files or notebooks found under the given paths\n"
        )
    findings: list[Finding] = []
    diffs: list[str] = []
    outcomes: list[FileOutcome] = []
    if "-" in files:
        files.remove("-")
        outcome = Checker(job).data(args.stdin_filename or "-", sys.stdin.buffer.read(), stdin=True)
        outcomes.append(outcome)
        stdin_output = outcome.output
    outcomes.extend(check_paths(job, files, args.jobs or default_jobs()))
    for outcome in outcomes:
        findings.extend(outcome.findings)
        diffs.append(outcome.diff)
    findings.extend(error_finding(path, message) for path, message in discovery_errors)
    if args.add_noqa:
        return _add_noqa(args, files, outcomes, findings)
    findings.sort(key=Finding.sort_key)
    options = ReportOptions(args.show_context, args.unsafe_fixes, args.statistics)
    report = REPORTERS[args.format](findings, options)
    if stdin_output is not None and args.fix:
        sys.stdout.buffer.write(stdin_output)
        sys.stdout.flush()
        _emit(sys.stderr, report)
    elif args.output_file:
        try:
            Path(args.output_file).write_text(
                "".join(diffs) + report, encoding="utf-8", errors="backslashreplace"
            )
        except OSError as error:
            return _usage_error(f"could not write {args.output_file}: {error.strerror or error}")
    else:
        _emit(out, "".join(diffs) + report)
    if (args.fix or args.diff) and args.format == "text":
        _emit(sys.stderr, _fix_summary(outcomes, len(findings), would=args.diff))
    if any(f.code == ERROR_CODE for f in findings):
        return EXIT_ERROR
    problems = any(diffs) if args.diff else any(f.code != ERROR_CODE for f in findings)
    return EXIT_CLEAN if args.exit_zero or not problems else EXIT_FINDINGS

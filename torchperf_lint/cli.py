"""The `torchperf-lint` command: its options and how it exits. What a parsed
command line does is command.py's, imported only after parsing, so that --version and --help load
nothing else; libcst and the rules load only when a file must be parsed (checking.py)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from . import __version__
from .console import EXIT_CLOSED_PIPE, comma_list, emit, positive_int, usage_error
from .reporting import FORMATS
from .settings import DEFAULT_CACHE_DIRECTORY, NO_CACHE_VARIABLE

# no release is on a package index and the project has no published home: the extra installs
# from a clone
SERVER_INSTALL = "pip install -e '.[server]' in a clone of torchperf-lint"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="torchperf-lint",
        description="Find the PyTorch code that makes GPUs wait, and fix it.",
        epilog="Exit status: 0 no findings, 1 findings (or a --diff to show), 2 usage error or a "
        "file that could not be checked, 141 the reader closed the output pipe early (| head). "
        "`torchperf-lint server` runs the language server for editors; `torchperf-lint confirm -- python "
        "train.py` runs a training script a few steps and says which findings it saw (see confirm --help).",
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
        "selector wins, and ignore wins a tie; a prefix enables only default-on rules, ALL every rule)"
    )
    select.add_argument(
        "--select",
        type=comma_list,
        help="only these rules (replaces the default set and the config's selection)",
    )
    select.add_argument(
        "--extend-select",
        type=comma_list,
        default=[],
        help="add rules, e.g. off-by-default ones (ALL: every rule)",
    )
    select.add_argument("--ignore", type=comma_list, default=[], help="rules to skip")
    select.add_argument(
        "--extend-ignore",
        type=comma_list,
        default=[],
        help="rules to skip as well (as --ignore: neither replaces the config's ignore)",
    )
    select.add_argument(
        "--library",
        action="store_true",
        help="lint as a library: the rules that ask for a step loop of this project also report code "
        "hot only by assumption (a forward no step loop here runs, which users of the library will)",
    )
    files = parser.add_argument_group("files")
    files.add_argument("--exclude", type=comma_list, help="names or globs to skip (replaces the defaults)")
    files.add_argument("--extend-exclude", type=comma_list, default=[], help="names or globs to skip as well")
    files.add_argument("--stdin-filename", metavar="PATH", help="the path to report for - (stdin)")
    files.add_argument(
        "--config",
        metavar="FILE",
        help="read every file's settings from this file (default: each file's nearest config)",
    )
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
        "-j", "--jobs", type=positive_int, metavar="N", help="processes to lint with (default: the CPU count)"
    )
    speed.add_argument(
        "--no-cache",
        action="store_true",
        help=f"neither read nor write the result cache (or set {NO_CACHE_VARIABLE}=1)",
    )
    speed.add_argument(
        "--cache-dir", metavar="DIR", help=f"where results are cached (default: {DEFAULT_CACHE_DIRECTORY})"
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
    output.add_argument(
        "--format",
        choices=FORMATS,
        default="text",
        help="text: path:line:col: CODE message and a summary (the default); json: a list of findings "
        "(docs/json-output.schema.json); sarif: SARIF 2.1.0 for code scanning; github: workflow "
        "annotations",
    )
    output.add_argument(
        "--show-context",
        action="store_true",
        help="say why each line counts as hot, and add notes where a rule stays silent on purpose "
        "(text and json only; notes never count as findings)",
    )
    output.add_argument(
        "--statistics",
        action="store_true",
        help="count findings per rule, in text those of the rules off by default too (with --format json: "
        "a list of counts instead of the findings)",
    )
    output.add_argument("--output-file", metavar="FILE", help="write the report here instead of stdout")
    output.add_argument("--exit-zero", action="store_true", help="exit 0 even with findings (not on errors)")
    info = parser.add_argument_group("information")
    info.add_argument("--explain", metavar="CODE", help="print a rule's page")
    info.add_argument(
        "--show-settings",
        action="store_true",
        help="print the first path's resolved settings and where each came from (and the other configs "
        "files are checked under), and check nothing",
    )
    info.add_argument(
        "--show-files", action="store_true", help="list the files that would be checked, and check none"
    )
    info.add_argument(
        "--list-rules", action="store_true", help="list every rule (as JSON with --format json)"
    )
    parser.add_argument("--torch-version", metavar="X.Y", help="the torch version the code targets")
    return parser


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
        return usage_error(f"the language server needs pygls: {SERVER_INSTALL}")
    if os.path.exists("server"):
        emit(
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
    if argv[:1] == ["confirm"]:
        from .confirm.command import run as confirm  # torch-free here; the program's torch runs it

        return confirm(argv[1:])
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
    args = build_parser().parse_args(argv)
    from .command import run

    return run(args)

"""What both halves of the command share (cli.py parses, command.py runs): the exit statuses, and
writing to the terminal."""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
EXIT_CLOSED_PIPE = 128 + 13  # what a shell reports for a tool that SIGPIPE ended (`yes | head -1`)


def emit(stream: TextIO, text: str) -> None:
    """Write text that may hold a path the terminal's encoding cannot show (a file name with
    undecodable bytes comes back from the OS as surrogates): escape it rather than crash."""
    try:
        stream.write(text)
    except UnicodeEncodeError:
        encoding = getattr(stream, "encoding", None) or "utf-8"
        stream.write(text.encode(encoding, "backslashreplace").decode(encoding))


def usage_error(message: str) -> int:
    """One line on stderr, like argparse's own errors but without the usage block: the problem
    is in a path or a config file, not in how the command was spelled."""
    emit(sys.stderr, f"torchperf-lint: error: {message}\n")
    return EXIT_ERROR


def comma_list(text: str) -> list[str]:
    """An option's comma-separated values (`--select TPL101,TPL103`), blanks dropped."""
    return [part.strip() for part in text.split(",") if part.strip()]


def positive_int(text: str, why: str = "") -> int:
    """An option's count, at least 1; `why` says what 0 would mean."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1{f' ({why})' if why else ''}")
    return value

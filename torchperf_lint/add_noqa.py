"""`--add-noqa`: a `# noqa: TPLxxx` comment on every line with a finding, so that a codebase can
adopt the linter with a clean baseline and see only new findings from then on.

Each comment goes where flake8's noqa mapping (engine/noqa.py) reads it for the finding's line, and
merges with a noqa comment already there (`# noqa: E501` becomes `# noqa: E501,TPL101`). The text
changes only at the ends of those lines; a file is written (atomically, by writer.py) only when the
result still parses.
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Iterable

from .engine.findings import Finding
from .engine.noqa import NOQA_INLINE, NoqaIndex
from .engine.runner import ERROR_CODE
from .notebook import NotebookError, read_notebook, write_back
from .syntax.parsing import parse_module

_LINE_ENDS = re.compile(r"(?<=\n)|(?<=\r)(?!\n)")


def _comments(source: str) -> dict[int, tuple[int, str]]:
    """Line -> (column, text) of its comment token: a `#` in a string is no comment."""
    found: dict[int, tuple[int, str]] = {}
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.COMMENT:
                found[token.start[0]] = (token.start[1], token.string)
    except (tokenize.TokenError, SyntaxError):
        pass
    return found


def _with_codes(line: str, comment: tuple[int, str] | None, codes: list[str]) -> str:
    """`line` (without its line break) with `codes` added to its noqa comment (`# noqa: E501`
    becomes `# noqa: E501, TPL101`; what follows the codes stays), or with a new one at its end."""
    if comment is not None:
        column, text = comment
        match = NOQA_INLINE.search(text)
        if match is not None and match.group("codes"):
            end = column + match.start("codes") + len(match.group("codes").rstrip(", \t"))
            return f"{line[:end]}, {', '.join(codes)}{line[end:]}"
    return f"{line.rstrip()}  # noqa: {', '.join(codes)}"


def add_to_source(source: str, findings: Iterable[Finding]) -> tuple[str, int]:
    """`source` with noqa comments for `findings` (lines of `source`), and how many lines got one."""
    index = NoqaIndex(source)
    wanted: dict[int, list[str]] = {}
    for finding in findings:
        if finding.code == ERROR_CODE:
            continue
        line = index.comment_line(finding.line)
        codes = wanted.setdefault(line, [])
        # a finding a noqa comment already covers is not reported; this keeps the function whole
        if finding.code not in codes and not index.suppresses(finding.line, finding.code):
            codes.append(finding.code)
    wanted = {line: sorted(codes) for line, codes in wanted.items() if codes}
    if not wanted:
        return source, 0
    comments = _comments(source)
    lines = [line for line in _LINE_ENDS.split(source) if line]
    for number, codes in wanted.items():
        text = lines[number - 1]
        body = text.rstrip("\r\n")
        lines[number - 1] = _with_codes(body, comments.get(number), codes) + text[len(body) :]
    return "".join(lines), len(wanted)


def _encoding(data: bytes) -> str:
    """The file's encoding as Python reads it (a BOM, a coding declaration, else UTF-8)."""
    return tokenize.detect_encoding(io.BytesIO(data).readline)[0]


class NotAdded(Exception):
    """The file was left alone; the message says why, for a TPL000 line."""


def add_to_file(path: str, data: bytes, findings: list[Finding]) -> tuple[bytes, int]:
    """The file's new bytes and the number of comments added. `findings` are the file's, as the
    checker reports them (per cell for notebooks). Raises NotAdded when the result would not
    parse."""
    if path.endswith(".ipynb"):
        try:
            notebook = read_notebook(data.decode("utf-8"))
        except (UnicodeDecodeError, NotebookError) as error:
            raise NotAdded(f"could not read notebook: {error}") from None
        source = notebook.module_source()
        located = [_in_module(notebook.module_line(f.cell, f.line), f) for f in findings]
        new_source, added = add_to_source(source, located)
        if not added:
            return data, 0
        _check_parses(new_source)
        return write_back(notebook, new_source).encode("utf-8"), added
    encoding = _encoding(data)
    source = data.decode(encoding)
    new_source, added = add_to_source(source, findings)
    if not added:
        return data, 0
    _check_parses(new_source)
    return new_source.encode(encoding), added


def _in_module(line: int, finding: Finding) -> Finding:
    return Finding(finding.code, finding.name, finding.message, finding.path, line, finding.col)


def _check_parses(source: str) -> None:
    try:
        parse_module(source)
    except Exception as error:  # noqa: BLE001 - any failure means "do not write this"
        raise NotAdded(
            f"noqa comments not added: the result would not parse ({type(error).__name__})"
        ) from None

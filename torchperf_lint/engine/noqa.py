"""`# noqa` with flake8's own semantics, so the CLI and the flake8 plugin agree.

flake8 looks for the comment on the finding's physical line, joined with the other lines of any
token that spans several lines (a triple-quoted string, a backslash continuation).
"""

from __future__ import annotations

import io
import re
import tokenize

# The same pattern flake8 7 uses (flake8/defaults.py); codes are letters followed by digits.
NOQA_INLINE = re.compile(r"# noqa(?::[\s]?(?P<codes>([A-Z]+[0-9]+(?:[,\s]+)?)+))?", re.IGNORECASE)
NOQA_FILE = re.compile(r"\s*# flake8[:=]\s*noqa", re.IGNORECASE)
_LINE_ENDS = re.compile(r"(?<=\n)|(?<=\r)(?!\n)")


class NoqaIndex:
    def __init__(self, source: str) -> None:
        # Physical lines end at \n, \r\n or \r only (str.splitlines would also split at a form feed
        # and shift every later line); flake8 strips the BOM.
        self._lines = [line for line in _LINE_ENDS.split(source.removeprefix("\ufeff")) if line]
        self._mapping: dict[int, str] | None = None
        self._last_lines: dict[int, int] = {}  # line -> the last line of its multi-line token group
        # most files hold no noqa comment at all: they need no tokenizing to know it
        self._mentions_noqa = "noqa" in source.lower()

    def file_is_exempt(self) -> bool:
        """A line that starts with `# flake8: noqa` exempts the file, as in flake8 7 (codes after
        it do not narrow it); after code on a line it means nothing."""
        return any(NOQA_FILE.match(line) for line in self._lines)

    def _build(self) -> dict[int, str]:
        mapping: dict[int, str] = {}
        try:
            tokens = list(tokenize.generate_tokens(io.StringIO("".join(self._lines)).readline))
        except (tokenize.TokenError, SyntaxError, IndentationError):
            return mapping
        low, high = len(self._lines) + 2, -1
        for kind, _, (start, _), (end, _), _ in tokens:
            if kind in (tokenize.ENDMARKER, tokenize.DEDENT):
                continue
            low, high = min(low, start), max(high, end)
            if kind in (tokenize.NL, tokenize.NEWLINE):
                joined = "".join(self._lines[low - 1 : high])
                for number in range(low, high + 1):
                    mapping[number] = joined
                    self._last_lines[number] = high
                low, high = len(self._lines) + 2, -1
        return mapping

    def comment_line(self, line: int) -> int:
        """Where a `# noqa` for a finding on `line` can go and be read: the line itself, or for a
        line inside a multi-line string or a backslash continuation, the last line of that group
        (a comment cannot go inside a string or after a backslash)."""
        if self._mapping is None:
            self._mapping = self._build()
        return self._last_lines.get(line, line)

    def suppresses(self, line: int, code: str) -> bool:
        if not self._mentions_noqa:
            return False
        if self._mapping is None:
            self._mapping = self._build()
        text = self._mapping.get(line)
        if text is None:
            text = self._lines[line - 1] if 0 < line <= len(self._lines) else ""
        match = NOQA_INLINE.search(text)
        if match is None:
            return False
        codes_text = match.group("codes")
        if not codes_text:
            return True
        codes = {c for c in re.split(r"[,\s]+", codes_text.strip()) if c}
        return code in codes or code.startswith(tuple(codes))

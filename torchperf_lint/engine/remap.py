"""Findings of fixed text placed in the text before the fix.

`--diff` writes nothing, so the findings it prints must point into the file on disk, while what
remains is what the fixed text still has. A fix that removes or adds lines above a finding moves
it; the line diff of the two texts says where each unchanged line came from.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Sequence

from .findings import Finding

# Physical lines as Python and libcst count them: \n, \r\n or \r (str.splitlines would also split
# at a form feed and shift every later line).
_LINE_ENDS = re.compile(r"(?<=\n)|(?<=\r)(?!\n)")


def _lines(text: str) -> list[str]:
    return [line for line in _LINE_ENDS.split(text) if line]


def place_before_fix(
    remaining: Sequence[Finding], original: Sequence[Finding], before: str, after: str
) -> list[Finding]:
    """`remaining` (findings of `after`, the fixed text) at their positions in `before`.

    A finding of the fixed text on a line the fixes left alone is the original file's finding of
    that code at the same line and column, which also has the right hot-path context and end. One
    on a line a fix changed is the original finding of its code in that changed region, the one
    with the same message where there are several. A finding with no original (a fix made it) is
    moved by the line offset, or to the start of the changed region it sits in."""
    before_lines = _lines(before)
    blocks = difflib.SequenceMatcher(None, before_lines, _lines(after), autojunk=False).get_opcodes()
    if not blocks:
        return list(remaining)
    unused = list(original)
    placed: list[Finding] = []
    for finding in remaining:
        tag, i1, i2, j1, _ = next(
            (block for block in blocks if block[3] <= finding.line - 1 < block[4]), blocks[-1]
        )
        if tag == "equal":
            line = i1 + finding.line - j1
            match = next(
                (o for o in unused if (o.code, o.line, o.col) == (finding.code, line, finding.col)), None
            )
        else:
            line = min(i1 + 1, max(len(before_lines), 1))
            # of two findings of one code on a line, the one left unfixed says what it said before
            region = [o for o in unused if o.code == finding.code and i1 < o.line <= i2]
            match = next((o for o in region if o.message == finding.message), region[0] if region else None)
        if match is not None:
            unused.remove(match)
            placed.append(match)
            continue
        shift = line - finding.line
        placed.append(
            dataclasses.replace(
                finding,
                line=line,
                end_line=finding.end_line + shift,
                edits=(),  # they count lines of the fixed text
            )
        )
    placed.sort(key=Finding.sort_key)
    return placed

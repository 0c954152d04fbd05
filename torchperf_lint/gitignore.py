"""`.gitignore` rules, so that a directory is walked as git sees it (ruff's default).

Only inside a git work tree (a `.git` directory or file at or above the walked directory), as git
itself reads them: the repository's `.git/info/exclude`, then each `.gitignore` from the top of
the work tree down to the directory that holds the path; a deeper file and a later line win. The
syntax is git's: `#` comments, `!` negation, a trailing `/` for directories only, a `/` at the
start or in the middle anchors the pattern to its file's directory, `*`, `?` and `[...]` stay
within one path component, and `**/`, `/**/` and `/**` span directories. The user's global
excludes file (`core.excludesFile`) is not read.
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import Optional

GIT = ".git"
IGNORE_FILE = ".gitignore"


@dataclasses.dataclass(frozen=True)
class Pattern:
    regex: re.Pattern[str]
    negated: bool
    directory_only: bool
    anchored: bool  # matched against the path below the ignore file's directory, else the name


def _character_class(pattern: str, start: int) -> tuple[str, int] | None:
    """The regex of the `[...]` at `start` and the index after it; None when it is not closed."""
    end = start + 1
    if end < len(pattern) and pattern[end] in "!^":
        end += 1
    if end < len(pattern) and pattern[end] == "]":
        end += 1  # a `]` first in the class is one of its characters
    while end < len(pattern) and pattern[end] != "]":
        end += 1
    if end >= len(pattern):
        return None
    body = pattern[start + 1 : end].replace("\\", "\\\\")
    if body[:1] in ("!", "^"):
        body = "^" + body[1:]
    return f"[{body}]", end + 1


def _translate(pattern: str) -> str:
    parts: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i) and (i == 0 or pattern[i - 1] == "/"):
            parts.append("(?:.*/)?")  # zero or more directories
            i += 3
        elif pattern.startswith("/**", i) and i + 3 == len(pattern):
            parts.append("/.*")  # everything inside
            i += 3
        elif pattern[i] == "*":
            while i < len(pattern) and pattern[i] == "*":
                i += 1  # other runs of asterisks are one asterisk
            parts.append("[^/]*")
        elif pattern[i] == "?":
            parts.append("[^/]")
            i += 1
        elif pattern[i] == "[" and (found := _character_class(pattern, i)) is not None:
            parts.append(found[0])
            i = found[1]
        elif pattern[i] == "\\" and i + 1 < len(pattern):
            parts.append(re.escape(pattern[i + 1]))
            i += 2
        else:
            parts.append(re.escape(pattern[i]))
            i += 1
    return "".join(parts)


def parse(text: str) -> tuple[Pattern, ...]:
    patterns: list[Pattern] = []
    for raw in text.splitlines():
        line = raw
        while line.endswith(" ") and not line.endswith("\\ "):
            line = line[:-1]  # trailing spaces are dropped unless escaped
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        if negated:
            line = line[1:]
        directory_only = line.endswith("/")
        line = line.rstrip("/")
        if not line:
            continue
        anchored = "/" in line
        regex = re.compile(_translate(line.lstrip("/") if anchored else line), re.DOTALL)
        patterns.append(Pattern(regex, negated, directory_only, anchored))
    return tuple(patterns)


@dataclasses.dataclass(frozen=True)
class IgnoreFile:
    base: str  # the absolute directory its patterns are relative to
    patterns: tuple[Pattern, ...]


def _read(path: str, base: str) -> Optional[IgnoreFile]:
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as stream:
            patterns = parse(stream.read())
    except OSError:
        return None  # no such file, or not readable: nothing ignored by it
    return IgnoreFile(base, patterns) if patterns else None


def _repository_files(top: str) -> list[IgnoreFile]:
    """The ignore files of the repository whose work tree starts at `top`: info/exclude (when
    `.git` is a directory; a worktree's or submodule's `.git` file points elsewhere) and the top
    `.gitignore`."""
    found = [
        _read(os.path.join(top, GIT, "info", "exclude"), top),
        _read(os.path.join(top, IGNORE_FILE), top),
    ]
    return [f for f in found if f is not None]


@dataclasses.dataclass(frozen=True)
class GitIgnore:
    """The ignore files that apply inside one directory, outermost first."""

    files: tuple[IgnoreFile, ...]

    def child(self, directory: str) -> GitIgnore:
        """The rules inside `directory`, a subdirectory being walked: its own `.gitignore` comes
        last; a nested repository (its own `.git`) starts afresh with its own rules."""
        absolute = os.path.abspath(directory)
        if os.path.lexists(os.path.join(absolute, GIT)):
            return GitIgnore(tuple(_repository_files(absolute)))
        own = _read(os.path.join(absolute, IGNORE_FILE), absolute)
        return GitIgnore((*self.files, own)) if own is not None else self

    def ignored(self, path: str, is_directory: bool) -> bool:
        absolute = os.path.abspath(path)
        name = os.path.basename(absolute)
        verdict = False
        for ignore_file in self.files:
            relative = os.path.relpath(absolute, ignore_file.base).replace(os.sep, "/")
            if relative.startswith("../"):
                continue
            for pattern in ignore_file.patterns:
                if pattern.directory_only and not is_directory:
                    continue
                if pattern.regex.fullmatch(relative if pattern.anchored else name):
                    verdict = not pattern.negated
        return verdict


def for_directory(directory: str) -> Optional[GitIgnore]:
    """The rules for walking `directory`; None outside a git work tree."""
    absolute = os.path.abspath(directory)
    chain = [absolute]
    while not os.path.lexists(os.path.join(chain[-1], GIT)):
        parent = os.path.dirname(chain[-1])
        if parent == chain[-1]:
            return None  # reached the root: not in a work tree
        chain.append(parent)
    top = chain.pop()
    files = _repository_files(top)
    for folder in reversed(chain):  # from below the top down to `directory`
        own = _read(os.path.join(folder, IGNORE_FILE), folder)
        if own is not None:
            files.append(own)
    return GitIgnore(tuple(files))

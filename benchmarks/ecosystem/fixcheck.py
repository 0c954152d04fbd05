"""The fix check: every fix the linter applies to a real project (safe and unsafe) must leave each
file compiling, add no pyflakes message, and be idempotent.

The project is copied to a temporary directory and fixed there with the current checkout's linter;
the cache is never touched.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

from pyflakes import checker

from .lint import ERROR_CODE, run_linter, trouble
from .projects import Project, python_files

Fixer = Callable[[Path, Sequence[Path]], list[str]]
PyflakesKey = tuple[str, tuple[object, ...]]


@dataclasses.dataclass(frozen=True)
class FixFailure:
    project: str
    path: str  # relative to the project root; "" for the fixer run as a whole
    problem: str


@dataclasses.dataclass
class FixCheck:
    project: str
    changed: int = 0
    seconds: float = 0.0
    failures: list[FixFailure] = dataclasses.field(default_factory=list)


def run_fixer(root: Path, paths: Sequence[Path], select: Sequence[str] = ()) -> list[str]:
    """Fix `paths` in place with every safe and unsafe fix of the `select` arguments' rules (the
    default selection when empty); returns what went wrong (a crash, or a file the fixer reported
    an internal error or a failed write on)."""
    # the cache of unpacked projects usually sits in a gitignored folder of a git work tree
    args = [
        "--fix",
        "--unsafe-fixes",
        "--no-cache",
        "--no-respect-gitignore",
        "--exit-zero",
        "--format",
        "json",
    ]
    args += select
    done = run_linter([*args, *map(str, paths)], cwd=root)
    failure = trouble(done)
    if failure is not None:
        return [failure]
    try:
        items = json.loads(done.stdout)
    except json.JSONDecodeError as error:
        return [f"fixer output is not JSON: {error}"]
    # "could not parse/decode" errors are the original file's, and the lint run reports them.
    return [
        f"{item['path']}: {item['message']}"
        for item in items
        if item["code"] == ERROR_CODE and item["message"].startswith(("internal error", "could not write"))
    ]


def pyflakes_messages(source: str, filename: str) -> Counter[PyflakesKey]:
    """pyflakes' messages for a file as (kind, arguments) with the line numbers some arguments
    carry ("redefinition of unused 'x' from line 3") left out, so a fix that moves lines does not
    make old messages look new."""
    tree = ast.parse(source, filename=filename)
    found = checker.Checker(tree, filename=filename)
    return Counter(
        (type(m).__name__, tuple(a for a in m.message_args if not isinstance(a, int))) for m in found.messages
    )


def describe(key: PyflakesKey) -> str:
    kind, args = key
    return f"{kind}({', '.join(map(repr, args))})"


def problems_in_fixed_file(before: str, after: str, filename: str) -> list[str]:
    """What is wrong with `after`, the fixed text of a file that was `before`."""
    try:
        compile(after, filename, "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as error:
        return [f"does not compile after fixing: {error}"]
    try:
        old = pyflakes_messages(before, filename)
    except SyntaxError:
        old = Counter()  # the original does not parse here: every message of the fixed file is new
    new = pyflakes_messages(after, filename) - old
    return [f"new pyflakes message: {describe(key)}" for key in sorted(new.elements())]


def _contents(root: Path) -> dict[Path, bytes]:
    return {path: path.read_bytes() for path in python_files(root)}


def check_fixes(project: Project, root: Path, fixer: Fixer = run_fixer) -> FixCheck:
    result = FixCheck(project.name)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ecosystem-fix-") as scratch:
        copy = Path(scratch) / root.name
        shutil.copytree(root, copy)
        original = _contents(copy)
        failures = fixer(copy, [copy])
        result.failures += [FixFailure(project.name, "", problem) for problem in failures]
        fixed = _contents(copy)
        changed = sorted(path for path in fixed if fixed[path] != original.get(path))
        result.changed = len(changed)
        for path in changed:
            name = path.relative_to(copy).as_posix()
            before = original.get(path, b"").decode("utf-8", errors="replace")
            after = fixed[path].decode("utf-8", errors="replace")
            result.failures += [
                FixFailure(project.name, name, p) for p in problems_in_fixed_file(before, after, name)
            ]
        if changed:
            result.failures += [FixFailure(project.name, "", p) for p in fixer(copy, changed)]
            again = _contents(copy)
            result.failures += [
                FixFailure(
                    project.name, path.relative_to(copy).as_posix(), "a second --fix run changed it again"
                )
                for path in changed
                if again.get(path) != fixed[path]
            ]
    result.seconds = time.perf_counter() - start
    return result

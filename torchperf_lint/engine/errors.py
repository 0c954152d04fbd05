"""What cannot be checked becomes a TPL000 finding. Kept apart from the runner, which imports
libcst, so that reporting a file from the cache or a file that cannot be read imports neither libcst nor
the rules."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

from .findings import Finding

ERROR_CODE = "TPL000"
# the project has no published home yet: a report needs the version and the code, not an address
REPORT_IT = "a bug in torchperf-lint: report it with the output of `torchperf-lint --version` and the code that triggered it"
RECURSION_LIMIT = 20_000


def error_finding(path: str, what: str, line: int = 1, col: int = 1) -> Finding:
    return Finding(ERROR_CODE, "error", what, path, line, col, line, col)


def internal_error(where: str, error: BaseException) -> str:
    """One line naming the failing rule (or the engine) and asking for a report; a rule's own page
    is local (`--explain`)."""
    detail = str(error).strip().splitlines()
    what = f"{type(error).__name__}: {detail[0]}" if detail else type(error).__name__
    page = f" (the rule: `torchperf-lint --explain {where}`)" if where.startswith("TPL") else ""
    return f"internal error in {where} ({what}); {REPORT_IT}{page}"


@contextlib.contextmanager
def deep_recursion() -> Iterator[None]:
    """Room for libcst's recursive parser and visitors on deeply nested code (1,000 levels of
    nesting take about 12,000 frames); the old limit comes back afterwards."""
    old = sys.getrecursionlimit()
    if old >= RECURSION_LIMIT:
        yield
        return
    sys.setrecursionlimit(RECURSION_LIMIT)
    try:
        yield
    finally:
        sys.setrecursionlimit(old)

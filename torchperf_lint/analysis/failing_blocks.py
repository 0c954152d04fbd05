"""A block that ends by raising an error, with nothing before that leaves it: what it does runs
only on the way to the error (`if a: return x` ... `raise ValueError(...)` dispatches), so it is
cold. One reading on CPython's `ast` for both passes: the project pass asks it of its statements
(project/summary.py), the file pass of a libcst block whose last statement raises, parsed back
(analysis/cold.py)."""

from __future__ import annotations

import ast

from ..syntax.ast_nodes import own_nodes
from .branch_sides import dotted

_LEAVING = (ast.Return, ast.Break, ast.Continue, ast.Yield, ast.YieldFrom)


def fails_at_end(statements: list[ast.stmt]) -> bool:
    """The block ends by raising an error (not `raise SystemExit(...)`, which ends a program that
    ran) and nothing before leaves it."""
    last = statements[-1] if statements else None
    if not isinstance(last, ast.Raise):
        return False
    raised = last.exc.func if isinstance(last.exc, ast.Call) else last.exc
    if raised is not None and dotted(raised) == "SystemExit":
        return False
    return not any(isinstance(node, _LEAVING) for node in own_nodes(statements[:-1]))

"""Whether a `for` loop walks a DataLoader, and which one: one reading on CPython's `ast` that both
passes ask. The project pass (project/summary.py, `Loop.loader`) hands it the function's own
bindings; the file pass (analysis/hotpath.py) converts the loop's iterable with syntax/ast_view.py
and hands it the bindings libcst's scopes show at the loop.

A loop walks a loader when its iterable, an argument of a call it iterates (`enumerate(loader)`,
`metric_logger.log_every(loader, 10)`, `tqdm(loader)`), or the call a name it iterates is bound
to (`pbar = tqdm(train_loader)`), is named like a loader or bound to `DataLoader(...)`.
"""

from __future__ import annotations

import ast
from typing import Callable, Optional, Sequence

from .branch_sides import dotted
from .vocabulary import is_loader_name, names_held_out_data

# the calls a name is bound to where it is read (`pbar` -> [`tqdm(train_loader)`])
CallsOf = Callable[[str], Sequence[ast.Call]]

_MOST_CANDIDATES = 32  # a name bound to a call of itself (`it = wrap(it)`) ends the search here


def builds_loader(value: ast.AST) -> bool:
    """`DataLoader(...)`, however the name is reached."""
    return isinstance(value, ast.Call) and (dotted(value.func) or "").split(".")[-1] == "DataLoader"


def loader_label(expr: ast.AST, calls_of: CallsOf) -> Optional[str]:
    """How a loader `expr` names or builds is shown to a reader (`train_loader`,
    `self.val_dataloader`), or None when `expr` is no loader: a name, attribute or call named
    like one, or a name bound to `DataLoader(...)`."""
    name = dotted(expr.func if isinstance(expr, ast.Call) else expr)
    if name is None:
        return None
    if is_loader_name(name):
        return name
    if isinstance(expr, ast.Name) and any(builds_loader(call) for call in calls_of(expr.id)):
        return name
    return None


def iterated_candidates(iterable: ast.AST, calls_of: CallsOf) -> list[ast.AST]:
    """What a loop over `iterable` may draw from, nearest first: the expression, the positional
    arguments of a call it iterates, and the calls a name it iterates is bound to."""
    found: list[ast.AST] = []
    todo: list[ast.AST] = [iterable]
    while todo and len(found) < _MOST_CANDIDATES:
        expr = todo.pop(0)
        if any(expr is seen for seen in found):
            continue
        found.append(expr)
        if isinstance(expr, ast.Call):
            todo.extend(arg for arg in expr.args if not isinstance(arg, ast.Starred))
        elif isinstance(expr, ast.Name):
            todo.extend(calls_of(expr.id))
    return found


def iterated_loader(iterable: ast.AST, calls_of: CallsOf) -> Optional[str]:
    """The loader a loop over `iterable` walks, as `loader_label` shows it, or None."""
    for candidate in iterated_candidates(iterable, calls_of):
        label = loader_label(candidate, calls_of)
        if label is not None:
            return label
    return None


def held_out_loader(iterable: ast.AST, calls_of: CallsOf) -> Optional[str]:
    """The loader when a loop over `iterable` draws from data kept out of training: named so
    (`val_loader`, `testloader`) or built from a dataset named so (`DataLoader(test_set)`,
    `DataLoader(dataset=holdout)`)."""
    for candidate in iterated_candidates(iterable, calls_of):
        label = loader_label(candidate, calls_of)
        if label is not None and names_held_out_data(label):
            return label
        dataset = _loader_dataset(candidate)
        shown = dotted(dataset) if dataset is not None else None
        if shown is not None and names_held_out_data(shown):
            return f"a DataLoader over {shown}"
    return None


def _loader_dataset(expr: ast.AST) -> Optional[ast.AST]:
    """The dataset a `DataLoader(...)` call reads: its first positional argument or `dataset=`."""
    if not builds_loader(expr):
        return None
    assert isinstance(expr, ast.Call)
    if expr.args:
        return None if isinstance(expr.args[0], ast.Starred) else expr.args[0]
    for keyword in expr.keywords:  # in order: an unpacking before `dataset=` may hold it
        if keyword.arg is None:
            return None
        if keyword.arg == "dataset":
            return keyword.value
    return None

"""The names a loop over a loader binds to its batches: not `enumerate`'s counter, not what a
counter (`range`) yields, each side of a `zip` by what it iterates. One reading on CPython's `ast`
for both passes: the project pass hands its own loops, the file pass converts libcst's target and
iterable (syntax/ast_view.py)."""

from __future__ import annotations

import ast

from .branch_sides import dotted

# Wrappers whose items are the items of their first argument.
PASS_THROUGH = frozenset({"tqdm", "iter", "track"})
# Iterables of counters, never of batches.
COUNTERS = frozenset({"range", "count", "trange"})


def _names_in(target: ast.AST) -> set[str]:
    if isinstance(target, ast.Name):
        return {target.id}
    if isinstance(target, (ast.Tuple, ast.List)):
        return {name for element in target.elts for name in _names_in(element)}
    if isinstance(target, ast.Starred):
        return _names_in(target.value)
    return set()


def batch_names(target: ast.AST, iterable: ast.AST) -> set[str]:
    """The names of a loader loop's target that receive batch data (not `enumerate` indices)."""
    if isinstance(iterable, ast.Call):
        callee = (dotted(iterable.func) or "").rsplit(".", 1)[-1]
        positional = [arg for arg in iterable.args if not isinstance(arg, ast.Starred)]
        if callee == "enumerate":
            if positional and isinstance(target, (ast.Tuple, ast.List)) and len(target.elts) == 2:
                return batch_names(target.elts[1], positional[0])
            return set()  # `for pair in enumerate(loader)`: a tuple of an index and a batch
        if callee == "zip":
            if isinstance(target, (ast.Tuple, ast.List)) and len(target.elts) == len(positional):
                return {
                    name
                    for element, source in zip(target.elts, positional, strict=True)
                    for name in batch_names(element, source)
                }
            return set()
        if callee in PASS_THROUGH and positional:
            return batch_names(target, positional[0])
        if callee in COUNTERS:
            return set()
    return _names_in(target)

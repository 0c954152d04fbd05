"""Generators that hand on the items of one of their parameters as they come
(`def cycle(dl): while True: for data in dl: yield data`, `yield from loader`, DETR's
`MetricLogger.log_every(iterable)`): a loop over their result, or `next(...)` of it, walks the
argument (RULES.md, "Values that travel"). One reading on CPython's `ast`, in the project pass
(project/summary.py, Function.yields_items_of); the file pass reads the answer by position
(analysis/entry.py, EntryFacts.item_generators; analysis/batches.py)."""

from __future__ import annotations

import ast
from typing import Union

from ..syntax.ast_nodes import own_nodes

FunctionNode = Union[ast.FunctionDef, ast.AsyncFunctionDef]


def yielded_parameter(function: FunctionNode) -> str:
    """The parameter whose items the generator yields as they are: `yield from PARAM`, or
    `for ITEM in PARAM: ... yield ITEM`; "" for any other function."""
    arguments = function.args
    params = {a.arg for a in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]}
    for node in own_nodes(function.body):
        if isinstance(node, ast.YieldFrom) and isinstance(node.value, ast.Name) and node.value.id in params:
            return node.value.id
        if (
            isinstance(node, (ast.For, ast.AsyncFor))
            and isinstance(node.iter, ast.Name)
            and node.iter.id in params
            and isinstance(node.target, ast.Name)
            and _yields_name(node.body, node.target.id)
        ):
            return node.iter.id
    return ""


def _yields_name(body: list[ast.stmt], name: str) -> bool:
    return any(
        isinstance(node, ast.Yield) and isinstance(node.value, ast.Name) and node.value.id == name
        for node in own_nodes(body)
    )

"""Local names a function computes from its settings by string arithmetic, and what they hold on
the default run (RULES.md, "Values that travel": configuration defaults, with the arithmetic code
does on them). ConvNeXt's `create_optimizer` reads `opt_lower = args.opt.lower()`, then
`opt_split = opt_lower.split('_')` and `opt_lower = opt_split[-1]`, and branches on
`opt_lower == 'sgd'`: with `--opt adamw` by default, only the `adamw` branch runs.
"""

from __future__ import annotations

import ast
from typing import Mapping

import libcst as cst

from ..syntax.walker import FileFacts, bound_value, descendants, dotted_name, signed_int
from .names import Names

# str methods whose result the default value decides, with literal arguments only
_STRING_METHODS = frozenset({"lower", "upper", "strip", "lstrip", "rstrip", "split", "replace", "casefold"})
_MAX_DEPTH = 6


class DerivedSettings:
    def __init__(self, facts: FileFacts, names: Names) -> None:
        self._facts = facts
        self._names = names

    def around(self, test: cst.BaseExpression, settings: Mapping[str, str]) -> dict[str, str]:
        """The local names `test` reads that the default run fixes through `settings` (the
        options' defaults and what callers pass, as tokens), each as a token of its value."""
        found: dict[str, str] = {}
        for node in descendants(test):
            if isinstance(node, cst.Name) and node.value not in settings and node.value not in found:
                value = self._value(node, settings, 0)
                if isinstance(value, (str, int, float, bool)):
                    found[node.value] = repr(value)
        return found

    def _value(self, expr: cst.BaseExpression, settings: Mapping[str, str], depth: int) -> object:
        """What `expr` holds on the default run: a str, number, bool, list or tuple; None when not known."""
        if depth > _MAX_DEPTH:
            return None
        written = dotted_name(expr)
        if written is not None and written in settings:
            try:
                return ast.literal_eval(settings[written])
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                return None
        if isinstance(expr, (cst.SimpleString, cst.Integer)):
            return expr.evaluated_value
        if isinstance(expr, cst.Name):
            reaching = self._names.reaching(expr)
            value = bound_value(reaching[0], expr.value, self._facts) if len(reaching) == 1 else None
            return self._value(value, settings, depth + 1) if value is not None else None
        if isinstance(expr, cst.Call):
            return self._method(expr, settings, depth)
        if isinstance(expr, cst.Subscript) and len(expr.slice) == 1:
            index = expr.slice[0].slice
            position = signed_int(index.value) if isinstance(index, cst.Index) else None
            held = self._value(expr.value, settings, depth + 1)
            if (
                position is not None
                and isinstance(held, (str, list, tuple))
                and -len(held) <= position < len(held)
            ):
                return held[position]
        return None

    def _method(self, call: cst.Call, settings: Mapping[str, str], depth: int) -> object:
        func = call.func
        if not (isinstance(func, cst.Attribute) and func.attr.value in _STRING_METHODS):
            return None
        arguments = [
            a.value.evaluated_value for a in call.args if isinstance(a.value, (cst.SimpleString, cst.Integer))
        ]
        if len(arguments) != len(call.args) or any(a.keyword is not None or a.star for a in call.args):
            return None
        receiver = self._value(func.value, settings, depth + 1)
        if not isinstance(receiver, str):
            return None
        try:
            return getattr(receiver, func.attr.value)(*arguments)
        except (TypeError, ValueError):
            return None

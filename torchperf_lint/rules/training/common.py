"""Helpers shared by the training rules."""

from __future__ import annotations

import re
from typing import Optional

import libcst as cst


def is_name(expr: cst.BaseExpression, value: str) -> bool:
    return isinstance(expr, cst.Name) and expr.value == value


def is_number(expr: cst.BaseExpression, value: float) -> bool:
    if isinstance(expr, (cst.Integer, cst.Float)):
        try:
            return float(expr.value) == value
        except ValueError:
            return False
    return False


def without_parens(expr: cst.BaseExpression) -> cst.BaseExpression:
    """`expr` without its parentheses, to sit as a call argument or be compared."""
    if getattr(expr, "lpar", None):
        return expr.with_changes(lpar=[], rpar=[])
    return expr


def method_call(expr: cst.BaseExpression, *names: str) -> Optional[cst.Call]:
    """`expr` when it is a call of a method named one of `names`."""
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in names:
        return expr
    return None


LOSS_NAME = re.compile(r"loss|criterion", re.IGNORECASE)

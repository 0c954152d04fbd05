"""Helpers shared by the loops rules."""

from __future__ import annotations

from typing import Optional

import libcst as cst

SCOPES = (cst.FunctionDef, cst.Lambda, cst.ClassDef)


def data_argument(call: cst.Call, keyword: str) -> Optional[cst.BaseExpression]:
    """The first positional argument, or the one passed as `keyword=`."""
    for arg in call.args:
        if not arg.star and (arg.keyword is None or arg.keyword.value == keyword):
            return arg.value
    return None

"""Small tree-building helpers that fixes share."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from .context import Context


def keyword(call: cst.Call, name: str) -> Optional[cst.Arg]:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg
    return None


def has_star_kwargs(call: cst.Call) -> bool:
    """`**kwargs` could supply any keyword."""
    return any(arg.star == "**" for arg in call.args)


def add_keyword(call: cst.Call, name: str, value: cst.BaseExpression) -> cst.Call:
    """`f(a)` -> `f(a, name=value)`, keeping a trailing comma where the call had one."""
    new_arg = cst.Arg(
        value=value,
        keyword=cst.Name(name),
        equal=cst.AssignEqual(
            whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
        ),
    )
    args = list(call.args)
    if not args:
        return call.with_changes(args=[new_arg])
    last = args[-1]
    if isinstance(last.comma, cst.Comma):
        # keep the user's trailing comma (and its line break) after the new argument
        args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        new_arg = new_arg.with_changes(comma=last.comma)
    else:
        args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    return call.with_changes(args=[*args, new_arg])


def replace_keyword(call: cst.Call, name: str, value: cst.BaseExpression) -> cst.Call:
    args = [
        arg.with_changes(value=value) if arg.keyword is not None and arg.keyword.value == name else arg
        for arg in call.args
    ]
    return call.with_changes(args=args)


def remove_keyword(call: cst.Call, name: str) -> cst.Call:
    args = [arg for arg in call.args if not (arg.keyword is not None and arg.keyword.value == name)]
    if args and call.args and args[-1] is not call.args[-1]:
        args[-1] = args[-1].with_changes(comma=call.args[-1].comma)
    return call.with_changes(args=args)


def torch_attribute(ctx: Context, dotted: str) -> tuple[cst.BaseExpression, bool]:
    """`torch.<dotted>` spelled with the file's alias (`th.arange`), and whether the fix must
    add `import torch`."""
    alias, needs_import = ctx.torch_name()
    return cst.parse_expression(f"{alias}.{dotted}"), needs_import

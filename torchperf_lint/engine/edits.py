"""Small tree-building helpers that fixes share."""

from __future__ import annotations

import libcst as cst

from .context import Context


def keyword(call: cst.Call, name: str) -> cst.Arg | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg
    return None


def passed_argument(call: cst.Call, param: str, position: int) -> cst.Arg | None:
    """The argument `call` passes for `param`, by keyword or at `position` (-1: keyword only)."""
    found = keyword(call, param)
    if found is not None:
        return found
    positional = [arg for arg in call.args if arg.keyword is None and not arg.star]
    return positional[position] if 0 <= position < len(positional) else None


def has_star_kwargs(call: cst.Call) -> bool:
    """`**kwargs` could supply any keyword."""
    return any(arg.star == "**" for arg in call.args)


def _spans_lines(whitespace: cst.BaseParenthesizableWhitespace) -> bool:
    return isinstance(whitespace, cst.ParenthesizedWhitespace)


def add_keyword(call: cst.Call, name: str, value: cst.BaseExpression) -> cst.Call:
    """`f(a)` -> `f(a, name=value)`, keeping a trailing comma where the call had one, and any
    comment or line break after the last argument after the new one."""
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
    separator = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    if isinstance(last.comma, cst.Comma):
        # one argument per line: the new one goes on its own line like the others
        previous = args[-2].comma if len(args) > 1 else None
        if isinstance(previous, cst.Comma) and _spans_lines(previous.whitespace_after):
            separator = previous
        # keep the user's trailing comma (and its line break) after the new argument
        new_arg = new_arg.with_changes(comma=last.comma)
    # what followed the last argument (a comment, the line break before `)`) follows the new one
    new_arg = new_arg.with_changes(whitespace_after_arg=last.whitespace_after_arg)
    args[-1] = last.with_changes(comma=separator, whitespace_after_arg=cst.SimpleWhitespace(""))
    return call.with_changes(args=[*args, new_arg])


def replace_keyword(call: cst.Call, name: str, value: cst.BaseExpression) -> cst.Call:
    args = [
        arg.with_changes(value=value) if arg.keyword is not None and arg.keyword.value == name else arg
        for arg in call.args
    ]
    return call.with_changes(args=args)


def remove_keyword(call: cst.Call, name: str) -> cst.Call:
    """`f(a, name=x)` -> `f(a)`; a comment after the removed last argument stays."""
    args = [arg for arg in call.args if not (arg.keyword is not None and arg.keyword.value == name)]
    if args and call.args and args[-1] is not call.args[-1]:
        removed = call.args[-1]
        changes: dict[str, object] = {"comma": removed.comma}
        if not _spans_lines(args[-1].whitespace_after_arg):
            changes["whitespace_after_arg"] = removed.whitespace_after_arg
        args[-1] = args[-1].with_changes(**changes)
    return call.with_changes(args=args)


def torch_attribute(ctx: Context, dotted: str) -> tuple[cst.BaseExpression, bool]:
    """`torch.<dotted>` spelled with the file's alias (`th.arange`), and whether the fix must
    add `import torch`."""
    alias, needs_import = ctx.torch_name()
    return cst.parse_expression(f"{alias}.{dotted}"), needs_import


def functional_attribute(ctx: Context, name: str) -> tuple[cst.BaseExpression, bool]:
    """`F.<name>` with the file's top-level alias for torch.nn.functional, else
    `torch.nn.functional.<name>` as `torch_attribute` spells it (and whether the fix must add
    `import torch`)."""
    for bound, target in ctx.facts.imports.items():
        if target == "torch.nn.functional" and "." not in bound:
            bindings = ctx.facts.module_scope.bindings.get(bound)
            if bindings and bindings[-1].kind == "import":
                return cst.Attribute(value=cst.Name(bound), attr=cst.Name(name)), False
    return torch_attribute(ctx, f"nn.functional.{name}")


def insert_after_imports(
    ctx: Context, code: str, blank_line_before: bool = False
) -> tuple[cst.CSTNode, cst.FlattenSentinel[cst.CSTNode]] | None:
    """The replacement that puts the statement `code` after the file's last top-level import:
    `(that import statement, FlattenSentinel([it, new statement]))` for `Fix.replace`; None when the
    file has no top-level import. `blank_line_before` sets the new statement apart from the imports."""
    last: cst.SimpleStatementLine | None = None
    for statement in ctx.module.body:
        if isinstance(statement, cst.SimpleStatementLine) and any(
            isinstance(small, (cst.Import, cst.ImportFrom)) for small in statement.body
        ):
            last = statement
    if last is None:
        return None
    module = ctx.module
    new = cst.parse_statement(code + module.default_newline, config=module.config_for_parsing)
    if blank_line_before:
        new = new.with_changes(leading_lines=[cst.EmptyLine()])
    return last, cst.FlattenSentinel([last, new])

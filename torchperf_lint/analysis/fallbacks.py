"""Helpers of the `default(val, d)` shape: a function of two parameters that returns its first
argument when that is not None, else its second (latent-diffusion's `ldm/util.py`, and many
research repositories copy it). What a call of one gives is known wherever both arguments'
tokens are (analysis/arguments.py): `default(num_timesteps_cond, 1)` with the parameter left
at None is 1. The test on the first argument may be written out (`val is not None`) or be a
call of a project function of the `exists(x)` shape (`return x is not None`), which only the
project pass resolves; the shape names it.
"""

from __future__ import annotations

import ast
from typing import Optional, Union

FunctionNode = Union[ast.FunctionDef, ast.AsyncFunctionDef]

# the test of a fallback written out in the helper itself, not through an `exists` helper
INLINE_TEST = ""
# the second argument is called when it is a function (`d() if isfunction(d) else d`)
CALLS_SECOND = "calls"


def _body(node: FunctionNode) -> list[ast.stmt]:
    """The statements past a docstring."""
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        return body[1:]
    return body


def _plain_params(node: FunctionNode) -> Optional[list[str]]:
    args = node.args
    if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs:
        return None
    return [a.arg for a in args.args]


def is_not_none_test(node: FunctionNode) -> bool:
    """`def exists(x): return x is not None`."""
    params, body = _plain_params(node), _body(node)
    return (
        params is not None
        and len(params) == 1
        and len(body) == 1
        and isinstance(body[0], ast.Return)
        and body[0].value is not None
        and _none_test(body[0].value, params[0]) is True
    )


def _none_test(test: ast.expr, name: str) -> Optional[bool]:
    """True for `name is not None`, False for `name is None`; None for anything else."""
    if (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], (ast.Is, ast.IsNot))
        and isinstance(test.left, ast.Name)
        and test.left.id == name
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value is None
    ):
        return isinstance(test.ops[0], ast.IsNot)
    return None


def _test(test: ast.expr, name: str) -> Optional[tuple[bool, str]]:
    """(whether `test` holds when `name` is not None, the helper it calls or INLINE_TEST) for
    `name is not None`, `name is None`, `helper(name)`, `not helper(name)`."""
    inline = _none_test(test, name)
    if inline is not None:
        return inline, INLINE_TEST
    negated = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
    call = test.operand if isinstance(test, ast.UnaryOp) and negated else test
    if (
        isinstance(call, ast.Call)
        and isinstance(call.func, (ast.Name, ast.Attribute))
        and len(call.args) == 1
        and not call.keywords
        and isinstance(call.args[0], ast.Name)
        and call.args[0].id == name
    ):
        return not negated, ast.unparse(call.func)
    return None


def _second(value: Optional[ast.expr], name: str) -> Optional[str]:
    """ "" for `d`, CALLS_SECOND for `d() if isfunction(d) else d` (or `callable(d)`); None for
    anything else."""
    if isinstance(value, ast.Name) and value.id == name:
        return ""
    if (
        isinstance(value, ast.IfExp)
        and isinstance(value.orelse, ast.Name)
        and value.orelse.id == name
        and isinstance(value.body, ast.Call)
        and isinstance(value.body.func, ast.Name)
        and value.body.func.id == name
        and isinstance(value.test, ast.Call)
        and len(value.test.args) == 1
        and isinstance(value.test.args[0], ast.Name)
        and value.test.args[0].id == name
    ):
        return CALLS_SECOND
    return None


def fallback_shape(node: FunctionNode) -> list[str]:
    """[the test helper (INLINE_TEST when written out), "" or CALLS_SECOND] for a helper that
    returns its first argument when it is not None and its second otherwise; [] for any other
    function. The forms: `if TEST: return val` then `return d`, the same with the test negated
    and the returns swapped, and `return val if TEST else d`."""
    params, body = _plain_params(node), _body(node)
    if params is None or len(params) != 2:
        return []
    first, second = params
    choice: Optional[tuple[ast.expr, Optional[ast.expr], Optional[ast.expr]]] = None
    if len(body) == 1 and isinstance(body[0], ast.Return) and isinstance(body[0].value, ast.IfExp):
        value = body[0].value
        choice = (value.test, value.body, value.orelse)
    elif (
        len(body) == 2
        and isinstance(body[0], ast.If)
        and not body[0].orelse
        and len(body[0].body) == 1
        and isinstance(body[0].body[0], ast.Return)
        and isinstance(body[1], ast.Return)
    ):
        choice = (body[0].test, body[0].body[0].value, body[1].value)
    if choice is None:
        return []
    test, taken, other = choice
    read = _test(test, first)
    if read is None:
        return []
    holds_when_given, helper = read
    given, missing = (taken, other) if holds_when_given else (other, taken)
    if not (isinstance(given, ast.Name) and given.id == first):
        return []
    calls = _second(missing, second)
    return [] if calls is None else [helper, calls]

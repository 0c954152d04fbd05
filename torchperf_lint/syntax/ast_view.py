"""A libcst expression as CPython's `ast` reads it, so that a fact judged on `ast` (the project
pass's tree) is judged by the same code in the file pass: analysis/branch_sides.py,
analysis/cache_misses.py, analysis/accumulators.py.

The shapes tests and targets are made of (names, attributes, calls, comparisons, boolean and
arithmetic operators, literals, subscripts, tuples and lists) are converted node by node; any other
expression is printed and parsed back, which gives the same tree for ten times the cost.
"""

from __future__ import annotations

import ast
from typing import Any, Callable, Optional

import libcst as cst

_CODE = cst.Module([])

_COMPARISONS: dict[type, type] = {
    cst.Equal: ast.Eq,
    cst.NotEqual: ast.NotEq,
    cst.LessThan: ast.Lt,
    cst.LessThanEqual: ast.LtE,
    cst.GreaterThan: ast.Gt,
    cst.GreaterThanEqual: ast.GtE,
    cst.In: ast.In,
    cst.NotIn: ast.NotIn,
    cst.Is: ast.Is,
    cst.IsNot: ast.IsNot,
}
_BINARY: dict[type, type] = {
    cst.Add: ast.Add,
    cst.Subtract: ast.Sub,
    cst.Multiply: ast.Mult,
    cst.Divide: ast.Div,
    cst.FloorDivide: ast.FloorDiv,
    cst.Modulo: ast.Mod,
    cst.Power: ast.Pow,
    cst.LeftShift: ast.LShift,
    cst.RightShift: ast.RShift,
    cst.BitOr: ast.BitOr,
    cst.BitAnd: ast.BitAnd,
    cst.BitXor: ast.BitXor,
    cst.MatrixMultiply: ast.MatMult,
}
_UNARY: dict[type, type] = {
    cst.Not: ast.Not,
    cst.Minus: ast.USub,
    cst.Plus: ast.UAdd,
    cst.BitInvert: ast.Invert,
}
_NAMED_CONSTANTS = {"None": None, "True": True, "False": False}


def as_ast(node: cst.BaseExpression) -> Optional[ast.expr]:
    """`node` as `ast.parse` gives it (positions left out); None where it does not parse alone
    (a starred element outside its display)."""
    try:
        return _convert(node)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _parsed(node: cst.CSTNode) -> ast.expr:
    """The slow, exact way: the node's code, parsed back."""
    return ast.parse(f"(\n{_CODE.code_for_node(node)}\n)", mode="eval").body


def _convert(node: cst.CSTNode) -> ast.expr:
    convert = _CONVERTERS.get(type(node))
    return convert(node) if convert is not None else _parsed(node)


def _name(node: cst.Name) -> ast.expr:
    if node.value in _NAMED_CONSTANTS:
        return ast.Constant(_NAMED_CONSTANTS[node.value])
    return ast.Name(node.value, ast.Load())


def _attribute(node: cst.Attribute) -> ast.expr:
    return ast.Attribute(_convert(node.value), node.attr.value, ast.Load())


def _call(node: cst.Call) -> ast.expr:
    args: list[ast.expr] = []
    keywords: list[ast.keyword] = []
    for arg in node.args:
        value = _convert(arg.value)
        if arg.keyword is not None:
            keywords.append(ast.keyword(arg.keyword.value, value))
        elif arg.star == "**":
            keywords.append(ast.keyword(None, value))
        else:
            args.append(ast.Starred(value, ast.Load()) if arg.star == "*" else value)
    return ast.Call(_convert(node.func), args, keywords)


def _comparison(node: cst.Comparison) -> ast.expr:
    ops = [_COMPARISONS[type(target.operator)]() for target in node.comparisons]
    return ast.Compare(_convert(node.left), ops, [_convert(t.comparator) for t in node.comparisons])


def _boolean(node: cst.BooleanOperation) -> ast.expr:
    """`a and b and c` is one BoolOp in CPython's tree, libcst's is nested to the left; a
    parenthesised operand stays an operand of its own."""
    op = ast.And if isinstance(node.operator, cst.And) else ast.Or
    operands: list[cst.BaseExpression] = [node.right]
    left = node.left
    while (
        isinstance(left, cst.BooleanOperation)
        and isinstance(left.operator, type(node.operator))
        and not left.lpar
    ):
        operands.append(left.right)
        left = left.left
    operands.append(left)
    return ast.BoolOp(op(), [_convert(o) for o in reversed(operands)])


def _binary(node: cst.BinaryOperation) -> ast.expr:
    return ast.BinOp(_convert(node.left), _BINARY[type(node.operator)](), _convert(node.right))


def _unary(node: cst.UnaryOperation) -> ast.expr:
    return ast.UnaryOp(_UNARY[type(node.operator)](), _convert(node.expression))


def _number(node: cst.Integer | cst.Float | cst.Imaginary) -> ast.expr:
    return ast.Constant(node.evaluated_value)


def _string(node: cst.SimpleString) -> ast.expr:
    return ast.Constant(node.evaluated_value, kind="u" if node.prefix.lower() == "u" else None)


def _slice(node: cst.BaseSlice) -> ast.expr:
    if isinstance(node, cst.Index):
        value = _convert(node.value)
        return ast.Starred(value, ast.Load()) if node.star else value
    assert isinstance(node, cst.Slice)
    lower, upper, step = (_convert(v) if v is not None else None for v in (node.lower, node.upper, node.step))
    return ast.Slice(lower, upper, step)


def _subscript(node: cst.Subscript) -> ast.expr:
    elements = [_slice(element.slice) for element in node.slice]
    single = (
        len(elements) == 1
        and not isinstance(node.slice[0].comma, cst.Comma)
        and not isinstance(elements[0], ast.Starred)
    )
    index = elements[0] if single else ast.Tuple(elements, ast.Load())
    return ast.Subscript(_convert(node.value), index, ast.Load())


def _elements(node: cst.Tuple | cst.List) -> list[ast.expr]:
    found: list[ast.expr] = []
    for element in node.elements:
        value = _convert(element.value)
        found.append(ast.Starred(value, ast.Load()) if isinstance(element, cst.StarredElement) else value)
    return found


def _tuple(node: cst.Tuple) -> ast.expr:
    return ast.Tuple(_elements(node), ast.Load())


def _list(node: cst.List) -> ast.expr:
    return ast.List(_elements(node), ast.Load())


_CONVERTERS: dict[type, Callable[[Any], ast.expr]] = {
    cst.Name: _name,
    cst.Attribute: _attribute,
    cst.Call: _call,
    cst.Comparison: _comparison,
    cst.BooleanOperation: _boolean,
    cst.BinaryOperation: _binary,
    cst.UnaryOperation: _unary,
    cst.Integer: _number,
    cst.Float: _number,
    cst.Imaginary: _number,
    cst.SimpleString: _string,
    cst.Subscript: _subscript,
    cst.Tuple: _tuple,
    cst.List: _list,
}

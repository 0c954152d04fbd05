"""Project modules that are one convolution under another name (RULES.md, TPL401): tacotron2's
`ConvNorm(in, out, kernel_size=..., bias=True, w_init_gain=...)` builds `self.conv = nn.Conv1d(...,
bias=bias)` and its `forward` returns `self.conv(signal)`. A norm after such a module cancels the
bias its `bias` parameter leaves on, as after the convolution itself; the fix passes that
parameter `bias=False` where the module is built. Read on CPython's `ast` by the project pass.
"""

from __future__ import annotations

import ast
from typing import Optional, Union

from ..analysis.branch_sides import dotted

FunctionNode = Union[ast.FunctionDef, ast.AsyncFunctionDef]


def conv_wrapper(cls: ast.ClassDef) -> list[str]:
    """[the convolution's callee as written, the `__init__` parameter its bias comes from, that
    parameter's position after `self`] for a class whose `forward` returns what one attribute
    built in `__init__` makes of its input, and whose `__init__` builds that attribute with
    `bias=PARAM` where PARAM defaults to True; [] for any other class."""
    methods = {f.name: f for f in cls.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
    init, forward = methods.get("__init__"), methods.get("forward")
    if init is None or forward is None:
        return []
    attribute = _returned_attribute_call(forward)
    if attribute is None:
        return []
    built = _built(init, attribute)
    if built is None:
        return []
    callee, bias = built
    params = [a.arg for a in [*init.args.posonlyargs, *init.args.args]][1:]
    if bias not in params or not _defaults_to_true(init, bias):
        return []
    return [callee, bias, str(params.index(bias))]


def _returned_attribute_call(forward: FunctionNode) -> Optional[str]:
    """`ATTR` where `forward(self, x)` is `return self.ATTR(x)`, or `y = self.ATTR(x); return y`."""
    args = forward.args.args
    if len(args) != 2:
        return None
    given = args[1].arg
    body = [s for s in forward.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    returned: Optional[ast.expr] = None
    if len(body) == 1 and isinstance(body[0], ast.Return):
        returned = body[0].value
    elif (
        len(body) == 2
        and isinstance(body[0], ast.Assign)
        and len(body[0].targets) == 1
        and isinstance(body[0].targets[0], ast.Name)
        and isinstance(body[1], ast.Return)
        and isinstance(body[1].value, ast.Name)
        and body[1].value.id == body[0].targets[0].id
    ):
        returned = body[0].value
    if not (isinstance(returned, ast.Call) and len(returned.args) == 1 and not returned.keywords):
        return None
    func, argument = returned.func, returned.args[0]
    if not (isinstance(argument, ast.Name) and argument.id == given):
        return None
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
        return func.attr
    return None


def _built(init: FunctionNode, attribute: str) -> Optional[tuple[str, str]]:
    """(the callee, the parameter its `bias=` names) of the one `self.ATTR = Callee(..., bias=P)`
    in `__init__`; None when it is built otherwise, or more than once."""
    found: list[tuple[str, str]] = []
    for node in ast.walk(init):
        if not isinstance(node, ast.Assign):
            continue
        for target in node.targets:
            if dotted(target) != f"self.{attribute}":
                continue
            value = node.value
            callee = dotted(value.func) if isinstance(value, ast.Call) else None
            bias = (
                next((k.value for k in value.keywords if k.arg == "bias"), None)
                if isinstance(value, ast.Call)
                else None
            )
            if callee is None or not isinstance(bias, ast.Name):
                return None
            found.append((callee, bias.id))
    return found[0] if len(found) == 1 else None


def _defaults_to_true(init: FunctionNode, param: str) -> bool:
    positional = [*init.args.posonlyargs, *init.args.args]
    defaults = init.args.defaults
    offset = len(positional) - len(defaults)
    for index, arg in enumerate(positional):
        if arg.arg == param and index >= offset:
            default = defaults[index - offset]
            return isinstance(default, ast.Constant) and default.value is True
    return False

"""Whether a model class runs reduced precision by itself on its default configuration (RULES.md,
TPL701): a cast to float16/bfloat16 or an autocast in its `forward` or `__init__` (or a method of
the class they call, such as guided-diffusion's `convert_to_fp16`), on a path its defaults take.

A cast behind a flag (`if self.use_fp16:`, `torch.float16 if use_fp16 else torch.float32`) counts
when the flag's default is on (`use_fp16=True`, `num_fp16_res=4`) or cannot be read; a default that
is off (`use_fp16=False`, `num_fp16_res=0`, None) leaves the model in fp32, whatever an opt-in
option could make of it. Read on CPython's `ast` by the project pass.
"""

from __future__ import annotations

import ast
from typing import Iterator, Optional, Union

_REDUCED_DTYPES = frozenset({"float16", "half", "bfloat16"})
_CAST_METHODS = frozenset({"half", "bfloat16"})
_TORCH_NAMES = frozenset({"torch", "th", "pt"})
_NOT_TORCH = frozenset({"self", "np", "numpy", "jnp", "cls"})
_ENTRY_METHODS = ("__init__", "forward")
_MARKER_WORDS = ("float16", "half", "autocast")  # in every marker: bfloat16 holds float16
Value = Union[bool, None]  # a guard's value on the default configuration; None: cannot be read


def reduced_precision(cls: ast.ClassDef, text: Optional[str] = None) -> str:
    """How the class runs reduced precision by default (`casts to float16 in forward`), or "".
    `text`, the class's source where known, is read first: what `_marker` finds is spelled in it."""
    if text is not None and not any(word in text for word in _MARKER_WORDS):
        return ""
    methods = {f.name: f for f in cls.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
    defaults = _attribute_defaults(methods.get("__init__"))
    for name in _ENTRY_METHODS:
        method = methods.get(name)
        if method is None:
            continue
        found = _default_marker(method, methods, defaults, follow=True)
        if found:
            return f"{found} in {cls.name}.{name}"
    return ""


def _default_marker(
    method: Union[ast.FunctionDef, ast.AsyncFunctionDef],
    methods: dict[str, Union[ast.FunctionDef, ast.AsyncFunctionDef]],
    attributes: dict[str, Value],
    follow: bool,
) -> str:
    params = _parameter_defaults(method)
    for node, guards in _walk(method.body, []):
        found = _marker(node)
        if not found and follow and isinstance(node, ast.Call):
            callee = node.func
            if (
                isinstance(callee, ast.Attribute)
                and isinstance(callee.value, ast.Name)
                and callee.value.id == "self"
                and callee.attr in methods
                and callee.attr not in _ENTRY_METHODS
            ):
                found = _default_marker(methods[callee.attr], methods, attributes, follow=False)
        if found and all(_holds(test, wanted, params, attributes) is not False for test, wanted in guards):
            return found
    return ""


def _marker(node: ast.AST) -> str:
    if isinstance(node, ast.Attribute) and node.attr in _REDUCED_DTYPES and isinstance(node.value, ast.Name):
        # `torch.float16`, `th.half`; not `self.half = dim // 2` nor NumPy's dtypes
        owner = node.value.id
        if owner in _TORCH_NAMES or (node.attr != "half" and owner not in _NOT_TORCH):
            return f"casts to {'float16' if node.attr == 'half' else node.attr}"
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in _CAST_METHODS and not node.args:
            return f"casts to {'float16' if func.attr == 'half' else func.attr}"
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        enabled = next((k.value for k in node.keywords if k.arg == "enabled"), None)
        if name == "autocast" and not (isinstance(enabled, ast.Constant) and not enabled.value):
            return "runs under autocast"  # `autocast(enabled=False)` keeps a region in fp32
    return ""


Guards = list[tuple[ast.expr, bool]]


def _walk(statements: list[ast.stmt], guards: Guards) -> Iterator[tuple[ast.AST, Guards]]:
    """Every node of `statements` with the tests that must hold (True) or fail (False) to reach it;
    nested functions and classes are not entered."""
    for statement in statements:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(statement, ast.If):  # the test itself casts nothing (`x.dtype == torch.half`)
            yield from _walk(statement.body, [*guards, (statement.test, True)])
            yield from _walk(statement.orelse, [*guards, (statement.test, False)])
            continue
        children = [c for c in ast.iter_child_nodes(statement) if isinstance(c, ast.expr)]
        for child in children:
            yield from _expression(child, guards)
        for field in ("body", "orelse", "finalbody"):
            yield from _walk(getattr(statement, field, []) or [], guards)
        for handler in getattr(statement, "handlers", []) or []:
            yield from _walk(handler.body, guards)


def _expression(expr: ast.AST, guards: Guards) -> Iterator[tuple[ast.AST, Guards]]:
    if isinstance(expr, ast.Compare):
        return  # `x.dtype == torch.float16` asks, it does not cast
    yield expr, guards
    if isinstance(expr, ast.IfExp):
        yield from _expression(expr.test, guards)
        yield from _expression(expr.body, [*guards, (expr.test, True)])
        yield from _expression(expr.orelse, [*guards, (expr.test, False)])
        return
    for child in ast.iter_child_nodes(expr):
        yield from _expression(child, guards)


def _holds(test: ast.expr, wanted: bool, params: dict[str, Value], attributes: dict[str, Value]) -> Value:
    value = _truth(test, params, attributes)
    return None if value is None else value == wanted


def _truth(test: ast.expr, params: dict[str, Value], attributes: dict[str, Value]) -> Value:
    """The test's value on the default configuration; None where it cannot be read (a comparison
    on a tensor's device, a computed attribute): the cast may run."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = _truth(test.operand, params, attributes)
        return None if inner is None else not inner
    if isinstance(test, ast.BoolOp):
        values = [_truth(v, params, attributes) for v in test.values]
        if isinstance(test.op, ast.And):
            return False if False in values else None if None in values else True
        return True if True in values else None if None in values else False
    if isinstance(test, ast.Name):
        return params.get(test.id)
    if isinstance(test, ast.Attribute) and isinstance(test.value, ast.Name) and test.value.id == "self":
        return attributes.get(test.attr)
    if isinstance(test, ast.Constant):
        return bool(test.value)
    return None


def _parameter_defaults(method: Union[ast.FunctionDef, ast.AsyncFunctionDef]) -> dict[str, Value]:
    args = method.args
    positional = [*args.posonlyargs, *args.args]
    pairs = list(zip(positional[len(positional) - len(args.defaults) :], args.defaults, strict=True))
    pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None]
    return {arg.arg: _constant(default) for arg, default in pairs}


def _attribute_defaults(init: Optional[Union[ast.FunctionDef, ast.AsyncFunctionDef]]) -> dict[str, Value]:
    """`self.ATTR = PARAM` or `self.ATTR = literal` in `__init__`: the attribute's default truth."""
    if init is None:
        return {}
    params = _parameter_defaults(init)
    found: dict[str, Value] = {}
    for node in ast.walk(init):
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        target = node.targets[0]
        if (
            isinstance(target, ast.Attribute)
            and isinstance(target.value, ast.Name)
            and target.value.id == "self"
        ):
            value = node.value
            truth = params.get(value.id) if isinstance(value, ast.Name) else _constant(value)
            found[target.attr] = None if target.attr in found and found[target.attr] != truth else truth
    return found


def _constant(expr: ast.expr) -> Value:
    return bool(expr.value) if isinstance(expr, ast.Constant) else None

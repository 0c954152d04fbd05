"""Helpers shared by the transfer rules."""

from __future__ import annotations

from typing import Iterator, Optional

import libcst as cst

from ...engine.context import Context
from ...engine.findings import Safety
from ...syntax.walker import dotted_name


def move_target(move: cst.Call, ctx: Context) -> Optional[tuple[cst.BaseExpression, Safety]]:
    """The device a `.cuda()`/`.to()` call moves to, and how sure we are that it is a device.

    `.cuda()` -> "cuda"; `.cuda(d)`/`.to(device=d)` -> d (certain); `.to("cuda:0")` and
    `.to(torch.device(...))` are certain; `.to(device)` with a name that looks like a device is
    inferred; `.to(torch.float16)`, extra arguments or a tensor argument give None.
    """
    assert isinstance(move.func, cst.Attribute)
    method = move.func.attr.value
    args = list(move.args)
    if method == "cuda":
        if not args:
            return cst.SimpleString('"cuda"'), Safety.SAFE
        if len(args) == 1 and (args[0].keyword is None or args[0].keyword.value == "device"):
            return args[0].value, Safety.SAFE
        return None
    if len(args) != 1:
        return None
    arg = args[0]
    if arg.keyword is not None:
        return (arg.value, Safety.SAFE) if arg.keyword.value == "device" else None
    value = arg.value
    if isinstance(value, cst.SimpleString):
        text = value.evaluated_value
        if isinstance(text, str) and text.split(":")[0] in ("cuda", "cpu", "mps", "xpu", "meta"):
            return value, Safety.SAFE
        return None
    if isinstance(value, cst.Call) and ctx.qualified_name(value) == "torch.device":
        return value, Safety.SAFE
    name = (dotted_name(value) or "").split(".")[-1].lower()
    if name in ("device", "dev") or name.endswith("device") or name == "rank" or name == "local_rank":
        if isinstance(value, cst.Name):
            for binding in ctx.bindings(value.value, value):
                if binding.kind == "assign" and isinstance(binding.node, cst.Call):
                    if ctx.qualified_name(binding.node) == "torch.device":
                        return value, Safety.SAFE
        return value, Safety.UNSAFE
    return None


# Tensor methods that copy values to the host and wait for the device.
SYNC_METHODS = frozenset({"item", "tolist", "cpu", "numpy"})
SYNC_CASTS = frozenset({"builtins.float", "builtins.int", "builtins.bool"})
# `math` functions that read a tensor argument through `float()`: `math.isfinite(loss)`.
SYNC_MATH = frozenset({"math.isfinite", "math.isnan", "math.isinf"})


def device_move(move: cst.Call, ctx: Context) -> Optional[tuple[cst.BaseExpression, Safety]]:
    """Like `move_target`, judged on the device part alone: `.to(d, torch.half)`,
    `.to(d, non_blocking=True)` and `.cuda(d, non_blocking=True)` move to `d`."""
    assert isinstance(move.func, cst.Attribute)
    device_args = [
        a for a in move.args if a.star == "" and (a.keyword is None or a.keyword.value == "device")
    ]
    if move.func.attr.value == "to":
        device_args = device_args[:1]
    return move_target(move.with_changes(args=device_args), ctx)


def to_accelerator(move: cst.Call, ctx: Context) -> bool:
    """`move` may take its value to an accelerator: a device that is not the CPU, or the device
    of another tensor (`.to(x)`, `.type_as(x)`)."""
    assert isinstance(move.func, cst.Attribute)
    positional = [a.value for a in move.args if a.keyword is None and a.star == ""]
    if move.func.attr.value in ("to", "type_as") and len(positional) == 1 and ctx.is_tensor(positional[0]):
        return not ctx.is_host_tensor(positional[0])  # `.to(h)` of a host tensor `h` stays on the host
    if move.func.attr.value == "type_as":
        return False
    target = device_move(move, ctx)
    if target is None:
        return False
    device = target[0]
    if (
        isinstance(device, cst.Attribute)
        and device.attr.value == "device"
        and ctx.is_host_tensor(device.value)
    ):
        return False  # `.to(h.device)` of a host tensor `h`: the CPU
    if isinstance(device, cst.SimpleString):
        text = device.evaluated_value
        return not (isinstance(text, str) and text.startswith(("cpu", "meta")))
    return True


def names_accelerator(device: cst.BaseExpression, ctx: Context) -> bool:
    """A `device=` value that may name an accelerator: anything but a CPU or meta device
    written out (`"cpu"`, `torch.device("cpu")`)."""
    if isinstance(device, cst.Call) and ctx.qualified_name(device) == "torch.device" and device.args:
        device = device.args[0].value
    if isinstance(device, cst.SimpleString):
        text = device.evaluated_value
        return not (isinstance(text, str) and text.startswith(("cpu", "meta")))
    return not (isinstance(device, cst.Name) and device.value == "None")


def condition_parts(test: cst.BaseExpression, ctx: Context) -> Iterator[cst.BaseExpression]:
    """The operands that `and`/`or`/`not` hand to `bool()`, those a step reads: not one that
    runs only where the operands before it let it and they never do (`not is_compiling() and
    check`, `size is not None or check` where every call passes a size: analysis/cold.py)."""
    if isinstance(test, cst.BooleanOperation):
        yield from condition_parts(test.left, ctx)
        yield from condition_parts(test.right, ctx)
    elif isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        yield from condition_parts(test.expression, ctx)
    elif ctx.is_hot(test):
        yield test


def is_bare_parameter(expr: cst.BaseExpression, ctx: Context) -> bool:
    if not isinstance(expr, cst.Name):
        return False
    bindings = ctx.bindings(expr.value, expr)
    return bool(bindings) and all(b.kind == "param" for b in bindings)


def shown_tensor(expr: cst.BaseExpression, ctx: Context) -> bool:
    """A tensor whose values `print()` or an f-string would read: certain, or likely but neither
    a bare parameter (a flag or a name) nor a host batch."""
    if ctx.is_host_tensor(expr):
        return False
    if ctx.is_tensor(expr, certain=True):
        return True
    return ctx.is_tensor(expr) and not is_bare_parameter(expr, ctx) and ctx.batch_loop(expr) is None


def printed(call: cst.Call) -> Iterator[cst.BaseExpression]:
    for arg in call.args:
        if arg.keyword is not None:
            continue
        if isinstance(arg.value, cst.FormattedString):
            for part in arg.value.parts:
                if isinstance(part, cst.FormattedStringExpression):
                    yield part.expression
        else:
            yield arg.value


def on_device(expr: cst.BaseExpression, ctx: Context, certain: bool = False) -> bool:
    """A tensor that may live on an accelerator (not a CPU tensor built in this code)."""
    return ctx.is_tensor(expr, certain=certain) and not ctx.is_host_tensor(expr)


def host_sync(call: cst.Call, ctx: Context) -> Optional[str]:
    """What in `call` copies tensor values to the host (`.item()`, `float()`, `print()`...), or None."""
    func = call.func
    if isinstance(func, cst.Attribute):
        method = func.attr.value
        if (method in SYNC_METHODS or method == "nonzero") and on_device(func.value, ctx):
            if method in ("cpu", "numpy") and ctx.fed_to_other_runtime(call):
                return None  # the input of an exported model's runtime, not a sync mid-step
            return f".{method}()"
    qualified = ctx.qualified_name(call)
    if qualified == "torch.nonzero" and call.args and not ctx.is_host_tensor(call.args[0].value):
        return "torch.nonzero()"
    if qualified in SYNC_CASTS and len(call.args) == 1 and on_device(call.args[0].value, ctx, certain=True):
        return f"{qualified[len('builtins.') :]}() of a tensor"
    if qualified in SYNC_MATH and len(call.args) == 1 and shown_tensor(call.args[0].value, ctx):
        return f"{qualified}() of a tensor"
    if qualified == "builtins.print" and any(shown_tensor(e, ctx) for e in printed(call)):
        return "print() of a tensor"
    return None


def on_error_path(node: cst.CSTNode, ctx: Context) -> bool:
    """Inside an `assert` (its test is TPL104's, its message runs only when it fails) or a
    `raise`."""
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, (cst.Assert, cst.Raise)):
            return True
        if isinstance(ancestor, (cst.BaseStatement, cst.FunctionDef)):
            return False
    return False

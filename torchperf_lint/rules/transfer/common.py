"""Helpers shared by the transfer rules."""

from __future__ import annotations

from typing import Callable, Iterator, Optional

import libcst as cst

from ...analysis.tensors import formatted_values
from ...analysis.vocabulary import SYNC_METHODS
from ...engine.context import Context
from ...engine.findings import Safety
from ...syntax.walker import dotted_name, visit


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


def cuda_tensor_type(expr: cst.BaseExpression, ctx: Context) -> bool:
    """`expr` names a legacy CUDA tensor type: `torch.cuda.FloatTensor`, its name as a string,
    or a name bound once to a choice with such a type on one side (YOLOv3's `Tensor =
    torch.cuda.FloatTensor if torch.cuda.is_available() else torch.FloatTensor`: the CUDA side is
    the run the device rules judge). `x.type(T)` then copies `x` to the device."""
    if isinstance(expr, cst.Name):
        bindings = ctx.bindings(expr.value, expr)
        if len(bindings) == 1 and bindings[0].kind == "assign" and isinstance(bindings[0].node, cst.IfExp):
            choice = bindings[0].node
            return any(_cuda_type_name(side, ctx) for side in (choice.body, choice.orelse))
    return _cuda_type_name(expr, ctx)


def _cuda_type_name(expr: cst.BaseExpression, ctx: Context) -> bool:
    if isinstance(expr, cst.SimpleString):
        text = expr.evaluated_value
        name = text if isinstance(text, str) else ""
    else:
        name = ctx.qualified_name(expr) or ""
    return name.startswith("torch.cuda.") and name.endswith("Tensor")


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


def shown_tensor(expr: cst.BaseExpression, ctx: Context) -> bool:
    """A tensor whose values `print()` or an f-string would read: certain, or likely but neither
    a bare parameter (a flag or a name) nor a host batch."""
    if ctx.is_host_tensor(expr):
        return False
    if ctx.is_tensor(expr, certain=True):
        return True
    return ctx.is_tensor(expr) and not ctx.names.is_bare_parameter(expr) and ctx.batch_loop(expr) is None


def formatted_tensor(expr: cst.BaseExpression, ctx: Context) -> bool:
    """A tensor whose values a string formats: one the code computes (a torch result, the norm
    `clip_grad_norm_` returns, a model's or a loss's output), not a host one."""
    return ctx.is_computed_tensor(expr) and not ctx.is_host_tensor(expr)


def _prints_a_tensor(call: cst.Call, ctx: Context) -> bool:
    """`print(loss)`, or print() of a string that formats one (`print(f"loss {loss}")`)."""
    for arg in call.args:
        if arg.keyword is not None:
            continue
        formatted = formatted_values(arg.value)
        if any(formatted_tensor(e, ctx) for e in formatted) or (
            not formatted and shown_tensor(arg.value, ctx)
        ):
            return True
    return False


def on_device(expr: cst.BaseExpression, ctx: Context, certain: bool = False) -> bool:
    """A tensor that may live on an accelerator (not a CPU tensor built in this code)."""
    return ctx.is_tensor(expr, certain=certain) and not ctx.is_host_tensor(expr)


def host_sync(call: cst.Call, ctx: Context) -> Optional[str]:
    """What in `call` copies tensor values to the host (`.item()`, `float()`, `print()`...), or None."""
    func = call.func
    if isinstance(func, cst.Attribute):
        method = func.attr.value
        if (
            (method in SYNC_METHODS or method == "nonzero")
            and on_device(func.value, ctx)
            and not ctx.copied_for_callers(call)
        ):
            if method in ("cpu", "numpy") and ctx.fed_to_other_runtime(call):
                return None  # the input of an exported model's runtime, not a sync mid-step
            return f".{method}()"
    copied = ctx.host_copied_argument(call)
    if copied is not None and on_device(copied, ctx):
        return f"{ctx.code(call.func)}(), which copies its argument to the host,"
    qualified = ctx.qualified_name(call)
    if qualified == "torch.nonzero" and call.args and not ctx.is_host_tensor(call.args[0].value):
        return "torch.nonzero()"
    if qualified in SYNC_CASTS and len(call.args) == 1:
        value = call.args[0].value
        if on_device(value, ctx, certain=True) or ctx.device_scalar(value):
            return f"{qualified[len('builtins.') :]}() of a tensor"
    if qualified in SYNC_MATH and len(call.args) == 1 and shown_tensor(call.args[0].value, ctx):
        return f"{qualified}() of a tensor"
    if qualified == "builtins.print":
        return "print() of a tensor" if _prints_a_tensor(call, ctx) else None
    return _formats_a_tensor(call, ctx)


def _formats_a_tensor(call: cst.Call, ctx: Context) -> Optional[str]:
    """`"{:.3f}".format(loss)`, or a call handed a tensor formatted into a string (`pbar.set_description(
    f"loss {loss:.3f}")`, `log.info("%f" % loss)`): the string is built, values and all, before the
    call runs, at whatever level the logger is set. A format call that print() shows is print's."""
    formatted = formatted_values(call)
    if formatted:
        parent = ctx.parent(call)
        grandparent = ctx.parent(parent) if isinstance(parent, cst.Arg) else None
        shown = isinstance(grandparent, cst.Call) and ctx.qualified_name(grandparent) == "builtins.print"
        if not shown and any(formatted_tensor(e, ctx) for e in formatted):
            return "str.format() of a tensor"
        return None
    for arg in call.args:
        if not isinstance(arg.value, cst.Call) and any(
            formatted_tensor(e, ctx) for e in formatted_values(arg.value)
        ):
            return "a tensor formatted into a string"
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


# -- 0-dim device tensors where Python needs a number (issue 39) ---------------------------------
# Calls whose positional arguments, or the elements of a list or tuple among them, Python reads as
# ints (sizes, counts): a 0-dim tensor there is turned into one through `.item()`.
_SIZE_METHODS = frozenset(
    "view reshape repeat expand new_zeros new_ones new_empty new_full narrow topk unflatten".split()
)
_SIZE_FUNCTIONS = frozenset(
    """builtins.range torch.zeros torch.ones torch.empty torch.rand torch.randn torch.full torch.arange
    torch.nn.functional.pad""".split()
)
_CLAMPS = frozenset({"clamp", "clamp_", "clip", "clip_"})
HOST_NUMBER = "a Python int kept beside the tensor (a shape, `.size(d)`, a number the code already has)"


def _flat(values: list[cst.BaseExpression]) -> list[cst.BaseExpression]:
    flat: list[cst.BaseExpression] = []
    for value in values:
        if isinstance(value, (cst.List, cst.Tuple)):
            flat.extend(e.value for e in value.elements if not isinstance(e, cst.StarredElement))
        else:
            flat.append(value)
    return flat


def _scalar_in_call(call: cst.Call, ctx: Context) -> Optional[tuple[cst.BaseExpression, str]]:
    """The 0-dim device tensor `call` reads as a Python number, and where it stands."""
    func = call.func
    qualified = ctx.qualified_name(call) or ""
    method = (
        func.attr.value if isinstance(func, cst.Attribute) and not qualified.startswith("torch.") else None
    )
    positional = [a.value for a in call.args if a.keyword is None and not a.star]
    if method in _CLAMPS or qualified in ("torch.clamp", "torch.clip"):
        bounds = positional[1:3] if method is None else positional[:2]
        bounds += [a.value for a in call.args if a.keyword is not None and a.keyword.value in ("min", "max")]
        # a number beside a tensor bound picks the Scalar overload, which reads the tensor on the host
        scalars = [b for b in bounds if ctx.device_scalar(b)]
        if scalars and any(not ctx.is_tensor(b) and not _none(b) for b in bounds):
            name = method or qualified.rsplit(".", 1)[-1]
            return scalars[0], f"a {name}() bound beside a Python number"
        return None
    if method in _SIZE_METHODS and isinstance(func, cst.Attribute) and ctx.is_tensor(func.value):
        where = f"a size of .{method}()"
    elif qualified in _SIZE_FUNCTIONS:
        where = (
            "a range() bound"
            if qualified == "builtins.range"
            else f"an int argument of {qualified.replace('torch.nn.functional.', 'F.')}()"
        )
        if qualified == "torch.nn.functional.pad":
            positional = positional[1:2] + [
                a.value for a in call.args if a.keyword is not None and a.keyword.value == "pad"
            ]
    else:
        return None
    if qualified == "torch.full" or method == "new_full":
        fill = positional[1:2] + [
            a.value for a in call.args if a.keyword is not None and a.keyword.value == "fill_value"
        ]
        for value in fill:
            if ctx.device_scalar(value):
                return value, f"the fill value of {'torch.full' if method is None else '.new_full'}()"
        positional = positional[:1]
    for value in _flat(positional):
        if ctx.device_scalar(value):
            return value, where
    return None


def _none(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "None"


def _scalar_in_subscript(subscript: cst.Subscript, ctx: Context) -> Optional[tuple[cst.BaseExpression, str]]:
    for element in subscript.slice:
        part = element.slice
        if isinstance(part, cst.Slice):
            for bound in (part.lower, part.upper, part.step):
                if bound is not None and ctx.device_scalar(bound):
                    return bound, "a slice bound"
        elif (
            isinstance(part, cst.Index)
            and not ctx.is_tensor(subscript.value)
            and ctx.device_scalar(part.value)
        ):
            return part.value, "an index of a Python sequence"  # a tensor takes a tensor index on the device
    return None


def _scalar_in(node: cst.CSTNode, ctx: Context) -> Optional[tuple[cst.BaseExpression, str]]:
    if isinstance(node, cst.Call):
        return _scalar_in_call(node, ctx)
    if isinstance(node, cst.Subscript):
        return _scalar_in_subscript(node, ctx)
    return None


def scalar_read(node: cst.CSTNode, ctx: Context) -> Optional[cst.BaseExpression]:
    """The 0-dim device tensor that `node` (a call or a subscript) reads where Python needs a number."""
    found = _scalar_in(node, ctx)
    return found[0] if found is not None else None


def scalar_sync(node: cst.CSTNode, ctx: Context) -> Optional[tuple[str, str]]:
    """(what, remedy) when `node` (a call or a subscript) reads a 0-dim device tensor where
    Python needs a number: a slice bound, `range()`, a size, a Scalar argument. The remedy names
    the host value the tensor was built from where the code shows it."""
    found = _scalar_in(node, ctx)
    if found is None:
        return None
    scalar, where = found
    host = ctx.host_source(scalar)
    remedy = (
        f"use the host value `{ctx.code(host)}` instead" if host is not None else f"use {HOST_NUMBER} instead"
    )
    return f"the 0-dim device tensor `{ctx.code(scalar)}` as {where}", remedy


# -- `if` on a device count inside a loop over items (issue 39) ------------------------------------
class _MaskedWrites(cst.CSTVisitor):
    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx
        self.found = False

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False

    def _written(self, target: cst.BaseExpression) -> None:
        if isinstance(target, cst.Subscript) and any(
            isinstance(e.slice, cst.Index) and self._ctx.device_mask(e.slice.value) for e in target.slice
        ):
            self.found = True

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        self._written(node.target)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._written(node.target)

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Attribute) and node.func.attr.value in (
            "masked_fill_",
            "masked_scatter_",
        ):
            self.found = True


def guards_masked_update(node: cst.If, ctx: Context) -> bool:
    """`node` is an `if` on a device tensor, inside a loop over items, whose body updates through
    a mask (`if (m > 1).sum() > 0: t[m > 1] = v`): with an empty mask the update changes nothing,
    so it can run unconditionally and the per-item sync goes."""
    if ctx.item_loop(node) is None:
        return False
    writes = _MaskedWrites(ctx)
    visit(node.body, writes)
    return writes.found


UNCONDITIONAL = "the masked update can run unconditionally (with an empty mask it changes nothing), which removes the sync"


def in_a_syncing_branch(
    node: cst.CSTNode, ctx: Context, syncs: Callable[[cst.BaseExpression, Context], bool]
) -> bool:
    """Inside the body of an `if` whose test syncs (`if torch.isnan(loss).any(): print(loss)`,
    a degenerate-case cascade under `if denom == 0:`): the finding is the test's; the body runs
    only when it is true, after the host waited. A loop between them runs its syncs again."""
    child = node
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, (cst.For, cst.While, cst.FunctionDef)):
            return False
        if isinstance(ancestor, cst.If) and child is ancestor.body and syncs(ancestor.test, ctx):
            return True
        child = ancestor
    return False

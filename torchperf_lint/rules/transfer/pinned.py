"""Where the host memory of a `non_blocking=True` copy to the device lives: pinned, pageable, or
unknown (TPL106; TPL502 gives way to it on the loaders it reports).

A copy from pageable memory is staged through a driver buffer, and the host waits for it, and
for the work queued on the stream before it, whatever `non_blocking` says. Pageable, for certain:
a batch of a DataLoader of this file built without `pin_memory=True` (or with `pin_memory=False`),
and a tensor built on the host in the step itself (`torch.cat`/`torch.stack` of host tensors,
`torch.from_numpy`/`torch.tensor` of data that changes every step), also through the layout and
dtype conversions that keep it on the host. Pinned: a `.pin_memory()` on the way, or a loader
with `pin_memory=True`. Everything else (a loader passed in, `pin_memory=args.pin`, a dtype cast of
a pinned batch, which is a new pageable tensor unless the dtype already matched) is unknown:
silent.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import libcst as cst

from ...analysis.batches import HOST_CONVERSIONS
from ...engine.context import Context
from ...engine.edits import keyword
from ..data.common import argument, dataloader, dataset_on_device
from .common import to_accelerator

# Calls that build a new tensor from host tensors: their result is fresh pageable memory.
_JOINS = frozenset(
    f"torch.{name}" for name in ("cat", "concat", "concatenate", "stack", "hstack", "vstack", "dstack")
)
# Calls that wrap or copy host data (NumPy arrays, lists) into a tensor in pageable memory.
_FROM_HOST_DATA = frozenset(
    f"torch.{name}"
    for name in ("from_numpy", "tensor", "as_tensor", "Tensor", "FloatTensor", "LongTensor", "ByteTensor")
)


@dataclasses.dataclass(frozen=True)
class Pageable:
    """Why the copied memory is pageable, as a message says it."""

    source: str
    loader: Optional[cst.Call] = None  # the DataLoader whose pin_memory decides it
    written: bool = False  # the loader says pin_memory=False


def asynchronous_copy(call: cst.Call, ctx: Context) -> bool:
    """`x.to(device, non_blocking=True)`/`x.cuda(non_blocking=True)` to an accelerator, in a step loop."""
    func = call.func
    if not isinstance(func, cst.Attribute) or func.attr.value not in ("to", "cuda"):
        return False
    flag = keyword(call, "non_blocking")
    if flag is None or not (isinstance(flag.value, cst.Name) and flag.value.value == "True"):
        return False
    return ctx.step_loop(call) is not None and to_accelerator(call, ctx)


def pageable_source(receiver: cst.BaseExpression, ctx: Context) -> Optional[Pageable]:
    """Why the memory `receiver` holds is certainly pageable, or None (pinned or unknown)."""
    built = _built_on_host(receiver, ctx, set())
    if built is not None:
        return built
    source = ctx.batch_loop(receiver)
    loaders = ctx.batch_loaders(source) if source is not None else None
    if not loaders or len(loaders) != 1:
        return None
    loader = loaders[0]
    pinning = _pin_memory(loader, ctx)
    if pinning is None or pinning == "True":
        return None
    line = ctx.line_of(loader)
    if pinning == "False":
        return Pageable(
            f"a batch of the DataLoader at line {line}, which sets pin_memory=False", loader, True
        )
    return Pageable(f"a batch of the DataLoader at line {line}, built without pin_memory=True", loader)


def first_copies(loader: cst.Call, ctx: Context) -> list[cst.Call]:
    """The asynchronous copies of the file that read batches of `loader` alone, in source order."""
    found = []
    for call in ctx.facts.method_calls.get("to", []) + ctx.facts.method_calls.get("cuda", []):
        if not asynchronous_copy(call, ctx):
            continue
        assert isinstance(call.func, cst.Attribute)
        source = ctx.batch_loop(call.func.value)
        if source is not None and ctx.batch_loaders(source) == [loader]:
            found.append(call)
    return sorted(found, key=ctx.facts.calls.index)


def _pin_memory(loader: cst.Call, ctx: Context) -> Optional[str]:
    """ "True", "False" or "absent" for what `loader` passes as pin_memory; None when unknown (an
    expression, `**kwargs`, a dataset on the device, a collate that pinning cannot reach)."""
    if not dataloader(loader, ctx, "pin_memory") or dataset_on_device(loader, ctx):
        return None
    if ctx.collates_unpinned(loader):
        return None
    value = argument(loader, "pin_memory", ctx)
    if value is None:
        return "absent"
    if isinstance(value, cst.Name) and value.value in ("True", "False"):
        return value.value
    return None


def _built_on_host(expr: cst.BaseExpression, ctx: Context, seen: set[cst.CSTNode]) -> Optional[Pageable]:
    if expr in seen:
        return None
    seen.add(expr)
    if isinstance(expr, cst.Name):
        bindings = ctx.names.reaching(expr)
        if not bindings or any(
            b.kind != "assign" or not isinstance(b.node, cst.BaseExpression) for b in bindings
        ):
            return None
        found = [_built_on_host(b.node, ctx, seen) for b in bindings]  # type: ignore[arg-type]
        return found[0] if all(found) else None
    if not isinstance(expr, cst.Call):
        return None
    func = expr.func
    if isinstance(func, cst.Attribute) and func.attr.value in HOST_CONVERSIONS:
        if func.attr.value == "pin_memory":
            return None
        return _built_on_host(func.value, ctx, seen)  # a new layout or dtype of pageable memory
    qualified = ctx.qualified_name(expr) or ""
    if qualified not in _JOINS | _FROM_HOST_DATA or not ctx.is_host_tensor(expr):
        return None
    if any(arg.keyword is not None and arg.keyword.value == "pin_memory" for arg in expr.args):
        return None  # `torch.tensor(data, pin_memory=True)`
    if qualified in _FROM_HOST_DATA:
        data = next((arg.value for arg in expr.args if arg.keyword is None), None)
        if data is None or ctx.is_step_invariant(data) or ctx.is_host_array(data):
            return None  # the same data every step: TPL102's constant to keep on the device
    return Pageable(f"{qualified}()'s result, new pageable memory built in the step")

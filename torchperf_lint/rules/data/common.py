"""Helpers shared by the data rules."""

from __future__ import annotations

import libcst as cst

from ...analysis.loader_reads import read_a_few_batches
from ...engine.context import Context
from ...engine.edits import keyword

DATALOADER = "torch.utils.data.DataLoader"
# DataLoader(dataset, batch_size, shuffle, sampler, batch_sampler, num_workers, collate_fn, pin_memory, ...)
POSITIONS = {"dataset": 0, "num_workers": 5, "pin_memory": 7}
ON_DEVICE = (".cuda(", ".to(", "device=")


def dataloader(call: cst.Call, ctx: Context, keyword: str) -> bool:
    """`call` constructs torch's DataLoader, and neither `*args` nor a `**mapping` could pass it
    `keyword`."""
    return (
        ctx.qualified_name(call) == DATALOADER
        and not any(arg.star == "*" for arg in call.args)
        and not ctx.module_graph.star_kwargs_may_supply(call, keyword)
    )


def read_once(call: cst.Call, ctx: Context) -> bool:
    """The loader `call` builds is read for a few batches, once (analysis/loader_reads.py)."""
    parent = ctx.parent(call)
    name = None
    if isinstance(parent, cst.Assign) and len(parent.targets) == 1:
        target = parent.targets[0].target
        name = target.value if isinstance(target, cst.Name) else None
    scope = ctx.enclosing_function(call) or ctx.facts.module
    loops = ctx.facts.loops
    bounded = [loops[i] for i in ctx.entry.bounded_loops if i < len(loops)]
    return read_a_few_batches(name, scope, bounded)


def argument(call: cst.Call, name: str, ctx: Context | None = None) -> cst.BaseExpression | None:
    """The value `call` passes for DataLoader's parameter `name`, by keyword or position, or
    (given `ctx`) through a `**mapping` whose keys are known (`DataLoader(ds, **loader_args)`)."""
    found = keyword(call, name)
    if found is not None:
        return found.value
    position = POSITIONS.get(name)
    positional = [arg for arg in call.args if arg.keyword is None and not arg.star]
    if position is not None and position < len(positional):
        return positional[position].value
    return ctx.module_graph.star_kwargs_value(call, name) if ctx is not None else None


def int_literal(expr: cst.BaseExpression | None) -> int | None:
    if isinstance(expr, cst.Integer):
        return int(expr.evaluated_value)
    return None


def dataset_on_device(call: cst.Call, ctx: Context) -> bool:
    """The dataset is built from tensors already moved to a device (`TensorDataset(x.cuda(), y)`,
    or names bound to such values): worker processes cannot hold CUDA tensors and pinning them
    fails, so zero workers and no pinning are right for it."""
    dataset = argument(call, "dataset")
    if isinstance(dataset, cst.Name):
        bindings = ctx.bindings(dataset.value, dataset)
        if len(bindings) == 1 and isinstance(bindings[0].node, cst.BaseExpression):
            dataset = bindings[0].node
    if dataset is None:
        return False
    parts: list[cst.CSTNode] = [dataset]
    if isinstance(dataset, cst.Call):
        for arg in dataset.args:
            if isinstance(arg.value, cst.Name):
                bindings = ctx.bindings(arg.value.value, arg.value)
                parts.extend(b.node for b in bindings if b.kind == "assign")
    return any(marker in ctx.code(part) for part in parts for marker in ON_DEVICE)

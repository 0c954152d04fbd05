"""TPL604 synchronize-in-step: CUDA synchronize or empty_cache every step."""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from ...analysis.cold import periodic
from ...engine.context import Context
from ...engine.findings import Report, Safety
from ...syntax.walker import dotted_name
from ..base import Rule

_STEP_SYNCS = {
    "torch.cuda.synchronize": "torch.cuda.synchronize()",
    "torch.cuda.empty_cache": "torch.cuda.empty_cache()",
    "torch.cuda.memory.empty_cache": "torch.cuda.empty_cache()",
    "torch.accelerator.synchronize": "torch.accelerator.synchronize()",
    "torch.accelerator.empty_cache": "torch.accelerator.empty_cache()",
    "torch.accelerator.memory.empty_cache": "torch.accelerator.empty_cache()",
}
_TIMERS = frozenset(
    {
        "time.perf_counter",
        "time.perf_counter_ns",
        "time.time",
        "time.time_ns",
        "time.monotonic",
        "time.monotonic_ns",
        "timeit.default_timer",
    }
)
_EVENTS = frozenset({"torch.cuda.Event", "torch.Event", "torch.cuda.streams.Event"})


def _reads_timer(call: cst.Call, ctx: Context) -> bool:
    """A clock read: `time.perf_counter()` and friends, or a CUDA event's `record`/`elapsed_time`."""
    if ctx.qualified_name(call) in _TIMERS:
        return True
    func = call.func
    if not isinstance(func, cst.Attribute):
        return False
    if func.attr.value == "elapsed_time":
        return True
    if func.attr.value != "record":
        return False
    receiver = dotted_name(func.value) or ""
    if "event" in receiver.split(".")[-1].lower():
        return True
    if isinstance(func.value, cst.Name):
        for binding in ctx.bindings(func.value.value, func.value):
            if (
                binding.kind == "assign"
                and isinstance(binding.node, cst.Call)
                and ctx.qualified_name(binding.node) in _EVENTS
            ):
                return True
    return False


class SynchronizeInStep(Rule):
    """## What it does
    Flags `torch.cuda.synchronize()` and `torch.cuda.empty_cache()` (and their
    `torch.accelerator` twins) in the body of a step loop.

    ## Why it is slow
    `synchronize()` blocks the CPU until the GPU has finished every queued kernel, so the next
    step cannot be queued while the current one runs. `empty_cache()` hands the caching
    allocator's free blocks back to the driver; the next step allocates them again with
    `cudaMalloc`, which synchronizes. The measured effect on an H100 is in the Measured
    section below.

    Off by default (RULES.md, "Defaults follow evidence"): on an H100 a per-step
    `torch.cuda.synchronize()` cost at most 1.02x (GPU-bound MLP) and `empty_cache()` 1.04x; in
    launch-bound steps removing either was slower (0.90-0.97x). Enable it with
    `--extend-select TPL604`.

    ## Fix safety
    No automatic fix: a synchronize may guard a host read of device memory that the code does
    not show. Remove it, or move it out of the loop.

    ## When it stays silent
    When the same step-loop body reads a clock (`time.perf_counter()`, `time.time()`,
    `time.monotonic()`, a CUDA event's `.record()` or `.elapsed_time()`): timing needs the
    synchronize. Calls guarded by a periodic test (`if step % 100 == 0:`), whose cost is spread
    over many steps; calls before or after the loop; loops that are not step loops.
    """

    code = "TPL604"
    default_on = False
    name = "synchronize-in-step"
    summary = "CUDA synchronize or empty_cache every step"
    message = "{what} in {place} {cost}; remove it or move it out of {scope}{graph}"
    fix_safety = Safety.NONE
    where = "step loop"
    node_types = (cst.Call,)
    benchmark = "TPL604"

    _COSTS = {
        "synchronize": "stalls the CPU until the GPU drains its queue every step",
        "empty_cache": "frees cached memory that the next step must allocate again",
    }

    BAD = {
        "synchronize-after-step": """
            import torch

            def train(model, loader, optimizer):
                for x, y in loader:
                    loss = model(x.cuda(), y.cuda())
                    loss.backward()
                    optimizer.step()
                    torch.cuda.synchronize()  # expect: TPL604
            """,
        "empty-cache-per-image-in-label-assignment": """
            import torch
            from torch import nn

            def build_targets(predictions, targets):
                matched = []
                for image_index in range(predictions.shape[0]):
                    image_targets = targets[targets[:, 0] == image_index]
                    matched.append(predictions[image_index, : len(image_targets)])
                    torch.cuda.empty_cache()  # expect: TPL604
                return matched

            class DetectionLoss(nn.Module):
                def forward(self, predictions, targets):
                    matched = build_targets(predictions, targets)
                    return sum(m.pow(2).sum() for m in matched)
            """,
        "empty-cache-every-step": """
            import torch

            def train(model, data, optimizer):
                for epoch in range(10):
                    for batch in data:
                        model(batch).sum().backward()
                        optimizer.step()
                        torch.cuda.empty_cache()  # expect: TPL604
            """,
        "imported-function-under-if": """
            import torch
            from torch.cuda import empty_cache, synchronize

            def train(model, train_loader, optimizer, big):
                for batch in train_loader:
                    if big:
                        empty_cache()  # expect: TPL604
                    model(batch).sum().backward()
                    synchronize(0)  # expect: TPL604
                    optimizer.step()
            """,
    }
    GOOD = {
        "timed-benchmark-loop": """
            import time
            import torch

            def bench(model, loader, optimizer):
                for x, y in loader:
                    torch.cuda.synchronize()
                    start = time.perf_counter()
                    model(x, y).backward()
                    optimizer.step()
                    torch.cuda.synchronize()
                    print(time.perf_counter() - start)
            """,
        "cuda-events": """
            import torch

            def bench(model, loader, optimizer):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                for x, y in loader:
                    start.record()
                    model(x, y).backward()
                    optimizer.step()
                    end.record()
                    torch.cuda.synchronize()
                    print(start.elapsed_time(end))
            """,
        "once-per-epoch-and-after-training": """
            import torch

            def train(model, loader, optimizer):
                for epoch in range(10):
                    for x, y in loader:
                        model(x, y).backward()
                        optimizer.step()
                    torch.cuda.empty_cache()
                torch.cuda.synchronize()
            """,
        "periodic-cleanup": """
            import torch

            def train(model, loader, optimizer):
                for step, (x, y) in enumerate(loader):
                    model(x, y).backward()
                    optimizer.step()
                    if step % 1000 == 0:
                        torch.cuda.empty_cache()
            """,
        "timed-helper-and-oom-fallback": """
            import time
            import torch
            from torch import nn

            def time_synchronized():
                torch.cuda.synchronize()
                return time.time()

            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.body = nn.Linear(8, 8)

                def forward(self, x):
                    start = time_synchronized()
                    try:
                        out = self.body(x)
                    except torch.cuda.OutOfMemoryError:
                        torch.cuda.empty_cache()
                        out = self.body(x.half()).float()
                    self.elapsed = time_synchronized() - start
                    return out
            """,
        "stream-synchronize-and-plain-loop": """
            import torch

            def copy_all(tensors, stream):
                for t in tensors:
                    t.cuda(non_blocking=True)
                    torch.cuda.synchronize()
                stream.synchronize()
            """,
    }

    def check(self, node: cst.Call, ctx: Context) -> Iterator[Report]:
        what = _STEP_SYNCS.get(ctx.qualified_name(node) or "")
        if what is None:
            return
        cost = self._COSTS["synchronize" if "synchronize" in what else "empty_cache"]
        calls = [c for c in ctx.nodes(cst.Call) if isinstance(c, cst.Call)]
        loop = ctx.step_loop(node)
        if loop is not None:
            if self._periodic(node, loop, ctx) or any(
                _reads_timer(c, ctx) for c in calls if ctx.step_loop(c) is loop
            ):
                return
            yield self.report(
                node,
                reason=ctx.hot_reason(node),
                what=what,
                place="the step loop",
                cost=cost,
                scope="the loop",
                graph=ctx.graph_break(node),
            )
            return
        # a function that runs per step (a loss's label assignment): the same cost, paid in a callee
        reason = ctx.hot_reason(node)
        function = ctx.enclosing_function(node)
        if reason is None or function is None or self._periodic(node, function, ctx):
            return
        if any(_reads_timer(c, ctx) for c in calls if ctx.enclosing_function(c) is function):
            return
        yield self.report(
            node,
            reason=reason,
            what=what,
            place=f"{function.name.value}(), which runs per step,",
            cost=cost,
            scope="the step",
            graph=ctx.graph_break(node),
        )

    @staticmethod
    def _periodic(node: cst.Call, scope: cst.CSTNode, ctx: Context) -> bool:
        for ancestor in ctx.ancestors(node):
            if ancestor is scope:
                return False
            if isinstance(ancestor, cst.If) and periodic(ancestor.test):
                return True
        return False

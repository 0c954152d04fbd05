"""TPL602 profiler-in-training-code: Profiler wrapped around a training loop."""

from __future__ import annotations

from typing import Iterator, Optional

import libcst as cst

from ...engine.context import Context
from ...engine.findings import Report, Safety
from ..base import Rule

_PROFILERS = frozenset(
    {
        "torch.autograd.profiler.profile",
        "torch.autograd.profiler.emit_nvtx",
        "torch.autograd.profiler.emit_itt",
        "torch.autograd.profiler_legacy.profile",
        "torch.profiler.profile",
        "torch.profiler.profiler.profile",
    }
)


_SCHEDULES = frozenset({"torch.profiler.schedule", "torch.profiler.profiler.schedule"})


def _profiler_call(expr: cst.BaseExpression, ctx: Context) -> Optional[cst.Call]:
    """The profiler constructor a `with` item enters: inline, or through a name bound to it."""
    if isinstance(expr, cst.Name):
        bindings = [b for b in ctx.bindings(expr.value, expr) if b.kind == "assign"]
        if not bindings or not isinstance(bindings[-1].node, cst.Call):
            return None
        expr = bindings[-1].node
    if isinstance(expr, cst.Call) and ctx.qualified_name(expr) in _PROFILERS:
        return expr
    return None


def _records_a_few_steps(call: cst.Call, ctx: Context) -> bool:
    """`schedule=torch.profiler.schedule(..., repeat=N)` with N a literal above 0: the profiler
    records `active` steps N times and then stops, which is what the rule recommends. Without
    `repeat` (or with `repeat=0`) the cycle runs for as long as the loop does."""
    schedule = next(
        (a.value for a in call.args if a.keyword is not None and a.keyword.value == "schedule"), None
    )
    if not isinstance(schedule, cst.Call) or ctx.qualified_name(schedule) not in _SCHEDULES:
        return False
    repeat = next(
        (a.value for a in schedule.args if a.keyword is not None and a.keyword.value == "repeat"), None
    )
    return isinstance(repeat, cst.Integer) and int(repeat.value, 0) > 0


class ProfilerInTrainingCode(Rule):
    """## What it does
    Flags `torch.profiler.profile`, `torch.autograd.profiler.profile`, `emit_nvtx` and `emit_itt`
    entered by a `with` that holds a step loop, or inside a step loop's body.

    ## Why it is slow
    The profiler records every operator (and with `record_shapes`, `profile_memory` or
    `with_stack` much more) for as long as it is active, and the trace it builds grows with every
    step. The measured effect on an H100 is in the Measured section below.

    ## Fix safety
    No automatic fix: whether a profile is wanted is the author's call. Profile a few steps with
    `torch.profiler.schedule(...)` in a separate run, or remove the profiler.

    ## When it stays silent
    Profilers around code without a step loop (a single forward pass, a benchmark of one
    function); a profiler whose `schedule=torch.profiler.schedule(...)` sets `repeat` to a
    literal above 0, which records a few steps and stops (nanoGPT's `bench.py`); `record_function`
    ranges, which cost nothing unless a profiler runs; profilers from other libraries. Off by default: enable it with `--extend-select TPL602`.
    """

    code = "TPL602"
    name = "profiler-in-training-code"
    summary = "Profiler wrapped around a training loop"
    message = (
        "{what} records every operator of the step loop while it is active; "
        "profile a few steps in a separate run or remove it"
    )
    default_on = False
    fix_safety = Safety.NONE
    where = "around step loops"
    node_types = (cst.WithItem,)
    benchmark = "TPL602"

    BAD = {
        "profiler-around-epoch": """
            import torch

            def train(model, loader, optimizer):
                with torch.profiler.profile(record_shapes=True) as prof:  # expect: TPL602
                    for x, y in loader:
                        model(x, y).backward()
                        optimizer.step()
                print(prof.key_averages().table())
            """,
        "autograd-profiler-inside-step": """
            import torch
            from torch.autograd import profiler

            def train(model, loader, optimizer):
                for x, y in loader:
                    with profiler.profile(use_cuda=True):  # expect: TPL602
                        model(x, y).backward()
                    optimizer.step()
            """,
        "emit-nvtx-around-loop": """
            import torch

            def train(model, data, optimizer):
                with torch.autograd.profiler.emit_nvtx():  # expect: TPL602
                    for epoch in range(10):
                        for x, y in data:
                            model(x, y).backward()
                            optimizer.step()
            """,
        "schedule-that-cycles-for-the-whole-run": """
            import torch

            def train(model, loader, optimizer):
                with torch.profiler.profile(schedule=torch.profiler.schedule(wait=1, warmup=1, active=3)) as prof:  # expect: TPL602
                    for x, y in loader:
                        model(x, y).backward()
                        optimizer.step()
                        prof.step()
            """,
        "profiler-bound-to-a-name": """
            import torch
            from torch.profiler import profile, ProfilerActivity

            def train(model, train_loader, optimizer):
                prof = profile(activities=[ProfilerActivity.CUDA])
                with prof:  # expect: TPL602
                    for batch in train_loader:
                        model(batch).sum().backward()
                        optimizer.step()
            """,
    }
    GOOD = {
        "profile-one-forward": """
            import torch

            def profile_forward(model, x):
                with torch.profiler.profile() as prof:
                    model(x)
                return prof
            """,
        "scheduled-profile-of-a-few-steps": """
            import torch

            def benchmark(model, loader, optimizer, wait=5, warmup=5, active=5):
                with torch.profiler.profile(
                    activities=[torch.profiler.ProfilerActivity.CUDA],
                    schedule=torch.profiler.schedule(wait=wait, warmup=warmup, active=active, repeat=1),
                    on_trace_ready=torch.profiler.tensorboard_trace_handler("./bench_log"),
                ) as prof:
                    for x, y in loader:
                        model(x, y).backward()
                        optimizer.step()
                        prof.step()
            """,
        "record-function-in-step": """
            import torch

            def train(model, loader, optimizer):
                for x, y in loader:
                    with torch.profiler.record_function("step"):
                        model(x, y).backward()
                    optimizer.step()
            """,
        "no-grad-around-loop": """
            import torch

            def evaluate(model, loader):
                with torch.no_grad():
                    for x, y in loader:
                        model(x)
            """,
        "profiler-of-another-library": """
            import torch
            from line_profiler import profile

            def train(model, loader, optimizer):
                with profile():
                    for x, y in loader:
                        model(x, y).backward()
                        optimizer.step()
            """,
    }

    def check(self, node: cst.WithItem, ctx: Context) -> Iterator[Report]:
        call = _profiler_call(node.item, ctx)
        with_node = ctx.parent(node)
        if call is None or not isinstance(with_node, cst.With) or _records_a_few_steps(call, ctx):
            return
        inside = ctx.step_loop(with_node)
        if inside is None and not any(with_node in ctx.ancestors(loop) for loop in ctx.hot.step_loops):
            return
        qualified = ctx.qualified_name(call) or ""
        what = qualified.replace("torch.profiler.profiler.", "torch.profiler.") + "()"
        yield self.report(node.item, reason=ctx.hot_reason(with_node), what=what)

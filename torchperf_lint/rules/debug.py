"""TPL6xx: debugging and profiling left on."""

from __future__ import annotations

from typing import Iterator, Optional

import libcst as cst

from ..engine.context import Context
from ..engine.edits import keyword
from ..engine.findings import Fix, Replacement, Report, Safety
from ..engine.walker import Loop, dotted_name
from .base import Rule

_SET_DETECT_ANOMALY = frozenset(
    {"torch.autograd.set_detect_anomaly", "torch.autograd.anomaly_mode.set_detect_anomaly"}
)
_DETECT_ANOMALY = frozenset({"torch.autograd.detect_anomaly", "torch.autograd.anomaly_mode.detect_anomaly"})
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
_GRADCHECKS = {
    "torch.autograd.gradcheck": "gradcheck",
    "torch.autograd.gradgradcheck": "gradgradcheck",
    "torch.autograd.gradcheck.gradcheck": "gradcheck",
    "torch.autograd.gradcheck.gradgradcheck": "gradgradcheck",
}
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


def _is_true(expr: Optional[cst.BaseExpression]) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "True"


def _first_argument(call: cst.Call, name: str) -> Optional[cst.BaseExpression]:
    """The first positional argument, or the keyword `name`."""
    for arg in call.args:
        if arg.keyword is None and not arg.star:
            return arg.value
    found = keyword(call, name)
    return found.value if found is not None else None


def _is_main_guard(test: cst.BaseExpression) -> bool:
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    sides = (test.left, test.comparisons[0].comparator)
    return any(isinstance(s, cst.Name) and s.value == "__name__" for s in sides) and any(
        isinstance(s, cst.SimpleString) and s.evaluated_value == "__main__" for s in sides
    )


def _is_conditional(node: cst.CSTNode, ctx: Context) -> bool:
    """Inside an `if` (other than the `__main__` guard) or a conditional expression of its scope:
    a debug switch someone turns on deliberately."""
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return False
        if isinstance(ancestor, cst.IfExp):
            return True
        if isinstance(ancestor, cst.If) and not _is_main_guard(ancestor.test):
            return True
    return False


def _without_last_semicolon(
    statements: list[cst.BaseSmallStatement],
) -> list[cst.BaseSmallStatement]:
    return [*statements[:-1], statements[-1].with_changes(semicolon=cst.MaybeSentinel.DEFAULT)]


def _remove_statement(expr: cst.Expr, ctx: Context) -> Optional[tuple[cst.CSTNode, Replacement]]:
    """Remove the expression statement `expr`, leaving `pass` where its block would be empty."""
    line = ctx.parent(expr)
    if isinstance(line, cst.SimpleStatementSuite):
        rest = [s for s in line.body if s is not expr]
        return line, line.with_changes(body=_without_last_semicolon(rest) if rest else [cst.Pass()])
    if not isinstance(line, cst.SimpleStatementLine):
        return None
    if len(line.body) > 1:
        rest = [s for s in line.body if s is not expr]
        return line, line.with_changes(body=_without_last_semicolon(rest))
    block = ctx.parent(line)
    if isinstance(block, cst.IndentedBlock) and len(block.body) == 1:
        return line, line.with_changes(body=[cst.Pass()])
    return line, cst.RemovalSentinel.REMOVE


def _unwrap_with(item: cst.WithItem, ctx: Context) -> Optional[tuple[cst.CSTNode, Replacement]]:
    """Drop `item` from its `with`; a `with` left without items is replaced by its body."""
    with_node = ctx.parent(item)
    if not isinstance(with_node, cst.With) or with_node.asynchronous is not None or item.asname is not None:
        return None
    rest = [i for i in with_node.items if i is not item]
    if rest:
        rest[-1] = rest[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return with_node, with_node.with_changes(items=rest)
    body = with_node.body
    statements: list[cst.BaseStatement]
    if isinstance(body, cst.IndentedBlock):
        statements = list(body.body)
    elif isinstance(body, cst.SimpleStatementSuite):
        statements = [cst.SimpleStatementLine(body=_without_last_semicolon(list(body.body)))]
    else:
        return None
    first = statements[0]
    if isinstance(first, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
        # Comments above the `with` stay above the code it held.
        statements[0] = first.with_changes(leading_lines=[*with_node.leading_lines, *first.leading_lines])
    return with_node, cst.FlattenSentinel(statements)


class AnomalyDetectionEnabled(Rule):
    """## What it does
    Flags `torch.autograd.set_detect_anomaly(True)` (also `mode=True`) and
    `with torch.autograd.detect_anomaly():` outside test files.

    ## Why it is slow
    Anomaly mode records a Python traceback for every operation of the forward pass and checks
    every gradient of the backward pass for NaN, which also forces a device sync per checked
    output. It is a debugging tool; left on in training it slows every step. The measured
    effect on an H100 is in the Measured section below.

    ## Fix safety
    Safe: the call statement is removed (a `pass` keeps an otherwise empty block valid), and a
    `with torch.autograd.detect_anomaly():` is replaced by its body, or loses only that item when
    it manages several. What the program computes is unchanged; only the error that anomaly
    mode raises on a NaN gradient goes away. A `with ... as name:` or an assigned call is reported
    without a fix.

    ## When it stays silent
    Test files (`test-file-patterns`); `set_detect_anomaly(False)` or a non-literal mode
    (`set_detect_anomaly(args.debug)`, a switch); calls guarded by an `if` (other than
    `if __name__ == "__main__":`) or a conditional expression, which turn it on deliberately;
    `check_nan=False` written out, which keeps anomaly mode for its tracebacks (PyTorch's own
    tracing uses it to tag graph nodes with their source line), a decision.
    """

    code = "TPL601"
    name = "anomaly-detection-enabled"
    summary = "Autograd anomaly detection left on"
    message = (
        "{what} records a traceback per op and checks every gradient for NaN; remove it outside debugging"
    )
    fix_safety = Safety.SAFE
    where = "outside test files"
    node_types = (cst.Call,)
    benchmark = "TPL601"

    BAD = {
        "set-detect-anomaly-at-module-level": """
            import torch

            torch.autograd.set_detect_anomaly(True)  # expect: TPL601

            def train(model, loader, optimizer):
                for x, y in loader:
                    model(x, y).backward()
                    optimizer.step()
            """,
        "detect-anomaly-with-around-step": """
            import torch

            def train(model, loader, optimizer):
                for x, y in loader:
                    # checked while the loss is unstable
                    with torch.autograd.detect_anomaly():  # expect: TPL601
                        loss = model(x, y)
                        loss.backward()
                    optimizer.step()
            """,
        "mode-keyword-through-import-in-function": """
            from torch.autograd import set_detect_anomaly

            def main():
                set_detect_anomaly(mode=True)  # expect: TPL601
            """,
        "one-item-of-several": """
            import torch
            from torch import autograd

            def step(model, x, log_path):
                with open(log_path, "a") as log, autograd.detect_anomaly(check_nan=True):  # expect: TPL601
                    loss = model(x)
                    log.write(str(loss.item()))
                    loss.backward()
            """,
        "set-detect-anomaly-as-context-manager": """
            import torch

            def step(model, x):
                with torch.autograd.set_detect_anomaly(True):  # expect: TPL601
                    model(x).sum().backward()
            """,
    }
    FIXED = {
        "set-detect-anomaly-at-module-level": """
            import torch

            def train(model, loader, optimizer):
                for x, y in loader:
                    model(x, y).backward()
                    optimizer.step()
            """,
        "detect-anomaly-with-around-step": """
            import torch

            def train(model, loader, optimizer):
                for x, y in loader:
                    # checked while the loss is unstable
                    loss = model(x, y)
                    loss.backward()
                    optimizer.step()
            """,
        "mode-keyword-through-import-in-function": """
            from torch.autograd import set_detect_anomaly

            def main():
                pass
            """,
        "one-item-of-several": """
            import torch
            from torch import autograd

            def step(model, x, log_path):
                with open(log_path, "a") as log:
                    loss = model(x)
                    log.write(str(loss.item()))
                    loss.backward()
            """,
        "set-detect-anomaly-as-context-manager": """
            import torch

            def step(model, x):
                model(x).sum().backward()
            """,
    }
    GOOD = {
        "turned-off": """
            import torch

            torch.autograd.set_detect_anomaly(False)
            torch.autograd.set_detect_anomaly(mode=False)
            """,
        "switch-from-the-command-line": """
            import argparse
            import torch

            args = argparse.ArgumentParser().parse_args()
            torch.autograd.set_detect_anomaly(args.detect_anomaly)
            if args.debug:
                torch.autograd.set_detect_anomaly(True)
            """,
        "conditional-context-manager": """
            import contextlib
            import torch

            def step(model, x, debug):
                with torch.autograd.detect_anomaly() if debug else contextlib.nullcontext():
                    model(x).sum().backward()
            """,
        "look-alike-from-another-library": """
            import torch
            from mylib.debug import set_detect_anomaly, detect_anomaly

            set_detect_anomaly(True)
            with detect_anomaly():
                pass
            """,
        "query-only": """
            import torch

            def report():
                return torch.is_anomaly_enabled()
            """,
        "tracebacks-without-nan-checks": """
            import torch

            def trace(fn, *args):
                with torch.autograd.detect_anomaly(check_nan=False):
                    return fn(*args)
            """,
    }

    def check(self, node: cst.Call, ctx: Context) -> Iterator[Report]:
        if ctx.is_test_file:
            return
        qualified = ctx.qualified_name(node)
        parent = ctx.parent(node)
        if qualified in _SET_DETECT_ANOMALY:
            if not _is_true(_first_argument(node, "mode")):
                return
            check_nan_arg = keyword(node, "check_nan")
            check_nan = check_nan_arg.value if check_nan_arg is not None else None
            what = "torch.autograd.set_detect_anomaly(True)"
        elif qualified in _DETECT_ANOMALY:
            if not (isinstance(parent, cst.WithItem) and parent.item is node):
                return  # constructing it enables nothing: only entering the `with` does
            check_nan = _first_argument(node, "check_nan")
            what = "torch.autograd.detect_anomaly()"
        else:
            return
        if check_nan is not None and not _is_true(check_nan):
            return  # kept for its tracebacks only (tracing tools tag graph nodes with them): a decision
        if _is_conditional(node, ctx):
            return
        found: Optional[tuple[cst.CSTNode, Replacement]] = None
        if isinstance(parent, cst.WithItem) and parent.item is node:
            found = _unwrap_with(parent, ctx)
        elif isinstance(parent, cst.Expr):
            found = _remove_statement(parent, ctx)
        fix = Fix.replace(*found, Safety.SAFE, "remove anomaly detection") if found else None
        yield self.report(node, reason=ctx.hot_reason(node), fix=fix, what=what)


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
    function); `record_function` ranges, which cost nothing unless a profiler runs; profilers
    from other libraries. Off by default: enable it with `--extend-select TPL602`.
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
        if call is None or not isinstance(with_node, cst.With):
            return
        inside = ctx.step_loop(with_node)
        if inside is None and not any(with_node in ctx.ancestors(loop) for loop in ctx.hot.step_loops):
            return
        qualified = ctx.qualified_name(call) or ""
        what = qualified.replace("torch.profiler.profiler.", "torch.profiler.") + "()"
        yield self.report(node.item, reason=ctx.hot_reason(with_node), what=what)


class GradcheckOutsideTests(Rule):
    """## What it does
    Flags calls to `torch.autograd.gradcheck` and `torch.autograd.gradgradcheck` (however they
    are imported) outside test files.

    ## Why it is slow
    gradcheck compares analytical gradients with finite differences: it runs the function twice
    per input element, usually in float64. It belongs in a test suite; in a training or library
    module it runs with the program. There is no benchmark: the cost is the whole check, which
    has nothing to compare against.

    ## Fix safety
    No automatic fix: move the check into a test (a file matching `test-file-patterns`).

    ## When it stays silent
    Test files (`test_*.py`, `*_test.py`, `tests/`, `conftest.py`, or the configured
    `test-file-patterns`); a wrapper function of the same name (`def gradcheck(fn, inputs):`
    setting defaults for a test suite), whose callers run the check; functions of other
    libraries with the same name; references that do not call it.
    """

    code = "TPL603"
    name = "gradcheck-outside-tests"
    summary = "gradcheck called outside the tests"
    message = (
        "torch.autograd.{what}() evaluates the function twice per input element; move the check into a test"
    )
    fix_safety = Safety.NONE
    where = "outside test files"
    node_types = (cst.Call,)
    benchmark = None

    BAD = {
        "gradcheck-in-training-script": """
            import torch

            def main(layer):
                x = torch.randn(8, 4, dtype=torch.double, requires_grad=True)
                assert torch.autograd.gradcheck(layer, (x,))  # expect: TPL603
            """,
        "imported-from-gradcheck-module": """
            import torch
            from torch.autograd.gradcheck import gradgradcheck

            x = torch.randn(3, dtype=torch.double, requires_grad=True)
            gradgradcheck(torch.sin, (x,))  # expect: TPL603
            """,
        "aliased-autograd-in-forward": """
            import torch
            from torch import autograd as ag
            from torch import nn

            class Checked(nn.Module):
                def forward(self, x):
                    ag.gradcheck(torch.tanh, (x.double(),))  # expect: TPL603
                    return torch.tanh(x)
            """,
    }
    GOOD = {
        "reference-without-call": """
            import torch

            CHECKS = {"first": torch.autograd.gradcheck, "second": torch.autograd.gradgradcheck}
            """,
        "same-name-from-another-library": """
            import torch
            from mylib.checks import gradcheck

            gradcheck(torch.sin)
            """,
        "local-function-named-gradcheck": """
            import torch

            def gradcheck(fn, x):
                return fn(x).isfinite().all()

            gradcheck(torch.sin, torch.randn(3))
            """,
        "same-name-wrapper-with-defaults": """
            import torch

            def gradcheck(fn, inputs, **kwargs):
                kwargs.setdefault("fast_mode", True)
                return torch.autograd.gradcheck(fn, inputs, **kwargs)
            """,
        "gradient-norm-check": """
            import torch

            def check(model):
                return torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            """,
    }

    def check(self, node: cst.Call, ctx: Context) -> Iterator[Report]:
        what = _GRADCHECKS.get(ctx.qualified_name(node) or "")
        if what is None or ctx.is_test_file:
            return
        function = ctx.enclosing_function(node)
        if function is not None and function.name.value in _GRADCHECKS.values():
            return  # a same-name wrapper (defaults for a test suite): its callers run the check
        yield self.report(node, reason=ctx.hot_reason(node), what=what)


def _is_periodic(test: cst.BaseExpression) -> bool:
    """`step % 100 == 0`, `not i % n`, or either inside `and`/`or`: once every n steps."""
    if isinstance(test, cst.BooleanOperation):
        return _is_periodic(test.left) or _is_periodic(test.right)
    if isinstance(test, cst.UnaryOperation):
        return _is_periodic(test.expression)
    if isinstance(test, cst.Comparison):
        return _is_periodic(test.left) or any(_is_periodic(c.comparator) for c in test.comparisons)
    return isinstance(test, cst.BinaryOperation) and isinstance(test.operator, cst.Modulo)


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
    name = "synchronize-in-step"
    summary = "CUDA synchronize or empty_cache every step"
    message = "{what} in the step loop {cost}; remove it or move it out of the loop"
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
        loop = ctx.step_loop(node)
        if loop is None or self._periodic(node, loop, ctx):
            return
        calls = (c for c in ctx.nodes(cst.Call) if isinstance(c, cst.Call))
        if any(_reads_timer(c, ctx) for c in calls if ctx.step_loop(c) is loop):
            return
        cost = self._COSTS["synchronize" if "synchronize" in what else "empty_cache"]
        yield self.report(node, reason=ctx.hot_reason(node), what=what, cost=cost)

    @staticmethod
    def _periodic(node: cst.Call, loop: Loop, ctx: Context) -> bool:
        for ancestor in ctx.ancestors(node):
            if ancestor is loop:
                return False
            if isinstance(ancestor, cst.If) and _is_periodic(ancestor.test):
                return True
        return False

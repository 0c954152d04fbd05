"""TPL107 sync-per-step: Device-to-host sync at every step of a training loop."""

from __future__ import annotations

from typing import Iterator, Optional

import libcst as cst

from ...engine.context import Context
from ...engine.findings import Report, Safety
from ...syntax.walker import Loop
from ..base import Rule, hot_place
from .common import (
    condition_parts,
    host_sync,
    on_device,
    on_error_path,
)


def _contains_modulo(expr: cst.BaseExpression) -> bool:
    if isinstance(expr, cst.BinaryOperation):
        if isinstance(expr.operator, cst.Modulo):
            return True
        return _contains_modulo(expr.left) or _contains_modulo(expr.right)
    if isinstance(expr, cst.Comparison):
        return _contains_modulo(expr.left) or any(_contains_modulo(c.comparator) for c in expr.comparisons)
    if isinstance(expr, cst.BooleanOperation):
        return _contains_modulo(expr.left) or _contains_modulo(expr.right)
    if isinstance(expr, cst.UnaryOperation):
        return _contains_modulo(expr.expression)
    return False


def _runs_periodically(node: cst.CSTNode, ctx: Context) -> bool:
    """In the body of `if step % log_every == 0:` inside the loop: not every iteration."""
    child = node
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, (cst.For, cst.While, cst.FunctionDef)):
            return False
        if isinstance(ancestor, cst.If) and child is ancestor.body and _contains_modulo(ancestor.test):
            return True
        child = ancestor
    return False


class SyncPerStep(Rule):
    """## What it does
    Flags `.item()`, `.tolist()`, `.cpu()`, `.numpy()`, `float(t)`/`int(t)`/`bool(t)`,
    `math.isfinite(t)`, `print(loss)` and an `if`/`while` on a device tensor
    (`if torch.min(out) < -1.0:`) that run at every iteration of a step loop (in its body or in
    a function called from it). Off by default.

    ## Why it is slow
    Each one makes the CPU wait for the GPU to finish the step before it can queue the next:
    the GPU idles for the time the CPU needs to launch the next step's first kernels. When the
    GPU is the bottleneck that gap is small, which is why the rule is off by default; it
    matters for small, launch-bound models and under CUDA graphs. The measured effect on an
    H100 is in the Measured section below.

    ## Fix safety
    No automatic fix: keep running totals on the device (`total += loss.detach()`) and read
    them every N steps, or log under `if step % log_every == 0:`.

    ## When it stays silent
    Code under `if step % N == 0:` inside the loop; batches straight from the DataLoader, which
    are still on the host; code after the loop; forward and loss code (TPL105's); a second read of
    values the same step already read on the host (`print(loss.item())` after
    `value = loss.item()`): the host waited for them once, and that first read is the finding.
    """

    code = "TPL107"
    name = "sync-per-step"
    summary = "Device-to-host sync at every step of a training loop"
    message = (
        "{what} makes the host wait for the device in {place} at every step; keep running values "
        "on the device and read them every N steps{graph}"
    )
    default_on = False
    fix_safety = Safety.NONE
    where = "step loop"
    node_types = (cst.Call, cst.If, cst.While)
    benchmark = "TPL107"

    BAD = {
        "second-read-of-the-same-loss": """
            import torch

            def train(model, loader, optimizer, history):
                for x, y in loader:
                    loss = model(x.cuda(), y.cuda())
                    loss.backward()
                    optimizer.step()
                    history.append(loss.item())  # expect: TPL107
                    if loss.item() > 1e3:  # read already: the host waited above
                        print("diverging", loss.detach().item())
            """,
        "loss-item-every-step": """
            import torch

            def train(model, loader, optimizer):
                total = 0.0
                for x, y in loader:
                    loss = model(x.cuda(), y.cuda())
                    loss.backward()
                    optimizer.step()
                    total += loss.item()  # expect: TPL107
                return total
            """,
        "print-loss": """
            import torch
            import torch.nn.functional as F

            def train(model, loader, optimizer):
                for x, y in loader:
                    loss = F.cross_entropy(model(x.cuda()), y.cuda())
                    loss.backward()
                    optimizer.step()
                    print(f"loss {loss}")  # expect: TPL107
            """,
        "cpu-outputs-for-metrics": """
            import torch

            def evaluate(model, val_loader):
                predictions = []
                with torch.no_grad():
                    for x, y in val_loader:
                        out = model(x.cuda())
                        predictions.append(out.argmax(1).cpu())  # expect: TPL107
                return torch.cat(predictions)
            """,
        "finite-check-and-reduction-in-if": """
            import math
            import torch

            def train(model, loader, optimizer, criterion):
                for x, y in loader:
                    out = model(x.cuda(non_blocking=True))
                    loss = criterion(out, y.cuda(non_blocking=True))
                    if not math.isfinite(loss):  # expect: TPL107
                        break
                    if torch.min(out) < -1.0:  # expect: TPL107
                        print("out of range")
                    loss.backward()
                    optimizer.step()
            """,
        "helper-called-every-step": """
            import torch

            def log_metrics(loss, history):
                history.append(float(loss.detach()))  # expect: TPL107

            def train(model, loader, optimizer, history):
                for x, y in loader:
                    loss = model(x.cuda(), y.cuda())
                    loss.backward()
                    optimizer.step()
                    log_metrics(loss, history)
            """,
    }
    GOOD = {
        "periodic-logging": """
            import torch

            def train(model, loader, optimizer):
                for step, (x, y) in enumerate(loader):
                    loss = model(x.cuda(), y.cuda())
                    loss.backward()
                    optimizer.step()
                    if step % 100 == 0:
                        print(f"step {step}: {loss.item():.3f}")
            """,
        "after-the-loop": """
            import torch

            def train(model, loader, optimizer):
                total = torch.zeros((), device="cuda")
                for x, y in loader:
                    loss = model(x.cuda(), y.cuda())
                    loss.backward()
                    optimizer.step()
                    total += loss.detach()
                print(total.item())
            """,
        "host-batch-values": """
            import torch

            def train(model, loader, optimizer, seen):
                for x, y in loader:
                    seen.extend(y.tolist())
                    print(x)
                    loss = model(x.cuda(), y.cuda())
                    loss.backward()
                    optimizer.step()
            """,
        "forward-code-is-tpl105s": """
            import torch
            from torch import nn

            class Net(nn.Module):
                def forward(self, x):
                    return x * x.sum().item()
            """,
        "host-batch-and-number-conditions": """
            import math
            import torch

            def train(model, loader, optimizer, max_norm):
                for step, (x, y) in enumerate(loader):
                    if torch.min(y) < 0 or x.shape[0] < 2:
                        continue
                    loss = model(x.cuda(), y.cuda())
                    loss_value = loss.detach().float().item() if step % 50 == 0 else 0.0
                    if not math.isfinite(loss_value) or not math.isfinite(max_norm):
                        break
                    loss.backward()
                    optimizer.step()
            """,
        "python-numbers": """
            import torch

            def train(model, loader, optimizer, lr):
                for step, (x, y) in enumerate(loader):
                    loss = model(x.cuda(), y.cuda())
                    loss.backward()
                    optimizer.step()
                    print("lr", float(lr), int(step))
            """,
    }

    def check(self, node: cst.CSTNode, ctx: Context) -> Iterator[Report]:
        reason = ctx.hot_reason(node)
        if reason is None or reason.from_model_code:
            return
        if isinstance(node, (cst.If, cst.While)):
            if _runs_periodically(node, ctx):
                return
            if any(self._device_reading(part, ctx) for part in condition_parts(node.test, ctx)):
                what = "`while` on a tensor" if isinstance(node, cst.While) else "`if` on a tensor"
                yield self.report(
                    node, reason=reason, what=what, place=hot_place(node, ctx), graph=ctx.graph_break(node)
                )
            return
        assert isinstance(node, cst.Call)
        sync = host_sync(node, ctx)
        if sync is None or on_error_path(node, ctx) or _runs_periodically(node, ctx):
            return
        if isinstance(node.func, cst.Attribute) and ctx.batch_loop(node.func.value) is not None:
            return  # a batch from the DataLoader is still on the host
        if _read_already(node, ctx):
            return
        yield self.report(node, reason=reason, what=sync, place=hot_place(node, ctx), graph=ctx.graph_break(node))

    @staticmethod
    def _device_reading(part: cst.BaseExpression, ctx: Context) -> bool:
        """A condition that reads a device tensor's values: not one computed from a batch still
        on the host."""
        if not on_device(part, ctx, certain=True):
            return False
        names = [n for n in _names_in(part) if isinstance(n, cst.Name)]
        return not any(ctx.batch_loop(n) is not None for n in names)


# Calls that hand on the same values: `loss.detach().item()` reads what `loss.item()` read.
_SAME_VALUES = frozenset({"detach", "float", "double", "cpu", "clone"})
_CONDITIONAL = (cst.If, cst.Else, cst.IfExp, cst.BooleanOperation, cst.For, cst.While, cst.Try, cst.ExceptHandler)


def _read_name(call: cst.Call) -> Optional[cst.Name]:
    """The tensor whose values `call` reads: the receiver of `.item()`-style methods (through
    `.detach()`/`.float()`...), else the one argument of `float()`, `print()` and the like."""
    if isinstance(call.func, cst.Attribute):
        value: cst.BaseExpression = call.func.value
    elif len(call.args) == 1:
        value = call.args[0].value
    else:
        return None
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in _SAME_VALUES:
        value = value.func.value
    return value if isinstance(value, cst.Name) else None


def _read_already(call: cst.Call, ctx: Context) -> bool:
    """An earlier read of the same tensor in the same iteration of the step loop, on every path to
    this one, with no rebinding and no backward or optimizer step between: the host has waited for
    these values already (RULES.md: the second read of a value is silent). After a backward or a
    step the same read waits again, for the work queued since."""
    name = _read_name(call)
    loop = ctx.step_loop(call)
    if name is None or loop is None:
        return False
    here = ctx.facts.order.get(call, 0)
    rebound = [b.order for b in ctx.bindings(name.value, call)]
    queued = [
        ctx.facts.order.get(work, 0)
        for method in ("backward", "step")
        for work in ctx.facts.method_calls.get(method, ())
        if any(a is loop for a in ctx.ancestors(work))
    ]
    around = set(map(id, ctx.ancestors(call)))
    for other in ctx.nodes(cst.Call):
        assert isinstance(other, cst.Call)
        there = ctx.facts.order.get(other, 0)
        if there >= here or other is call:
            continue
        read = _read_name(other)
        if read is None or read.value != name.value or host_sync(other, ctx) is None:
            continue
        if any(there < order < here for order in [*rebound, *queued]):
            continue
        if _always_before(other, loop, around, ctx):
            return True
    return False


def _always_before(other: cst.Call, loop: Loop, around: set[int], ctx: Context) -> bool:
    """`other` sits in `loop`'s body, and every branch or inner loop on its way there also holds
    the later read (`around`: the ids of that read's ancestors)."""
    for ancestor in ctx.ancestors(other):
        if ancestor is loop:
            return True
        if isinstance(ancestor, _CONDITIONAL) and id(ancestor) not in around:
            return False
        if isinstance(ancestor, (cst.FunctionDef, cst.Lambda)):
            return False
    return False


def _names_in(expr: cst.CSTNode) -> Iterator[cst.CSTNode]:
    yield expr
    for child in expr.children:
        yield from _names_in(child)

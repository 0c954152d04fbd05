"""TPL107 sync-per-step: Device-to-host sync at every step of a training loop."""

from __future__ import annotations

from typing import Iterator, Optional, Sequence

import libcst as cst

from ...analysis.cold import cold_sides, periodic
from ...analysis.names import statement_of
from ...engine.context import Context
from ...engine.findings import Fix, Report, Safety
from ...syntax.walker import Loop, descendants, dotted_name
from ..base import Rule, hot_place
from .common import (
    UNCONDITIONAL,
    condition_parts,
    guards_masked_update,
    host_sync,
    in_a_syncing_branch,
    on_device,
    on_error_path,
    scalar_sync,
)


def _runs_periodically(node: cst.CSTNode, ctx: Context) -> bool:
    """In the body of `if step % log_every == 0:` inside the loop: not every iteration."""
    child = node
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, (cst.For, cst.While, cst.FunctionDef)):
            return False
        if isinstance(ancestor, cst.If) and child is ancestor.body and periodic(ancestor.test):
            return True
        child = ancestor
    return False


class SyncPerStep(Rule):
    """## What it does
    Flags `.item()`, `.tolist()`, `.cpu()`, `.numpy()`, `float(t)`/`int(t)`/`bool(t)`,
    `math.isfinite(t)`, `print(loss)`, a tensor formatted into a string (`f"loss {loss:.3f}"`
    handed to a progress bar or a logger, `"{:.6f}".format(grad_norm)`, `"%f" % loss`: the
    string is built before the call runs, whatever the log level) and an `if`/`while` on a
    device tensor (`if torch.min(out) < -1.0:`), or a conditional expression on one (`0.4 if
    t_cur > 0.05 else 0.0`), that run at every iteration of a step loop (in
    its body or in a function called from it), and a 0-dim device tensor used where Python needs a number (a
    slice bound, `range()`, a size, a `clamp_` bound beside a number: TPL105 lists them), with
    the host value to use instead. A call of a project helper that copies its argument to the
    host on every return (`to_cpu(loss)`, with `def to_cpu(tensor): return tensor.detach().cpu()`)
    is a read at the call, where the device tensor is handed over. Off by default.

    ## Why it is slow
    Each one makes the CPU wait for the GPU to finish the step before it can queue the next:
    the GPU idles for the time the CPU needs to launch the next step's first kernels. When the
    GPU is the bottleneck that gap is small, which is why the rule is off by default; it
    matters for small, launch-bound models and under CUDA graphs. The measured effect on an
    H100 is in the Measured section below.

    The finding is on the statement that syncs: an `if` on a tensor, not what its body does
    (`print(loss)` under `if torch.isnan(loss).any():` runs only when the test is true). A test
    that reads a tensor and then a flag that is off in a training step
    (`if torch.isnan(x).any() and DEBUG:`, `... or not self.debug`) is pointed at testing the
    flag first, which skips the read.

    ## Fix safety
    Safe, for the flag tested second only: the operands of the `and`/`or` are swapped where
    neither has side effects (the flag is read, the tensor test calls no in-place method and
    assigns nothing), so the condition keeps its value and the tensor is read only when the flag
    lets the test go on. Otherwise no automatic fix: keep running totals on the device
    (`total += loss.detach()`) and read them every N steps, or log under
    `if step % log_every == 0:`.

    ## When it stays silent
    Code under `if step % N == 0:` inside the loop; batches straight from the DataLoader, which
    are still on the host (a batch moved and rebound under its own name, `labels =
    labels.to(device)`, is not, nor one moved under a CUDA switch, `if args.cuda: x = x.cuda()`,
    which a GPU run takes: reading it back waits for the device); code after the loop;
    forward and loss code (TPL105's); a second read of values the same step already read on the
    host (`print(loss.item())` after `value = loss.item()`): the host waited for them once, and
    that first read is the finding;
    what the body of an `if` whose test syncs does (the `if` is reported); a read right after an
    explicit `torch.cuda.synchronize()` in the same block, or in the CUDA branch of a device test
    there (the host already waited: a timer).
    """

    code = "TPL107"
    name = "sync-per-step"
    summary = "Device-to-host sync at every step of a training loop"
    message = "{what} makes the host wait for the device in {place} at every step; {remedy}{graph}"
    default_on = False
    fix_safety = Safety.SAFE
    where = "step loop"
    node_types = (cst.Call, cst.If, cst.While, cst.IfExp, cst.Subscript)
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
        "sync-tested-before-its-debug-flag": """
            import torch

            DEBUG = False

            def train(model, loader, optimizer):
                for x, y in loader:
                    out = model(x.cuda())
                    if torch.isnan(out).any() and DEBUG:  # expect: TPL107
                        raise FloatingPointError("nan in the output")
                    out.mean().backward()
                    optimizer.step()
            """,
        "print-in-a-rarely-true-branch-is-the-ifs": """
            import torch

            def train(model, loader, optimizer):
                for x, y in loader:
                    loss = model(x.cuda(), y.cuda())
                    if torch.isnan(loss).any():  # expect: TPL107
                        print(f"nan loss: {loss}")
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
        "device-count-as-a-slice-bound-every-step": """
            import torch

            def train(model, loader, optimizer):
                for images, labels in loader:
                    out = model(images.cuda())
                    n_pos = (labels.cuda() > 0).sum()
                    loss = out[:n_pos].mean()  # expect: TPL107
                    loss.backward()
                    optimizer.step()
            """,
        # NVIDIA/tacotron2's train(): the norm clipping hands back is a device tensor, formatted
        "grad-norm-formatted-every-step": """
            import torch

            def train(model, loader, optimizer, rank):
                for x, y in loader:
                    loss = model(x.cuda(non_blocking=True), y.cuda(non_blocking=True))
                    loss.backward()
                    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                    optimizer.step()
                    if rank == 0:
                        print("Grad Norm {:.6f}".format(grad_norm))  # expect: TPL107
            """,
        "loss-formatted-for-a-progress-bar-and-a-logger": """
            import logging
            import torch
            from torch.nn.utils import clip_grad_norm_

            log = logging.getLogger(__name__)

            def train(model, loader, optimizer, bar):
                for x, y in loader:
                    loss = model(x.cuda(non_blocking=True), y.cuda(non_blocking=True))
                    loss.backward()
                    norm = clip_grad_norm_(model.parameters(), 1.0)
                    optimizer.step()
                    bar.set_description(f"loss {loss:.4f}")  # expect: TPL107
                    log.debug("grad norm %.3f" % norm)  # expect: TPL107
                    log.debug("loss {}".format(loss))  # expect: TPL107
            """,
        # VainF/DeepLabV3Plus-Pytorch's validate(): the labels are moved, rebound, then copied back
        "batch-moved-then-read-back": """
            import torch

            def validate(model, loader, device, metrics):
                with torch.no_grad():
                    for images, labels in loader:
                        images = images.to(device, dtype=torch.float32)
                        labels = labels.to(device, dtype=torch.long)
                        preds = model(images).argmax(1)
                        metrics.update(labels.cpu().numpy(), preds)  # expect: TPL107
            """,
        # edm's sampler: each noise level drawn from a device schedule is a 0-d device tensor
        "schedule-level-tested-in-a-conditional-expression": """
            import torch

            def sample(net, latents, num_steps=18):
                t_steps = torch.linspace(80.0, 0.0, num_steps, device=latents.device)
                x = latents
                for t_cur, t_next in zip(t_steps[:-1], t_steps[1:]):
                    gamma = 0.4 if 0.05 <= t_cur <= 50.0 else 0.0  # expect: TPL107
                    x = net(x, t_cur * (1 + gamma))
                return x

            def main():
                net = torch.nn.Linear(2, 2).cuda()
                for seed in range(10):
                    sample(net, torch.randn(2, 2, device="cuda"))
            """,
    }
    FIXED = {
        "sync-tested-before-its-debug-flag": """
            import torch

            DEBUG = False

            def train(model, loader, optimizer):
                for x, y in loader:
                    out = model(x.cuda())
                    if DEBUG and torch.isnan(out).any():
                        raise FloatingPointError("nan in the output")
                    out.mean().backward()
                    optimizer.step()
            """,
    }
    GOOD = {
        # the same sampler with its schedule read to the host once, before the loop
        "schedule-levels-read-once": """
            import torch

            def sample(net, latents, num_steps=18):
                t_steps = torch.linspace(80.0, 0.0, num_steps, device=latents.device).tolist()
                x = latents
                for t_cur, t_next in zip(t_steps[:-1], t_steps[1:]):
                    gamma = 0.4 if 0.05 <= t_cur <= 50.0 else 0.0
                    x = net(x, t_cur * (1 + gamma))
                return x

            def main():
                net = torch.nn.Linear(2, 2).cuda()
                for seed in range(10):
                    sample(net, torch.randn(2, 2, device="cuda"))
            """,
        "host-count-as-a-slice-bound": """
            import torch

            def train(model, loader, optimizer):
                for images, labels in loader:
                    out = model(images.cuda())
                    n_pos = (labels > 0).sum()
                    loss = out[:n_pos].mean() + out[: out.shape[0] - 1].sum()
                    loss.backward()
                    optimizer.step()
            """,
        "timed-read-after-synchronize": """
            import time
            import torch

            def train(model, loader, optimizer, log):
                for x, y in loader:
                    start = time.perf_counter()
                    loss = model(x.cuda(), y.cuda())
                    loss.backward()
                    optimizer.step()
                    torch.cuda.synchronize()
                    elapsed = time.perf_counter() - start
                    log.append((elapsed, loss.item()))
            """,
        # karpathy/llm.c's train_gpt2.py: the timer waits in the CUDA branch of a device test
        "formatted-after-a-synchronize-on-cuda": """
            import time
            import torch

            def train(model, loader, optimizer, device):
                for x, y in loader:
                    t0 = time.time()
                    loss = model(x.to(device), y.to(device))
                    loss.backward()
                    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                    optimizer.step()
                    if device == "mps":
                        torch.mps.synchronize()
                    elif device == "cuda":
                        torch.cuda.synchronize()
                    t1 = time.time()
                    print(f"norm {norm:.4f} | {(t1 - t0) * 1000:.2f} ms")
            """,
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
        # a batch cast or copied on the host is still the loader's host batch
        "host-batch-cast-or-cloned": """
            import torch

            def train(model, loader, optimizer, seen, device):
                for x, y in loader:
                    y = y.to(torch.long)
                    x = x.clone()
                    seen.extend(y.tolist())
                    print(x.cpu())
                    loss = model(x.to(device), y.to(device))
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
        # the same strings, made of host values: numbers, shapes, a loss read every N steps
        "host-values-formatted": """
            import logging
            import torch

            log = logging.getLogger(__name__)

            def train(model, loader, optimizer, bar, epoch):
                running = 0.0
                for step, (x, y) in enumerate(loader):
                    x = x.cuda(non_blocking=True)
                    loss = model(x, y.cuda(non_blocking=True))
                    loss.backward()
                    optimizer.step()
                    bar.set_description(f"epoch {epoch} step {step} batch {x.shape[0]}")
                    log.debug("step %d of epoch %d" % (step, epoch))
                    log.debug("input {}".format(tuple(x.shape)))
                    if step % 100 == 0:
                        running = loss.item()
                        print("loss {:.4f}".format(running))
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
        if isinstance(node, (cst.If, cst.While, cst.IfExp)):
            if _runs_periodically(node, ctx) or _after_synchronize(node, ctx):
                return
            if any(_device_reading(part, ctx) for part in condition_parts(node.test, ctx)):
                what = _TESTS[type(node)]
                flag = _flag_tested_second(node.test, ctx)
                remedy = _REMEDY
                if flag is not None:
                    remedy = f"test {ctx.code(flag)} first: the tensor is then read only when the flag does not decide"
                elif isinstance(node, cst.If) and guards_masked_update(node, ctx):
                    what, remedy = "`if` on a device tensor in a loop over items", UNCONDITIONAL
                yield self.report(
                    node,
                    reason=reason,
                    fix=_flag_first(node.test) if flag is not None else None,
                    what=what,
                    place=hot_place(node, ctx),
                    remedy=remedy,
                    graph=ctx.graph_break(node),
                )
            return
        scalar = scalar_sync(node, ctx)
        if scalar is not None:
            if (
                on_error_path(node, ctx)
                or _runs_periodically(node, ctx)
                or in_a_syncing_branch(node, ctx, _syncs)
            ):
                return
            what, remedy = scalar
            yield self.report(
                node,
                reason=reason,
                what=what,
                place=hot_place(node, ctx),
                remedy=remedy,
                graph=ctx.graph_break(node),
            )
            return
        if not isinstance(node, cst.Call):
            return
        sync = host_sync(node, ctx)
        if sync is None or on_error_path(node, ctx) or _runs_periodically(node, ctx):
            return
        if isinstance(node.func, cst.Attribute) and _host_batch(node.func.value, ctx):
            return  # a batch from the DataLoader is still on the host
        if (
            in_a_syncing_branch(node, ctx, _syncs)
            or _after_synchronize(node, ctx)
            or _read_already(node, ctx)
        ):
            return
        yield self.report(
            node,
            reason=reason,
            what=sync,
            place=hot_place(node, ctx),
            remedy=_REMEDY,
            graph=ctx.graph_break(node),
        )


_REMEDY = "keep running values on the device and read them every N steps"


def _host_batch(expr: cst.BaseExpression, ctx: Context) -> bool:
    """A DataLoader batch not moved and rebound under its own name (`labels = labels.to(device)`)."""
    base = expr
    while isinstance(base, (cst.Subscript, cst.Attribute)):
        base = base.value
    moved = isinstance(base, cst.Name) and ctx.moved_under_its_name(base)
    return not moved and ctx.batch_loop(expr) is not None


_TESTS = {
    cst.If: "`if` on a tensor",
    cst.While: "`while` on a tensor",
    cst.IfExp: "`x if ... else y` on a tensor",
}


def _device_reading(part: cst.BaseExpression, ctx: Context) -> bool:
    """A condition that reads a device tensor's values: not one computed from a batch still
    on the host."""
    if not on_device(part, ctx, certain=True):
        return False
    names = [n for n in descendants(part) if isinstance(n, cst.Name)]
    return not any(ctx.batch_loop(n) is not None for n in names)


def _syncs(test: cst.BaseExpression, ctx: Context) -> bool:
    """The test reads a device value: a condition on a tensor, or a host read inside it."""
    if any(_device_reading(part, ctx) for part in condition_parts(test, ctx)):
        return True
    return any(isinstance(n, cst.Call) and host_sync(n, ctx) is not None for n in descendants(test))


def _after_synchronize(node: cst.CSTNode, ctx: Context) -> bool:
    """An earlier statement of the same block calls `torch.cuda.synchronize()`, with only simple
    statements between (a timer read, a log line): the host waited for the device already. The
    call may stand in the CUDA branch of a device test (llm.c's `elif device == "cuda":
    torch.cuda.synchronize()`): the other branches run where no CUDA work waits."""
    found = statement_of(node, ctx.facts.parents)
    if found is None:
        return False
    holder, statement = found
    block: Sequence[cst.CSTNode] = holder.body if isinstance(holder, (cst.IndentedBlock, cst.Module)) else ()
    index = next(i for i, s in enumerate(block) if s is statement)
    for earlier in reversed(block[:index]):
        if isinstance(earlier, cst.If):
            return _synchronizes_on_cuda(earlier, ctx)
        if not isinstance(earlier, cst.SimpleStatementLine):
            return False
        if _synchronizes(earlier, ctx):
            return True
    return False


def _synchronizes(node: cst.CSTNode, ctx: Context) -> bool:
    return any(
        isinstance(n, cst.Call) and ctx.qualified_name(n) == "torch.cuda.synchronize"
        for n in descendants(node)
    )


def _synchronizes_on_cuda(branch: cst.If, ctx: Context) -> bool:
    """A branch of the `if`/`elif` chain that tests for CUDA calls `torch.cuda.synchronize()`."""
    current: Optional[cst.CSTNode] = branch
    while isinstance(current, cst.If):
        if "cuda" in ctx.code(current.test) and _synchronizes(current.body, ctx):
            return True
        current = current.orelse
    return False


def _flag_tested_second(test: cst.BaseExpression, ctx: Context) -> Optional[cst.BaseExpression]:
    """The flag of `sync and FLAG` (FLAG off in a training step: `DEBUG`, `self.verbose`) or
    `sync or FLAG` (FLAG on: `not DEBUG`): tested first, it would skip the sync."""
    if not isinstance(test, cst.BooleanOperation) or not _syncs(test.left, ctx) or _syncs(test.right, ctx):
        return None
    body_cold, else_cold = cold_sides(test.right)
    off_for_and = isinstance(test.operator, cst.And) and body_cold
    on_for_or = isinstance(test.operator, cst.Or) and else_cold
    return test.right if off_for_and or on_for_or else None


def _flag_first(test: cst.BaseExpression) -> Optional[Fix]:
    """Swap the operands (safe where neither has side effects: the flag is a name or an attribute,
    the sync calls no in-place method and assigns nothing)."""
    assert isinstance(test, cst.BooleanOperation)
    if not _side_effect_free(test.left) or not _side_effect_free(test.right):
        return None
    swapped = test.with_changes(left=test.right, right=test.left)
    return Fix.replace(test, swapped, Safety.SAFE, "test the flag before reading the tensor")


def _side_effect_free(expr: cst.BaseExpression) -> bool:
    for node in descendants(expr):
        if isinstance(node, (cst.NamedExpr, cst.Await, cst.Yield, cst.Lambda)):
            return False
        if isinstance(node, cst.Call):
            func = node.func
            name = func.attr.value if isinstance(func, cst.Attribute) else dotted_name(func) or ""
            if name.endswith("_") and not name.endswith("__") or name.split(".")[-1] in ("print", "append"):
                return False
    return True


# Calls that hand on the same values: `loss.detach().item()` reads what `loss.item()` read.
_SAME_VALUES = frozenset({"detach", "float", "double", "cpu", "clone"})
_CONDITIONAL = (
    cst.If,
    cst.Else,
    cst.IfExp,
    cst.BooleanOperation,
    cst.For,
    cst.While,
    cst.Try,
    cst.ExceptHandler,
)


def _read_name(call: cst.Call) -> Optional[cst.Name]:
    """The tensor whose values `call` reads: the receiver of `.item()`-style methods (through
    `.detach()`/`.float()`...), else the one argument of `float()`, `print()` and the like."""
    if isinstance(call.func, cst.Attribute):
        value: cst.BaseExpression = call.func.value
    elif len(call.args) == 1:
        value = call.args[0].value
    else:
        return None
    while (
        isinstance(value, cst.Call)
        and isinstance(value.func, cst.Attribute)
        and value.func.attr.value in _SAME_VALUES
    ):
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

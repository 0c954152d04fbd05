"""TPL406 all-reduce-every-micro-step: gradient accumulation under DDP/FSDP without no_sync()."""

from __future__ import annotations

import re
from typing import Iterator, Optional

import libcst as cst

from ...analysis.accumulation import Accumulation, runs_own_backward
from ...analysis.distributed import Wrapped
from ...engine.context import Context
from ...engine.edits import insert_after_imports
from ...engine.findings import Fix, Report, Safety
from ...syntax.walker import children
from ..base import Rule

# Any of these in the file means the author already decides when gradients synchronise: DDP's and
# FSDP1's `no_sync()`, DDP's flag set by hand (nanoGPT, llm.c), FSDP2's switch.
_DECIDES_SYNC = re.compile(r"\bno_sync\b|\brequire_backward_grad_sync\b|\bset_requires_gradient_sync\b")
# The node types a stepping test may hold for the fix to copy it before the forward: arithmetic on
# names, attributes and numbers, `len(...)`; no other call (it could have effects, or change value).
_PLAIN_TEST = (
    cst.Name,
    cst.Attribute,
    cst.Dot,
    cst.Integer,
    cst.BinaryOperation,
    cst.UnaryOperation,
    cst.BooleanOperation,
    cst.Comparison,
    cst.ComparisonTarget,
    cst.LeftParen,
    cst.RightParen,
    cst.BaseBinaryOp,
    cst.BaseUnaryOp,
    cst.BaseBooleanOp,
    cst.BaseCompOp,
    cst.BaseParenthesizableWhitespace,
    cst.Comment,
    cst.EmptyLine,
    cst.TrailingWhitespace,
    cst.Newline,
)


class AllReduceEveryMicroStep(Rule):
    """## What it does
    Flags the `backward()` of gradient accumulation (micro-steps that run `loss.backward()` while
    the optimizer steps on only some of them: the step under `if (i + 1) % accum == 0:`, or after
    an inner `for micro_step in range(accum_steps):` loop) when the model is wrapped in
    `DistributedDataParallel` or FSDP and nothing in the file keeps the micro-steps that do not
    step from synchronising gradients.

    The wrapped model is followed through the analysis: a name bound to the wrapper (also in one
    branch: `if args.distributed: model = DDP(model)`), a `self.` attribute set to it in any method,
    a helper of the file that returns one, a parameter its callers pass one for (in this file, or
    from another module of the project: `train_one_epoch(model, ...)` in `main.py`), and FSDP2's
    `fully_shard(model)`, which wraps in place.

    ## Why it is slow
    DDP all-reduces every gradient during every `backward()`: a loop that accumulates over N
    micro-steps pays N all-reduces per optimizer step where one would do, since only the sum
    reaches the optimizer. Under `model.no_sync()` DDP only accumulates locally, and the next
    synchronised backward reduces the sum. Over NVLink the extra traffic mostly hides behind the
    backward's compute; between hosts (or over PCIe without peer-to-peer) it dominates the step.
    Measured on two H200s with a GPT-2-small-sized model, 4 micro-steps per optimizer step
    (benchmarks/cases/tpl406.py, run with `benchmarks/distributed.py`): see Measured below; the
    issue that proposed the rule measured 1.23x over NVLink and 2.77x with NCCL over sockets
    (`NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1`, a stand-in for the link between hosts).

    ## Fix safety
    Unsafe: the micro-step that steps the optimizer must still synchronise, and the fix reads when
    that happens from the code's own test. Offered where the loop's shape makes it mechanical: the
    forward and `backward()` are statements of the micro-step loop's own body, and either the
    optimizer step's guard (a test of plain arithmetic on names, which nothing between the forward
    and the guard assigns) follows them there, or the micro-steps are `for i in range(n):`. The
    fix wraps the forward through the `backward()` (DDP decides at the forward whether the next
    backward synchronises) in `with model.no_sync() if <not stepping> else contextlib.nullcontext():`
    and adds `import contextlib` when the file has no spelling of it. FSDP2 has no `no_sync()`: the
    message names `set_requires_gradient_sync(False)` instead, without a fix.

    ## When it stays silent
    A file that already decides when gradients synchronise (any `no_sync`,
    `require_backward_grad_sync` set by hand as nanoGPT and llm.c do, FSDP2's
    `set_requires_gradient_sync`); a framework that owns accumulation (Lightning's
    `accumulate_grad_batches`, accelerate's `accumulate()` and `accelerator.backward(loss)`,
    DeepSpeed's `engine.backward(loss)`, Fabric); a `with` around the micro-step that is handed the
    model (NVlabs/edm's `with misc.ddp_sync(ddp, sync):`: a helper of the project decides); a loop that steps the optimizer at every
    `backward()` (no accumulation, or a step in both branches: `if scaler: scaler.step(opt) else:
    opt.step()`); a model that is never wrapped for data parallelism; test files.
    """

    code = "TPL406"
    name = "all-reduce-every-micro-step"
    summary = "Gradient accumulation under DDP/FSDP without no_sync()"
    message = (
        "backward() all-reduces every gradient at each micro-step of this gradient accumulation: "
        "{model} is a {wrapper} ({where}); {advice}"
    )
    default_on = False  # no two-GPU result committed yet, and too few findings to measure precision
    fix_safety = Safety.UNSAFE
    where = "step loop"
    node_types = (cst.Call,)
    benchmark = "TPL406"

    BAD = {
        "accumulate-under-a-modulo-guard": """
            import torch
            from torch.nn.parallel import DistributedDataParallel as DDP

            def train(net, loader, rank, accum_steps=4):
                model = DDP(net.to(rank), device_ids=[rank])
                optimizer = torch.optim.AdamW(model.parameters(), fused=True)
                for i, (x, y) in enumerate(loader):
                    loss = model(x.to(rank), y.to(rank)) / accum_steps
                    loss.backward()  # expect: TPL406
                    if (i + 1) % accum_steps == 0:
                        optimizer.step()
                        optimizer.zero_grad(set_to_none=True)
            """,
        "micro-steps-in-an-inner-loop": """
            import torch

            def train(model, batches, optimizer, grad_accum_steps):
                for step in range(1000):
                    for micro_step in range(grad_accum_steps):
                        x, y = next(batches)
                        loss = model(x, y) / grad_accum_steps
                        loss.backward()  # expect: TPL406
                    optimizer.step()
                    optimizer.zero_grad(set_to_none=True)

            def main(net, batches, rank):
                model = torch.nn.parallel.DistributedDataParallel(net.cuda(rank), device_ids=[rank])
                train(model, batches, torch.optim.AdamW(model.parameters()), 8)
            """,
        "trainer-keeps-the-ddp-model": """
            import torch
            import torch.nn as nn

            class Trainer:
                def __init__(self, model, optimizer, rank, accumulate):
                    self.model = nn.parallel.DistributedDataParallel(model, device_ids=[rank])
                    self.optimizer = optimizer
                    self.accumulate = accumulate

                def epoch(self, loader):
                    for it, (x, y) in enumerate(loader):
                        loss = nn.functional.cross_entropy(self.model(x.cuda()), y.cuda())
                        loss.backward()  # expect: TPL406
                        if it % self.accumulate == self.accumulate - 1:
                            self.optimizer.step()
                            self.optimizer.zero_grad()
            """,
        "wrapped-only-when-distributed-by-a-helper": """
            import torch
            from torch.nn.parallel import DistributedDataParallel

            def wrap(model, args):
                if args.distributed:
                    return DistributedDataParallel(model, device_ids=[args.gpu])
                return model

            def main(args, net, loader, optimizer):
                model = wrap(net.cuda(), args)
                for i, (x, y) in enumerate(loader):
                    loss = model(x.cuda(), y.cuda())
                    (loss / args.accum_iter).backward()  # expect: TPL406
                    if (i + 1) % args.accum_iter == 0:
                        optimizer.step()
                        optimizer.zero_grad()
            """,
        "fsdp2-fully-shard": """
            import torch
            from torch.distributed.fsdp import fully_shard

            def train(model, loader, optimizer, accumulation):
                fully_shard(model)
                for i, (x, y) in enumerate(loader):
                    model(x.cuda(), y.cuda()).backward()  # expect: TPL406
                    if (i + 1) % accumulation == 0:
                        optimizer.step()
                        optimizer.zero_grad()
            """,
    }
    FIXED = {
        "accumulate-under-a-modulo-guard": """
            import torch
            from torch.nn.parallel import DistributedDataParallel as DDP
            import contextlib

            def train(net, loader, rank, accum_steps=4):
                model = DDP(net.to(rank), device_ids=[rank])
                optimizer = torch.optim.AdamW(model.parameters(), fused=True)
                for i, (x, y) in enumerate(loader):
                    with model.no_sync() if (i + 1) % accum_steps != 0 else contextlib.nullcontext():
                        loss = model(x.to(rank), y.to(rank)) / accum_steps
                        loss.backward()
                    if (i + 1) % accum_steps == 0:
                        optimizer.step()
                        optimizer.zero_grad(set_to_none=True)
            """,
        "micro-steps-in-an-inner-loop": """
            import torch
            import contextlib

            def train(model, batches, optimizer, grad_accum_steps):
                for step in range(1000):
                    for micro_step in range(grad_accum_steps):
                        x, y = next(batches)
                        with model.no_sync() if micro_step < grad_accum_steps - 1 else contextlib.nullcontext():
                            loss = model(x, y) / grad_accum_steps
                            loss.backward()
                    optimizer.step()
                    optimizer.zero_grad(set_to_none=True)

            def main(net, batches, rank):
                model = torch.nn.parallel.DistributedDataParallel(net.cuda(rank), device_ids=[rank])
                train(model, batches, torch.optim.AdamW(model.parameters()), 8)
            """,
        "trainer-keeps-the-ddp-model": """
            import torch
            import torch.nn as nn
            import contextlib

            class Trainer:
                def __init__(self, model, optimizer, rank, accumulate):
                    self.model = nn.parallel.DistributedDataParallel(model, device_ids=[rank])
                    self.optimizer = optimizer
                    self.accumulate = accumulate

                def epoch(self, loader):
                    for it, (x, y) in enumerate(loader):
                        with self.model.no_sync() if it % self.accumulate != self.accumulate - 1 else contextlib.nullcontext():
                            loss = nn.functional.cross_entropy(self.model(x.cuda()), y.cuda())
                            loss.backward()
                        if it % self.accumulate == self.accumulate - 1:
                            self.optimizer.step()
                            self.optimizer.zero_grad()
            """,
        "wrapped-only-when-distributed-by-a-helper": """
            import torch
            from torch.nn.parallel import DistributedDataParallel
            import contextlib

            def wrap(model, args):
                if args.distributed:
                    return DistributedDataParallel(model, device_ids=[args.gpu])
                return model

            def main(args, net, loader, optimizer):
                model = wrap(net.cuda(), args)
                for i, (x, y) in enumerate(loader):
                    with model.no_sync() if (i + 1) % args.accum_iter != 0 else contextlib.nullcontext():
                        loss = model(x.cuda(), y.cuda())
                        (loss / args.accum_iter).backward()
                    if (i + 1) % args.accum_iter == 0:
                        optimizer.step()
                        optimizer.zero_grad()
            """,
    }
    GOOD = {
        "no-sync-on-the-micro-steps": """
            import contextlib
            import torch
            from torch.nn.parallel import DistributedDataParallel as DDP

            def train(net, loader, optimizer, rank, accum_steps):
                model = DDP(net.to(rank), device_ids=[rank])
                for i, (x, y) in enumerate(loader):
                    need_update = (i + 1) % accum_steps == 0
                    with contextlib.nullcontext() if need_update else model.no_sync():
                        model(x.to(rank), y.to(rank)).backward()
                    if need_update:
                        optimizer.step()
                        optimizer.zero_grad()
            """,
        "sync-flag-set-by-hand": """
            import torch

            def train(net, get_batch, optimizer, grad_accum_steps, rank):
                model = torch.nn.parallel.DistributedDataParallel(net, device_ids=[rank])
                for step in range(5000):
                    for micro_step in range(grad_accum_steps):
                        model.require_backward_grad_sync = micro_step == grad_accum_steps - 1
                        x, y = get_batch()
                        loss = model(x, y) / grad_accum_steps
                        loss.backward()
                    optimizer.step()
                    optimizer.zero_grad(set_to_none=True)
            """,
        "fsdp2-switches-sync-off": """
            import torch
            from torch.distributed.fsdp import fully_shard

            def train(model, loader, optimizer, accumulation):
                fully_shard(model)
                for i, (x, y) in enumerate(loader):
                    stepping = (i + 1) % accumulation == 0
                    model.set_requires_gradient_sync(stepping)
                    model(x.cuda(), y.cuda()).backward()
                    if stepping:
                        optimizer.step()
                        optimizer.zero_grad()
            """,
        "accelerate-owns-accumulation": """
            import torch
            from accelerate import Accelerator

            accelerator = Accelerator(gradient_accumulation_steps=4)

            def train(model, loader, optimizer):
                model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
                for i, (x, y) in enumerate(loader):
                    with accelerator.accumulate(model):
                        accelerator.backward(model(x, y))
                        optimizer.step()
                        optimizer.zero_grad()
            """,
        "sync-decided-by-a-project-helper": """
            import torch
            from torch_utils import misc

            def train(net, loader, optimizer, num_accumulation_rounds, rank):
                ddp = torch.nn.parallel.DistributedDataParallel(net, device_ids=[rank])
                for x, y in loader:
                    for round_idx in range(num_accumulation_rounds):
                        with misc.ddp_sync(ddp, round_idx == num_accumulation_rounds - 1):
                            ddp(x.cuda(), y.cuda()).backward()
                    optimizer.step()
            """,
        "deepspeed-engine-owns-accumulation": """
            import deepspeed

            def train(model, loader, config, accum):
                engine, optimizer, _, _ = deepspeed.initialize(model=model, config=config)
                for i, (x, y) in enumerate(loader):
                    loss = engine(x.cuda(), y.cuda())
                    engine.backward(loss)
                    if (i + 1) % accum == 0:
                        engine.step()
            """,
        "lightning-owns-accumulation": """
            import lightning as L
            import torch

            class Model(L.LightningModule):
                def training_step(self, batch, batch_idx):
                    x, y = batch
                    return torch.nn.functional.mse_loss(self.layer(x), y)

            L.Trainer(strategy="ddp", devices=2, accumulate_grad_batches=4).fit(Model())
            """,
        "ddp-without-accumulation": """
            import torch
            from torch.nn.parallel import DistributedDataParallel as DDP

            def train(net, loader, optimizer, rank):
                model = DDP(net.to(rank), device_ids=[rank])
                for x, y in loader:
                    model(x.to(rank), y.to(rank)).backward()
                    optimizer.step()
                    optimizer.zero_grad()
            """,
        "step-in-both-branches": """
            import torch
            from torch.nn.parallel import DistributedDataParallel as DDP

            def train(net, loader, optimizer, scaler, rank):
                model = DDP(net.to(rank), device_ids=[rank])
                for x, y in loader:
                    model(x.to(rank), y.to(rank)).backward()
                    if scaler is not None:
                        scaler.step(optimizer)
                    else:
                        optimizer.step()
            """,
        "periodic-regulariser-after-a-step-every-iteration": """
            import torch
            from torch.nn.parallel import DistributedDataParallel as DDP

            def train(net, loader, d_optim, rank, d_reg_every):
                discriminator = DDP(net.to(rank), device_ids=[rank])
                for i, (x, y) in enumerate(loader):
                    discriminator(x.to(rank), y.to(rank)).backward()
                    d_optim.step()
                    if i % d_reg_every == 0:
                        discriminator.zero_grad()
                        r1_penalty(discriminator, x.to(rank)).backward()
                        d_optim.step()
            """,
        "accumulation-on-one-gpu": """
            import torch

            def train(model, loader, optimizer, accum_steps):
                model = model.cuda()
                for i, (x, y) in enumerate(loader):
                    (model(x.cuda(), y.cuda()) / accum_steps).backward()
                    if (i + 1) % accum_steps == 0:
                        optimizer.step()
                        optimizer.zero_grad()
            """,
        "logging-every-n-steps-is-not-accumulation": """
            import torch
            from torch.nn.parallel import DistributedDataParallel as DDP

            def train(net, loader, optimizer, rank, log_every):
                model = DDP(net.to(rank), device_ids=[rank])
                for i, (x, y) in enumerate(loader):
                    loss = model(x.to(rank), y.to(rank))
                    loss.backward()
                    optimizer.step()
                    if i % log_every == 0:
                        print(loss.item())
            """,
    }

    def check(self, node: cst.Call, ctx: Context) -> Iterator[Report]:
        if not (
            isinstance(node.func, cst.Attribute)
            and node.func.attr.value == "backward"
            and runs_own_backward(node)
            and not ctx.is_test_file
        ):
            return
        accumulation = ctx.accumulation(node)
        if accumulation is None or _DECIDES_SYNC.search(ctx.source):
            return
        model, wrapped = self._wrapped_model(accumulation, ctx)
        if model is None or wrapped is None:
            return
        name = ctx.code(model)
        if _handed_to_context_manager(node, name, ctx):
            return
        if wrapped.sharded_in_place:
            advice = (
                f"call {name}.set_requires_gradient_sync(False) before the micro-steps that do not step "
                "the optimizer and set_requires_gradient_sync(True) before the one that does"
            )
        else:
            advice = (
                f"run the forward and backward() of the micro-steps that do not step the optimizer "
                f"under {name}.no_sync()"
            )
        if wrapped.call is not None:
            where = f"wrapped at line {ctx.lines_of([wrapped.call])[wrapped.call]}"
        else:
            where = f"wrapped by a caller of {wrapped.receiver}()"
        fix = None if wrapped.sharded_in_place else _no_sync_fix(accumulation, model, ctx)
        yield self.report(
            node,
            reason=ctx.hot_reason(node),
            fix=fix,
            model=name,
            wrapper=wrapped.short_name,
            where=where,
            advice=advice,
        )

    @staticmethod
    def _wrapped_model(
        accumulation: Accumulation, ctx: Context
    ) -> tuple[Optional[cst.BaseExpression], Optional[Wrapped]]:
        """The wrapped model the micro-step calls or hands to a helper (`model(x)`,
        `compute_loss(model, batch)`), and its wrapper."""
        loop = accumulation.loop
        for call in ctx.facts.calls:
            if not any(a is loop.body for a in ctx.ancestors(call)):
                continue
            candidates = [call.func, *(arg.value for arg in call.args)]
            for expr in candidates:
                if isinstance(expr, (cst.Name, cst.Attribute)) and not _is_method(call, expr):
                    wrapped = ctx.wrapped_model(expr)
                    if wrapped is not None:
                        return expr, wrapped
        return None, None


def _handed_to_context_manager(backward: cst.Call, model: str, ctx: Context) -> bool:
    """A `with` around the backward is handed the model (NVlabs/edm's `with misc.ddp_sync(ddp, sync):`,
    accelerate's `with accelerator.accumulate(model):`): the project decides there when to sync."""
    for ancestor in ctx.ancestors(backward):
        if isinstance(ancestor, cst.With):
            for item in ancestor.items:
                call = item.item
                if isinstance(call, cst.Call) and any(ctx.code(arg.value) == model for arg in call.args):
                    return True
    return False


def _is_method(call: cst.Call, expr: cst.BaseExpression) -> bool:
    """`x.to(...)` names a method, not a model: only a call's receiver may be the model."""
    return expr is call.func and isinstance(expr, cst.Attribute) and not _is_self_attribute(expr)


def _is_self_attribute(expr: cst.Attribute) -> bool:
    return isinstance(expr.value, cst.Name) and expr.value.value == "self"


def _no_sync_fix(accumulation: Accumulation, model: cst.BaseExpression, ctx: Context) -> Optional[Fix]:
    body = accumulation.loop.body
    if not isinstance(body, cst.IndentedBlock):
        return None
    statements = list(body.body)
    last = _index_holding(statements, accumulation.backward, ctx)
    first = next(
        (i for i, s in enumerate(statements) if _calls(s, model, ctx)),
        None,
    )
    if (
        last is None
        or first is None
        or first > last
        or not isinstance(statements[last], cst.SimpleStatementLine)
    ):
        return None
    not_stepping = _not_stepping(accumulation, statements, first, ctx)
    if not_stepping is None:
        return None
    nullcontext, import_line = _nullcontext(ctx)
    replacements: list[tuple[cst.CSTNode, cst.CSTNode | cst.FlattenSentinel[cst.CSTNode]]] = []
    if import_line is not None:
        insertion = insert_after_imports(ctx, import_line)
        if insertion is None:
            return None
        replacements.append(insertion)
    item = cst.parse_expression(f"{ctx.code(model)}.no_sync() if {not_stepping} else {nullcontext}()")
    wrapped = statements[first : last + 1]
    if not isinstance(wrapped[0], (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
        return None
    block = cst.With(
        items=[cst.WithItem(item=item)],
        body=cst.IndentedBlock(body=[wrapped[0].with_changes(leading_lines=()), *wrapped[1:]]),
        leading_lines=wrapped[0].leading_lines,
    )
    new_body = body.with_changes(body=[*statements[:first], block, *statements[last + 1 :]])
    replacements.insert(0, (body, new_body))
    return Fix(tuple(replacements), Safety.UNSAFE, "skip the all-reduce on micro-steps that do not step")


def _index_holding(statements: list[cst.BaseStatement], node: cst.CSTNode, ctx: Context) -> Optional[int]:
    for index, statement in enumerate(statements):
        if any(a is statement for a in ctx.ancestors(node)):
            return index
    return None


def _calls(statement: cst.CSTNode, model: cst.BaseExpression, ctx: Context) -> bool:
    """`statement` calls the model or hands it to a call."""
    text = ctx.code(model)
    for call in ctx.facts.calls:
        if any(a is statement for a in ctx.ancestors(call)):
            if ctx.code(call.func) == text or any(ctx.code(arg.value) == text for arg in call.args):
                return True
    return False


def _not_stepping(
    accumulation: Accumulation, statements: list[cst.BaseStatement], first: int, ctx: Context
) -> Optional[str]:
    """When the micro-step does not step the optimizer, as an expression the fix can evaluate
    before the forward; None where that is not mechanical."""
    if accumulation.counter is not None and accumulation.count is not None:
        count = accumulation.count
        if not isinstance(count, (cst.Name, cst.Attribute, cst.Integer)):
            return None
        if _assigned(statements, {accumulation.counter.value, _root(count)}, ctx):
            return None
        return f"{accumulation.counter.value} < {ctx.code(count)} - 1"
    guard = accumulation.guard
    if guard is None or not any(s is guard for s in statements[first:]):
        return None
    test = guard.test
    if not _plain(test):
        return None
    between = statements[first : next(i for i, s in enumerate(statements) if s is guard)]
    read = {n.value for n in _walk(test) if isinstance(n, cst.Name)}
    if _assigned(between, read, ctx):
        return None
    if (
        isinstance(test, cst.Comparison)
        and len(test.comparisons) == 1
        and isinstance(test.comparisons[0].operator, cst.Equal)
        and not test.lpar
    ):
        return f"{ctx.code(test.left)} != {ctx.code(test.comparisons[0].comparator)}"
    if isinstance(test, (cst.Name, cst.Attribute)):
        return f"not {ctx.code(test)}"
    return f"not ({ctx.code(test)})"


def _plain(test: cst.BaseExpression) -> bool:
    for node in _walk(test):
        if isinstance(node, cst.Call):
            if not (isinstance(node.func, cst.Name) and node.func.value == "len"):
                return False
        elif not isinstance(node, (*_PLAIN_TEST, cst.Arg)):
            return False
    return True


def _walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    yield node
    for child in children(node):
        yield from _walk(child)


def _root(expr: cst.BaseExpression) -> str:
    while isinstance(expr, cst.Attribute):
        expr = expr.value
    return expr.value if isinstance(expr, cst.Name) else ""


def _assigned(statements: list[cst.BaseStatement], names: set[str], ctx: Context) -> bool:
    """One of `names` is bound in `statements` (assignments, loops, with-targets, walrus)."""
    for statement in statements:
        for node in _walk(statement):
            targets: list[cst.CSTNode] = []
            if isinstance(node, cst.AssignTarget):
                targets.append(node.target)
            elif isinstance(node, (cst.AugAssign, cst.AnnAssign)):
                targets.append(node.target)
            elif isinstance(node, (cst.For, cst.CompFor)):
                targets.append(node.target)
            elif isinstance(node, cst.AsName):
                targets.append(node.name)
            elif isinstance(node, cst.NamedExpr):
                targets.append(node.target)
            for target in targets:
                if any(isinstance(n, cst.Name) and n.value in names for n in _walk(target)):
                    return True
    return False


def _nullcontext(ctx: Context) -> tuple[str, Optional[str]]:
    """How the fix spells `contextlib.nullcontext`, and the import it must add (or None)."""
    for bound, target in ctx.facts.imports.items():
        if target == "contextlib.nullcontext" and "." not in bound:
            return bound, None
    for bound, target in ctx.facts.imports.items():
        if target == "contextlib" and "." not in bound:
            return f"{bound}.nullcontext", None
    return "contextlib.nullcontext", "import contextlib"

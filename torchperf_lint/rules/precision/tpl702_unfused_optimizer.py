"""TPL702 unfused-optimizer: Optimizer without its fused CUDA kernel."""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from ...engine.context import Context
from ...engine.edits import add_keyword, keyword, remove_keyword
from ...engine.findings import Fix, Report, Safety
from ..base import Rule
from .common import torch_optimizer

_FUSED_OPTIMIZERS = frozenset({"Adam", "AdamW", "SGD"})
# the keywords that choose an optimizer's kernel: a `**mapping` that may pass one is a decision
_DECIDING_KEYWORDS = ("fused", "foreach", "differentiable")
# The optimizers that took `foreach=` in torch 1.12 (Adagrad's flag came later; LBFGS and SparseAdam
# have none). Before torch 2.0 `foreach=None` meant the for-loop.
_FOREACH_OPTIMIZERS = frozenset(
    {"Adadelta", "Adam", "Adamax", "AdamW", "ASGD", "NAdam", "RAdam", "RMSprop", "Rprop", "SGD"}
)
_FOR_LOOP = "updates one parameter at a time (the default before torch 2.0)"


def _is_literal(expr: cst.BaseExpression, value: str) -> bool:
    return isinstance(expr, cst.Name) and expr.value == value


def _step_compiled(call: cst.Call, ctx: Context) -> bool:
    """`opt = SGD(...)` whose `opt.step` the file hands to `torch.compile` (`opt.step =
    torch.compile(opt.step)`, pytorch/examples' RPC pipeline): Inductor fuses the update itself."""
    assign = ctx.parent(call)
    if not (isinstance(assign, cst.Assign) and assign.value is call and len(assign.targets) == 1):
        return False
    bound = ctx.code(assign.targets[0].target)
    for compiled in ctx.facts.calls:
        if ctx.qualified_name(compiled) == "torch.compile" and compiled.args:
            if ctx.code(compiled.args[0].value) == f"{bound}.step":
                return True
    return False


class UnfusedOptimizer(Rule):
    """## What it does
    Flags `torch.optim.Adam`, `AdamW` and `SGD` (the optimizers with a fused CUDA kernel) built
    without `fused=True`, and `foreach=False` on any `torch.optim` optimizer, in a file that shows
    CUDA use. Where the project runs a torch older than 2.0 (an exact pin or an upper bound below
    it: RULES.md, "Which torch the code runs on"), an optimizer left at its default updates one
    parameter at a time, as `foreach=False` does: the message says so, and where that runtime has no
    fused kernel for it (SGD, AdamW) but has the `foreach=` flag (torch 1.12 and later), names
    `foreach=True` instead of `fused=True`.

    ## Why it is slow
    By default the update runs as a chain of multi-tensor (`foreach`) kernels, one per operation
    of the update rule; `fused=True` does the whole update in one kernel per group of tensors, and
    `foreach=False` falls back to a Python loop over parameters. The measured effect on an H100 is
    in the Measured section below.

    ## Fix safety
    Unsafe: `fused=True` is added (replacing a literal `foreach=`, since the two cannot both be
    True); on the optimizers without a fused kernel, `foreach=False` is removed; on a torch before
    2.0 without the fused kernel, `foreach=True` is added where the oldest supported torch has the
    flag (1.12; otherwise the message says what it needs). A fused optimizer
    raises if any parameter is not a floating-point CUDA tensor (CPU, sparse or integer
    parameters), and its results can differ from the default in the last bits.

    ## When it stays silent
    CPU-only files; `fused=` written out (`fused=False` is a decision); `foreach=` given by an
    expression; a default optimizer on a torch from 2.0 on without its fused kernel (SGD before
    2.3: the default is already multi-tensor), or on a torch older than 1.12 (no `foreach=` to pass); `differentiable=True`, which fused kernels do not support; a `**mapping` that could
    supply `fused=`, `foreach=` or `differentiable=` (one whose keys are all known, such as
    `opt_args = dict(lr=lr)` with `opt_args["eps"] = eps` added, is read key by key); an optimizer whose `step` the file compiles (`opt.step = torch.compile(opt.step)`:
    Inductor fuses the update); optimizers of other libraries with the same names (`timm.optim.AdamW`,
    `apex.optimizers.FusedAdam`); references to the class that do not call it; optimizers over a model
    that stays on the host (built without a device and never moved, passed on or returned), even in a
    file that uses CUDA elsewhere; an optimizer that a function builds, keeps to itself and steps once,
    outside any loop (a demo's single update).
    """

    code = "TPL702"
    name = "unfused-optimizer"
    default_on = True  # meets both bars again since CPU-only models and one-step demos (evidence.py)
    summary = "Optimizer without its fused CUDA kernel"
    message = "torch.optim.{optimizer}{how} {cause}; {fix_text}"
    fix_safety = Safety.UNSAFE
    where = "file shows CUDA use"
    node_types = (cst.Call,)
    benchmark = "TPL702"

    _FUSED_FIX = (
        "pass fused=True (unsafe: every parameter must then be a dense floating-point tensor on CUDA "
        "or another device with a fused kernel)"
    )

    BAD = {
        "model-built-then-moved-by-a-method": """
            import torch

            class Trainer:
                def __init__(self):
                    self.model = torch.nn.Linear(512, 10)
                    self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.01)  # expect: TPL702

                def setup(self):
                    self.model.cuda()
            """,
        "demo-stepping-in-a-loop": """
            import torch

            def demo(rank, batches):
                torch.cuda.set_device(rank)
                model = torch.nn.Linear(10, 5).to(rank)
                optimizer = torch.optim.SGD(model.parameters(), lr=0.001)  # expect: TPL702
                for x in batches:
                    optimizer.zero_grad()
                    model(x.to(rank)).sum().backward()
                    optimizer.step()
            """,
        "model-returned-to-a-caller": """
            import torch

            def build():
                model = torch.nn.Linear(512, 10)
                optimizer = torch.optim.AdamW(model.parameters())  # expect: TPL702
                return model, optimizer

            device = "cuda"
            """,
        "adamw-default": """
            import torch

            model = torch.nn.Linear(512, 512).cuda()
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)  # expect: TPL702
            """,
        "sgd-imported-with-trailing-comma": """
            from torch.optim import SGD

            def build(model):
                model.cuda()
                return SGD(  # expect: TPL702
                    model.parameters(),
                    lr=0.1,
                    momentum=0.9,
                )
            """,
        "adam-foreach-false": """
            import torch
            from torch import optim

            model = torch.nn.Linear(8, 8).to("cuda")
            opt = optim.Adam(model.parameters(), foreach=False, lr=3e-4)  # expect: TPL702
            """,
        "rmsprop-foreach-false": """
            import torch

            model = torch.nn.Linear(8, 8).to("cuda")
            opt = torch.optim.RMSprop(model.parameters(), lr=1e-2, foreach=False)  # expect: TPL702
            """,
        "module-spelling": """
            import torch
            import torch.optim.adamw

            model = torch.nn.Linear(8, 8).cuda()
            opt = torch.optim.adamw.AdamW(model.parameters(), foreach=True)  # expect: TPL702
            """,
        "arguments-in-a-mapping-of-known-keys": """
            import torch

            def build(model, args):
                opt_args = dict(lr=args.lr, weight_decay=0.05)
                if args.opt_eps is not None:
                    opt_args["eps"] = args.opt_eps
                return torch.optim.AdamW(model.cuda().parameters(), **opt_args)  # expect: TPL702
            """,
    }
    FIXED = {
        "model-built-then-moved-by-a-method": """
            import torch

            class Trainer:
                def __init__(self):
                    self.model = torch.nn.Linear(512, 10)
                    self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.01, fused=True)

                def setup(self):
                    self.model.cuda()
            """,
        "demo-stepping-in-a-loop": """
            import torch

            def demo(rank, batches):
                torch.cuda.set_device(rank)
                model = torch.nn.Linear(10, 5).to(rank)
                optimizer = torch.optim.SGD(model.parameters(), lr=0.001, fused=True)
                for x in batches:
                    optimizer.zero_grad()
                    model(x.to(rank)).sum().backward()
                    optimizer.step()
            """,
        "model-returned-to-a-caller": """
            import torch

            def build():
                model = torch.nn.Linear(512, 10)
                optimizer = torch.optim.AdamW(model.parameters(), fused=True)
                return model, optimizer

            device = "cuda"
            """,
        "adamw-default": """
            import torch

            model = torch.nn.Linear(512, 512).cuda()
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
            """,
        "sgd-imported-with-trailing-comma": """
            from torch.optim import SGD

            def build(model):
                model.cuda()
                return SGD(
                    model.parameters(),
                    lr=0.1,
                    momentum=0.9,
                    fused=True,
                )
            """,
        "adam-foreach-false": """
            import torch
            from torch import optim

            model = torch.nn.Linear(8, 8).to("cuda")
            opt = optim.Adam(model.parameters(), fused=True, lr=3e-4)
            """,
        "rmsprop-foreach-false": """
            import torch

            model = torch.nn.Linear(8, 8).to("cuda")
            opt = torch.optim.RMSprop(model.parameters(), lr=1e-2)
            """,
        "module-spelling": """
            import torch
            import torch.optim.adamw

            model = torch.nn.Linear(8, 8).cuda()
            opt = torch.optim.adamw.AdamW(model.parameters(), fused=True)
            """,
        "arguments-in-a-mapping-of-known-keys": """
            import torch

            def build(model, args):
                opt_args = dict(lr=args.lr, weight_decay=0.05)
                if args.opt_eps is not None:
                    opt_args["eps"] = args.opt_eps
                return torch.optim.AdamW(model.cuda().parameters(), **opt_args, fused=True)
            """,
    }
    GOOD = {
        "demo-taking-one-step": """
            import torch

            def demo(rank):
                torch.cuda.set_device(rank)
                model = torch.nn.Linear(10, 5).to(rank)
                optimizer = torch.optim.SGD(model.parameters(), lr=0.001)
                optimizer.zero_grad()
                model(torch.randn(20, 10).to(rank)).sum().backward()
                optimizer.step()
            """,
        "model-kept-on-the-host-in-a-cuda-file": """
            import torch

            class ParameterServer:
                def __init__(self):
                    self.model = torch.nn.Linear(512, 10)
                    self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.01)

                def apply(self, grads):
                    for p, g in zip(self.model.parameters(), grads):
                        p.grad = g.cpu()
                    self.optimizer.step()

            def trainer_step(batch):
                return batch.cuda()
            """,
        "compiled-optimizer-step": """
            import torch

            def make_optimizer(model):
                opt = torch.optim.SGD(model.cuda().parameters(), lr=0.05)
                opt.step = torch.compile(opt.step)
                return opt
            """,
        "already-fused-or-decided": """
            import torch

            model = torch.nn.Linear(8, 8).cuda()
            fast = torch.optim.AdamW(model.parameters(), fused=True)
            slow = torch.optim.AdamW(model.parameters(), fused=False)
            chosen = torch.optim.SGD(model.parameters(), lr=0.1, fused=use_fused)
            """,
        "cpu-only-file": """
            import torch

            model = torch.nn.Linear(8, 8)
            optimizer = torch.optim.AdamW(model.parameters(), foreach=False)
            """,
        "kwargs-could-supply-fused": """
            import torch

            def build(model, **optim_kwargs):
                return torch.optim.AdamW(model.cuda().parameters(), **optim_kwargs)
            """,
        "mapping-that-may-hold-fused": """
            import torch

            def build(model, args, flags):
                opt_args = dict(lr=args.lr)
                for name in flags:
                    opt_args[name] = True  # any key: fused= among them
                return torch.optim.AdamW(model.cuda().parameters(), **opt_args)
            """,
        "same-names-from-other-libraries": """
            import torch
            from apex.optimizers import FusedAdam
            from timm.optim import AdamW

            model = torch.nn.Linear(8, 8).cuda()
            a = AdamW(model.parameters(), lr=1e-3)
            b = FusedAdam(model.parameters())
            """,
        "foreach-from-config-and-differentiable": """
            import torch

            model = torch.nn.Linear(8, 8).cuda()
            a = torch.optim.Adam(model.parameters(), foreach=cfg.foreach)
            b = torch.optim.SGD(model.parameters(), lr=0.1, differentiable=True)
            """,
        "class-reference-and-other-optimizers": """
            import torch

            OPTIMIZERS = {"adamw": torch.optim.AdamW, "sgd": torch.optim.SGD}
            model = torch.nn.Linear(8, 8).cuda()
            lbfgs = torch.optim.LBFGS(model.parameters())
            rms = torch.optim.RMSprop(model.parameters(), foreach=True)
            """,
    }

    def check(self, node: cst.Call, ctx: Context) -> Iterator[Report]:
        optimizer = torch_optimizer(node, ctx)
        if optimizer is None or not ctx.shows_cuda_use:
            return
        if any(ctx.module_graph.star_kwargs_may_supply(node, name) for name in _DECIDING_KEYWORDS):
            return  # a `**mapping` that may choose the kernel
        if _step_compiled(node, ctx):
            return
        params = node.args[0].value if node.args and node.args[0].keyword is None else None
        if params is not None and ctx.walks_host_model(params):
            return  # a model that stays on the host: no CUDA kernel to fuse
        if ctx.steps_once(node):
            return  # one update: nothing to gain
        foreach = keyword(node, "foreach")
        foreach_false = foreach is not None and _is_literal(foreach.value, "False")
        fused = ctx.api(f"{optimizer}(fused=)") if optimizer in _FUSED_OPTIMIZERS else None
        if fused is not None and fused.usable:
            differentiable = keyword(node, "differentiable")
            if keyword(node, "fused") is not None or (
                differentiable is not None and not _is_literal(differentiable.value, "False")
            ):
                return
            if foreach is not None and not (foreach_false or _is_literal(foreach.value, "True")):
                return  # foreach chosen by an expression: a decision
            true = cst.Name("True")
            if foreach is None:
                fixed = add_keyword(node, "fused", true)
                how, cause = (
                    "",
                    _FOR_LOOP
                    if _defaults_to_for_loop(ctx)
                    else "runs its update as a chain of multi-tensor kernels instead of one fused kernel",
                )
            else:
                fixed = node.with_changes(
                    args=[
                        a.with_changes(keyword=cst.Name("fused"), value=true) if a is foreach else a
                        for a in node.args
                    ]
                )
                how = f"(foreach={ctx.code(foreach.value)})"
                cause = (
                    "updates one parameter at a time"
                    if foreach_false
                    else "runs a chain of multi-tensor kernels instead of one fused kernel"
                )
            fix = (
                Fix.replace(node, fixed, Safety.UNSAFE, "use the fused optimizer") if fused.writable else None
            )
            yield self.report(
                node,
                reason=ctx.hot_reason(node),
                fix=fix,
                optimizer=optimizer,
                how=how,
                cause=cause,
                fix_text=self._FUSED_FIX if fused.writable else f"pass fused=True ({fused.needs()})",
            )
        elif foreach is None and optimizer in _FOREACH_OPTIMIZERS and _defaults_to_for_loop(ctx):
            yield from self._foreach_on_old_torch(node, ctx, optimizer)
        elif foreach_false:
            fix = Fix.replace(node, remove_keyword(node, "foreach"), Safety.UNSAFE, "use the foreach kernels")
            yield self.report(
                node,
                reason=ctx.hot_reason(node),
                fix=fix,
                optimizer=optimizer,
                how="(foreach=False)",
                cause="updates one parameter at a time",
                fix_text="remove foreach=False to batch the update in multi-tensor kernels "
                "(results can differ in the last bits)",
            )

    def _foreach_on_old_torch(self, node: cst.Call, ctx: Context, optimizer: str) -> Iterator[Report]:
        """A runtime older than 2.0 without the fused kernel: the default is the for-loop, and
        `foreach=True` (torch 1.12) batches the update where that runtime has it."""
        if keyword(node, "differentiable") is not None:
            return
        foreach = ctx.api("optimizer(foreach=)")
        if not foreach.usable:
            return  # torch 1.11 or older: no flag to pass
        fix = None
        if foreach.writable:
            fixed = add_keyword(node, "foreach", cst.Name("True"))
            fix = Fix.replace(node, fixed, Safety.UNSAFE, "use the foreach kernels")
        advice = (
            "pass foreach=True to run it as multi-tensor kernels (results can differ in the last bits)"
            if foreach.writable
            else f"pass foreach=True ({foreach.needs()})"
        )
        yield self.report(
            node,
            reason=ctx.hot_reason(node),
            fix=fix,
            optimizer=optimizer,
            how="",
            cause=_FOR_LOOP,
            fix_text=advice,
        )


def _defaults_to_for_loop(ctx: Context) -> bool:
    """The runtime may be older than torch 2.0, whose optimizers took the for-loop by default."""
    return ctx.target_torch_version().may_run_older_than(ctx.api("foreach by default").first)

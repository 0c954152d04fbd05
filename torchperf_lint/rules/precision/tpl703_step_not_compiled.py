"""TPL703 step-not-compiled: a CUDA training script whose model, step and loss run eagerly."""

from __future__ import annotations

from typing import Iterator, Optional

import libcst as cst

from ...analysis.accumulation import runs_own_backward, steps_an_optimizer
from ...engine.context import Context
from ...engine.findings import Report
from ..base import Rule
from ..transfer.tpl105_sync_in_forward import SyncInForward
from ..transfer.tpl107_sync_per_step import SyncPerStep

# The issue that proposed the rule measured a whole step under torch.compile on an H100 (torch
# 2.11); benchmarks/cases/tpl703.py measures it again (Measured on the rule's page).
_MEASURED = (
    "1.29x per step for a GPT-2-small-sized bf16 model on an H200 (1.16x on an H100) after a first step of 22 s, "
    "and up to 1.39x for a bf16 ResNet-50 on an H100 (none for a ResNet-18-sized one on the H200)"
)
_SHOWN_BREAKERS = 5
_MOVES = frozenset({"to", "cuda"})


class StepNotCompiled(Rule):
    """## What it does
    Flags a CUDA training script (a step loop that runs its own `loss.backward()` and steps an
    optimizer) in which nothing is compiled: no `torch.compile` call or decorator, no
    `model.compile()`, and no option that decides about it (a `compile=`/`torch_compile=`
    keyword for a trainer, a `compile` setting, a `--compile` flag), in the script or anywhere in
    its project. One finding per script, at the model's move to the device (at the first
    `backward()` when no move is found). The message lists what in the step would break a compiled
    graph: the script's TPL105 and TPL107 findings (host syncs, `.item()`, Python branches on
    tensors), with their lines: those are what to fix first.

    ## Why it is slow
    Eager PyTorch launches one kernel per operation and reads every intermediate back from
    memory. `torch.compile` traces the step into graphs that Inductor fuses (pointwise chains,
    normalisations, the optimizer's update), cutting launches and memory traffic. It costs a
    compilation on the first step (tens of seconds for a real model), recompiles when shapes or
    Python values it guards on change, and splits the graph at every host sync. The measured
    effect is in the Measured section below; the issue that proposed the rule measured
    1.16x (GPT-2 small, first step 19 s) and 1.39x (ResNet-50, bf16, channels_last, first step
    38 s) on an H100. On an H200 the suite's case gives 1.29x (1.27-1.30) for a GPT-2-small-sized bf16
    step (first call 22 s) and no gain for a ResNet-18-sized bf16 channels_last step (1.02x, first call
    15 s): what compiling buys depends on how much of the step is fusible pointwise work.

    ## Fix safety
    No automatic fix: compiling is a decision with costs (start-up time, recompilation on dynamic
    shapes, graph breaks on dynamic code), and where it goes (the model, the loss, a step
    function) depends on the code. Off by default for the same reason: enable it with
    `--select TPL703` when start-up time is worth trading for steady-state speed.

    ## When it stays silent
    Anything compiled or an option about compiling, here or in another module of the project;
    a runtime older than torch 2.0 (the project pins one); files without a step loop of their own
    that steps an optimizer (a timing helper's loop of `backward()` calls), or whose backward belongs
    to a framework (`accelerator.backward(loss)`, Lightning: trainers
    have compile options of their own); backward without an optimizer; CPU-only scripts; test files.
    """

    code = "TPL703"
    name = "step-not-compiled"
    summary = "Training step never compiled"
    message = (
        "this training step runs eagerly: nothing compiles its model, step or loss; torch.compile "
        "measured {measured}; try {model} = torch.compile({model}){breakers}"
    )
    default_on = False  # off by design: compiling costs start-up time and can fail on dynamic code
    where = "training script"
    node_types = (cst.Call, cst.If, cst.While)
    benchmark = "TPL703"

    BAD = {
        "eager-training-script": """
            import torch
            import torch.nn as nn

            model = nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 1024))
            model.cuda()  # expect: TPL703
            optimizer = torch.optim.AdamW(model.parameters(), fused=True)
            for x, y in loader:
                loss = nn.functional.mse_loss(model(x.cuda()), y.cuda())
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
            """,
        "breakers-listed-first": """
            import torch
            import torch.nn as nn

            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.layer = nn.Linear(512, 512)

                def forward(self, x):
                    h = self.layer(x)
                    if torch.isnan(h).any():
                        raise ValueError("nan")
                    return h

            def main(loader):
                model = Net().to("cuda")  # expect: TPL703
                optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
                for x, y in loader:
                    loss = (model(x.cuda()) - y.cuda()).pow(2).mean()
                    loss.backward()
                    optimizer.step()
                    optimizer.zero_grad()
            """,
        "trainer-reads-the-loss-every-step": """
            import torch

            class Trainer:
                def __init__(self, model, loader):
                    self.model = model.to("cuda")  # expect: TPL703
                    self.optimizer = torch.optim.AdamW(self.model.parameters(), fused=True)
                    self.loader = loader

                def fit(self):
                    for x, y in self.loader:
                        loss = torch.nn.functional.cross_entropy(self.model(x.cuda()), y.cuda())
                        loss.backward()
                        self.optimizer.step()
                        self.optimizer.zero_grad()
                        print(f"loss {loss.item():.3f}")
            """,
    }
    GOOD = {
        "model-compiled": """
            import torch
            import torch.nn as nn

            model = torch.compile(nn.Linear(1024, 1024).cuda())
            optimizer = torch.optim.AdamW(model.parameters(), fused=True)
            for x, y in loader:
                nn.functional.mse_loss(model(x.cuda()), y.cuda()).backward()
                optimizer.step()
            """,
        "step-function-compiled": """
            import torch

            @torch.compile
            def train_step(model, x, y, optimizer):
                loss = torch.nn.functional.cross_entropy(model(x), y)
                loss.backward()
                optimizer.step()

            def main(model, loader, optimizer):
                model.cuda()
                for x, y in loader:
                    train_step(model, x.cuda(), y.cuda(), optimizer)
            """,
        "compile-option-decided-elsewhere": """
            import torch

            compile = False  # the author turned it off: a decision, not an oversight

            def main(model, loader, optimizer):
                model.cuda()
                if compile:
                    model = torch.compile(model)
                for x, y in loader:
                    model(x.cuda(), y.cuda()).backward()
                    optimizer.step()
            """,
        "accelerate-owns-the-step": """
            import torch
            from accelerate import Accelerator

            accelerator = Accelerator()

            def train(model, loader, optimizer):
                model, optimizer, loader = accelerator.prepare(model.cuda(), optimizer, loader)
                for x, y in loader:
                    accelerator.backward(model(x, y))
                    optimizer.step()
            """,
        "timing-helper-beside-an-optimizer-factory": """
            import time
            import torch

            def smart_optimizer(model, lr):
                return torch.optim.SGD(model.parameters(), lr=lr, fused=True)

            def profile(x, ops, n=10):
                for m in ops:
                    m = m.to("cuda")
                    for _ in range(n):
                        t0 = time.time()
                        m(x).sum().backward()
                        print(time.time() - t0)
            """,
        "cpu-only-script": """
            import torch

            def train(model, loader, optimizer):
                for x, y in loader:
                    model(x, y).backward()
                    optimizer.step()
            """,
    }

    def check_file(self, ctx: Context) -> Iterator[Report]:
        if ctx.is_test_file or not ctx.runs_on_cuda or not ctx.api("torch.compile").usable:
            return
        if ctx.entry.compiles is not None or ctx.compiled.decided:
            return
        calls = [c for c in ctx.nodes(cst.Call) if isinstance(c, cst.Call)]
        backward = next(
            (
                c
                for c in calls
                if isinstance(c.func, cst.Attribute)
                and c.func.attr.value == "backward"
                and runs_own_backward(c)
                and ctx.step_loop(c) is not None
            ),
            None,
        )
        if backward is None:
            return
        loop = ctx.step_loop(backward)
        assert loop is not None
        # the optimizer steps in the same loop (yolov5's `profile()` times backward() beside an
        # optimizer factory of the same file: no training step)
        around = ctx.hot.loops_around(backward)  # an outer loop steps after inner micro-steps (edm)
        if not any(
            steps_an_optimizer(c, ctx.is_optimizer_step)
            and any(a is b for a in ctx.ancestors(c) for b in around)
            for c in calls
        ):
            return
        model, at = self._model_move(loop, calls, ctx)
        yield self.report(
            at or backward,
            reason=ctx.hot_reason(backward),
            measured=_MEASURED,
            model=ctx.code(model) if model is not None else "model",
            breakers=self._breakers(ctx),
        )

    @staticmethod
    def _model_move(
        loop: cst.CSTNode, calls: list[cst.Call], ctx: Context
    ) -> tuple[Optional[cst.BaseExpression], Optional[cst.Call]]:
        """The model the step loop calls, and its move to the device (`model.cuda()`,
        `model = Net().to(device)`), when the file has one."""
        called = {
            ctx.code(c.func)
            for c in calls
            if isinstance(c.func, (cst.Name, cst.Attribute))
            and any(a is loop for a in ctx.ancestors(c))
            and not (isinstance(c.func, cst.Attribute) and c.func.attr.value in _MOVES)
        }
        for call in calls:
            func = call.func
            if not (isinstance(func, cst.Attribute) and func.attr.value in _MOVES) or any(
                a is loop for a in ctx.ancestors(call)
            ):
                continue
            if call.args and all(a.keyword is not None and a.keyword.value != "device" for a in call.args):
                continue  # `model.to(memory_format=...)`, `.to(dtype=...)`: not the move to the device
            receiver = func.value
            if isinstance(receiver, (cst.Name, cst.Attribute)) and ctx.code(receiver) in called:
                return receiver, call
            assign = ctx.parent(call)
            if isinstance(assign, cst.Assign) and len(assign.targets) == 1:
                target = assign.targets[0].target
                if isinstance(target, (cst.Name, cst.Attribute)) and ctx.code(target) in called:
                    return target, call
        return None, None

    @staticmethod
    def _breakers(ctx: Context) -> str:
        """The script's TPL105/TPL107 findings, with their lines: what breaks a compiled graph."""
        found: list[tuple[cst.CSTNode, str]] = []
        for rule in (SyncInForward(), SyncPerStep()):
            for kind in rule.node_types:
                for node in ctx.nodes(kind):
                    for report in rule.check(node, ctx):
                        if not report.note:
                            found.append((report.node, _described(report.node, ctx)))
        if not found:
            return ""
        lines = ctx.lines_of([node for node, _ in found])
        shown = sorted({(lines[node], what) for node, what in found if node in lines})
        listed = ", ".join(f"{what} (line {line})" for line, what in shown[:_SHOWN_BREAKERS])
        more = f" and {len(shown) - _SHOWN_BREAKERS} more" if len(shown) > _SHOWN_BREAKERS else ""
        return f"; first fix what breaks its graph: {listed}{more}"


def _described(node: cst.CSTNode, ctx: Context) -> str:
    if isinstance(node, cst.If):
        return "`if` on a tensor"
    if isinstance(node, cst.While):
        return "`while` on a tensor"
    if isinstance(node, cst.Call):
        return f"{ctx.code(node.func)}()"
    return type(node).__name__

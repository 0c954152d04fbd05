"""TPL307 model-moved-per-step: Model moved to the device at every step."""

from __future__ import annotations

from typing import Iterator, Optional

import libcst as cst

from ...engine.context import Context
from ...engine.findings import Report
from ...syntax.walker import Loop, dotted_name
from ..base import Rule
from .common import method_call

_MOVES = ("to", "cuda")
_HOST_MOVES = ("cpu",)


class ModelMovedPerStep(Rule):
    """## What it does
    Flags `model.to(device)`, `model = model.to(device)` and `model.cuda()` in the body of a step
    loop, where the model was built before the loop: the same move at every step. Module work in hot
    code, the family of TPL302.

    ## Why it is slow
    `Module.to` walks the whole module tree and every parameter and buffer at each call, even when
    they are already on the device (then no bytes move, but the walk and the per-tensor checks still
    run on the host). Measured on an H200 (torch 2.11): about 1 ms of host time per move for ResNet-50
    and a GPT-2-small-sized transformer, 0.93x and 1.01x per training step, invisible where the GPU is
    the bottleneck. It counts only in launch-bound loops of small models, so the rule is off by
    default.

    ## Fix safety
    No automatic fix: move the model once, before the loop (where the optimizer is built from its
    parameters).

    ## When it stays silent
    A model built, chosen or rebuilt inside the loop (`for model in models:`, one model per
    iteration); a model the loop also moves to the host (offloading between steps, or a checkpoint
    written from the host and the move back), and moves in periodic or other cold branches
    (`if step % 100 == 0:`); tensors (`x.to(device)` is TPL106's); moves outside step loops.
    """

    code = "TPL307"
    name = "model-moved-per-step"
    summary = "Model moved to the device at every step"
    message = (
        "{model}.{method}() walks every parameter of the model at every step of the loop, though it is "
        "already there; move it once, before the loop"
    )
    default_on = False  # about 1 ms per move on an H200: 0.93x-1.01x per step (RULES.md, TPL302)
    where = "step loop"
    node_types = (cst.Call,)
    benchmark = "TPL307"

    BAD = {
        "moved-in-the-step-loop": """
            import torch

            def train(model, loader, optimizer, criterion, device):
                model.train()
                for x, y in loader:
                    model.to(device)  # expect: TPL307
                    x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
                    optimizer.zero_grad()
                    criterion(model(x), y).backward()
                    optimizer.step()
            """,
        "reassigned-by-cuda": """
            import torch

            def fit(net, train_loader, optimizer, epochs):
                for epoch in range(epochs):
                    for images, labels in train_loader:
                        net = net.cuda()  # expect: TPL307
                        loss = torch.nn.functional.cross_entropy(net(images.cuda()), labels.cuda())
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
            """,
        "trainer-attribute": """
            import torch

            class Trainer:
                def __init__(self, model, train_loader, optimizer, device):
                    self.model = model
                    self.train_loader = train_loader
                    self.optimizer = optimizer
                    self.device = device

                def train_epoch(self):
                    for batch, target in self.train_loader:
                        self.model.to(self.device)  # expect: TPL307
                        out = self.model(batch.to(self.device))
                        torch.nn.functional.mse_loss(out, target.to(self.device)).backward()
                        self.optimizer.step()
            """,
    }
    GOOD = {
        "moved-once-before-the-loop": """
            import torch

            def train(model, loader, optimizer, criterion, device):
                model.to(device)
                for x, y in loader:
                    x = x.to(device, non_blocking=True)
                    y = y.to(device, non_blocking=True)
                    optimizer.zero_grad()
                    criterion(model(x), y).backward()
                    optimizer.step()
            """,
        "one-model-per-iteration": """
            import torch

            def compare(models_to_train, batch, target, device):
                for model in models_to_train:
                    model.to(device)
                    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
                    torch.nn.functional.mse_loss(model(batch), target).backward()
                    optimizer.step()
            """,
        "checkpoint-from-the-host": """
            import torch

            def train(transformer, loader, optimizer, device):
                for step, (x, _) in enumerate(loader):
                    transformer(x.to(device)).sum().backward()
                    optimizer.step()
                    if step % 500 == 0:
                        transformer.eval().cpu()
                        torch.save(transformer.state_dict(), "ckpt.pth")
                        transformer.to(device).train()
            """,
        "offloaded-between-steps": """
            import torch

            def train(model, loader, optimizer, device):
                for x, y in loader:
                    model.to(device)
                    torch.nn.functional.mse_loss(model(x.to(device)), y.to(device)).backward()
                    optimizer.step()
                    model.cpu()  # frees the device for something else between steps
            """,
    }

    def check(self, node: cst.Call, ctx: Context) -> Iterator[Report]:
        method = next((m for m in _MOVES if method_call(node, m) is not None), None)
        if method is None:
            return
        assert isinstance(node.func, cst.Attribute)
        receiver = node.func.value
        shown = dotted_name(receiver)
        loop = ctx.step_loop(node)
        if shown is None or loop is None or ctx.hot_reason(node) is None:
            return
        if not ctx.tensors.is_module_value(receiver) or ctx.is_tensor(receiver):
            return
        if self._bound_in(shown, node, loop, ctx) or self._moved_to_host(shown, loop, ctx):
            return
        yield self.report(node, reason=ctx.hot_reason(node), model=shown, method=method)

    @staticmethod
    def _bound_in(shown: str, move: cst.Call, loop: Loop, ctx: Context) -> bool:
        """The loop binds the model other than by moving it: a model per iteration."""
        if isinstance(loop, cst.For) and shown in _target_names(loop.target):
            return True
        for assign in ctx.nodes(cst.Assign):
            assert isinstance(assign, cst.Assign)
            if _moves_itself(assign, shown, move) or not any(a is loop for a in ctx.ancestors(assign)):
                continue
            if any(shown in _target_names(target.target) for target in assign.targets):
                return True
        return False

    @staticmethod
    def _moved_to_host(shown: str, loop: Loop, ctx: Context) -> bool:
        """The loop also moves the model to the host: the moves are the point (offloading)."""
        for method in _HOST_MOVES:
            for call in ctx.facts.method_calls.get(method, ()):
                assert isinstance(call.func, cst.Attribute)
                receiver = call.func.value
                while isinstance(receiver, cst.Call) and isinstance(receiver.func, cst.Attribute):
                    receiver = receiver.func.value  # `model.eval().cpu()`
                if dotted_name(receiver) == shown and any(a is loop for a in ctx.ancestors(call)):
                    return True
        return False


def _target_names(target: cst.BaseExpression) -> set[str]:
    if isinstance(target, (cst.Tuple, cst.List)):
        return {name for element in target.elements for name in _target_names(element.value)}
    shown = dotted_name(target)
    return {shown} if shown is not None else set()


def _moves_itself(assign: cst.Assign, shown: str, move: cst.Call) -> bool:
    """`model = model.to(device)`: the move under report, rebinding the same model."""
    value: Optional[cst.BaseExpression] = assign.value
    return value is move and all(dotted_name(t.target) == shown for t in assign.targets)

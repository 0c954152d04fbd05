"""TPL301 zero-grad-without-set-to-none: Gradients zero-filled instead of set to None."""

from __future__ import annotations

import re
from typing import Iterator, Optional, Union, cast

import libcst as cst

from ...analysis.hotpath import Reason
from ...analysis.torch_version import Declared, VersionReason
from ...engine.context import Context
from ...engine.edits import add_keyword, keyword
from ...engine.findings import Fix, Report, Safety
from ...syntax.walker import Loop, dotted_name
from ..base import Rule
from .common import is_name, is_number


def _statement_loops(node: cst.CSTNode, ctx: Context) -> Iterator[Loop]:
    """Loops of the same function whose body holds `node`, innermost first."""
    child: cst.CSTNode = node
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, (cst.FunctionDef, cst.Lambda)):
            return
        if isinstance(ancestor, (cst.For, cst.While)) and child is ancestor.body:
            yield ancestor
        child = ancestor


# -- TPL301 -------------------------------------------------------------------------------

_PARAMETER_METHODS = frozenset({"parameters", "named_parameters"})


def _iterates_parameters(expr: cst.BaseExpression) -> bool:
    """`model.parameters()`, `group["params"]`, `params`, `filter(f, model.parameters())`..."""
    if isinstance(expr, cst.Call):
        if isinstance(expr.func, cst.Attribute) and expr.func.attr.value in _PARAMETER_METHODS:
            return True
        return any(_iterates_parameters(arg.value) for arg in expr.args)
    if isinstance(expr, cst.Subscript):
        for element in expr.slice:
            index = element.slice
            if isinstance(index, cst.Index) and isinstance(index.value, cst.SimpleString):
                if index.value.evaluated_value == "params":
                    return True
        return False
    name = (dotted_name(expr) or "").rsplit(".", 1)[-1].lower()
    return "param" in name


def _parameter_loop(owner: cst.BaseExpression, node: cst.CSTNode, ctx: Context) -> Optional[cst.For]:
    """The loop over parameters whose target binds `owner` (the `p` of `p.grad`)."""
    if not isinstance(owner, cst.Name):
        return None
    for loop in _statement_loops(node, ctx):
        if isinstance(loop, cst.For) and _iterates_parameters(loop.iter):
            targets: list[cst.BaseExpression] = [loop.target] if isinstance(loop.target, cst.Name) else []
            if isinstance(loop.target, (cst.Tuple, cst.List)):
                targets = [e.value for e in loop.target.elements]
            if any(is_name(t, owner.value) for t in targets):
                return loop
    return None


def _deliberate_zeros(node: cst.CSTNode, ctx: Context) -> bool:
    """Under `if set_to_none:` or its `else:` (the code already offers the choice), or in the
    body of `if p.grad is None:` (a gradient being created, often as a view into a flat buffer)."""
    child: cst.CSTNode = node
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, (cst.FunctionDef, cst.Lambda)):
            return False
        if isinstance(ancestor, cst.If):
            test = ctx.code(ancestor.test)
            if "set_to_none" in test:
                return True
            if child is ancestor.body and re.search(r"\.grad is None\b", test):
                return True
        child = ancestor
    return False


def _feeds_a_step(node: cst.CSTNode, ctx: Context) -> bool:
    """The zeros are gradients created for an optimizer step the same function takes with no
    backward pass (torchtitan's `init_optim_state`: zero gradients and `lr=0`, then `step()`, to
    build the optimizer's state): `None` would leave the step nothing to do."""
    function = ctx.facts.enclosing_function(node)
    info = ctx.facts.functions.get(function) if function is not None else None
    if info is None:
        return False
    methods = [c.func.attr.value for c in info.calls if isinstance(c.func, cst.Attribute)]
    return "step" in methods and "backward" not in methods


def _runtime(declared: Declared) -> str:
    """`on torch 1.12` for a pin, `on torch older than 2.0` for a range."""
    oldest, below = declared.version, declared.below
    assert oldest is not None and below is not None
    if below == (oldest[0], oldest[1] + 1):
        return f"on torch {oldest[0]}.{oldest[1]}"
    return f"on torch older than {below[0]}.{below[1]}"


class ZeroGradWithoutSetToNone(Rule):
    """## What it does
    Flags gradient zeroing that writes zeros instead of dropping the gradient:
    `zero_grad(set_to_none=False)`; a plain `zero_grad()` when the code targets torch older than
    2.0, where `set_to_none` defaulted to False; and hand-written zeroing in a loop over
    parameters (`p.grad.zero_()`, `p.grad.data.zero_()`, `p.grad.fill_(0)`,
    `p.grad = torch.zeros_like(p)`). Any receiver counts (`optimizer`, `model`,
    `self.optimizers()`), but the method must be called `zero_grad`.

    A plain `zero_grad()` is flagged only where the runtime may be older than 2.0 and new enough
    to have `set_to_none` (1.7): `--torch-version` (or config `torch-version`) in that range, or
    an upper bound or pin in the linted project's own `torch` requirement (`pyproject.toml`,
    `setup.cfg`, `requirements*.txt` or a conda environment file of the nearest project root:
    `torch>=1.13,<2`, `torch==1.12.1`, conda's `pytorch=1.12.1`). A lower bound alone (`torch>=1.8`) is the oldest torch the project
    supports, not the one it runs on, which is then the newest; an upper bound above 2.0
    (`torch<2.6`, with or without a lower bound) lets the runtime be 2.5, which already drops
    the gradients. `--show-context` says which
    version was used and where it came from.

    ## Why it is slow
    Zero-filling launches a memset per parameter every step, and the next backward then reads
    and adds into those zeros instead of writing the gradient directly. Setting gradients to
    None skips both and frees their memory between steps. The measured effect on an H100 is in
    the Measured section below.

    ## Fix safety
    Unsafe: code that reads `.grad` after zeroing (gradient clipping, logging, a custom
    optimizer) sees None instead of a zero tensor. The fix passes `set_to_none=True` (replacing
    an explicit False) or turns manual zeroing into `p.grad = None`; none is written where the
    oldest torch the project supports predates `set_to_none` (1.7): the message says so.

    ## When it stays silent
    `zero_grad()` when the runtime is torch 2.0 or newer (the default is already None: a lower
    bound alone, an upper bound above 2.0) or older than 1.7 (no `set_to_none`);
    `set_to_none=` given a variable; methods that merely end in `zero_grad`; manual zeroing that
    is not in a loop over parameters, that already sits behind a `set_to_none` choice, or that
    follows `if p.grad is None:` (a gradient being created, e.g. as a view into a flat buffer);
    `p.grad = torch.zeros_like(p)` outside the training step (in an inference step, a generation
    or evaluation loop, too) and outside functions named for zeroing (`zero_grads`,
    `reset_gradients`): in `__init__` or setup it creates gradients; files that
    add into gradients in place (`p.grad += g`, an RPC parameter server), which need the zeros.
    """

    code = "TPL301"
    name = "zero-grad-without-set-to-none"
    summary = "Gradients zero-filled instead of set to None"
    message = "{what} writes zeros into every gradient{when}; {remedy}"
    fix_safety = Safety.UNSAFE
    where = "anywhere"
    node_types = (cst.Call, cst.Assign)
    benchmark = "TPL301"

    BAD = {
        "seed-explicit-false": """
            import torch

            def train(model, loader, optimizer, criterion):
                for images, labels in loader:
                    optimizer.zero_grad(set_to_none=False)  # expect: TPL301
                    loss = criterion(model(images), labels)
                    loss.backward()
                    optimizer.step()
            """,
        "manual-zeroing-loop": """
            import torch

            def clear_grads(model):
                for p in model.parameters():
                    if p.grad is not None:
                        p.grad.zero_()  # expect: TPL301
            """,
        "data-fill-and-zeros-like": """
            import torch

            def reset(optimizer):
                for group in optimizer.param_groups:
                    for p in group["params"]:
                        p.grad.data.fill_(0)  # expect: TPL301

            def zero_named_grads(model):
                for name, p in model.named_parameters():
                    p.grad = torch.zeros_like(p)  # expect: TPL301
            """,
        "lightning-positional-false": """
            import lightning as L
            import torch

            class Model(L.LightningModule):
                def training_step(self, batch, batch_idx):
                    opt = self.optimizers()
                    opt.zero_grad(False)  # expect: TPL301
                    loss = self.compute_loss(batch)
                    self.manual_backward(loss)
                    opt.step()
            """,
    }
    FIXED = {
        "seed-explicit-false": """
            import torch

            def train(model, loader, optimizer, criterion):
                for images, labels in loader:
                    optimizer.zero_grad(set_to_none=True)
                    loss = criterion(model(images), labels)
                    loss.backward()
                    optimizer.step()
            """,
        "manual-zeroing-loop": """
            import torch

            def clear_grads(model):
                for p in model.parameters():
                    if p.grad is not None:
                        p.grad = None
            """,
        "data-fill-and-zeros-like": """
            import torch

            def reset(optimizer):
                for group in optimizer.param_groups:
                    for p in group["params"]:
                        p.grad = None

            def zero_named_grads(model):
                for name, p in model.named_parameters():
                    p.grad = None
            """,
        "lightning-positional-false": """
            import lightning as L
            import torch

            class Model(L.LightningModule):
                def training_step(self, batch, batch_idx):
                    opt = self.optimizers()
                    opt.zero_grad(True)
                    loss = self.compute_loss(batch)
                    self.manual_backward(loss)
                    opt.step()
            """,
    }
    GOOD = {
        "plain-zero-grad-on-torch-2": """
            import torch

            def train(model, loader, optimizer):
                for x, y in loader:
                    optimizer.zero_grad()
                    model(x, y).backward()
                    optimizer.step()
            """,
        "set-to-none-true-or-variable": """
            import torch

            def train(model, loader, optimizer, keep_zeros):
                model.zero_grad(set_to_none=True)
                for x, y in loader:
                    optimizer.zero_grad(set_to_none=keep_zeros)
                    model(x, y).backward()
                    optimizer.step()
            """,
        "look-alike-methods": """
            import torch

            def train(model, loader, optimizer, tracker):
                for x, y in loader:
                    tracker.maybe_zero_grad(False)
                    optimizer.zero_grad_buffers(False)
                    model(x, y).backward()
                    optimizer.step()
            """,
        "zeroing-outside-parameter-loops": """
            import torch

            def accumulate(buffers, x):
                total = torch.empty(3)
                total.zero_()
                for b in buffers:
                    b.grad.zero_()
                return total + x
            """,
        "optimizer-implementing-set-to-none": """
            import torch

            class MyOptimizer(torch.optim.Optimizer):
                def zero_grad(self, set_to_none=True):
                    for group in self.param_groups:
                        for p in group["params"]:
                            if p.grad is not None:
                                if set_to_none:
                                    p.grad = None
                                else:
                                    p.grad.zero_()
            """,
        "zeros-kept-for-in-place-accumulation": """
            import torch

            class ParameterServer:
                def update(self, grads):
                    for p, g in zip(self.model.parameters(), grads):
                        p.grad += g
                    self.optimizer.step()
                    self.optimizer.zero_grad(set_to_none=False)
            """,
        "zero-gradients-for-a-state-building-step": """
            import torch

            def init_optimizer_state(optimizer, model):
                if optimizer.state:
                    return
                # zero gradients and lr=0, then one step: the optimizer builds its state
                for p in model.parameters():
                    p.grad = torch.zeros_like(p)
                for group in optimizer.param_groups:
                    group["lr"] = 0.0
                optimizer.step()

            def train(model, loader, optimizer):
                for x in loader:
                    init_optimizer_state(optimizer, model)
                    model(x).sum().backward()
                    optimizer.step()
            """,
        "materialising-missing-gradients": """
            import torch

            class Server:
                def __init__(self, model):
                    for p in model.parameters():
                        p.grad = torch.zeros_like(p)

            def init_grads(model, views):
                for i, p in enumerate(model.parameters()):
                    if p.grad is None:
                        p.grad = views[i]
                        p.grad.zero_()
            """,
    }

    def check(self, node: Union[cst.Call, cst.Assign], ctx: Context) -> Iterator[Report]:
        if isinstance(node, cst.Assign):
            yield from self._zeros_like(node, ctx)
            return
        if not isinstance(node.func, cst.Attribute):
            return
        method = node.func.attr.value
        if method == "zero_grad":
            yield from self._zero_grad(node, ctx)
        elif method in ("zero_", "fill_"):
            yield from self._zero_fill(node, ctx)

    def _zero_grad(self, call: cst.Call, ctx: Context) -> Iterator[Report]:
        if any(arg.star for arg in call.args):
            return
        given = keyword(call, "set_to_none")
        positional = [arg for arg in call.args if arg.keyword is None]
        if given is None and len(positional) == 1:
            given = positional[0]
        if given is not None:
            if is_name(given.value, "False") and not ctx.accumulates_into_grad:
                new = call.with_changes(
                    args=[a.with_changes(value=cst.Name("True")) if a is given else a for a in call.args]
                )
                yield self.report(
                    call,
                    reason=ctx.hot_reason(call),
                    fix=Fix.replace(call, new, Safety.UNSAFE, "pass set_to_none=True"),
                    what="zero_grad(set_to_none=False)",
                    when="",
                    remedy="pass set_to_none=True",
                )
            return
        if call.args:
            return
        declared = ctx.target_torch_version()
        set_to_none = ctx.api("zero_grad(set_to_none=)")
        # only where the runtime may be older than 2.0 (an upper bound or a pin) and new enough
        # to have set_to_none at all
        if not (declared.may_run_older_than((2, 0)) and set_to_none.usable):
            return
        if ctx.accumulates_into_grad:
            return
        fix = None
        remedy = "pass set_to_none=True"
        if set_to_none.writable:
            fix = Fix.replace(
                call,
                add_keyword(call, "set_to_none", cst.Name("True")),
                Safety.UNSAFE,
                "pass set_to_none=True",
            )
        else:
            remedy += f" ({set_to_none.needs()})"
        yield self.report(
            call,
            reason=cast(Reason, VersionReason(declared, ctx.hot_reason(call))),  # the runner only renders it
            fix=fix,
            what="zero_grad()",
            when=f" {_runtime(declared)} (set_to_none defaults to False before 2.0)",
            remedy=remedy,
        )

    def _zero_fill(self, call: cst.Call, ctx: Context) -> Iterator[Report]:
        assert isinstance(call.func, cst.Attribute)
        if call.func.attr.value == "fill_" and not (
            len(call.args) == 1 and call.args[0].keyword is None and is_number(call.args[0].value, 0)
        ):
            return
        if call.func.attr.value == "zero_" and call.args:
            return
        grad = call.func.value
        if isinstance(grad, cst.Attribute) and grad.attr.value == "data":
            grad = grad.value
        if not (isinstance(grad, cst.Attribute) and grad.attr.value == "grad"):
            return
        if _parameter_loop(grad.value, call, ctx) is None:
            return
        if _deliberate_zeros(call, ctx) or ctx.accumulates_into_grad or _feeds_a_step(call, ctx):
            return
        statement = ctx.parent(call)
        fix = None
        if isinstance(statement, cst.Expr):
            assign = cst.Assign(targets=[cst.AssignTarget(target=grad)], value=cst.Name("None"))
            fix = Fix.replace(statement, assign, Safety.UNSAFE, "set the gradient to None")
        owner = ctx.code(grad.value)
        yield self.report(
            call,
            reason=ctx.hot_reason(call),
            fix=fix,
            what=ctx.code(call),
            when="",
            remedy=f"set {owner}.grad = None",
        )

    @staticmethod
    def _zeroing_place(node: cst.CSTNode, ctx: Context) -> bool:
        """`p.grad = torch.zeros_like(p)` zeroes gradients in hot code or in a function named for
        it (`zero_grads`, `reset_gradients`); elsewhere (`__init__`, setup) it creates them. An
        inference step (generation, evaluation) is not the training step this rule is about."""
        reason = ctx.hot_reason(node)
        if reason is not None and not reason.inference_only:
            return True
        function = ctx.enclosing_function(node)
        name = function.name.value.lower() if function is not None else ""
        return name != "__init__" and any(word in name for word in ("zero", "clear", "reset"))

    def _zeros_like(self, node: cst.Assign, ctx: Context) -> Iterator[Report]:
        if len(node.targets) != 1 or not isinstance(node.value, cst.Call):
            return
        target = node.targets[0].target
        if not (isinstance(target, cst.Attribute) and target.attr.value == "grad"):
            return
        if ctx.qualified_name(node.value) != "torch.zeros_like":
            return
        if _parameter_loop(target.value, node, ctx) is None:
            return
        if not self._zeroing_place(node, ctx) or _deliberate_zeros(node, ctx) or ctx.accumulates_into_grad:
            return
        if _feeds_a_step(node, ctx):
            return
        owner = ctx.code(target.value)
        fix = Fix.replace(node.value, cst.Name("None"), Safety.UNSAFE, "set the gradient to None")
        yield self.report(
            node,
            reason=ctx.hot_reason(node),
            fix=fix,
            what=f"{owner}.grad = torch.zeros_like(...)",
            when="",
            remedy=f"set {owner}.grad = None",
        )

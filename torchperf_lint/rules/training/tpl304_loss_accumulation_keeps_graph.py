"""TPL304 loss-accumulation-keeps-graph: Loss accumulated across steps with its autograd graph."""

from __future__ import annotations

import re
import sys
from typing import Iterator, Optional, Union

import libcst as cst

from ...engine.context import Context
from ...engine.findings import Fix, Report, Safety
from ...syntax.walker import Loop, dotted_name, returned_values, unpacked_position
from ..base import Rule
from .common import LOSS_NAME, is_name, method_call, without_parens

# -- TPL304 -------------------------------------------------------------------------------

# Methods whose result carries the receiver's autograd graph.
_GRAPH_METHODS = frozenset(
    """sum mean float double half bfloat16 to cuda cpu clone squeeze unsqueeze view reshape mul add
    div sub pow abs contiguous flatten exp log sqrt neg prod""".split()
)
_DETACHING_ATTRIBUTES = frozenset({"data", "grad", "shape", "dtype", "device", "requires_grad", "ndim"})
_CONDITIONAL = (cst.If, cst.Else, cst.For, cst.While, cst.ExceptHandler)


class LossAccumulationKeepsGraph(Rule):
    """## What it does
    Flags `total += loss`, `total = total + loss`, `losses.append(loss)` (or `.extend([loss])`,
    `.insert(i, loss)`) and `per_step[i] = loss` in a step loop, and the same on a `self` attribute in
    Lightning's `training_step`, which outlives the call (`self.step_losses.append(loss)`, reduced at
    epoch end), when `loss` is attached to the autograd graph: the result of a model, criterion or
    loss-function call (or arithmetic on one), or of a helper of the file that returns one whatever
    it is called, not of `.item()` or `.detach()`.

    ## Why it is slow
    The accumulator lives outside the loop, so it keeps a reference to every step's graph: its
    nodes and, until `.backward()` frees them, the activations they saved. Memory grows with
    every step until the epoch ends or the process runs out of memory, and the allocator works
    ever harder to find room. It is the PyTorch FAQ's first advice on running out of memory.

    ## Fix safety
    Unsafe: the fix accumulates `loss.detach()`, and code that later calls `.backward()` on the
    accumulator (in another function) would no longer reach the model. `loss.item()` works too,
    at the price of a device sync per step.

    ## When it stays silent
    Inside `torch.no_grad()`/`torch.inference_mode()`; `.item()`, `.detach()`, `.data` and
    `float()` values; gradient accumulation, where the sum is back-propagated in the same function
    (`total = total + loss` then `total.backward()`); and within-step sums, where the accumulator
    is reset in the loop body every iteration (`loss = criterion(...)`, then `loss += aux`), or bound
    afresh earlier in the same iteration on every path to the sum (a branch that starts the loss and
    adds its terms); sums that the same function later turns into NumPy (`mu.cpu().numpy()`),
    which raises on a tensor that requires grad: as the code runs, they carry no graph (a frozen
    feature network's statistics); outputs of a module whose every parameter the file freezes and
    never unfreezes (`net.requires_grad_(False)`, `Net().eval().requires_grad_(False)`, or each
    `p` of `net.parameters()`: a frozen network used as a metric). A `.detach()` before `.numpy()` proves nothing and keeps the
    finding. A store under a literal key (`logs["loss"] = loss` holds one step at a time), into a
    tensor buffer, in the evaluation hooks (Lightning runs them without grad) or into a list
    `training_step` starts afresh; a `self` list that a method back-propagates later (a pipeline
    schedule holding each micro-batch's loss); a helper's returned tuple.
    """

    code = "TPL304"
    name = "loss-accumulation-keeps-graph"
    summary = "Loss accumulated across steps with its autograd graph"
    message = (
        "{accumulator} collects {value} with its autograd graph, so every step's graph stays alive; "
        "use {fixed}"
    )
    default_on = False  # below the real-code precision bar (evidence.py, precision.json)
    fix_safety = Safety.UNSAFE
    where = "step loop"
    node_types = (cst.AugAssign, cst.Assign, cst.Call)
    benchmark = "TPL304"

    BAD = {
        "faq-running-total": """
            import torch

            def train(model, loader, optimizer, criterion):
                total_loss = 0
                for x, y in loader:
                    optimizer.zero_grad()
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    total_loss += loss  # expect: TPL304
                return total_loss / len(loader)
            """,
        "detached-before-numpy": """
            import torch

            def feature_stats(net, loader):
                mu = torch.zeros(512, device="cuda")
                for images, _ in loader:
                    mu += net(images.cuda()).sum(0)  # expect: TPL304
                return mu.detach().cpu().numpy()
            """,
        "some-parameters-frozen": """
            import torch

            def score(net, loader):
                for name, p in net.named_parameters():
                    if "head" not in name:
                        p.requires_grad = False
                total = 0.0
                for x, y in loader:
                    total += net(x).mean()  # expect: TPL304
                return total
            """,
        "list-of-losses": """
            import torch
            import torch.nn.functional as F

            def train(model, train_loader, optimizer):
                history = []
                for x, y in train_loader:
                    loss = F.cross_entropy(model(x), y)
                    loss.backward()
                    optimizer.step()
                    history.append(loss)  # expect: TPL304
                return history
            """,
        "weighted-sum-by-assignment": """
            import torch

            def train(net, loader, optimizer, criterion):
                epoch_loss = 0.0
                for x, y in loader:
                    out = net(x)
                    loss = criterion(out, y)
                    loss.backward()
                    optimizer.step()
                    epoch_loss = epoch_loss + loss * x.size(0)  # expect: TPL304
                return epoch_loss
            """,
        "first-element-of-a-loss-tuple": """
            import torch

            def train(policy, loader, optimizer, loss_fn):
                total = 0.0
                for chosen_ids, rejected_ids in loader:
                    loss, chosen_rewards, rejected_rewards = loss_fn(policy(chosen_ids), policy(rejected_ids))
                    loss.backward()
                    optimizer.step()
                    total += loss  # expect: TPL304
                return total
            """,
        "second-output-of-a-model": """
            import torch

            def train(model, loader, optimizer, criterion):
                aux_total = 0.0
                for x, y in loader:
                    out, aux = model(x)
                    loss = criterion(out, y)
                    loss.backward()
                    optimizer.step()
                    aux_total += aux.mean()  # expect: TPL304
                return aux_total
            """,
        "later-loss-of-a-helper-tuple": """
            import torch

            class Distiller:
                def loss_step(self, batch):
                    logits = self.student(batch)
                    class_loss = self.loss_fn(logits, batch)
                    kd_loss = self.kd_loss_fn(logits, self.teacher(batch))
                    return class_loss, kd_loss

                def train(self, loader):
                    running_kd = 0
                    for batch in loader:
                        class_loss, kd_loss = self.loss_step(batch)
                        (class_loss + kd_loss).backward()
                        self.optimizer.step()
                        running_kd += kd_loss * 0.5  # expect: TPL304
            """,
        "stored-under-the-step-index": """
            import torch

            def train(model, loader, optimizer, criterion):
                per_step = {}
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    per_step[step] = loss  # expect: TPL304
                return per_step
            """,
        "kept-on-self-across-training-steps": """
            import torch
            import torch.nn.functional as F
            import lightning as L

            class Classifier(L.LightningModule):
                def __init__(self, net):
                    super().__init__()
                    self.net = net
                    self.step_losses = []

                def training_step(self, batch, batch_idx):
                    x, y = batch
                    loss = F.cross_entropy(self.net(x), y)
                    self.step_losses.append(loss)  # expect: TPL304
                    return loss

                def on_train_epoch_end(self):
                    self.log("epoch_loss", torch.stack(self.step_losses).mean())
                    self.step_losses.clear()
            """,
        "returned-by-a-helper": """
            import torch

            def forward_and_score(net, batch, target, criterion):
                return criterion(net(batch), target)

            def train(net, loader, optimizer, criterion):
                scores = []
                for x, y in loader:
                    optimizer.zero_grad()
                    score = forward_and_score(net, x, y, criterion)
                    score.backward()
                    optimizer.step()
                    scores.append(score)  # expect: TPL304
                return scores
            """,
        "summed-in-one-branch-kept-across-steps": """
            import torch

            def train(model, loader, optimizer, criterion, cosub):
                total = 0.0
                for x, y in loader:
                    out = model(x)
                    if cosub:
                        total = 0.0
                    loss = criterion(out, y)
                    loss.backward()
                    optimizer.step()
                    total = total + loss  # expect: TPL304
                return total
            """,
    }
    FIXED = {
        "first-element-of-a-loss-tuple": """
            import torch

            def train(policy, loader, optimizer, loss_fn):
                total = 0.0
                for chosen_ids, rejected_ids in loader:
                    loss, chosen_rewards, rejected_rewards = loss_fn(policy(chosen_ids), policy(rejected_ids))
                    loss.backward()
                    optimizer.step()
                    total += loss.detach()
                return total
            """,
        "second-output-of-a-model": """
            import torch

            def train(model, loader, optimizer, criterion):
                aux_total = 0.0
                for x, y in loader:
                    out, aux = model(x)
                    loss = criterion(out, y)
                    loss.backward()
                    optimizer.step()
                    aux_total += aux.mean().detach()
                return aux_total
            """,
        "later-loss-of-a-helper-tuple": """
            import torch

            class Distiller:
                def loss_step(self, batch):
                    logits = self.student(batch)
                    class_loss = self.loss_fn(logits, batch)
                    kd_loss = self.kd_loss_fn(logits, self.teacher(batch))
                    return class_loss, kd_loss

                def train(self, loader):
                    running_kd = 0
                    for batch in loader:
                        class_loss, kd_loss = self.loss_step(batch)
                        (class_loss + kd_loss).backward()
                        self.optimizer.step()
                        running_kd += kd_loss.detach() * 0.5
            """,
        "stored-under-the-step-index": """
            import torch

            def train(model, loader, optimizer, criterion):
                per_step = {}
                for step, (x, y) in enumerate(loader):
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    per_step[step] = loss.detach()
                return per_step
            """,
        "kept-on-self-across-training-steps": """
            import torch
            import torch.nn.functional as F
            import lightning as L

            class Classifier(L.LightningModule):
                def __init__(self, net):
                    super().__init__()
                    self.net = net
                    self.step_losses = []

                def training_step(self, batch, batch_idx):
                    x, y = batch
                    loss = F.cross_entropy(self.net(x), y)
                    self.step_losses.append(loss.detach())
                    return loss

                def on_train_epoch_end(self):
                    self.log("epoch_loss", torch.stack(self.step_losses).mean())
                    self.step_losses.clear()
            """,
        "returned-by-a-helper": """
            import torch

            def forward_and_score(net, batch, target, criterion):
                return criterion(net(batch), target)

            def train(net, loader, optimizer, criterion):
                scores = []
                for x, y in loader:
                    optimizer.zero_grad()
                    score = forward_and_score(net, x, y, criterion)
                    score.backward()
                    optimizer.step()
                    scores.append(score.detach())
                return scores
            """,
        "faq-running-total": """
            import torch

            def train(model, loader, optimizer, criterion):
                total_loss = 0
                for x, y in loader:
                    optimizer.zero_grad()
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    total_loss += loss.detach()
                return total_loss / len(loader)
            """,
        "list-of-losses": """
            import torch
            import torch.nn.functional as F

            def train(model, train_loader, optimizer):
                history = []
                for x, y in train_loader:
                    loss = F.cross_entropy(model(x), y)
                    loss.backward()
                    optimizer.step()
                    history.append(loss.detach())
                return history
            """,
        "weighted-sum-by-assignment": """
            import torch

            def train(net, loader, optimizer, criterion):
                epoch_loss = 0.0
                for x, y in loader:
                    out = net(x)
                    loss = criterion(out, y)
                    loss.backward()
                    optimizer.step()
                    epoch_loss = epoch_loss + loss.detach() * x.size(0)
                return epoch_loss
            """,
        "summed-in-one-branch-kept-across-steps": """
            import torch

            def train(model, loader, optimizer, criterion, cosub):
                total = 0.0
                for x, y in loader:
                    out = model(x)
                    if cosub:
                        total = 0.0
                    loss = criterion(out, y)
                    loss.backward()
                    optimizer.step()
                    total = total + loss.detach()
                return total
            """,
    }
    GOOD = {
        "rewards-reported-beside-the-loss": """
            import torch

            def train(policy, loader, optimizer, loss_fn):
                running = {"chosen": 0.0, "rejected": 0.0}
                for chosen_ids, rejected_ids in loader:
                    loss, chosen_rewards, rejected_rewards = loss_fn(policy(chosen_ids), policy(rejected_ids))
                    loss.backward()
                    optimizer.step()
                    running["chosen"] += chosen_rewards.mean()  # a loss's later outputs: unknown
                    running["rejected"] += rejected_rewards.mean()
                return running
            """,
        "embedded-without-grad-in-a-helper": """
            import torch
            import torch.nn.functional as F

            class Embedder:
                def embed(self, x):
                    with torch.no_grad():
                        emb = self.trunk(x)
                    return F.normalize(emb, dim=1)

                def embed_all(self, loader):
                    embeddings = []
                    for x, _ in loader:
                        embeddings.append(self.embed(x))  # computed without grad
                    return torch.cat(embeddings)
            """,
        "frozen-metric-network": """
            import torch

            class Trainer:
                def __init__(self, model, feature_net):
                    self.model = model
                    self.lpips_net = feature_net.eval().requires_grad_(False)

                def score(self, loader):
                    total = 0.0
                    for x, y in loader:
                        total += self.lpips_net(self.model(x).detach(), y).mean()
                    return total
            """,
        "statistics-returned-as-numpy": """
            import torch

            def feature_stats(detector_net, loader, dim=2048):
                mu = torch.zeros([dim], dtype=torch.float64, device="cuda")
                for images, _ in loader:
                    features = detector_net(images.cuda()).to(torch.float64)
                    mu += features.sum(0)  # numpy() below would raise on a graph
                return mu.cpu().numpy()
            """,
        "item-and-detach": """
            import torch

            def train(model, loader, optimizer, criterion):
                total, history = 0.0, []
                for x, y in loader:
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    total += loss.item()
                    history.append(loss.detach())
                return total, history
            """,
        "gradient-accumulation": """
            import torch

            def train(model, loader, optimizer, criterion, accum=4):
                total = 0
                for i, (x, y) in enumerate(loader):
                    total = total + criterion(model(x), y) / accum
                    if (i + 1) % accum == 0:
                        total.backward()
                        optimizer.step()
                        total = 0
            """,
        "within-step-sum": """
            import torch

            def train(model, loader, optimizer, criterion):
                for x, y in loader:
                    out, aux = model(x)
                    loss = criterion(out, y)
                    loss += 0.1 * criterion(aux, y)
                    parts = []
                    parts.append(loss)
                    loss.backward()
                    optimizer.step()
            """,
        "within-step-sum-in-one-branch": """
            import torch

            def train(model, loader, optimizer, criterion, loss_scaler, cosub):
                for x, y in loader:
                    out = model(x)
                    if not cosub:
                        loss = criterion(out, y)
                    else:
                        a, b = out.chunk(2)
                        loss = 0.5 * criterion(a, y)
                        loss = loss + 0.5 * criterion(b, y)
                    loss_scaler(loss, optimizer)  # scales, back-propagates and steps
            """,
        "under-no-grad": """
            import torch

            @torch.no_grad()
            def evaluate(model, val_loader, criterion):
                total = 0
                for x, y in val_loader:
                    total += criterion(model(x), y)
                return total

            def validate(model, val_loader, criterion):
                losses = []
                with torch.inference_mode():
                    for x, y in val_loader:
                        losses.append(criterion(model(x), y))
                return losses
            """,
        "logged-under-a-fixed-key": """
            import torch

            def train(model, loader, optimizer, criterion, logs):
                for x, y in loader:
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
                    logs["loss"] = loss  # one step's value at a time: no growth
            """,
        "chunks-written-into-a-tensor": """
            import torch

            def train(model, loader, optimizer, criterion, chunks=4):
                per_chunk = torch.zeros(chunks, device="cuda")
                for x, y in loader:
                    for i, (xc, yc) in enumerate(zip(x.chunk(chunks), y.chunk(chunks))):
                        per_chunk[i] = criterion(model(xc), yc)
                    per_chunk.mean().backward()
                    optimizer.step()
            """,
        "helper-returns-a-number": """
            import torch

            def step(net, batch, target, criterion, optimizer):
                loss = criterion(net(batch), target)
                loss.backward()
                optimizer.step()
                return loss.item()

            def train(net, loader, optimizer, criterion):
                history = []
                for x, y in loader:
                    history.append(step(net, x, y, criterion, optimizer))
                return history
            """,
        "hooks-that-keep-no-graph": """
            import torch
            import torch.nn.functional as F
            import lightning as L

            class Classifier(L.LightningModule):
                def training_step(self, batch, batch_idx):
                    x, y = batch
                    self.parts = []  # started afresh at every step
                    loss = F.cross_entropy(self.net(x), y)
                    self.parts.append(loss)
                    return loss

                def validation_step(self, batch, batch_idx):
                    x, y = batch
                    self.val_losses.append(F.cross_entropy(self.net(x), y))  # Lightning runs it without grad
            """,
        "accumulated-outside-a-step-loop": """
            import torch

            def ensemble(models, x):
                total = 0
                for model in models:
                    total += model(x)
                return total
            """,
    }

    def check(self, node: Union[cst.AugAssign, cst.Assign, cst.Call], ctx: Context) -> Iterator[Report]:
        found = self._accumulation(node)
        if found is None:
            return
        accumulator, value = found
        loop = ctx.step_loop(node)
        kept_on_self = loop is None and self._kept_across_training_steps(accumulator, node, ctx)
        if loop is None and not kept_on_self:
            return
        if isinstance(node, cst.Assign) and self._holds_a_tensor(accumulator, ctx):
            return  # a buffer written in place has one size, whatever the steps (a chunked loss)
        before = ctx.facts.order.get(node, 0)
        if not self._attached(value, before, ctx, 0):
            return
        if ctx.grad_disabled(node):
            return
        if loop is not None and (
            self._reset_each_step(accumulator, node, loop, ctx)
            or self._started_this_step(accumulator, node, loop, ctx)
        ):
            return
        if self._backpropagated(accumulator, node, ctx, across_methods=kept_on_self):
            return
        if ctx.grad_mode.converted_to_numpy_after(accumulator, node) is not None:
            return  # numpy() would raise on a graph: the summed values carry none
        fixed = self._detached(value, before, ctx)
        shown = ctx.code(without_parens(value))
        if len(shown) <= 30:
            operation = isinstance(without_parens(value), (cst.BinaryOperation, cst.UnaryOperation))
            remedy = f"{ctx.code(fixed)} or {f'({shown})' if operation else shown}.item()"
        else:
            shown, remedy = "the loss", "loss.detach() or loss.item()"
        yield self.report(
            node,
            reason=ctx.hot_reason(node),
            fix=Fix.replace(value, fixed, Safety.UNSAFE, "accumulate a detached value"),
            accumulator=ctx.code(accumulator),
            value=shown,
            fixed=remedy,
        )

    @staticmethod
    def _accumulation(
        node: Union[cst.AugAssign, cst.Assign, cst.Call],
    ) -> Optional[tuple[cst.BaseExpression, cst.BaseExpression]]:
        """(accumulator, accumulated value) of `acc += v`, `acc = acc + v`, `acc.append(v)`."""
        if isinstance(node, cst.AugAssign):
            return (node.target, node.value) if isinstance(node.operator, cst.AddAssign) else None
        if isinstance(node, cst.Assign):
            if len(node.targets) != 1:
                return None
            stored = LossAccumulationKeepsGraph._stored_by_key(node.targets[0].target)
            if stored is not None:
                return stored, node.value
            if not isinstance(node.value, cst.BinaryOperation):
                return None
            target, value = node.targets[0].target, node.value
            if not isinstance(value.operator, cst.Add) or not isinstance(target, (cst.Name, cst.Attribute)):
                return None
            target_text = dotted_name(target)
            if dotted_name(without_parens(value.left)) == target_text:
                return target, value.right
            if dotted_name(without_parens(value.right)) == target_text:
                return target, value.left
            return None
        for method, position in (("append", 0), ("extend", 0), ("insert", 1)):
            call = method_call(node, method)
            if call is None:
                continue
            if len(call.args) != position + 1 or any(a.keyword is not None or a.star for a in call.args):
                return None
            assert isinstance(call.func, cst.Attribute)
            added = call.args[position].value
            if method == "extend":
                # `losses.extend([loss])`: the one element of a display; a name may hold anything
                if not isinstance(added, (cst.List, cst.Tuple)) or len(added.elements) != 1:
                    return None
                element = added.elements[0]
                if isinstance(element, cst.StarredElement):
                    return None
                added = element.value
            return call.func.value, added
        return None

    @staticmethod
    def _stored_by_key(target: cst.BaseExpression) -> Optional[cst.BaseExpression]:
        """The container of `cache[i] = v` whose key changes from step to step: a literal key
        (`logs["loss"] = loss`) holds one step's value at a time, which is no growth."""
        if not isinstance(target, cst.Subscript) or len(target.slice) != 1:
            return None
        index = target.slice[0].slice
        if not isinstance(index, cst.Index) or isinstance(
            index.value, (cst.SimpleString, cst.ConcatenatedString, cst.Integer, cst.Float)
        ):
            return None
        container = target.value
        return container if isinstance(container, (cst.Name, cst.Attribute)) else None

    def _attached(self, expr: cst.BaseExpression, before: int, ctx: Context, depth: int) -> bool:
        """`expr` carries a graph: a model, criterion or loss call, or arithmetic on one."""
        if depth > 8:
            return False
        if isinstance(expr, cst.Name):
            bindings = [b for b in ctx.bindings(expr.value, expr) if b.order < before]
            if not bindings:
                return False
            last = bindings[-1]
            if ctx.grad_mode.disabled_by(last.node) is not None:
                return False  # computed without grad: no graph to keep
            if last.kind == "unpack" and isinstance(last.node, cst.Call):
                position = unpacked_position(last.node, expr.value, ctx.facts.parents)
                if position is not None and position[0] > 0:
                    return self._attached_call(last.node, last.order, ctx, depth + 1, position)
            if last.kind in ("assign", "unpack") and isinstance(last.node, cst.BaseExpression):
                return self._attached(last.node, last.order, ctx, depth + 1)
            if last.kind == "augassign" and isinstance(last.node, cst.AugAssign):
                return self._attached(last.node.value, last.order, ctx, depth + 1)
            return False
        if isinstance(expr, cst.Call):
            return self._attached_call(expr, before, ctx, depth)
        if isinstance(expr, cst.BinaryOperation):
            return self._attached(expr.left, before, ctx, depth + 1) or self._attached(
                expr.right, before, ctx, depth + 1
            )
        if isinstance(expr, cst.UnaryOperation):
            return self._attached(expr.expression, before, ctx, depth + 1)
        if isinstance(expr, cst.Attribute):
            if expr.attr.value in _DETACHING_ATTRIBUTES or is_name(expr.value, "self"):
                return False
            return self._attached(expr.value, before, ctx, depth + 1)
        if isinstance(expr, cst.Subscript):
            return self._attached(expr.value, before, ctx, depth + 1)
        return False

    def _attached_call(
        self,
        call: cst.Call,
        before: int,
        ctx: Context,
        depth: int,
        position: Optional[tuple[int, int]] = None,
    ) -> bool:
        """`position`: the value is a later element (index, arity) of the tuple the call returns
        (`loss, chosen, rejected = loss_fn(...)`). A helper of the file answers by what it returns
        there. Otherwise a loss callable's first element is its loss and the others are what it
        reports beside it, as often detached (DPO rewards, YOLO's loss items) as not: unknown, so
        the name says nothing of them. A model's outputs all carry its graph."""
        qualified = ctx.qualified_name(call)
        if qualified is not None:
            if qualified.startswith("torch.nn.functional.") or (
                qualified.startswith("torch.") and "." not in qualified[len("torch.") :]
            ):
                return any(self._attached(a.value, before, ctx, depth + 1) for a in call.args)
            return False
        func = call.func
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            if method in _GRAPH_METHODS:
                return self._attached(func.value, before, ctx, depth + 1)
            if method in ("item", "detach", "tolist", "numpy", "detach_"):
                return False
        if ctx.grad_mode.frozen(func) is not None:
            return False  # every parameter frozen: its outputs carry no graph
        last = (dotted_name(func) or "").rsplit(".", 1)[-1]
        if position is not None and ctx.hot.resolve_call(call):
            return self._returns_attached(call, ctx, depth, position)
        if LOSS_NAME.search(last):
            return position is None  # a loss module's later outputs as well
        if ctx.tensors.is_module_value(func):
            return True
        return self._returns_attached(call, ctx, depth)

    def _returns_attached(
        self, call: cst.Call, ctx: Context, depth: int, position: Optional[tuple[int, int]] = None
    ) -> bool:
        """A helper of this file whose own return is attached (`def compute(...): return
        criterion(...)`), whatever it is called: what it returns says so, not its name. Of a tuple
        returned, the element the caller unpacks at `position` (`return loss, kd_loss`); a tuple
        kept whole is not read."""
        for function in ctx.hot.resolve_call(call):
            values, yields = returned_values(function)
            if yields:
                continue
            for value in values:
                if isinstance(value, cst.Tuple):
                    if position is None or len(value.elements) != position[1]:
                        continue
                    element = value.elements[position[0]]
                    if isinstance(element, cst.StarredElement):
                        continue
                    value = element.value
                # a name has no walk position of its own: read its last binding in the helper
                before = ctx.facts.order.get(value, sys.maxsize)
                if self._attached(value, before, ctx, depth + 1):
                    return True
        return False

    def _detached(self, expr: cst.BaseExpression, before: int, ctx: Context) -> cst.BaseExpression:
        """`expr` with its graph-carrying operands detached: `loss * n` -> `loss.detach() * n`."""
        if isinstance(expr, cst.BinaryOperation) and not expr.lpar:
            return expr.with_changes(
                left=self._detached(expr.left, before, ctx)
                if self._attached(expr.left, before, ctx, 0)
                else expr.left,
                right=(
                    self._detached(expr.right, before, ctx)
                    if self._attached(expr.right, before, ctx, 0)
                    else expr.right
                ),
            )
        receiver = expr
        if isinstance(expr, (cst.BinaryOperation, cst.UnaryOperation)) and not expr.lpar:
            receiver = expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        return cst.Call(func=cst.Attribute(value=receiver, attr=cst.Name("detach")))

    @staticmethod
    def _reset_each_step(
        accumulator: cst.BaseExpression, node: cst.CSTNode, loop: Loop, ctx: Context
    ) -> bool:
        """A plain assignment to the accumulator in the loop body that runs every iteration."""
        text = ctx.code(accumulator)
        for assign in ctx.nodes(cst.Assign):
            if assign is node:
                continue
            assert isinstance(assign, cst.Assign)
            targets: list[cst.BaseExpression] = []
            for target in assign.targets:
                if isinstance(target.target, (cst.Tuple, cst.List)):
                    targets.extend(e.value for e in target.target.elements)
                else:
                    targets.append(target.target)
            if not any(ctx.code(t) == text for t in targets):
                continue
            for ancestor in ctx.ancestors(assign):
                if ancestor is loop:
                    return True
                if isinstance(ancestor, _CONDITIONAL) or isinstance(ancestor, (cst.FunctionDef, cst.Lambda)):
                    break
        return False

    @staticmethod
    def _started_this_step(
        accumulator: cst.BaseExpression, node: cst.CSTNode, loop: Loop, ctx: Context
    ) -> bool:
        """The sum reads an accumulator this iteration already bound afresh (a branch that
        starts `loss = 0.25 * criterion(a, y)` and adds three terms): a within-step sum."""
        while isinstance(accumulator, cst.Subscript):
            accumulator = accumulator.value
        key = dotted_name(accumulator)
        return key is not None and ctx.loop_facts(loop).bound_afresh(key, node)

    @staticmethod
    def _backpropagated(
        accumulator: cst.BaseExpression, node: cst.CSTNode, ctx: Context, across_methods: bool = False
    ) -> bool:
        """`.backward()` (or `autograd.grad`) reaches the accumulator in the same function; for one
        kept on `self` across steps, in any function that reads it (a schedule that holds each
        micro-batch's loss and back-propagates it later)."""
        function = ctx.enclosing_function(node)
        word = re.compile(r"(?<![\w.])" + re.escape(ctx.code(accumulator)) + r"(?!\w)")
        for method in ("backward", "manual_backward", "grad"):
            for call in ctx.facts.method_calls.get(method, ()):
                holder = ctx.enclosing_function(call)
                if not across_methods and holder is function and word.search(ctx.code(call)):
                    return True
                if across_methods and holder is not None and word.search(ctx.code(holder)):
                    return True
        return False

    @staticmethod
    def _kept_across_training_steps(accumulator: cst.BaseExpression, node: cst.CSTNode, ctx: Context) -> bool:
        """`self.step_losses.append(loss)` in `training_step`: the attribute outlives the call, so it
        gathers one graph per step until something reduces it (Lightning's epoch-end hooks). The
        evaluation hooks run without grad, and a list the hook starts afresh holds one step."""
        function = ctx.enclosing_function(node)
        if function is None or function.name.value != "training_step":
            return False
        if not (isinstance(accumulator, cst.Attribute) and is_name(accumulator.value, "self")):
            return False
        text = ctx.code(accumulator)
        before = ctx.facts.order.get(node, 0)
        for assign in ctx.nodes(cst.Assign):
            assert isinstance(assign, cst.Assign)
            if ctx.enclosing_function(assign) is function and ctx.facts.order.get(assign, 0) < before:
                if any(ctx.code(target.target) == text for target in assign.targets):
                    return False
        return True

    @staticmethod
    def _holds_a_tensor(accumulator: cst.BaseExpression, ctx: Context) -> bool:
        """A subscript store into a tensor (`per_sample[i] = loss`), not into a list or dict."""
        return ctx.is_tensor(accumulator, certain=True)

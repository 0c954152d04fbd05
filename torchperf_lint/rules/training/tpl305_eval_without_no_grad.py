"""TPL305 eval-without-no-grad: Evaluation loop without torch.no_grad()."""

from __future__ import annotations

import dataclasses
from typing import Callable, Iterator, Optional, Union, cast

import libcst as cst

from ...analysis.hotpath import STEP_HOOKS, Reason
from ...engine.context import Context
from ...engine.findings import Report
from ...syntax.walker import dotted_name
from ..base import Rule
from .common import LOSS_NAME, is_name

# -- TPL305 -------------------------------------------------------------------------------

_EVAL_WORDS = frozenset(
    {
        "eval",
        "evaluate",
        "evaluation",
        "validate",
        "validation",
        "val",
        "test",
        "predict",
        "prediction",
        "inference",
        "infer",
    }
)


_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)
_COMPREHENSION_TYPES = frozenset(_COMPREHENSIONS)
_EvalLoop = Union[cst.For, cst.While, cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp]


@dataclasses.dataclass(frozen=True)
class _EvalLoopReason:
    """Why a loop counts as evaluation: renders like a hot-path reason."""

    loop: _EvalLoop
    mode_call: Optional[cst.Call]
    function: Optional[str]
    loader: Optional[str] = None  # the held-out data the loop draws, when that is what says evaluation

    def render(self, line_of: Callable[[cst.CSTNode], int]) -> str:
        where = f"in loop at line {line_of(self.loop)}"
        if self.mode_call is not None:
            return f"{where}, after .eval() at line {line_of(self.mode_call)}"
        if self.loader is not None:
            return f"{where} over {self.loader}"
        return f"{where} of {self.function}()"


class EvalWithoutNoGrad(Rule):
    """## What it does
    Flags a model call inside a loop that runs after `model.eval()`, in a function named like
    `evaluate`, `validate`, `test`, `predict`, `inference`, or over a validation, test or holdout
    loader (named so, `val_loader`, or built from a dataset named so, `DataLoader(test_set)`), with no
    `torch.no_grad()` or `torch.inference_mode()` around it: no `with` block, no decorator on the
    function, and not only called from such code in the same file.

    ## Why it is slow
    This is a memory rule. With autograd on, every forward builds a graph nobody will
    back-propagate and keeps the activations it saved alive as long as the output lives.
    Evaluation then peaks at more memory than under `torch.no_grad()`, at about the same speed;
    the memory caps the batch size that evaluation can use, and `inference_mode` also skips
    version-counter bookkeeping. The measured effect on an H100 is in the Measured section
    below.

    ## Fix safety
    No automatic fix: wrap the loop in `with torch.no_grad():` (or `torch.inference_mode()`), or
    decorate the function with `@torch.no_grad()`.

    ## When it stays silent
    Loops that call `.backward()` (training, even in a function called `train_and_evaluate`, and
    adversarial examples crafted over a test loader); loops over things named like tests that are not
    data (`for model in models_to_test`);
    code under `torch.no_grad()`, `torch.inference_mode()` or `torch.set_grad_enabled(False)`;
    functions whose every call site in the file is under one of them; model calls after
    `model.train()`; Lightning hooks (`validation_step`, `test_step`, `predict_step`,
    `on_*`), which Lightning already runs without grad; a helper named like `inference` that a
    model's forward runs (NeRF's `render_rays` evaluating its MLP in chunks): that graph is the
    one training back-propagates, and no_grad there would stop training; loss and criterion
    calls; an instance of a project class with a `__call__` of its own that does not hand on to
    `super().__call__` (ultralytics' `YOLO(path)(image)` predicts under its own inference mode):
    the call runs that method, not a forward; test files.
    """

    code = "TPL305"
    name = "eval-without-no-grad"
    summary = "Evaluation loop without torch.no_grad()"
    message = (
        "{model}(...) runs with autograd on {why}, so every batch builds a graph and holds its "
        "activations (memory, not time); wrap the loop in torch.no_grad() or torch.inference_mode()"
    )
    default_on = True  # meets both populations' bars (evidence.py, precision.json), as designed (RULES.md)
    where = "eval loops"
    node_types = (cst.Call,)
    benchmark = "TPL305"

    BAD = {
        "seed-validate-after-eval": """
            import torch

            def run(model, train_loader, val_loader, optimizer, criterion):
                model.train()
                for x, y in train_loader:
                    criterion(model(x), y).backward()
                    optimizer.step()
                model.eval()
                correct = 0
                for x, y in val_loader:
                    correct += (model(x).argmax(1) == y).sum().item()  # expect: TPL305
                return correct
            """,
        "function-named-predict": """
            import torch

            def predict(net, loader):
                outputs = []
                for batch in loader:
                    outputs.append(net(batch).cpu())  # expect: TPL305
                return torch.cat(outputs)
            """,
        "method-evaluate-with-forward": """
            import torch

            class Trainer:
                def evaluate(self, batches):
                    self.model.eval()
                    scores = []
                    for x in batches:
                        scores.append(self.model.forward(x).softmax(-1))  # expect: TPL305
                    return scores
            """,
        "inference-helper-called-by-a-script": """
            import torch

            def inference(net, chunks):
                return [net(chunk) for chunk in chunks]  # expect: TPL305

            def main(net, images):
                net.eval()
                print(inference(net, images.split(64)))
            """,
        "validation-loader-without-eval": """
            import torch

            def fit(model, train_loader, val_loader, optimizer, criterion):
                for x, y in train_loader:
                    optimizer.zero_grad()
                    criterion(model(x), y).backward()
                    optimizer.step()
                val_loss = 0.0
                for x, y in val_loader:
                    val_loss += criterion(model(x), y).item()  # expect: TPL305
                return val_loss
            """,
        "loader-built-from-the-test-split": """
            import torch
            from torch.utils.data import DataLoader

            def accuracy(net, test_set):
                loader = DataLoader(test_set, batch_size=256)
                hits = 0
                for images, labels in loader:
                    hits += (net(images).argmax(1) == labels).sum().item()  # expect: TPL305
                return hits / len(test_set)
            """,
        "frozen-then-unfrozen": """
            import torch

            def validate(net, loader):
                net.requires_grad_(False)
                net.requires_grad_(True)
                return [net(x) for x in loader]  # expect: TPL305
            """,
    }
    GOOD = {
        "frozen-feature-network": """
            import torch

            def evaluate(feature_net, loader):
                for p in feature_net.parameters():
                    p.requires_grad_(False)
                return [feature_net(x).mean(0) for x, _ in loader]  # no parameter needs grad
            """,
        "inference-helper-inside-a-models-forward": """
            import torch
            import torch.nn as nn

            def render_rays(model, rays, chunk=1024):
                def inference(model, points):
                    out_chunks = []
                    for i in range(0, points.shape[0], chunk):
                        out_chunks += [model(points[i : i + chunk])]  # the training graph
                    return torch.cat(out_chunks)

                return inference(model, rays)

            class NeRFSystem(nn.Module):
                def __init__(self, nerf):
                    super().__init__()
                    self.nerf = nerf

                def forward(self, rays):
                    return render_rays(self.nerf, rays)
            """,
        "with-no-grad-and-decorator": """
            import torch

            @torch.no_grad()
            def evaluate(model, loader):
                return [model(x) for x, _ in loader]

            def validate(model, loader):
                model.eval()
                with torch.inference_mode():
                    for x, _ in loader:
                        model(x)
            """,
        "train-and-evaluate-training-loop": """
            import torch

            def train_and_evaluate(model, loader, optimizer, criterion):
                for x, y in loader:
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
            """,
        "caller-disables-grad": """
            import torch

            def predict(model, loader):
                return [model(x) for x in loader]

            def test_once(model, loader):
                preds = []
                for x in loader:
                    preds.append(model(x))
                return preds

            def main(model, loader):
                with torch.no_grad():
                    predict(model, loader)
                    test_once(model, loader)
            """,
        "train-mode-again": """
            import torch

            def fit(model, loader, calibrate):
                model.eval()
                stats = calibrate(model)
                model.train()
                for x in loader:
                    stats.update(model(x))
                return stats
            """,
        "lightning-hook-and-criterion": """
            import torch
            import lightning as L

            class Model(L.LightningModule):
                def validation_step(self, batch, batch_idx):
                    for x in batch:
                        self.model(x)

            def evaluate(criterion, pairs):
                return [criterion(a, b) for a, b in pairs]
            """,
        "adversarial-examples-over-the-test-loader": """
            import torch
            import torch.nn.functional as F

            def attack(model, test_loader, epsilon):
                crafted = []
                for x, y in test_loader:
                    x.requires_grad_(True)
                    F.cross_entropy(model(x), y).backward()  # gradients of the input, on purpose
                    crafted.append((x + epsilon * x.grad.sign()).detach())
                return crafted
            """,
        "models-named-like-tests": """
            import torch

            def compare(models_to_test, batch):
                return [model(batch) for model in models_to_test]  # models, not held-out data
            """,
        "set-grad-enabled-false": """
            import torch

            def evaluate(model, loader):
                torch.set_grad_enabled(False)
                for x in loader:
                    model(x)
            """,
    }

    def check(self, node: cst.Call, ctx: Context) -> Iterator[Report]:
        if ctx.is_test_file:
            return
        model = node.func
        if isinstance(model, cst.Attribute) and model.attr.value == "forward":
            model = model.value
        shown = dotted_name(model)
        if shown is None or is_name(model, "self") or LOSS_NAME.search(shown.rsplit(".", 1)[-1]):
            return
        loop = self._loop(node, ctx)
        if loop is None or self._trains(loop, ctx):
            return
        function = ctx.enclosing_function(node)
        mode_call = self._mode_call(shown, node, function, ctx)
        reason: Optional[_EvalLoopReason] = None
        if mode_call is not None:
            assert isinstance(mode_call.func, cst.Attribute)
            if mode_call.func.attr.value == "eval" or (
                mode_call.args and is_name(mode_call.args[0].value, "False")
            ):
                reason = _EvalLoopReason(loop, mode_call, None)
                why = f"after {shown}.eval()"
        elif (
            function is not None
            and self._eval_function(function)
            and ctx.tensors.is_module_value(model)
            and not self._part_of_a_model(node, ctx)
        ):
            reason = _EvalLoopReason(loop, None, function.name.value)
            why = f"in {function.name.value}()"
        if reason is None and not (function is not None and self._hook(function)):
            loader = self._held_out_loader(loop, ctx)
            if (
                loader is not None
                and ctx.tensors.is_module_value(model)
                and not self._part_of_a_model(node, ctx)
            ):
                reason = _EvalLoopReason(loop, None, None, loader)
                why = f"in the loop over {loader}"
        if reason is None or ctx.grad_disabled(node) or ctx.grad_mode.frozen(model) is not None:
            return
        if ctx.tensors.runs_own_call(model):
            return  # a `__call__` of the project's own runs, not a forward: what it does is not known
        yield self.report(
            node, reason=cast(Reason, reason), model=shown, why=why
        )  # the runner only renders it

    @staticmethod
    def _loop(node: cst.CSTNode, ctx: Context) -> Optional[_EvalLoop]:
        """The innermost loop or comprehension of the same function that repeats `node`, past
        loops over a model's own layers (`for conv in self.convolutions:`), which run once per
        call of the model, not once per batch."""
        child: cst.CSTNode = node
        for ancestor in ctx.ancestors(node):
            kind = type(ancestor)  # asked for every call: no isinstance against libcst's ABCs
            if kind is cst.FunctionDef or kind is cst.Lambda:
                return None
            if (kind is cst.For or kind is cst.While) and child is ancestor.body:  # type: ignore[attr-defined]
                if kind is cst.While or not ctx.tensors.is_module_value(ancestor.iter):  # type: ignore[attr-defined]
                    return ancestor  # type: ignore[return-value]
            elif kind in _COMPREHENSION_TYPES and child is not ancestor.for_in:  # type: ignore[attr-defined]
                if not ctx.tensors.is_module_value(ancestor.for_in.iter):  # type: ignore[attr-defined]
                    return ancestor  # type: ignore[return-value]
            child = ancestor
        return None

    @staticmethod
    def _trains(loop: _EvalLoop, ctx: Context) -> bool:
        """The loop runs `.backward()` or an optimizer step: training, where graphs are wanted."""
        for method in ("backward", "manual_backward", "step"):
            for call in ctx.facts.method_calls.get(method, ()):
                if method == "step":
                    receiver = (dotted_name(call.func.value) or "").lower()  # type: ignore[attr-defined]
                    if "optim" not in receiver and receiver.rsplit(".", 1)[-1] not in ("opt", "scaler"):
                        continue
                if any(ancestor is loop for ancestor in ctx.ancestors(call)):
                    return True
        return False

    @staticmethod
    def _mode_call(
        model: str, node: cst.Call, function: Optional[cst.FunctionDef], ctx: Context
    ) -> Optional[cst.Call]:
        """The last `model.eval()` / `model.train(...)` before `node` in the same function."""
        order = ctx.facts.order.get(node, 0)
        last: Optional[cst.Call] = None
        last_order = -1
        for method in ("eval", "train"):
            for call in ctx.facts.method_calls.get(method, ()):
                assert isinstance(call.func, cst.Attribute)
                if dotted_name(call.func.value) != model or len(call.args) > 1:
                    continue
                if method == "eval" and call.args:
                    continue
                call_order = ctx.facts.order.get(call, -1)
                if last_order < call_order < order and ctx.enclosing_function(call) is function:
                    last, last_order = call, call_order
        return last

    @staticmethod
    def _part_of_a_model(node: cst.CSTNode, ctx: Context) -> bool:
        """A model's forward (or a Lightning step hook) runs this code: a helper named like
        `inference` that evaluates a sub-network inside a trained model's forward (NeRF's
        `render_rays` -> `inference`) needs the graph, and where the model is evaluated the
        caller's loop is the place for no_grad."""
        reason = ctx.hot_reason(node)
        return reason is not None and reason.from_model_code

    @staticmethod
    def _held_out_loader(loop: _EvalLoop, ctx: Context) -> Optional[str]:
        """The validation/test loader the loop draws its batches from: a loop over held-out data
        that runs no backward is evaluation, with or without `model.eval()` before it."""
        if isinstance(loop, cst.While):
            return None
        iterable = loop.iter if isinstance(loop, cst.For) else loop.for_in.iter
        return ctx.hot.held_out_loader(iterable)

    @staticmethod
    def _hook(function: cst.FunctionDef) -> bool:
        name = function.name.value
        return name in STEP_HOOKS or name.startswith("on_")  # Lightning runs these without grad

    @classmethod
    def _eval_function(cls, function: cst.FunctionDef) -> bool:
        if cls._hook(function):
            return False
        return any(word in _EVAL_WORDS for word in function.name.value.lower().split("_"))

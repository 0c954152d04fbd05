"""TPL3xx: the training step and the optimizer."""

from __future__ import annotations

import dataclasses
import re
from typing import Callable, Iterator, Optional, Union, cast

import libcst as cst

from ..engine.context import Context
from ..engine.edits import add_keyword, keyword, torch_attribute
from ..engine.findings import Fix, Report, Safety
from ..engine.hotpath import STEP_HOOKS, Reason
from ..engine.torch_version import VersionReason
from ..engine.walker import Loop, dotted_name
from .base import Rule
from .transfer import hot_place


def _is_name(expr: cst.BaseExpression, value: str) -> bool:
    return isinstance(expr, cst.Name) and expr.value == value


def _is_number(expr: cst.BaseExpression, value: float) -> bool:
    if isinstance(expr, (cst.Integer, cst.Float)):
        try:
            return float(expr.value) == value
        except ValueError:
            return False
    return False


def _bare(expr: cst.BaseExpression) -> cst.BaseExpression:
    """`expr` without its parentheses, to sit as a call argument or be compared."""
    if getattr(expr, "lpar", None):
        return expr.with_changes(lpar=[], rpar=[])
    return expr


def _method(expr: cst.BaseExpression, *names: str) -> Optional[cst.Call]:
    """`expr` when it is a call of a method named one of `names`."""
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in names:
        return expr
    return None


def _positional(call: cst.Call) -> list[cst.BaseExpression]:
    return [arg.value for arg in call.args if arg.keyword is None and not arg.star]


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
            if any(_is_name(t, owner.value) for t in targets):
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


class ZeroGradWithoutSetToNone(Rule):
    """## What it does
    Flags gradient zeroing that writes zeros instead of dropping the gradient:
    `zero_grad(set_to_none=False)`; a plain `zero_grad()` when the code targets torch older than
    2.0, where `set_to_none` defaulted to False; and hand-written zeroing in a loop over
    parameters (`p.grad.zero_()`, `p.grad.data.zero_()`, `p.grad.fill_(0)`,
    `p.grad = torch.zeros_like(p)`). Any receiver counts (`optimizer`, `model`,
    `self.optimizers()`), but the method must be called `zero_grad`.

    The target version is `--torch-version` (or config `torch-version`), else the lowest version
    the linted project's own `torch` requirement admits (`pyproject.toml`, `setup.cfg`,
    `requirements*.txt` of the nearest project root: `torch>=1.13,<2.1` targets 1.13, an upper
    bound alone such as `torch<2` admits 1.x and targets 1.0), else the newest. `--show-context`
    says which version was used and where it came from.

    ## Why it is slow
    Zero-filling launches a memset per parameter every step, and the next backward then reads
    and adds into those zeros instead of writing the gradient directly. Setting gradients to
    None skips both and frees their memory between steps. The measured effect on an H100 is in
    the Measured section below.

    ## Fix safety
    Unsafe: code that reads `.grad` after zeroing (gradient clipping, logging, a custom
    optimizer) sees None instead of a zero tensor. The fix passes `set_to_none=True` (replacing
    an explicit False) or turns manual zeroing into `p.grad = None`.

    ## When it stays silent
    `zero_grad()` when the target is torch 2.0 or newer (the default is already None);
    `set_to_none=` given a variable; methods that merely end in `zero_grad`; manual zeroing that
    is not in a loop over parameters, that already sits behind a `set_to_none` choice, or that
    follows `if p.grad is None:` (a gradient being created, e.g. as a view into a flat buffer);
    `p.grad = torch.zeros_like(p)` outside hot code and outside functions named for zeroing
    (`zero_grads`, `reset_gradients`): in `__init__` or setup it creates gradients.
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
            if _is_name(given.value, "False"):
                new = call.with_changes(
                    args=[a.with_changes(value=cst.Name("True")) if a is given else a for a in call.args]
                )
                fix = Fix.replace(call, new, Safety.UNSAFE, "pass set_to_none=True")
                yield self.report(
                    call,
                    reason=ctx.hot_reason(call),
                    fix=fix,
                    what="zero_grad(set_to_none=False)",
                    when="",
                    remedy="pass set_to_none=True",
                )
            return
        if call.args:
            return
        declared = ctx.target_torch_version()
        if declared.version is None or declared.version >= (2, 0):
            return
        major, minor = declared.version
        fix = Fix.replace(
            call, add_keyword(call, "set_to_none", cst.Name("True")), Safety.UNSAFE, "pass set_to_none=True"
        )
        yield self.report(
            call,
            reason=cast(Reason, VersionReason(declared, ctx.hot_reason(call))),  # the runner only renders it
            fix=fix,
            what="zero_grad()",
            when=f" on torch {major}.{minor} (set_to_none defaults to False before 2.0)",
            remedy="pass set_to_none=True",
        )

    def _zero_fill(self, call: cst.Call, ctx: Context) -> Iterator[Report]:
        assert isinstance(call.func, cst.Attribute)
        if call.func.attr.value == "fill_" and not (
            len(call.args) == 1 and call.args[0].keyword is None and _is_number(call.args[0].value, 0)
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
        if _deliberate_zeros(call, ctx):
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
        it (`zero_grads`, `reset_gradients`); elsewhere (`__init__`, setup) it creates them."""
        if ctx.is_hot(node):
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
        if not self._zeroing_place(node, ctx) or _deliberate_zeros(node, ctx):
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


# -- TPL302 -------------------------------------------------------------------------------

# Capitalised names under torch.nn that are not modules.
_NOT_MODULES = frozenset({"Parameter", "UninitializedParameter", "UninitializedBuffer", "Buffer"})
# Module classes whose torch.nn.functional form the message can name.
_FUNCTIONAL = {
    "CrossEntropyLoss": "cross_entropy",
    "NLLLoss": "nll_loss",
    "MSELoss": "mse_loss",
    "L1Loss": "l1_loss",
    "SmoothL1Loss": "smooth_l1_loss",
    "HuberLoss": "huber_loss",
    "BCELoss": "binary_cross_entropy",
    "BCEWithLogitsLoss": "binary_cross_entropy_with_logits",
    "KLDivLoss": "kl_div",
    "CosineEmbeddingLoss": "cosine_embedding_loss",
    "MarginRankingLoss": "margin_ranking_loss",
    "TripletMarginLoss": "triplet_margin_loss",
    "CTCLoss": "ctc_loss",
    "ReLU": "relu",
    "GELU": "gelu",
    "SiLU": "silu",
    "LeakyReLU": "leaky_relu",
    "Softmax": "softmax",
    "LogSoftmax": "log_softmax",
    "Dropout": "dropout",
    "Sigmoid": "sigmoid",
    "Tanh": "tanh",
    "Softplus": "softplus",
    "ELU": "elu",
}


class ModuleInHotPath(Rule):
    """## What it does
    Flags an `nn.*` module or loss (`nn.CrossEntropyLoss()`, `nn.Linear(...)`, `nn.NLLLoss(w)`)
    or a class of the same file deriving from `nn.Module` that is constructed in hot code:
    `forward`, a Lightning step hook, a step loop, or a function they call.

    ## Why it is slow
    Every step pays the construction: Python object and hook set-up, parameter allocation and
    initialisation, and often a host-to-device copy of its weights or buffers. A freshly built
    layer also has fresh random weights that the optimizer never sees. Stateless modules with
    no parameters still cost an object and its hooks. The measured effect on an H100 is in the
    Measured section below.

    ## Fix safety
    No automatic fix: the module must move to `__init__` (or the setup code before the loop)
    and be stored on `self`; for stateless modules and losses the functional form
    (`F.cross_entropy`, `F.relu`) is the alternative the message names.

    ## When it stays silent
    `__init__` and other cold code (module level, setup functions, an `nn.ModuleList([...])`
    built in `__init__`); lazy construction stored on `self` behind an `if`
    (`if self.head is None: self.head = nn.Linear(...)`); functional calls (`F.cross_entropy`);
    `nn.init.*`, `nn.utils.*` (`clip_grad_norm_`), and `nn.Parameter`, which wraps an existing
    tensor without copying it (building one in `forward` is a correctness problem, not a
    per-step cost); loops over a literal list of cases (`for device in ["cpu", "cuda"]:`) that
    build and train a model per case.
    """

    code = "TPL302"
    name = "module-in-hot-path"
    summary = "nn.Module or loss constructed in hot code"
    message = "{module}(...) is constructed in {place} at every step; create it once {once}{alternative}"
    where = "hot code"
    node_types = (cst.Call,)
    benchmark = "TPL302"

    BAD = {
        "seed-loss-in-step-loop": """
            import torch
            import torch.nn as nn

            def train(model, loader, optimizer):
                for x, y in loader:
                    criterion = nn.CrossEntropyLoss()  # expect: TPL302
                    loss = criterion(model(x), y)
                    loss.backward()
                    optimizer.step()
            """,
        "layer-in-forward": """
            import torch
            from torch import nn

            class Head(nn.Module):
                def forward(self, x):
                    proj = nn.Linear(x.shape[-1], 10).to(x.device)  # expect: TPL302
                    return proj(x)
            """,
        "weighted-loss-in-helper": """
            import torch
            from torch import nn

            def weighted_loss(logits, target, weight):
                return nn.NLLLoss(weight)(logits.log_softmax(1), target)  # expect: TPL302

            class Net(nn.Module):
                def forward(self, x, target, weight):
                    return weighted_loss(self.body(x), target, weight)
            """,
        "in-file-module-class": """
            import torch
            import torch.nn as nn

            class Block(nn.Module):
                def forward(self, x):
                    return x.relu()

            class Net(nn.Module):
                def forward(self, x):
                    return Block()(x) + nn.ReLU()(x)  # expect: TPL302,TPL302
            """,
    }
    GOOD = {
        "same-constructors-in-init": """
            import torch
            from torch import nn

            class Net(nn.Module):
                def __init__(self, n):
                    super().__init__()
                    self.blocks = nn.ModuleList([nn.Linear(8, 8) for _ in range(n)])
                    self.loss = nn.CrossEntropyLoss()

                def forward(self, x, y):
                    for block in self.blocks:
                        x = block(x)
                    return self.loss(x, y)
            """,
        "functional-and-utilities": """
            import torch
            import torch.nn as nn
            import torch.nn.functional as F

            def train(model, loader, optimizer):
                for x, y in loader:
                    loss = F.cross_entropy(model(x), y)
                    loss.backward()
                    nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                    optimizer.step()
            """,
        "parameter-and-init-in-forward": """
            import torch
            from torch import nn

            class Net(nn.Module):
                def forward(self, x):
                    scale = nn.Parameter(torch.ones(1, device=x.device), requires_grad=False)
                    nn.init.zeros_(self.bias)
                    return x * scale
            """,
        "lazy-construction-behind-if": """
            import torch
            from torch import nn

            class Net(nn.Module):
                def forward(self, x):
                    if self.head is None:
                        self.head = nn.Linear(x.shape[-1], 10).to(x.device)
                    return self.head(x)
            """,
        "model-per-case": """
            import torch
            from torch import nn

            def check_devices():
                for device in ["cpu", "cuda"]:
                    model = nn.Linear(4, 1).to(device)
                    model(torch.ones(2, 4, device=device)).sum().backward()
            """,
        "setup-before-the-loop": """
            import torch
            from torch import nn

            criterion = nn.CrossEntropyLoss()

            def train(model, loader, optimizer):
                head = nn.Linear(16, 10)
                for x, y in loader:
                    loss = criterion(head(model(x)), y)
                    loss.backward()
                    optimizer.step()
            """,
    }

    def check(self, node: cst.Call, ctx: Context) -> Iterator[Report]:
        reason = ctx.hot_reason(node)
        if reason is None:
            return
        shown = self._module_class(node, ctx)
        if shown is None:
            return
        function = ctx.enclosing_function(node)
        if function is not None and function.name.value == "__init__":
            return
        if self._lazy(node, ctx) or self._over_cases(reason):
            return
        functional = _FUNCTIONAL.get(shown.rsplit(".", 1)[-1])
        alternative = f" or call F.{functional}(...)" if functional else ""
        in_loop = reason.loop is not None and reason.caller is None
        yield self.report(
            node,
            reason=reason,
            module=shown,
            place=hot_place(node, ctx),
            once="before the loop" if in_loop else "in __init__",
            alternative=alternative,
        )

    @staticmethod
    def _module_class(call: cst.Call, ctx: Context) -> Optional[str]:
        """How the call spells the module class it constructs, or None."""
        qualified = ctx.qualified_name(call)
        if qualified is not None:
            if not qualified.startswith("torch.nn."):
                return None
            parts = qualified[len("torch.nn.") :].split(".")
            last = parts[-1]
            if not last[:1].isupper() or last in _NOT_MODULES:
                return None
            if len(parts) == 1 or parts[0] in ("modules", "parallel"):
                return ctx.code(call.func)
            return None
        local = ctx.hot.local_class(call.func)
        if local is not None and ctx.hot.is_module_class(local):
            return local.name
        return None

    @staticmethod
    def _over_cases(reason: Reason) -> bool:
        """Hot only through a loop over a literal list of cases (`for device in ["cpu", "cuda"]:`
        that builds, trains and checks a model per case): each iteration is a whole run."""
        while reason.caller is not None:
            reason = reason.caller
        loop = reason.loop
        return isinstance(loop, cst.For) and isinstance(loop.iter, (cst.List, cst.Tuple, cst.Set))

    @staticmethod
    def _lazy(call: cst.Call, ctx: Context) -> bool:
        """Stored on `self` behind an `if`: built once, on first use."""
        assign: Optional[cst.Assign] = None
        for ancestor in ctx.ancestors(call):
            if isinstance(ancestor, cst.Assign):
                assign = ancestor
            elif isinstance(ancestor, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
                break
        if assign is None:
            return False
        for target in assign.targets:
            root: cst.BaseExpression = target.target
            while isinstance(root, (cst.Attribute, cst.Subscript)):
                root = root.value
            if not _is_name(root, "self") or target.target is root:
                return False
        for ancestor in ctx.ancestors(assign):
            if isinstance(ancestor, (cst.FunctionDef, cst.Lambda)):
                return False
            if isinstance(ancestor, cst.If):
                return True
        return False


# -- TPL303 -------------------------------------------------------------------------------

_SOFTMAX = frozenset({"torch.softmax", "torch.nn.functional.softmax", "torch.special.softmax"})
_SIGMOID = frozenset({"torch.sigmoid", "torch.nn.functional.sigmoid", "torch.special.expit"})
_REDUCTIONS = frozenset({"sum", "mean"})


@dataclasses.dataclass(frozen=True)
class _Composition:
    node: cst.CSTNode  # where the finding goes
    written: str
    builtin: str
    replacement: Optional[cst.BaseExpression] = None
    needs_import: bool = False


class HandWrittenFusedOp(Rule):
    """## What it does
    Flags hand-written compositions that have a fused, numerically stable built-in:
    `torch.log(torch.softmax(x, d))`, `torch.log(F.softmax(x, dim=d))`, `x.softmax(d).log()` and
    `x - x.exp().sum(d, keepdim=True).log()` (log-softmax); `torch.log(torch.sigmoid(x))`
    (log-sigmoid); `-(y * torch.log(p)).sum(...)` with `p` a softmax (cross-entropy); and
    `1 / (1 + torch.exp(-x))` (sigmoid).

    ## Why it is slow
    Each step of the composition is its own kernel with its own full-size intermediate in
    memory, where the built-in makes one pass. The compositions are also unstable: `softmax`
    underflows to 0 and its `log` to `-inf` (NaN gradients), and `exp(-x)` overflows. A hand
    log-softmax followed by NLL has both problems; `F.cross_entropy` has neither. The measured
    effect on an H100 is in the Measured section below.

    ## Fix safety
    Unsafe, because results differ in rounding (the built-ins are the more accurate ones).
    Mechanical rewrites only: `torch.log(torch.softmax(x, d))` -> `torch.log_softmax(x, d)`
    (keeping the namespace the softmax was called through, `F.` or `torch.`),
    `x.softmax(d).log()` -> `x.log_softmax(d)`, `x - x.exp().sum(d, keepdim=True).log()` ->
    `torch.log_softmax(x, d)`, `torch.log(torch.sigmoid(x))` -> `F.logsigmoid(x)` and
    `1 / (1 + torch.exp(-x))` -> `torch.sigmoid(x)`. The hand-written cross-entropy has no
    automatic fix: `F.cross_entropy` takes the logits, not the probabilities.

    ## When it stays silent
    `log` of anything but a softmax or sigmoid result (including `log(softmax(x) + eps)`, which
    does not compute the same value); `x - torch.logsumexp(x, d, keepdim=True)`, already stable;
    `x - log(sum(exp(y)))` over two different tensors; NumPy and `math` functions; an
    `nn.Softmax` module called as `self.softmax(x)`.
    """

    code = "TPL303"
    name = "hand-written-fused-op"
    summary = "Hand-written composition of a fused built-in"
    message = "{written} is a slower, less stable hand-written form of a fused built-in; use {builtin}"
    fix_safety = Safety.UNSAFE
    where = "anywhere"
    node_types = (cst.Call, cst.BinaryOperation, cst.UnaryOperation)
    benchmark = "TPL303"

    BAD = {
        "seed-hand-log-softmax": """
            import torch
            from torch import nn

            class Loss(nn.Module):
                def forward(self, logits, target):
                    logp = logits - logits.exp().sum(1, keepdim=True).log()  # expect: TPL303
                    return -logp[torch.arange(len(target), device=logits.device), target].mean()
            """,
        "log-of-softmax": """
            import torch
            import torch.nn.functional as F

            def scores(x, y):
                a = torch.log(F.softmax(x, dim=-1))  # expect: TPL303
                b = y.softmax(1).log()  # expect: TPL303
                return a, b
            """,
        "log-of-sigmoid-and-hand-sigmoid": """
            import torch

            def gates(x):
                log_gate = torch.log(torch.sigmoid(x))  # expect: TPL303
                gate = 1 / (1 + torch.exp(-x))  # expect: TPL303
                return log_gate, gate
            """,
        "hand-cross-entropy": """
            import torch

            def soft_target_loss(logits, soft_targets):
                probs = torch.softmax(logits, dim=1)
                return -(soft_targets * torch.log(probs)).sum(dim=1).mean()  # expect: TPL303
            """,
    }
    FIXED = {
        "seed-hand-log-softmax": """
            import torch
            from torch import nn

            class Loss(nn.Module):
                def forward(self, logits, target):
                    logp = torch.log_softmax(logits, 1)
                    return -logp[torch.arange(len(target), device=logits.device), target].mean()
            """,
        "log-of-softmax": """
            import torch
            import torch.nn.functional as F

            def scores(x, y):
                a = F.log_softmax(x, dim=-1)
                b = y.log_softmax(1)
                return a, b
            """,
        "log-of-sigmoid-and-hand-sigmoid": """
            import torch

            def gates(x):
                log_gate = torch.nn.functional.logsigmoid(x)
                gate = torch.sigmoid(x)
                return log_gate, gate
            """,
    }
    GOOD = {
        "built-ins": """
            import torch
            import torch.nn.functional as F

            def scores(x, target):
                logp = F.log_softmax(x, dim=-1)
                stable = x - torch.logsumexp(x, dim=1, keepdim=True)
                return F.nll_loss(logp, target) + torch.sigmoid(x).sum() + stable.sum()
            """,
        "log-of-other-things": """
            import torch

            def stats(x, probs, eps):
                entropy_floor = torch.log(probs + eps)
                scale = torch.log(x.abs().sum(1))
                ratio = x - torch.exp(probs).sum(1, keepdim=True).log()
                return entropy_floor, scale, ratio
            """,
        "numpy-and-math": """
            import math
            import numpy as np
            import torch

            def curve(values, t):
                y = 1 / (1 + np.exp(-values))
                z = 1 / (1 + math.exp(-t))
                return np.log(np.exp(values).sum()), y, z
            """,
        "softmax-module-and-sigmoid-variants": """
            import torch
            from torch import nn

            class Net(nn.Module):
                def forward(self, x):
                    p = torch.log(self.softmax(x))
                    half = 1 / (2 + torch.exp(-x))
                    return p, half, 1 / (1 + torch.exp(x))
            """,
    }

    def check(self, node: cst.CSTNode, ctx: Context) -> Iterator[Report]:
        found: Optional[_Composition] = None
        if isinstance(node, cst.Call):
            found = self._log_of(node, ctx)
        elif isinstance(node, cst.BinaryOperation):
            if isinstance(node.operator, cst.Subtract):
                found = self._log_softmax_by_hand(node, ctx)
            elif isinstance(node.operator, cst.Divide):
                found = self._sigmoid_by_hand(node, ctx)
        elif isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
            found = self._cross_entropy_by_hand(node, ctx)
        if found is None:
            return
        fix = None
        if found.replacement is not None:
            replacement = found.replacement
            if isinstance(found.node, (cst.Call, cst.BinaryOperation)) and found.node.lpar:
                replacement = replacement.with_changes(lpar=found.node.lpar, rpar=found.node.rpar)
            fix = Fix.replace(
                found.node, replacement, Safety.UNSAFE, f"use {found.builtin}", found.needs_import
            )
        yield self.report(
            found.node, reason=ctx.hot_reason(node), fix=fix, written=found.written, builtin=found.builtin
        )

    # -- matching ----------------------------------------------------------------------
    @staticmethod
    def _log_argument(call: cst.Call, ctx: Context) -> Optional[cst.BaseExpression]:
        """`x` for `torch.log(x)` or `x.log()`."""
        if ctx.qualified_name(call) == "torch.log":
            args = _positional(call)
            return args[0] if len(args) == 1 and len(call.args) == 1 else None
        if _method(call, "log") is not None and not call.args and ctx.qualified_name(call) is None:
            assert isinstance(call.func, cst.Attribute)
            return call.func.value
        return None

    @staticmethod
    def _tensor_method(expr: cst.BaseExpression, name: str, ctx: Context) -> Optional[cst.Call]:
        """`x.<name>(...)` on a tensor: not `self.<name>(...)` (a module) nor a module's call."""
        call = _method(expr, name)
        if call is None or ctx.qualified_name(call) is not None:
            return None
        assert isinstance(call.func, cst.Attribute)
        receiver = call.func.value
        if _is_name(receiver, "self") or ctx.tensors.is_module_value(receiver):
            return None
        return call

    def _softmax(self, expr: cst.BaseExpression, ctx: Context) -> Optional[cst.Call]:
        if isinstance(expr, cst.Call) and ctx.qualified_name(expr) in _SOFTMAX:
            return expr
        return self._tensor_method(expr, "softmax", ctx)

    def _log_of(self, call: cst.Call, ctx: Context) -> Optional[_Composition]:
        inner = self._log_argument(call, ctx)
        if inner is None:
            return None
        softmax = self._softmax(inner, ctx)
        if softmax is not None:
            return _Composition(
                call, "log(softmax(...))", "torch.log_softmax(x, dim)", self._log_softmax_call(softmax, ctx)
            )
        if isinstance(inner, cst.Call) and ctx.qualified_name(inner) in _SIGMOID:
            args = _positional(inner)
            argument = args[0] if len(args) == 1 and len(inner.args) == 1 else None
        elif (method := self._tensor_method(inner, "sigmoid", ctx)) is not None and not method.args:
            assert isinstance(method.func, cst.Attribute)
            argument = method.func.value
        else:
            return None
        replacement, needs_import = (None, False)
        if argument is not None:
            func, needs_import = self._functional(ctx, "logsigmoid")
            replacement = cst.Call(func=func, args=[cst.Arg(_bare(argument))])
        return _Composition(call, "log(sigmoid(...))", "F.logsigmoid(x)", replacement, needs_import)

    @staticmethod
    def _functional(ctx: Context, name: str) -> tuple[cst.BaseExpression, bool]:
        """`F.<name>` with the file's alias for torch.nn.functional, else through torch."""
        for bound, target in ctx.facts.imports.items():
            if target == "torch.nn.functional" and "." not in bound:
                bindings = ctx.facts.module_scope.bindings.get(bound)
                if bindings and bindings[-1].kind == "import":
                    return cst.Attribute(value=cst.Name(bound), attr=cst.Name(name)), False
        return torch_attribute(ctx, f"nn.functional.{name}")

    @staticmethod
    def _log_softmax_call(softmax: cst.Call, ctx: Context) -> Optional[cst.Call]:
        """The same call with `log_softmax` for `softmax`, when its dim is given."""
        func = softmax.func
        if not isinstance(func, cst.Attribute):
            return None
        positional = _positional(softmax)
        is_method = ctx.qualified_name(softmax) is None
        has_dim = keyword(softmax, "dim") is not None or len(positional) >= (1 if is_method else 2)
        if not has_dim or any(arg.star for arg in softmax.args) or keyword(softmax, "_stacklevel"):
            return None
        args = list(softmax.args)
        if args:
            args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return softmax.with_changes(
            func=func.with_changes(attr=cst.Name("log_softmax")), args=args, lpar=[], rpar=[]
        )

    @staticmethod
    def _exp_argument(expr: cst.BaseExpression, ctx: Context) -> Optional[cst.BaseExpression]:
        """`x` for `torch.exp(x)` or `x.exp()`."""
        if isinstance(expr, cst.Call) and ctx.qualified_name(expr) == "torch.exp":
            args = _positional(expr)
            return args[0] if len(args) == 1 and len(expr.args) == 1 else None
        call = _method(expr, "exp")
        if call is not None and not call.args and ctx.qualified_name(call) is None:
            assert isinstance(call.func, cst.Attribute)
            return call.func.value
        return None

    def _log_softmax_by_hand(self, node: cst.BinaryOperation, ctx: Context) -> Optional[_Composition]:
        """`x - x.exp().sum(d, keepdim=True).log()` and `x - torch.log(torch.exp(x).sum(...))`."""
        if not isinstance(node.right, cst.Call):
            return None
        summed = self._log_argument(node.right, ctx)
        if not isinstance(summed, cst.Call):
            return None
        if ctx.qualified_name(summed) == "torch.sum":
            args = _positional(summed)
            if not args:
                return None
            exp_of, dims = args[0], summed.args[1:]
        elif _method(summed, "sum") is not None and ctx.qualified_name(summed) is None:
            assert isinstance(summed.func, cst.Attribute)
            exp_of, dims = summed.func.value, summed.args
        else:
            return None
        argument = self._exp_argument(exp_of, ctx)
        if argument is None or ctx.code(_bare(argument)) != ctx.code(_bare(node.left)):
            return None
        replacement = None
        needs_import = False
        dim = self._dim_of_keepdim_sum(list(dims))
        if dim is not None:
            func, needs_import = torch_attribute(ctx, "log_softmax")
            replacement = cst.Call(func=func, args=[cst.Arg(_bare(node.left)), cst.Arg(dim)])
        return _Composition(
            node, "x - log(sum(exp(x)))", "torch.log_softmax(x, dim)", replacement, needs_import
        )

    @staticmethod
    def _dim_of_keepdim_sum(args: list[cst.Arg]) -> Optional[cst.BaseExpression]:
        """The dim of `sum(dim, keepdim=True)` (positional or keyword), else None."""
        dim: Optional[cst.BaseExpression] = None
        keepdim = False
        for index, arg in enumerate(args):
            name = arg.keyword.value if arg.keyword is not None else ("dim", "keepdim")[min(index, 1)]
            if arg.star or (arg.keyword is None and index > 1):
                return None
            if name == "dim":
                dim = arg.value
            elif name == "keepdim":
                keepdim = _is_name(arg.value, "True")
            else:
                return None
        return dim if keepdim else None

    def _sigmoid_by_hand(self, node: cst.BinaryOperation, ctx: Context) -> Optional[_Composition]:
        """`1 / (1 + torch.exp(-x))` (either order of the sum)."""
        if not _is_number(node.left, 1):
            return None
        denominator = node.right
        if not (isinstance(denominator, cst.BinaryOperation) and isinstance(denominator.operator, cst.Add)):
            return None
        if _is_number(denominator.left, 1):
            exp = denominator.right
        elif _is_number(denominator.right, 1):
            exp = denominator.left
        else:
            return None
        argument = self._exp_argument(exp, ctx)
        if argument is None:
            return None
        argument = _bare(argument)
        if isinstance(argument, cst.UnaryOperation) and isinstance(argument.operator, cst.Minus):
            x = argument.expression
        elif (neg := _method(argument, "neg")) is not None and not neg.args:
            assert isinstance(neg.func, cst.Attribute)
            x = neg.func.value
        else:
            return None
        func, needs_import = torch_attribute(ctx, "sigmoid")
        replacement = cst.Call(func=func, args=[cst.Arg(_bare(x))])
        return _Composition(node, "1 / (1 + exp(-x))", "torch.sigmoid(x)", replacement, needs_import)

    def _cross_entropy_by_hand(self, node: cst.UnaryOperation, ctx: Context) -> Optional[_Composition]:
        """`-(y * torch.log(p)).sum(...)`, `-torch.sum(y * p.log(), 1)` with `p` bound to a softmax."""
        expr = node.expression
        reduced = False
        while isinstance(expr, cst.Call):
            if ctx.qualified_name(expr) in ("torch.sum", "torch.mean"):
                args = _positional(expr)
                if not args:
                    return None
                expr = args[0]
            elif _method(expr, *_REDUCTIONS) is not None and ctx.qualified_name(expr) is None:
                assert isinstance(expr.func, cst.Attribute)
                expr = expr.func.value
            else:
                return None
            reduced = True
        if not reduced or not (
            isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Multiply)
        ):
            return None
        for factor in (expr.left, expr.right):
            logged = self._log_argument(factor, ctx) if isinstance(factor, cst.Call) else None
            if isinstance(logged, cst.Name) and self._bound_to_softmax(logged, ctx):
                return _Composition(
                    node,
                    "-(y * log(softmax(...))).sum()",
                    "F.cross_entropy(logits, y) or F.log_softmax(logits, dim)",
                )
        return None

    def _bound_to_softmax(self, name: cst.Name, ctx: Context) -> bool:
        bindings = ctx.bindings(name.value, name)
        return bool(bindings) and all(
            b.kind == "assign"
            and isinstance(b.node, cst.BaseExpression)
            and self._softmax(b.node, ctx) is not None
            for b in bindings
        )


# -- TPL304 -------------------------------------------------------------------------------

# Methods whose result carries the receiver's autograd graph.
_GRAPH_METHODS = frozenset(
    """sum mean float double half bfloat16 to cuda cpu clone squeeze unsqueeze view reshape mul add
    div sub pow abs contiguous flatten exp log sqrt neg prod""".split()
)
_DETACHING_ATTRIBUTES = frozenset({"data", "grad", "shape", "dtype", "device", "requires_grad", "ndim"})
_LOSS_NAME = re.compile(r"loss|criterion", re.IGNORECASE)
_CONDITIONAL = (cst.If, cst.Else, cst.For, cst.While, cst.ExceptHandler)


class LossAccumulationKeepsGraph(Rule):
    """## What it does
    Flags `total += loss`, `total = total + loss` and `losses.append(loss)` in a step loop when
    `loss` is attached to the autograd graph: the result of a model, criterion or loss-function
    call (or arithmetic on one), not of `.item()` or `.detach()`.

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
    is reset in the loop body every iteration (`loss = criterion(...)`, then `loss += aux`).
    """

    code = "TPL304"
    name = "loss-accumulation-keeps-graph"
    summary = "Loss accumulated across steps with its autograd graph"
    message = (
        "{accumulator} collects {value} with its autograd graph, so every step's graph stays alive; "
        "use {fixed}"
    )
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
    }
    FIXED = {
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
    }
    GOOD = {
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
        if loop is None:
            return
        before = ctx.facts.order.get(node, 0)
        if not self._attached(value, before, ctx, 0):
            return
        if ctx.grad_disabled(node) or self._reset_each_step(accumulator, node, loop, ctx):
            return
        if self._backpropagated(accumulator, node, ctx):
            return
        fixed = self._detached(value, before, ctx)
        shown = ctx.code(_bare(value))
        short = shown if len(shown) <= 30 else "the loss"
        yield self.report(
            node,
            reason=ctx.hot_reason(node),
            fix=Fix.replace(value, fixed, Safety.UNSAFE, "accumulate a detached value"),
            accumulator=ctx.code(accumulator),
            value=short,
            fixed=f"{short}.detach() or {short}.item()"
            if short != "the loss"
            else "loss.detach() or loss.item()",
        )

    @staticmethod
    def _accumulation(
        node: Union[cst.AugAssign, cst.Assign, cst.Call],
    ) -> Optional[tuple[cst.BaseExpression, cst.BaseExpression]]:
        """(accumulator, accumulated value) of `acc += v`, `acc = acc + v`, `acc.append(v)`."""
        if isinstance(node, cst.AugAssign):
            return (node.target, node.value) if isinstance(node.operator, cst.AddAssign) else None
        if isinstance(node, cst.Assign):
            if len(node.targets) != 1 or not isinstance(node.value, cst.BinaryOperation):
                return None
            target, value = node.targets[0].target, node.value
            if not isinstance(value.operator, cst.Add) or not isinstance(target, (cst.Name, cst.Attribute)):
                return None
            target_text = dotted_name(target)
            if dotted_name(_bare(value.left)) == target_text:
                return target, value.right
            if dotted_name(_bare(value.right)) == target_text:
                return target, value.left
            return None
        call = _method(node, "append")
        if call is None or len(call.args) != 1 or call.args[0].keyword is not None or call.args[0].star:
            return None
        assert isinstance(call.func, cst.Attribute)
        return call.func.value, call.args[0].value

    def _attached(self, expr: cst.BaseExpression, before: int, ctx: Context, depth: int) -> bool:
        """`expr` carries a graph: a model, criterion or loss call, or arithmetic on one."""
        if depth > 8:
            return False
        if isinstance(expr, cst.Name):
            bindings = [b for b in ctx.bindings(expr.value, expr) if b.order < before]
            if not bindings:
                return False
            last = bindings[-1]
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
            if expr.attr.value in _DETACHING_ATTRIBUTES or _is_name(expr.value, "self"):
                return False
            return self._attached(expr.value, before, ctx, depth + 1)
        if isinstance(expr, cst.Subscript):
            return self._attached(expr.value, before, ctx, depth + 1)
        return False

    def _attached_call(self, call: cst.Call, before: int, ctx: Context, depth: int) -> bool:
        qualified = ctx.qualified_name(call)
        if qualified is not None:
            if qualified.startswith("torch.nn.functional."):
                return True
            if qualified.startswith("torch.") and "." not in qualified[len("torch.") :]:
                return any(self._attached(a.value, before, ctx, depth + 1) for a in call.args)
            return False
        func = call.func
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            if method in _GRAPH_METHODS:
                return self._attached(func.value, before, ctx, depth + 1)
            if method in ("item", "detach", "tolist", "numpy", "detach_"):
                return False
        last = (dotted_name(func) or "").rsplit(".", 1)[-1]
        return bool(_LOSS_NAME.search(last)) or ctx.tensors.is_module_value(func)

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
    def _backpropagated(accumulator: cst.BaseExpression, node: cst.CSTNode, ctx: Context) -> bool:
        """`.backward()` (or `autograd.grad`) reaches the accumulator in the same function."""
        function = ctx.enclosing_function(node)
        word = re.compile(r"(?<![\w.])" + re.escape(ctx.code(accumulator)) + r"(?!\w)")
        for method in ("backward", "manual_backward", "grad"):
            for call in ctx.facts.method_calls.get(method, ()):
                if ctx.enclosing_function(call) is function and word.search(ctx.code(call)):
                    return True
        return False


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
_EvalLoop = Union[cst.For, cst.While, cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp]


@dataclasses.dataclass(frozen=True)
class _EvalLoopReason:
    """Why a loop counts as evaluation: renders like a hot-path reason."""

    loop: _EvalLoop
    mode_call: Optional[cst.Call]
    function: Optional[str]

    def render(self, line_of: Callable[[cst.CSTNode], int]) -> str:
        where = f"in loop at line {line_of(self.loop)}"
        if self.mode_call is not None:
            return f"{where}, after .eval() at line {line_of(self.mode_call)}"
        return f"{where} of {self.function}()"


class EvalWithoutNoGrad(Rule):
    """## What it does
    Flags a model call inside a loop that runs after `model.eval()` (or in a function named like
    `evaluate`, `validate`, `test`, `predict`, `inference`) with no `torch.no_grad()` or
    `torch.inference_mode()` around it: no `with` block, no decorator on the function, and not
    only called from such code in the same file.

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
    Loops that call `.backward()` (training, even in a function called `train_and_evaluate`);
    code under `torch.no_grad()`, `torch.inference_mode()` or `torch.set_grad_enabled(False)`;
    functions whose every call site in the file is under one of them; model calls after
    `model.train()`; Lightning hooks (`validation_step`, `test_step`, `predict_step`,
    `on_*`), which Lightning already runs without grad; loss and criterion calls; test files.
    """

    code = "TPL305"
    name = "eval-without-no-grad"
    summary = "Evaluation loop without torch.no_grad()"
    message = (
        "{model}(...) runs with autograd on {why}, so every batch builds a graph and holds its "
        "activations (memory, not time); wrap the loop in torch.no_grad() or torch.inference_mode()"
    )
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
    }
    GOOD = {
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
        if shown is None or _is_name(model, "self") or _LOSS_NAME.search(shown.rsplit(".", 1)[-1]):
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
                mode_call.args and _is_name(mode_call.args[0].value, "False")
            ):
                reason = _EvalLoopReason(loop, mode_call, None)
                why = f"after {shown}.eval()"
        elif function is not None and self._eval_function(function) and ctx.tensors.is_module_value(model):
            reason = _EvalLoopReason(loop, None, function.name.value)
            why = f"in {function.name.value}()"
        if reason is None or ctx.grad_disabled(node):
            return
        yield self.report(
            node, reason=cast(Reason, reason), model=shown, why=why
        )  # the runner only renders it

    @staticmethod
    def _loop(node: cst.CSTNode, ctx: Context) -> Optional[_EvalLoop]:
        """The innermost loop or comprehension of the same function that repeats `node`."""
        child: cst.CSTNode = node
        for ancestor in ctx.ancestors(node):
            if isinstance(ancestor, (cst.FunctionDef, cst.Lambda)):
                return None
            if isinstance(ancestor, (cst.For, cst.While)) and child is ancestor.body:
                return ancestor
            if isinstance(ancestor, _COMPREHENSIONS) and child is not ancestor.for_in:
                return ancestor
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
    def _eval_function(function: cst.FunctionDef) -> bool:
        name = function.name.value
        if name in STEP_HOOKS or name.startswith("on_"):
            return False  # Lightning runs these without grad
        return any(word in _EVAL_WORDS for word in name.lower().split("_"))

"""TPL302 module-in-hot-path: nn.Module or loss constructed in hot code."""

from __future__ import annotations

from typing import Iterator, Optional

import libcst as cst

from ...analysis.hotpath import Reason
from ...engine.context import Context
from ...engine.findings import Report
from ..base import Rule, hot_place
from .common import is_name

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
    build and train a model per case. A model moved to the device at every step, the other module
    work of a step loop, is TPL307's (off by default: measured small).
    """

    code = "TPL302"
    name = "module-in-hot-path"
    summary = "nn.Module or loss constructed in hot code"
    message = "{module}(...) is constructed in {place} at every step; create it once {once}{alternative}"
    # below the training bar (evidence.py, precision.json): one FALSE of eight in its default form, a
    # spatial-LPIPS branch whose flag three constructions leave False; its default form asks for
    # stepping evidence (Xception's logits, which no program runs, is hypothesis)
    default_on = False
    stepping_evidence = True
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
            if not is_name(root, "self") or target.target is root:
                return False
        for ancestor in ctx.ancestors(assign):
            if isinstance(ancestor, (cst.FunctionDef, cst.Lambda)):
                return False
            if isinstance(ancestor, cst.If):
                return True
        return False

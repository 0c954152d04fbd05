"""TPL303 hand-written-fused-op: Hand-written composition of a fused built-in."""

from __future__ import annotations

import dataclasses
from typing import Iterator, Optional

import libcst as cst

from ...engine.context import Context
from ...engine.edits import keyword, torch_attribute
from ...engine.findings import Fix, Report, Safety
from ..base import Rule
from .common import is_name, is_number, method_call, without_parens


def _positional(call: cst.Call) -> list[cst.BaseExpression]:
    return [arg.value for arg in call.args if arg.keyword is None and not arg.star]


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
    `x - x.exp().sum(d, keepdim=True).log()` (log-softmax); `torch.log(torch.sum(torch.exp(x), d))`
    and `x.exp().sum(d).log()` (log-sum-exp); `torch.log(torch.sigmoid(x))`
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
    `torch.log_softmax(x, d)`, `torch.log(torch.sum(torch.exp(x), d))` -> `torch.logsumexp(x, d)`
    (where the sum names its dim), `torch.log(torch.sigmoid(x))` -> `F.logsigmoid(x)` and
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
    # its default form: code a step loop of the project runs (RULES.md); on libraries the broad
    # form's findings are hand-written host-side numerics of functions no loop of theirs runs
    stepping_evidence = True
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
        "log-sum-exp": """
            import torch

            def free_energy(logits, temperature):
                return -temperature * torch.log(torch.sum(torch.exp(logits / temperature), dim=1))  # expect: TPL303
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
        "log-sum-exp": """
            import torch

            def free_energy(logits, temperature):
                return -temperature * torch.logsumexp(logits / temperature, dim=1)
            """,
    }
    GOOD = {
        "built-ins": """
            import torch
            import torch.nn.functional as F

            def scores(x, target):
                logp = F.log_softmax(x, dim=-1)
                stable = x - torch.logsumexp(x, dim=1, keepdim=True)
                energy = torch.logsumexp(x, 1)
                return F.nll_loss(logp, target) + torch.sigmoid(x).sum() + stable.sum() + energy.sum()
            """,
        "log-of-other-things": """
            import torch

            def stats(x, probs, eps):
                entropy_floor = torch.log(probs + eps)
                scale = torch.log(x.abs().sum(1))
                ratio = x - torch.log(torch.exp(probs).sum(1, keepdim=True) + eps)
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
        if method_call(call, "log") is not None and not call.args and ctx.qualified_name(call) is None:
            assert isinstance(call.func, cst.Attribute)
            return call.func.value
        return None

    @staticmethod
    def _tensor_method(expr: cst.BaseExpression, name: str, ctx: Context) -> Optional[cst.Call]:
        """`x.<name>(...)` on a tensor: not `self.<name>(...)` (a module) nor a module's call."""
        call = method_call(expr, name)
        if call is None or ctx.qualified_name(call) is not None:
            return None
        assert isinstance(call.func, cst.Attribute)
        receiver = call.func.value
        if is_name(receiver, "self") or ctx.tensors.is_module_value(receiver):
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
        summed = self._summed_exp(inner, ctx)
        if summed is not None:
            return self._logsumexp(call, *summed, ctx)
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
            replacement = cst.Call(func=func, args=[cst.Arg(without_parens(argument))])
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
        call = method_call(expr, "exp")
        if call is not None and not call.args and ctx.qualified_name(call) is None:
            assert isinstance(call.func, cst.Attribute)
            return call.func.value
        return None

    def _summed_exp(
        self, expr: cst.BaseExpression, ctx: Context
    ) -> Optional[tuple[cst.BaseExpression, list[cst.Arg]]]:
        """(x, the sum's dim arguments) for `torch.sum(torch.exp(x), ...)` or `x.exp().sum(...)`."""
        if not isinstance(expr, cst.Call):
            return None
        if ctx.qualified_name(expr) == "torch.sum":
            args = _positional(expr)
            if not args or expr.args[0].keyword is not None:
                return None
            exp_of, dims = args[0], list(expr.args[1:])
        elif method_call(expr, "sum") is not None and ctx.qualified_name(expr) is None:
            assert isinstance(expr.func, cst.Attribute)
            exp_of, dims = expr.func.value, list(expr.args)
        else:
            return None
        argument = self._exp_argument(exp_of, ctx)
        return None if argument is None else (argument, dims)

    def _logsumexp(
        self, call: cst.Call, argument: cst.BaseExpression, dims: list[cst.Arg], ctx: Context
    ) -> Optional[_Composition]:
        """`torch.log(torch.sum(torch.exp(x), d))` -> `torch.logsumexp(x, d)`: one pass that
        subtracts the maximum first, where `exp` overflows for logits above about 88 (fp32). The
        log-softmax form (`x - log(sum(exp(x)))`) is reported whole, by the subtraction."""
        parent = ctx.facts.parents.get(call)
        if (
            isinstance(parent, cst.BinaryOperation)
            and parent.right is call
            and self._log_softmax_by_hand(parent, ctx)
        ):
            return None
        replacement, needs_import = None, False
        if self._dims_only(dims):
            func, needs_import = torch_attribute(ctx, "logsumexp")
            args = [cst.Arg(without_parens(argument)), *dims]
            args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            replacement = cst.Call(func=func, args=args)
        return _Composition(call, "log(sum(exp(x)))", "torch.logsumexp(x, dim)", replacement, needs_import)

    @staticmethod
    def _dims_only(dims: list[cst.Arg]) -> bool:
        """The sum's arguments are a dim (logsumexp needs one) and perhaps keepdim, nothing else."""
        if not dims or any(arg.star for arg in dims):
            return False
        names = [
            arg.keyword.value if arg.keyword else ("dim", "keepdim", "")[min(i, 2)]
            for i, arg in enumerate(dims)
        ]
        return names[0] == "dim" and set(names) <= {"dim", "keepdim"} and len(set(names)) == len(names)

    def _log_softmax_by_hand(self, node: cst.BinaryOperation, ctx: Context) -> Optional[_Composition]:
        """`x - x.exp().sum(d, keepdim=True).log()` and `x - torch.log(torch.exp(x).sum(...))`."""
        if not isinstance(node.right, cst.Call):
            return None
        inner = self._log_argument(node.right, ctx)
        summed = self._summed_exp(inner, ctx) if inner is not None else None
        if summed is None:
            return None
        argument, dims = summed
        if ctx.code(without_parens(argument)) != ctx.code(without_parens(node.left)):
            return None
        replacement = None
        needs_import = False
        dim = self._dim_of_keepdim_sum(list(dims))
        if dim is not None:
            func, needs_import = torch_attribute(ctx, "log_softmax")
            replacement = cst.Call(func=func, args=[cst.Arg(without_parens(node.left)), cst.Arg(dim)])
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
                keepdim = is_name(arg.value, "True")
            else:
                return None
        return dim if keepdim else None

    def _sigmoid_by_hand(self, node: cst.BinaryOperation, ctx: Context) -> Optional[_Composition]:
        """`1 / (1 + torch.exp(-x))` (either order of the sum)."""
        if not is_number(node.left, 1):
            return None
        denominator = node.right
        if not (isinstance(denominator, cst.BinaryOperation) and isinstance(denominator.operator, cst.Add)):
            return None
        if is_number(denominator.left, 1):
            exp = denominator.right
        elif is_number(denominator.right, 1):
            exp = denominator.left
        else:
            return None
        argument = self._exp_argument(exp, ctx)
        if argument is None:
            return None
        argument = without_parens(argument)
        if isinstance(argument, cst.UnaryOperation) and isinstance(argument.operator, cst.Minus):
            x = argument.expression
        elif (neg := method_call(argument, "neg")) is not None and not neg.args:
            assert isinstance(neg.func, cst.Attribute)
            x = neg.func.value
        else:
            return None
        func, needs_import = torch_attribute(ctx, "sigmoid")
        replacement = cst.Call(func=func, args=[cst.Arg(without_parens(x))])
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
            elif method_call(expr, *_REDUCTIONS) is not None and ctx.qualified_name(expr) is None:
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

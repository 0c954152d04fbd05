"""TPL204 per-parameter-loop: a loop over a model's parameters that launches kernels per tensor, every step."""

from __future__ import annotations

import dataclasses
from typing import Iterator, Optional

import libcst as cst

from ...analysis.tensors import NON_TENSOR_METHODS, is_torch_tensor_function
from ...engine.context import Context
from ...engine.edits import torch_attribute
from ...engine.findings import Fix, Report, Safety
from ...syntax.walker import children, descendants, dotted_name
from ..base import Rule, hot_place

# The first torch with torch._foreach_lerp_ (pytorch/pytorch#87562, opened after 1.13 branched).
_FOREACH_LERP = (2, 0)
# Tensor methods that launch no kernel: metadata, autograd flags, views.
_NO_KERNEL_METHODS = (NON_TENSOR_METHODS - {"item", "tolist", "numpy"}) | frozenset(
    """requires_grad_ retain_grad register_post_accumulate_grad_hook detach detach_ view view_as
    share_memory_ type""".split()
)
_SYNC_METHODS = frozenset({"item", "tolist"})
_SYNC_BUILTINS = frozenset({"builtins.float", "builtins.int", "builtins.bool"})
_NORM_CALLS = frozenset({"norm", "vector_norm", "clip_grad_norm_", "clip_grad_value_", "get_total_norm"})
# In-place rescales that, after a norm in the same iteration, clip a tensor by its own norm.
_SCALE_METHODS = frozenset({"mul_", "div_"})

_REMEDIES = {
    "ema": (
        "updates an EMA one tensor at a time",
        "use one torch._foreach_lerp_ over lists of both models' tensors "
        "(or torch.optim.swa_utils.AveragedModel with get_ema_multi_avg_fn)",
    ),
    "norm": (
        "computes gradient norms one tensor at a time",
        "use torch.nn.utils.clip_grad_norm_(..., foreach=True) or torch.nn.utils.get_total_norm",
    ),
    # each gradient against its own norm: clip_grad_norm_ would clip by the global norm instead
    "clip": (
        "clips each gradient by its own norm one tensor at a time",
        "keep the per-tensor clip with norms = torch._foreach_norm(grads), scales max_norm / (norm + eps) "
        "clamped to 1 and one torch._foreach_mul_(grads, scales), not clip_grad_norm_ (a global norm "
        "trains differently)",
    ),
    "sgd": (
        "takes a gradient step one tensor at a time",
        "use one torch._foreach_add_(params, grads, alpha=-lr) over the parameters that have gradients",
    ),
    "copy": (
        "copies tensors one at a time",
        "use one torch._foreach_copy_ over lists (torch 2.1)",
    ),
    # an optimizer's own update over a parameter group: what torch.optim's foreach paths do
    "optimizer": (
        "updates each parameter of the group with kernels of its own",
        "write the update over the group's lists with the multi-tensor ops, as torch.optim's optimizers do "
        "(torch._foreach_norm for per-tensor norms, torch._foreach_mul_/_foreach_add_/_foreach_addcmul_ "
        "for the momentum and the step)",
    ),
    "other": (
        "launches kernels for each tensor",
        "use the multi-tensor torch._foreach_* ops (_foreach_mul_, _foreach_add_, _foreach_lerp_) over lists",
    ),
}


@dataclasses.dataclass(frozen=True)
class _Body:
    """What one iteration does on the device."""

    launches: bool
    sync: Optional[str]  # the first host sync in the body, as written
    kind: str  # "ema" | "norm" | "copy" | "other"


def _body_nodes(loop: cst.For) -> Iterator[cst.CSTNode]:
    """Every node of the loop body, not entering nested functions, classes or lambdas."""
    return descendants(loop.body, enter_scopes=False)


def _scan(loop: cst.For, ctx: Context) -> _Body:
    launches = False
    sync: Optional[str] = None
    names: set[str] = set()
    for node in _body_nodes(loop):
        if isinstance(node, cst.Call):
            names.add(_callee_name(node))
            if _launches(node, ctx) and ctx.is_hot(node):
                launches = True  # not the lazy state set-up of a first step (`if "mu" not in state:`)
            if sync is None and _syncs(node, ctx):
                sync = ctx.code(node)
        elif (
            isinstance(node, cst.BinaryOperation)
            and (ctx.is_tensor(node.left) or ctx.is_tensor(node.right))
            and ctx.is_hot(node)
        ):
            launches = True
        elif (
            isinstance(node, (cst.If, cst.While)) and sync is None and ctx.is_tensor(node.test, certain=True)
        ):
            sync = f"if {ctx.code(node.test)}"
    two_models = len(ctx.parameter_targets(loop)) >= 2 or any(
        isinstance(n, cst.Subscript) and ctx.tensors.parameters.is_tensor_mapping(n.value)
        for n in _body_nodes(loop)
    )
    tensors = frozenset(ctx.parameter_targets(loop))
    blends = any(
        isinstance(n, cst.BaseSmallStatement) and _ema_form(n, tensors, ctx) for n in _body_nodes(loop)
    )
    if set(ctx.parameter_targets(loop).values()) == {"param_groups"}:
        kind = "optimizer"
    elif blends or names & {"lerp", "lerp_"} or (two_models and names & {"mul_", "sub_", "add_"}):
        kind = "ema"
    elif names & _NORM_CALLS and (names & _SCALE_METHODS or "clip_grad_norm_" in names):
        kind = "clip"
    elif names & _NORM_CALLS:
        kind = "norm"
    elif any(_steps_by_gradient(n, tensors) for n in _body_nodes(loop)):
        kind = "sgd"
    elif "copy_" in names:
        kind = "copy"
    else:
        kind = "other"
    return _Body(launches or sync is not None, sync, kind)


def _steps_by_gradient(node: cst.CSTNode, tensors: frozenset[str]) -> bool:
    """`p.data.add_(p.grad, alpha=-lr)`, `p.sub_(lr * p.grad)`, `p.data -= lr * p.grad`: a loop
    tensor moved in place by an expression that reads a gradient (an SGD step by hand)."""
    if isinstance(node, cst.AugAssign) and isinstance(node.operator, (cst.SubtractAssign, cst.AddAssign)):
        return _root(node.target) in tensors and _reads_gradient(node.value)
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        if node.func.attr.value in ("add_", "sub_") and _root(node.func.value) in tensors:
            return any(_reads_gradient(arg.value) for arg in node.args)
    return False


def _reads_gradient(expr: cst.CSTNode) -> bool:
    if isinstance(expr, cst.Attribute) and expr.attr.value == "grad":
        return True
    return any(_reads_gradient(child) for child in children(expr))


def _callee_name(call: cst.Call) -> str:
    func = call.func
    return func.attr.value if isinstance(func, cst.Attribute) else (dotted_name(func) or "")


def _launches(call: cst.Call, ctx: Context) -> bool:
    """`call` runs a kernel on one of the loop's tensors: a tensor method other than metadata,
    an in-place method (`shadow[k].lerp_(p, w)`) given a tensor, or a torch function of one."""
    qualified = ctx.qualified_name(call)
    if qualified is not None:
        return is_torch_tensor_function(qualified) and any(ctx.is_tensor(arg.value) for arg in call.args)
    func = call.func
    if not isinstance(func, cst.Attribute):
        return False
    method = func.attr.value
    if method in _NO_KERNEL_METHODS:
        return False
    if ctx.is_tensor(func.value):
        return True
    in_place = method.endswith("_") and not method.startswith("_")
    return in_place and any(ctx.is_tensor(arg.value) for arg in call.args)


def _syncs(call: cst.Call, ctx: Context) -> bool:
    func = call.func
    if isinstance(func, cst.Attribute) and func.attr.value in _SYNC_METHODS:
        return ctx.is_tensor(func.value)
    if ctx.qualified_name(call) in _SYNC_BUILTINS and len(call.args) == 1:
        return ctx.is_tensor(call.args[0].value, certain=True) or ctx.is_tensor(call.args[0].value)
    return False


# -- the fix: plain EMA forms -----------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Ema:
    """`ema` moves toward `model` by `weight`: what one `torch._foreach_lerp_` does."""

    ema: cst.BaseExpression  # the averaged tensor as written (`p_ema`, `p_ema.data`)
    model: cst.BaseExpression
    weight: str
    same_dtype: bool  # the loop already required equal dtypes (`lerp_`)


def _strip(expr: cst.BaseExpression) -> cst.BaseExpression:
    return expr.with_changes(lpar=[], rpar=[]) if expr.lpar else expr


def _root(expr: cst.BaseExpression) -> Optional[str]:
    """`p` for `p`, `p.data`, `p.detach()`: a loop variable, seen through the no-copy accessors."""
    expr = _strip(expr)
    if isinstance(expr, cst.Call) and not expr.args and isinstance(expr.func, cst.Attribute):
        if expr.func.attr.value == "detach":
            expr = expr.func.value
    if isinstance(expr, cst.Attribute) and expr.attr.value == "data":
        expr = expr.value
    return expr.value if isinstance(expr, cst.Name) else None


def _code(expr: cst.BaseExpression, ctx: Context) -> str:
    return "".join(ctx.code(_strip(expr)).split())


def _complement(expr: cst.BaseExpression, of: cst.BaseExpression, ctx: Context) -> bool:
    """`expr` is `1 - of` (`1.0 - of`, `(1. - of)`)."""
    expr = _strip(expr)
    return (
        isinstance(expr, cst.BinaryOperation)
        and isinstance(expr.operator, cst.Subtract)
        and isinstance(expr.left, (cst.Integer, cst.Float))
        and expr.left.evaluated_value == 1
        and _code(expr.right, ctx) == _code(of, ctx)
    )


def _weight_of(keep: cst.BaseExpression, take: cst.BaseExpression, ctx: Context) -> Optional[str]:
    """The lerp weight when `keep` is the EMA's share and `take` the model's (`m`, `1 - m`)."""
    if _complement(take, keep, ctx):
        return ctx.code(_strip(take))
    if _complement(keep, take, ctx):
        return ctx.code(_strip(take))
    return None


def _blend(
    expr: cst.BaseExpression, ema: str, tensors: frozenset[str], ctx: Context
) -> Optional[tuple[cst.BaseExpression, str]]:
    """(model tensor, weight) of `m * e + (1 - m) * p` in any order of terms and factors, `e` and
    `p` two of the loop's `tensors`."""
    expr = _strip(expr)
    if not (isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add)):
        return None
    shares: dict[str, tuple[cst.BaseExpression, cst.BaseExpression]] = {}
    for term in (expr.left, expr.right):
        term = _strip(term)
        if not (isinstance(term, cst.BinaryOperation) and isinstance(term.operator, cst.Multiply)):
            return None
        for tensor, share in ((term.left, term.right), (term.right, term.left)):
            root = _root(tensor)
            if root in tensors and root not in shares:
                shares[root] = (tensor, share)
                break
    if ema not in shares or len(shares) != 2:
        return None
    (model, take), keep = next(v for k, v in shares.items() if k != ema), shares[ema][1]
    weight = _weight_of(keep, take, ctx)
    return (model, weight) if weight is not None else None


def _ema_form(statement: cst.BaseSmallStatement, tensors: frozenset[str], ctx: Context) -> Optional[_Ema]:
    """The EMA update `statement` writes, over the loop's `tensors`."""
    if isinstance(statement, cst.Assign):
        # `e.data = e.data * m + p.data * (1 - m)`
        if len(statement.targets) != 1:
            return None
        target = statement.targets[0].target
        if not (isinstance(target, cst.Attribute) and target.attr.value == "data"):
            return None
        ema = _root(target)
        found = _blend(statement.value, ema, tensors, ctx) if ema else None
        return _Ema(target, found[0], found[1], False) if found else None
    if not isinstance(statement, cst.Expr) or not isinstance(statement.value, cst.Call):
        return None
    call = statement.value
    if not isinstance(call.func, cst.Attribute) or any(a.star for a in call.args):
        return None
    method, receiver = call.func.attr.value, call.func.value
    args = call.args
    if method == "lerp_" and len(args) == 2 and args[0].keyword is None:
        if args[1].keyword is not None and args[1].keyword.value != "weight":
            return None
        return _Ema(receiver, args[0].value, ctx.code(_strip(args[1].value)), True)
    if method == "copy_" and len(args) == 1 and args[0].keyword is None:
        ema = _root(receiver)
        value = _strip(args[0].value)
        lerp = _method_call(value, "lerp")
        if ema and lerp is not None and len(lerp.args) == 2 and not any(a.keyword for a in lerp.args):
            # `e.copy_(p.lerp(e, m))`: the model moves toward the EMA by m
            assert isinstance(lerp.func, cst.Attribute)
            if _root(lerp.args[0].value) == ema:
                keep = lerp.args[1].value
                return _Ema(receiver, lerp.func.value, f"1 - {_operand(keep, ctx)}", True)
            return None
        found = _blend(value, ema, tensors, ctx) if ema else None
        return _Ema(receiver, found[0], found[1], False) if found else None
    if method == "add_":
        scaled = _method_call(receiver, "mul_")
        if scaled is None or len(scaled.args) != 1 or scaled.args[0].keyword is not None:
            return None
        assert isinstance(scaled.func, cst.Attribute)
        keep = scaled.args[0].value
        if (
            len(args) == 2
            and args[0].keyword is None
            and args[1].keyword
            and args[1].keyword.value == "alpha"
        ):
            weight = _weight_of(keep, args[1].value, ctx)
            return _Ema(scaled.func.value, args[0].value, weight, False) if weight else None
        if len(args) == 1 and args[0].keyword is None:
            product = _strip(args[0].value)
            if isinstance(product, cst.BinaryOperation) and isinstance(product.operator, cst.Multiply):
                for tensor, take in ((product.right, product.left), (product.left, product.right)):
                    weight = _weight_of(keep, take, ctx)
                    if weight is not None and _root(tensor) in tensors:
                        return _Ema(scaled.func.value, tensor, weight, False)
    return None


def _method_call(expr: cst.BaseExpression, method: str) -> Optional[cst.Call]:
    expr = _strip(expr)
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == method:
        return expr
    return None


def _operand(expr: cst.BaseExpression, ctx: Context) -> str:
    """`expr` as the right operand of a subtraction."""
    expr = _strip(expr)
    text = ctx.code(expr)
    simple = (cst.Name, cst.Attribute, cst.Subscript, cst.Call, cst.Integer, cst.Float)
    return text if isinstance(expr, simple) else f"({text})"


def _mentions(expr: cst.CSTNode, names: set[str]) -> bool:
    if isinstance(expr, cst.Name) and expr.value in names:
        return True
    return any(_mentions(child, names) for child in children(expr))


def _calls_anything(expr: cst.CSTNode) -> bool:
    if isinstance(expr, (cst.Call, cst.Await, cst.Yield, cst.NamedExpr)):
        return True
    return any(_calls_anything(child) for child in children(expr))


def _reiterable(expr: cst.BaseExpression, ctx: Context) -> bool:
    """Evaluating `expr` twice walks the same tensors: a fresh `m.parameters()` call, a list."""
    if isinstance(expr, cst.Call):
        return isinstance(expr.func, cst.Attribute) or ctx.qualified_name(expr) in (
            "builtins.list",
            "builtins.tuple",
        )
    if isinstance(expr, cst.Name):
        bindings = ctx.bindings(expr.value, expr)
        return bool(bindings) and all(
            b.kind == "assign"
            and (
                isinstance(b.node, cst.ListComp)
                or (
                    isinstance(b.node, cst.Call)
                    and ctx.qualified_name(b.node) in ("builtins.list", "builtins.tuple")
                )
            )
            for b in bindings
        )
    return False


def _ema_fix(loop: cst.For, ctx: Context) -> Optional[Fix]:
    """One `torch._foreach_lerp_` for `for e, p in zip(E.parameters(), P.parameters()): <EMA form>`."""
    source = loop.iter
    targets = ctx.parameter_targets(loop)
    if not (
        isinstance(source, cst.Call)
        and ctx.qualified_name(source) == "builtins.zip"
        and len(source.args) == 2
        and isinstance(loop.target, cst.Tuple)
        and len(loop.target.elements) == 2
        and set(targets.values()) == {"parameters"}
        and len(targets) == 2
        and all(_reiterable(arg.value, ctx) for arg in source.args)
        and isinstance(loop.body, cst.IndentedBlock)
        and len(loop.body.body) == 1
        and loop.orelse is None
    ):
        return None
    line = loop.body.body[0]
    if not isinstance(line, cst.SimpleStatementLine) or len(line.body) != 1:
        return None
    form = _ema_form(line.body[0], frozenset(targets), ctx)
    if form is None or {_root(form.ema), _root(form.model)} != set(targets):
        return None
    weight = cst.parse_expression(form.weight)
    if _mentions(weight, set(targets)) or _calls_anything(weight):
        return None
    declared = ctx.target_torch_version()
    if declared.version is not None and declared.version < _FOREACH_LERP:
        return None
    pairs = _unused_name(loop, ctx)
    header = f"for {ctx.code(loop.target)} in {pairs}"
    ema, model = ctx.code(_strip(form.ema)), ctx.code(_strip(form.model))
    if not form.same_dtype:
        # mul_/add_/copy_ accept a model in another dtype than its EMA; lerp does not
        model = f"{_operand(form.model, ctx)}.to({_root(form.ema)}.dtype)"
    function, needs_import = torch_attribute(ctx, "_foreach_lerp_")
    # the zip is built once and read twice: a list, since a zip of generators is spent by one read
    pairing = cst.parse_statement(f"{pairs} = list({ctx.code(source)})\n")
    lerp = cst.parse_statement(
        f"{ctx.code(function)}(\n    [{ema} {header}],\n    [{model} {header}],\n    {form.weight},\n)\n"
    )
    statements = cst.FlattenSentinel([pairing.with_changes(leading_lines=loop.leading_lines), lerp])
    return Fix.replace(loop, statements, Safety.UNSAFE, "one torch._foreach_lerp_ over lists", needs_import)


def _unused_name(loop: cst.For, ctx: Context) -> str:
    """A name for the list of tensor pairs that nothing in the loop's scope binds already."""
    for name in ("pairs", "tensor_pairs", "ema_pairs"):
        if not ctx.bindings(name, loop):
            return name
    return next(f"pairs_{n}" for n in range(2, 1000) if not ctx.bindings(f"pairs_{n}", loop))


class PerParameterLoop(Rule):
    """## What it does
    Flags a `for` loop over a model's tensors (`parameters()`, `named_parameters()`, `buffers()`,
    `named_buffers()`, `state_dict().values()`/`.items()`, a `zip` of such sequences, or a list or
    dict built from one) in code that runs every step (the step loop and what it calls: an EMA's
    `update`, a clipping or logging helper, a module's `forward`, such as MoCo's momentum update of
    its key encoder) whose body launches tensor operations for each tensor: an EMA, weight decay,
    gradient scaling, clipping, norms. An optimizer the project writes is one too: a LARS- or
    Muon-style `step` that walks each parameter group's `group["params"]` (`for group in
    self.param_groups: for p in group["params"]: ...`) with kernels of its own per tensor, where
    torch.optim's optimizers run the same update as a few multi-tensor kernels per group.

    ## Why it is slow
    Each iteration launches its own kernels (two or three for an EMA update, more for a norm and a
    rescale), so a ViT's 150 tensors cost hundreds of launches and Python round trips per step
    where the multi-tensor `torch._foreach_*` ops do the whole list in a few launches. A `.item()`,
    `float(t)` or an `if` on a tensor in the body adds one host sync per parameter: the host waits
    for the device once per tensor. Use `torch._foreach_lerp_` (EMA), `_foreach_mul_`/
    `_foreach_add_` (decay, scaling, a hand-written SGD step: `torch._foreach_add_(params, grads,
    alpha=-lr)`), `torch.nn.utils.clip_grad_norm_(..., foreach=True)` or
    `torch.nn.utils.get_total_norm` (a global norm), or `torch.optim.swa_utils.AveragedModel`
    with `get_ema_multi_avg_fn`. The advice keeps the loop's semantics: a clip of each gradient
    against its own norm becomes `torch._foreach_norm` + a clamp of the scales +
    `torch._foreach_mul_`, never `clip_grad_norm_`, whose one global norm trains differently.
    The Measured section below has an H100 and an H200. On the H200's host the ViT steps
    are launch-bound and their time varies by 5-10% from call to call: the EMA fix measured 0.97-1.07x,
    within that noise (an earlier run of the fix's previous spelling gave 1.10-1.14x in the short steps),
    while the clip loop, whose `.item()` drains the queue once per tensor, costs 10-27% on every size.
    Alone, the EMA update of 152 tensors takes 3.3 ms as a loop and 1.2-1.7 ms as the fix (which
    rebuilds its lists every call; 0.08 ms with the lists kept).

    ## Fix safety
    Unsafe, and only for the plain EMA forms over two models' `parameters()`
    (`e.mul_(m).add_(p, alpha=1 - m)`, `e.mul_(m).add_((1 - m) * p)`, `e.copy_(m * e + (1 - m) * p)`,
    `e.data = e.data * m + p.data * (1 - m)`, `e.lerp_(p, 1 - m)`, `e.copy_(p.lerp(e, m))`; with or
    without `.data`/`.detach()`): the loop becomes one `torch._foreach_lerp_` over two lists built
    by one `zip`, kept in a list (`pairs`, or a name the scope does not use) so that it is built
    once. Lerp rounds differently from a multiply and an add (the results agree to a
    few ulps), and the weight is evaluated once instead of once per tensor. The model's tensors are
    cast to the EMA's dtype where the loop allowed them to differ. It raises where the models have
    no parameters at all (the loop did nothing). Written only when the project's oldest supported
    torch has `torch._foreach_lerp_` (2.0); otherwise, and for every other body, the message says
    what to use.

    ## When it stays silent
    Loops at set-up or after training (`__init__`, freezing with `requires_grad_(False)`,
    initialisation, checkpoint conversion), under a periodic branch (`if step % 100 == 0:`),
    loops whose body does Python work only (collecting parameter groups, counting with
    `numel()`, tagging, setting each group's `lr`, an optimizer's loop that only gathers its lists for
    `torch._foreach_*` calls; a state filled on the first step, under `if len(state) == 0:` or
    `if "mu" not in state:`, does not count), loops over modules (`for name, m in self.named_children()`), and the
    step loop itself; loops over a model that stays on the host (built without a device, never
    moved, passed on or returned: a CPU-only script).
    """

    code = "TPL204"
    name = "per-parameter-loop"
    summary = "Loop over a model's parameters launches kernels per tensor every step"
    message = "loop over {over} in {place} {does}{sync}; {remedy}"
    default_on = False  # to be decided on labelled evidence (RULES.md, "Defaults follow evidence")
    fix_safety = Safety.UNSAFE
    where = "per step"
    node_types = (cst.For,)
    benchmark = "TPL204"

    BAD = {
        "script-whose-model-is-moved-after-it-is-built": """
            import torch
            import torch.nn.functional as F

            fc = torch.nn.Linear(4, 1)
            fc.cuda()
            for step in range(1000):
                x = torch.randn(32, 4, device="cuda")
                loss = F.smooth_l1_loss(fc(x), x.sum(1, keepdim=True))
                fc.zero_grad()
                loss.backward()
                for param in fc.parameters():  # expect: TPL204
                    param.data.add_(-0.1 * param.grad)
            """,
        "ema-teacher-in-step-loop": """
            import torch

            def train(student, teacher, loader, optimizer, momentum=0.996):
                for images, _ in loader:
                    loss = student(images).mean()
                    loss.backward()
                    optimizer.step()
                    with torch.no_grad():
                        for p_t, p_s in zip(teacher.parameters(), student.parameters()):  # expect: TPL204
                            p_t.mul_(momentum).add_(p_s.detach(), alpha=1 - momentum)
            """,
        "ema-update-method-called-per-step": """
            import torch
            from torch import nn

            class ModelEma:
                def __init__(self, model, decay=0.9999):
                    self.module = model
                    self.decay = decay

                @torch.no_grad()
                def update(self, model):
                    for e, p in zip(self.module.parameters(), model.parameters()):  # expect: TPL204
                        e.copy_(self.decay * e + (1 - self.decay) * p)

            def train(model, loader, optimizer):
                ema = ModelEma(model)
                for x, y in loader:
                    nn.functional.mse_loss(model(x), y).backward()
                    optimizer.step()
                    ema.update(model)
            """,
        "momentum-encoder-by-data-assignment": """
            import torch
            from torch import nn

            class MoCo(nn.Module):
                @torch.no_grad()
                def _momentum_update(self):
                    for q, k in zip(self.encoder_q.parameters(), self.encoder_k.parameters()):  # expect: TPL204
                        k.data = k.data * self.m + q.data * (1.0 - self.m)

                def forward(self, x):
                    self._momentum_update()
                    return self.encoder_q(x)
            """,
        "lerp-forms": """
            import torch

            def train(net, ema, loader, optimizer, beta):
                for x in loader:
                    net(x).mean().backward()
                    optimizer.step()
                    with torch.no_grad():
                        for e, p in zip(ema.parameters(), net.parameters()):  # expect: TPL204
                            e.lerp_(p, 1 - beta)
                        for p_ema, p_net in zip(ema.parameters(), net.parameters()):  # expect: TPL204
                            p_ema.copy_(p_net.detach().lerp(p_ema, beta))
            """,
        "state-dict-ema-with-dict-lookup": """
            import torch

            @torch.no_grad()
            def ema_update(model, averaged, decay):
                averaged_params = dict(averaged.named_parameters())
                for name, param in model.named_parameters():  # expect: TPL204
                    averaged_params[name].lerp_(param, 1 - decay)
                for e, p in zip(averaged.state_dict().values(), model.state_dict().values()):  # expect: TPL204
                    e.copy_(e * decay + (1 - decay) * p)

            def train(model, averaged, loader, optimizer):
                for x in loader:
                    model(x).sum().backward()
                    optimizer.step()
                    ema_update(model, averaged, 0.999)
            """,
        "clipping-with-item-per-parameter": """
            import torch

            def clip_gradients(model, clip):
                norms = []
                for name, p in model.named_parameters():  # expect: TPL204
                    if p.grad is not None:
                        param_norm = p.grad.data.norm(2)
                        norms.append(param_norm.item())
                        clip_coef = clip / (param_norm + 1e-6)
                        if clip_coef < 1:
                            p.grad.data.mul_(clip_coef)
                return norms

            def train(model, loader, optimizer):
                for x in loader:
                    model(x).sum().backward()
                    clip_gradients(model, 3.0)
                    optimizer.step()
            """,
        "lars-optimizer-of-the-project": """
            import torch

            class LARS(torch.optim.Optimizer):
                def __init__(self, params, lr, momentum=0.9, eta=0.001):
                    super().__init__(params, dict(lr=lr, momentum=momentum, eta=eta))

                @torch.no_grad()
                def step(self):
                    for g in self.param_groups:
                        for p in g["params"]:  # expect: TPL204
                            if p.grad is None:
                                continue
                            param_norm, update_norm = torch.norm(p), torch.norm(p.grad)
                            q = torch.where(update_norm > 0, g["eta"] * param_norm / update_norm, 1.0)
                            state = self.state[p]
                            if "mu" not in state:
                                state["mu"] = torch.zeros_like(p)
                            state["mu"].mul_(g["momentum"]).add_(p.grad * q)
                            p.add_(state["mu"], alpha=-g["lr"])

            def train(model, loader):
                optimizer = LARS(model.cuda().parameters(), lr=0.2)
                for x in loader:
                    model(x).sum().backward()
                    optimizer.step()
            """,
        "grad-sanitising-in-step-loop": """
            import torch

            def train(net, loader, optimizer):
                for x in loader:
                    net(x).sum().backward()
                    for param in net.parameters():  # expect: TPL204
                        if param.grad is not None:
                            torch.nan_to_num(param.grad, nan=0, posinf=1e5, neginf=-1e5, out=param.grad)
                    optimizer.step()
            """,
    }
    FIXED = {
        "ema-teacher-in-step-loop": """
            import torch

            def train(student, teacher, loader, optimizer, momentum=0.996):
                for images, _ in loader:
                    loss = student(images).mean()
                    loss.backward()
                    optimizer.step()
                    with torch.no_grad():
                        pairs = list(zip(teacher.parameters(), student.parameters()))
                        torch._foreach_lerp_(
                            [p_t for p_t, p_s in pairs],
                            [p_s.detach().to(p_t.dtype) for p_t, p_s in pairs],
                            1 - momentum,
                        )
            """,
        "ema-update-method-called-per-step": """
            import torch
            from torch import nn

            class ModelEma:
                def __init__(self, model, decay=0.9999):
                    self.module = model
                    self.decay = decay

                @torch.no_grad()
                def update(self, model):
                    pairs = list(zip(self.module.parameters(), model.parameters()))
                    torch._foreach_lerp_(
                        [e for e, p in pairs],
                        [p.to(e.dtype) for e, p in pairs],
                        1 - self.decay,
                    )

            def train(model, loader, optimizer):
                ema = ModelEma(model)
                for x, y in loader:
                    nn.functional.mse_loss(model(x), y).backward()
                    optimizer.step()
                    ema.update(model)
            """,
        "momentum-encoder-by-data-assignment": """
            import torch
            from torch import nn

            class MoCo(nn.Module):
                @torch.no_grad()
                def _momentum_update(self):
                    pairs = list(zip(self.encoder_q.parameters(), self.encoder_k.parameters()))
                    torch._foreach_lerp_(
                        [k.data for q, k in pairs],
                        [q.data.to(k.dtype) for q, k in pairs],
                        1.0 - self.m,
                    )

                def forward(self, x):
                    self._momentum_update()
                    return self.encoder_q(x)
            """,
        "lerp-forms": """
            import torch

            def train(net, ema, loader, optimizer, beta):
                for x in loader:
                    net(x).mean().backward()
                    optimizer.step()
                    with torch.no_grad():
                        pairs = list(zip(ema.parameters(), net.parameters()))
                        torch._foreach_lerp_(
                            [e for e, p in pairs],
                            [p for e, p in pairs],
                            1 - beta,
                        )
                        pairs = list(zip(ema.parameters(), net.parameters()))
                        torch._foreach_lerp_(
                            [p_ema for p_ema, p_net in pairs],
                            [p_net.detach() for p_ema, p_net in pairs],
                            1 - beta,
                        )
            """,
    }
    GOOD = {
        "cpu-script-with-a-model-never-moved": """
            import torch
            import torch.nn.functional as F

            fc = torch.nn.Linear(4, 1)
            for step in range(1000):
                x = torch.randn(32, 4)
                loss = F.smooth_l1_loss(fc(x), x.sum(1, keepdim=True))
                fc.zero_grad()
                loss.backward()
                for param in fc.parameters():
                    param.data.add_(-0.1 * param.grad)
            """,
        "freezing-and-init-at-set-up": """
            import torch
            from torch import nn

            class Net(nn.Module):
                def __init__(self, backbone):
                    super().__init__()
                    self.backbone = backbone
                    for p in self.backbone.parameters():
                        p.requires_grad_(False)
                    for p in self.parameters():
                        p.detach().zero_()

                def forward(self, x):
                    return self.backbone(x)

            def train(model, loader, optimizer):
                for name, p in model.named_parameters():
                    if "head" not in name:
                        p.requires_grad = False
                for x in loader:
                    model(x).sum().backward()
                    optimizer.step()
                for p in model.parameters():
                    p.data.mul_(0.5)
            """,
        "periodic-logging-loop": """
            import torch

            def train(model, loader, optimizer, writer):
                for step, x in enumerate(loader):
                    model(x).sum().backward()
                    optimizer.step()
                    if step % 100 == 0:
                        for name, p in model.named_parameters():
                            writer.add_histogram(name, p.detach().cpu().numpy(), step)
                            writer.add_scalar(name + "/norm", p.grad.norm().item(), step)
            """,
        "python-only-bodies": """
            import torch

            def train(model, loader, optimizer):
                for x in loader:
                    model(x).sum().backward()
                    optimizer.step()
                    count = 0
                    names = []
                    for name, p in model.named_parameters():
                        count += p.numel()
                        if p.grad is not None and p.ndim > 1:
                            names.append(name)
                    decay = [p for p in model.parameters() if p.requires_grad]
            """,
        "loop-over-named-modules": """
            import torch
            from torch import nn

            class Net(nn.Module):
                def forward(self, x):
                    for name, m in self.named_children():
                        x = m(x) * 2
                    for block in self.blocks:
                        x = block(x) + x
                    return x
            """,
        "optimizer-step-in-multi-tensor-form": """
            import torch

            class Lion(torch.optim.Optimizer):
                def __init__(self, params, lr=1e-4, betas=(0.9, 0.99)):
                    super().__init__(params, dict(lr=lr, betas=betas))

                @torch.no_grad()
                def step(self):
                    for group in self.param_groups:
                        params, grads, exp_avgs = [], [], []
                        for p in group["params"]:
                            if p.grad is None:
                                continue
                            state = self.state[p]
                            if len(state) == 0:  # the first step only
                                state["exp_avg"] = torch.zeros_like(p)
                            params.append(p)
                            grads.append(p.grad)
                            exp_avgs.append(state["exp_avg"])
                        beta1, beta2 = group["betas"]
                        updates = torch._foreach_lerp(exp_avgs, grads, 1 - beta1)
                        torch._foreach_sign_(updates)
                        torch._foreach_add_(params, updates, alpha=-group["lr"])
                        torch._foreach_lerp_(exp_avgs, grads, 1 - beta2)

            def train(model, loader, schedule):
                optimizer = Lion(model.cuda().parameters())
                for step, x in enumerate(loader):
                    for group in optimizer.param_groups:
                        group["lr"] = schedule(step)
                    model(x).sum().backward()
                    optimizer.step()
            """,
        "momentum-encoder-in-multi-tensor-form": """
            import torch
            from torch import nn

            class MoCo(nn.Module):
                @torch.no_grad()
                def _momentum_update_key_encoder(self):
                    torch._foreach_lerp_(
                        list(self.encoder_k.parameters()), list(self.encoder_q.parameters()), 1.0 - self.m
                    )

                def forward(self, x):
                    self._momentum_update_key_encoder()
                    return self.encoder_q(x)
            """,
        "multi-tensor-forms-already": """
            import torch

            def train(model, ema, loader, optimizer):
                ema_params = list(ema.parameters())
                params = list(model.parameters())
                for x in loader:
                    model(x).sum().backward()
                    torch.nn.utils.clip_grad_norm_(params, 1.0, foreach=True)
                    optimizer.step()
                    torch._foreach_lerp_(ema_params, params, 0.001)
            """,
    }

    def check(self, node: cst.For, ctx: Context) -> Iterator[Report]:
        if node.asynchronous is not None or ctx.hot_reason(node) is None:
            return
        if ctx.parameter_sequence(node.iter) is None or ctx.step_loop(node.body) is node:
            return
        if ctx.walks_host_model(node.iter):
            return  # CPU parameters: no kernel launches to batch
        body = _scan(node, ctx)
        if not body.launches:
            return
        does, remedy = _REMEDIES[body.kind]
        sync = f", with one host sync per parameter ({body.sync})" if body.sync else ""
        fix = _ema_fix(node, ctx) if body.kind == "ema" else None
        if body.kind == "ema" and fix is None:
            declared = ctx.target_torch_version()
            if declared.version is not None and declared.version < _FOREACH_LERP:
                remedy += " (torch._foreach_lerp_ needs torch 2.0)"
        yield self.report(
            node,
            reason=ctx.hot_reason(node),
            fix=fix,
            over=" ".join(ctx.code(node.iter).split()).replace("( ", "(").replace(" )", ")"),
            place=hot_place(node, ctx),
            does=does,
            sync=sync,
            remedy=remedy,
        )

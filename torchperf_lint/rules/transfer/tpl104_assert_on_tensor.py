"""TPL104 assert-on-tensor: assert that reads tensor values in hot code."""

from __future__ import annotations

from typing import Iterator, Optional

import libcst as cst

from ...engine.context import Context
from ...engine.edits import torch_attribute
from ...engine.findings import Fix, Report, Safety
from ..base import Rule, hot_place
from .assert_cost import outside_own_loop, syncs_anyway, validates_arguments
from .common import (
    condition_parts,
    host_sync,
    on_device,
)

_VALUE_COMPARISONS = frozenset({"torch.equal", "torch.allclose", "torch.is_nonzero"})


def _reads_tensor(test: cst.BaseExpression, ctx: Context) -> bool:
    """An `assert`/`if` test whose truth needs tensor values on the host."""
    for part in condition_parts(test, ctx):
        operands = [part]
        if isinstance(part, cst.Comparison):
            if all(isinstance(c.operator, (cst.Is, cst.IsNot)) for c in part.comparisons):
                continue  # `t is not None` asks which object, not what it holds
            operands = [part.left, *(c.comparator for c in part.comparisons)]
        for operand in operands:
            if on_device(operand, ctx, certain=True):
                return True
            if isinstance(operand, cst.Call) and (
                host_sync(operand, ctx) is not None or _compares_values(operand, ctx)
            ):
                return True
    return False


def _compares_values(call: cst.Call, ctx: Context) -> bool:
    """`torch.equal(a, b)`, `torch.allclose(a, b)`, `a.equal(b)`: bools computed from tensor values."""
    if ctx.qualified_name(call) in _VALUE_COMPARISONS:
        return True
    func = call.func
    return (
        isinstance(func, cst.Attribute)
        and func.attr.value in ("equal", "allclose")
        and ctx.is_tensor(func.value)
    )


def _single_tensor_condition(test: cst.BaseExpression, ctx: Context) -> bool:
    """A test `torch._assert_async` can take as is: one comparison of tensors, or `.all()`/
    `.any()` (method or torch function) reducing to one element."""
    if isinstance(test, cst.Comparison):
        if len(test.comparisons) != 1 or not ctx.is_tensor(test, certain=True):
            return False
        operands = (test.left, test.comparisons[0].comparator)
        return not any(isinstance(o, cst.Call) and host_sync(o, ctx) for o in operands)
    if not isinstance(test, cst.Call) or not ctx.is_tensor(test, certain=True):
        return False
    if ctx.qualified_name(test) in ("torch.all", "torch.any"):
        return len(test.args) == 1
    return isinstance(test.func, cst.Attribute) and test.func.attr.value in ("all", "any") and not test.args


def _why_free(node: cst.Assert, ctx: Context) -> Optional[str]:
    """Why the assert costs the step nothing worth a change, or is its entry's contract; None
    when it is a sync the step pays for (assert_cost.py)."""
    read = syncs_anyway(node, ctx)
    if read is not None:
        return (
            f"the function reads the same tensor on the host anyway at line {ctx.line_of(read)}: "
            "the assert adds no wait worth removing"
        )
    loop = outside_own_loop(node, ctx)
    if loop is not None:
        return (
            f"outside the loop at line {ctx.line_of(loop)} of its own function, which runs a model per "
            "iteration: the assert runs once per many model calls"
        )
    if validates_arguments(node, ctx):
        return "validates the caller's arguments, with a message for the caller: the entry's contract"
    return None


class AssertOnTensor(Rule):
    """## What it does
    Flags an `assert` in hot code whose test reads tensor values: `.max()`, `.min()`, `.all()`,
    `.any()`, `.sum()`, comparisons of tensors, `torch.isfinite(...)`, `torch.all(...)`,
    `.item()`, `torch.equal(...)`.

    ## Why it is slow
    Python needs a `bool` to decide the assert, so the tensor's value is copied to the host
    and the CPU waits for every kernel queued before it: the GPU then runs dry while the CPU
    queues the next work. Seed 004's loss with `assert target.max() < 10` pays this at every
    call, and so does a per-step `assert torch.isfinite(loss).all()`. The measured effect on
    an H100 is in the Measured section below.

    ## Fix safety
    Unsafe: `torch._assert_async(cond)` (the assert's message is kept when it is a string
    literal) checks on the device without waiting, but a failure surfaces later, at some
    following CUDA call, as a device-side assertion that leaves the CUDA context unusable, and
    `python -O` no longer removes the check. Offered only when the test is one tensor condition:
    a single comparison, or `.all()`/`.any()`/`torch.all(x)`/`torch.any(x)`. The alternative,
    named in the message, is to validate the data once in the input pipeline.

    ## When it stays silent
    Cold code (`__init__`, setup and validation functions); asserts on shapes, dtypes, devices,
    `isinstance`, `x.dim()`, `len(x)` and other Python values; parameters that are only likely
    tensors (`assert n == k` compares ints as often as tensors).

    Where the assert costs the step nothing worth a change, or is an entry's contract
    (`--show-context` says which):
    - the function reads the same tensor on the host anyway, on every path that runs the assert
      (`grid.tolist()`, `.item()`, `int()` of it, a size or a slice bound, an `if` on it; "the same"
      follows the function's assignments back to its parameters and the tensors on `self`): the host
      waits for those values once per call whatever the assert does. A read in another branch, or of
      another tensor, does not count;
    - the assert sits outside a loop of its own function that runs the model once per iteration
      (a `generate` whose checks follow its token loop, called per batch of an evaluation): it runs
      once per many model calls. Not in `forward`, a step hook or what they call, whose loops (over
      layers, over experts) run inside one model call;
    - the assert validates what the caller passed in (parameters, as they are or through torch
      functions and tensor methods, never through a layer or a helper) and says so in a message to
      the caller: a library entry's contract, kept on purpose, unlike a check on a value the step
      computes.
    """

    code = "TPL104"
    name = "assert-on-tensor"
    summary = "assert that reads tensor values in hot code"
    message = (
        "assert on tensor values makes the host wait for the device in {place}; "
        "use torch._assert_async(...) or validate the data in the input pipeline{graph}"
    )
    default_on = False  # below the real-code precision bar (evidence.py, precision.json)
    stepping_evidence = True  # its default form: code a step loop of the project runs (RULES.md)
    fix_safety = Safety.UNSAFE
    where = "hot code"
    node_types = (cst.Assert,)
    benchmark = "TPL104"

    BAD = {
        "seed-assert-in-loss-helper": """
            import torch
            import torch.nn.functional as F
            from torch import nn

            def weighted_nll(pred, target, weight):
                assert target.max() < 10  # expect: TPL104
                nll = -pred.gather(1, target[:, None])[:, 0]
                return (nll * weight[target]).mean()

            class CrossEntropyLoss(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.register_buffer("weight", torch.full((10,), 0.1))

                def forward(self, input, target):
                    pred = F.log_softmax(input, dim=1)
                    return weighted_nll(pred, target, self.weight)
            """,
        "isfinite-in-step-loop": """
            import torch

            def train(model, loader, optimizer):
                for x, y in loader:
                    loss = model(x, y)
                    assert torch.isfinite(loss).all(), "loss diverged"  # expect: TPL104
                    loss.backward()
                    optimizer.step()
            """,
        "comparison-all-with-alias": """
            import torch as th
            from torch import nn

            class SqrtLayer(nn.Module):
                def forward(self, x):
                    assert (x >= 0).all()  # expect: TPL104
                    return th.sqrt(x)
            """,
        "item-and-torch-all-in-forward": """
            import torch
            from torch import nn

            class Masked(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.gate = nn.Linear(16, 16)

                def forward(self, x, mask):
                    keep = mask & (self.gate(x) > 0)
                    assert keep.sum().item() > 0, f"empty mask for input of shape {x.shape}"  # expect: TPL104
                    assert torch.all(mask.sum(1) <= x.shape[1])  # expect: TPL104
                    return x.masked_fill(~keep, 0)
            """,
        "host-read-only-in-another-branch": """
            import torch
            from torch import nn

            class Clip(nn.Module):
                def forward(self, x, strategy: str = "peak"):
                    if strategy == "peak":
                        if (x.abs().max() > 1).item():
                            x = x / x.abs().max()
                    else:
                        assert x.abs().max() <= 1  # expect: TPL104
                    return x
            """,
        "host-read-of-another-tensor": """
            import torch
            from torch import nn

            class Gate(nn.Module):
                def forward(self, x, lengths):
                    assert (x >= 0).all()  # expect: TPL104
                    return x[:, : int(lengths.max())]
            """,
    }
    FIXED = {
        "seed-assert-in-loss-helper": """
            import torch
            import torch.nn.functional as F
            from torch import nn

            def weighted_nll(pred, target, weight):
                torch._assert_async(target.max() < 10)
                nll = -pred.gather(1, target[:, None])[:, 0]
                return (nll * weight[target]).mean()

            class CrossEntropyLoss(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.register_buffer("weight", torch.full((10,), 0.1))

                def forward(self, input, target):
                    pred = F.log_softmax(input, dim=1)
                    return weighted_nll(pred, target, self.weight)
            """,
        "isfinite-in-step-loop": """
            import torch

            def train(model, loader, optimizer):
                for x, y in loader:
                    loss = model(x, y)
                    torch._assert_async(torch.isfinite(loss).all(), "loss diverged")
                    loss.backward()
                    optimizer.step()
            """,
        "comparison-all-with-alias": """
            import torch as th
            from torch import nn

            class SqrtLayer(nn.Module):
                def forward(self, x):
                    th._assert_async((x >= 0).all())
                    return th.sqrt(x)
            """,
        "item-and-torch-all-in-forward": """
            import torch
            from torch import nn

            class Masked(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.gate = nn.Linear(16, 16)

                def forward(self, x, mask):
                    keep = mask & (self.gate(x) > 0)
                    assert keep.sum().item() > 0, f"empty mask for input of shape {x.shape}"
                    torch._assert_async(torch.all(mask.sum(1) <= x.shape[1]))
                    return x.masked_fill(~keep, 0)
            """,
        "host-read-only-in-another-branch": """
            import torch
            from torch import nn

            class Clip(nn.Module):
                def forward(self, x, strategy: str = "peak"):
                    if strategy == "peak":
                        if (x.abs().max() > 1).item():
                            x = x / x.abs().max()
                    else:
                        torch._assert_async(x.abs().max() <= 1)
                    return x
            """,
        "host-read-of-another-tensor": """
            import torch
            from torch import nn

            class Gate(nn.Module):
                def forward(self, x, lengths):
                    torch._assert_async((x >= 0).all())
                    return x[:, : int(lengths.max())]
            """,
    }
    GOOD = {
        "shape-dtype-and-type-asserts": """
            import torch
            from torch import nn

            class Conv(nn.Module):
                def forward(self, x, y):
                    assert x.dim() == 4
                    assert x.shape[1] == 3, f"expected RGB, got {x.shape}"
                    assert x.dtype == torch.float32 and x.is_contiguous()
                    assert isinstance(y, torch.Tensor) and len(y) == x.size(0)
                    assert x.device == y.device
                    return x
            """,
        "same-assert-in-init": """
            import torch
            from torch import nn

            class Embedding(nn.Module):
                def __init__(self, table):
                    super().__init__()
                    assert torch.isfinite(table).all()
                    self.register_buffer("table", table)

                def forward(self, idx):
                    return self.table[idx]
            """,
        "python-values-and-flags": """
            import torch
            from torch import nn

            class Attention(nn.Module):
                def forward(self, q, k, num_heads, mode="full"):
                    assert mode in ("full", "causal")
                    assert q.shape[-1] % num_heads == 0
                    assert k is not None
                    return torch.softmax(q @ k.transpose(-1, -2), dim=-1)
            """,
        "identity-test-of-a-device-tensor": """
            import torch
            from torch import nn

            class RunningSum(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.total = torch.zeros(3, device="cuda")

                def forward(self, x):
                    assert self.total is not None  # for mypy: which object, not its values
                    self.total += x.sum(0)
                    return self.total
            """,
        "same-tensor-read-on-the-host-anyway": """
            import torch
            from torch import nn

            class PatchEmbed(nn.Module):
                def forward(self, x, grid: torch.Tensor):
                    assert bool((grid[:, 0] == 1).all())
                    sizes = grid.tolist()  # one host read per call, which the assert joins
                    return torch.split(x, [h * w for _, h, w in sizes])

            def loudness(wav: torch.Tensor, target: float) -> torch.Tensor:
                energy = wav.pow(2).mean().sqrt().item()
                out = wav * (target / max(energy, 1e-8))
                assert out.isfinite().all()
                return out

            class Loss(nn.Module):
                def forward(self, pred, target):
                    return (pred - loudness(target, 0.1)).abs().mean()
            """,
        "entry-validating-its-arguments": """
            import torch
            from torch import nn

            class RoleEncoder(nn.Module):
                def __init__(self, fillers, roles):
                    super().__init__()
                    self.fillers = nn.Embedding(fillers, 64)
                    self.roles = nn.Embedding(roles, 64)

                def forward(self, tokens: torch.Tensor, roles: torch.Tensor, mask=None):
                    if mask is not None:
                        tokens = tokens.masked_fill(~mask, 0)
                    assert (tokens.min() >= 0) and (tokens.max() < self.fillers.num_embeddings), (
                        "tokens must be filler ids in [0, num_fillers); mark padding with `mask`"
                    )
                    return self.fillers(tokens) * self.roles(roles)
            """,
        "cold-dataset-validation": """
            import torch

            def check_dataset(dataset):
                assert (dataset.targets >= 0).all()

            def train(model, loader, optimizer):
                for x, y in loader:
                    loss = model(x, y)
                    torch._assert_async(torch.isfinite(loss))
                    loss.backward()
                    optimizer.step()
            """,
    }

    def check(self, node: cst.Assert, ctx: Context) -> Iterator[Report]:
        reason = ctx.hot_reason(node)
        if reason is None or not _reads_tensor(node.test, ctx):
            return
        free = _why_free(node, ctx)
        if free is not None:
            yield self.note(node, free)
            return
        yield self.report(
            node,
            reason=reason,
            fix=self._fix(node, ctx),
            place=hot_place(node, ctx),
            graph=ctx.graph_break(node),
        )

    @staticmethod
    def _fix(node: cst.Assert, ctx: Context) -> Optional[Fix]:
        if not _single_tensor_condition(node.test, ctx):
            return None
        if node.msg is not None and not isinstance(node.msg, (cst.SimpleString, cst.ConcatenatedString)):
            return None  # a computed message would run at every step instead of on failure
        function, needs_import = torch_attribute(ctx, "_assert_async")
        args = [cst.Arg(node.test.with_changes(lpar=[], rpar=[]))]
        if node.msg is not None:
            comma = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
            args = [args[0].with_changes(comma=comma), cst.Arg(node.msg)]
        statement = cst.Expr(cst.Call(func=function, args=args), semicolon=node.semicolon)
        return Fix.replace(node, statement, Safety.UNSAFE, "use torch._assert_async", needs_import)

"""TPL103 python-range-indexing: Tensor indexed with a Python range or list."""

from __future__ import annotations

import dataclasses
from itertools import pairwise
from typing import Iterator, Optional, Sequence

import libcst as cst

from ...engine.context import Context
from ...engine.edits import add_keyword, torch_attribute
from ...engine.findings import Fix, Report, Safety
from ..base import Rule

# What a host-built index costs, said in every message: the copy of a few ints is not the price.
SYNC = "copied to the device at every call, a full sync (the host waits for all queued GPU work), not a small copy"
ON_DEVICE = "build the index once on the device (a buffer registered in __init__)"
SLICE_FIX = "index with a slice"
HOST_TENSOR_ADVICE = "build it on the device (device=...), or move it there once where it is made"
NUMPY_ADVICE = (
    "make the index on the device (torch.randperm(n, device=...) for a shuffle, torch.arange for a range)"
)


def _index_kind(value: cst.BaseExpression, ctx: Context) -> Optional[tuple[str, Optional[cst.Call]]]:
    """What kind of host-built index `value` is, and the `range(...)` call a fix can replace."""
    if isinstance(value, cst.Call):
        qualified = ctx.qualified_name(value)
        if qualified == "builtins.range":
            return "range()", value
        if qualified == "builtins.list" and len(value.args) == 1:
            inner = value.args[0].value
            if isinstance(inner, cst.Call) and ctx.qualified_name(inner) == "builtins.range":
                return "list(range())", value
        # a project function's CPU tensors (`x[self.permutation(indices)]`); a torch factory
        # called in place is TPL101's
        if not (qualified or "").startswith("torch.") and _cpu_tensor_index(value, ctx):
            return "a CPU tensor", None
        return None
    if isinstance(value, cst.List) and value.elements:
        if all(_int_value(e.value) is not None for e in value.elements):
            return "a list of ints", None
        return None
    if isinstance(value, cst.ListComp):
        return "a list comprehension", None
    if ctx.is_index_array(value):
        return "a NumPy array", None
    if _cpu_tensor_index(value, ctx):
        return "a CPU tensor", None
    return None


def _cpu_tensor_index(value: cst.BaseExpression, ctx: Context) -> bool:
    """CPU tensors (or a tuple or list of them) made per step, indexing in a project on CUDA."""
    return ctx.runs_on_cuda and _made_per_step(value, ctx) and ctx.host_index_tensor(value)


def _made_per_step(value: cst.BaseExpression, ctx: Context) -> bool:
    """The index is made where it is used, at every step: not kept on an object or bound in cold
    code (`self.idx = torch.randperm(n)` in `__init__`: a constant copied per step, TPL102's)."""
    if isinstance(value, cst.Attribute):
        return False
    if isinstance(value, cst.Name):
        bindings = ctx.bindings(value.value, value)
        return bool(bindings) and all(b.kind == "param" or ctx.is_hot(b.node) for b in bindings)
    return True


def _int_value(expr: cst.BaseExpression) -> Optional[int]:
    """The value of an int literal (`3`, `-1`, `0x10`), else None."""
    sign = 1
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        sign, expr = -1, expr.expression
    if isinstance(expr, cst.Integer) and not expr.lpar:
        return sign * int(expr.evaluated_value)
    return None


def _range_call(call: cst.Call) -> cst.Call:
    """`range(...)` itself, out of `list(range(...))`."""
    if isinstance(call.func, cst.Name) and call.func.value == "list":
        inner = call.args[0].value
        assert isinstance(inner, cst.Call)
        return inner
    return call


def _literal_range(call: cst.Call) -> Optional[range]:
    """`range(a, b, s)` with int literals only, as the range it makes; None otherwise."""
    args = _range_call(call).args
    if not 1 <= len(args) <= 3 or any(a.keyword is not None or a.star for a in args):
        return None
    values = [_int_value(a.value) for a in args]
    if any(v is None for v in values) or (len(values) == 3 and values[2] == 0):
        return None
    return range(*[v for v in values if v is not None])


@dataclasses.dataclass(frozen=True)
class Progression:
    """Index values first, first + step, ..., last: all of one sign, step not 0."""

    first: int
    last: int
    step: int
    count: int

    @classmethod
    def of_range(cls, values: range) -> Optional[Progression]:
        if not values or (values[0] < 0) != (values[-1] < 0):
            return None
        return cls(values[0], values[-1], values.step if len(values) > 1 else 1, len(values))

    @classmethod
    def of(cls, values: Sequence[int]) -> Optional[Progression]:
        """The progression `values` form, or None: a repeated value, an uneven step, or
        indices of both signs (`[0, -1]`: which elements they are depends on the length)."""
        if not values:
            return None
        step = values[1] - values[0] if len(values) > 1 else 1
        if step == 0 or any(b - a != step for a, b in pairwise(values)):
            return None
        if (values[0] < 0) != (values[-1] < 0):
            return None
        return cls(values[0], values[-1], step, len(values))

    def ascending(self) -> Progression:
        if self.step > 0:
            return self
        return Progression(self.last, self.first, -self.step, self.count)

    def slice_text(self) -> str:
        """The slice that selects the same elements in the same order, ascending only. A
        negative index counts from the end like a negative slice bound, so `[-2, -1]` is `-2:`
        and `[-3, -1]` is `-3::2`; the stop is the last index plus one, and none when that is 0."""
        assert self.step > 0
        stop = self.last + 1
        text = f"{self.first}:{stop if stop != 0 else ''}"
        return text + (f":{self.step}" if self.step != 1 else "")

    def reverses_a_whole_dim(self) -> bool:
        """Descending through every index of a dim of `count` elements (`[2, 1, 0]`,
        `[-1, -2, -3]`): `.flip(dim)` alone equals them when the dim has `count` elements, which
        the linter cannot know."""
        up = self.ascending()
        return self.step == -1 and self.count > 1 and (up.first == 0 or up.last == -1)


def _basic_dims(element: cst.SubscriptElement) -> Optional[int]:
    """How many dims of the result a basic index makes (a slice or None 1, an int literal 0;
    torch selects with ints before it applies an index list, unlike NumPy); -1 for `...`; None for
    anything else, which may be another advanced index (a name can hold a tensor)."""
    index = element.slice
    if not isinstance(index, cst.Index):
        return 1
    if index.star is not None:
        return None
    value = index.value
    if isinstance(value, cst.Ellipsis):
        return -1
    if isinstance(value, cst.Name) and value.value == "None":
        return 1
    return 0 if _int_value(value) is not None else None


def _result_dim(elements: Sequence[cst.SubscriptElement], position: int) -> Optional[int]:
    """The dim of the indexed result that the index at `position` makes, counted from the end
    after a `...`; None when another index is not a slice, None, `...` or an int literal."""
    dims: list[int] = []
    for i, element in enumerate(elements):
        made = 1 if i == position else _basic_dims(element)
        if made is None:
            return None
        dims.append(made)
    if -1 in dims[:position]:
        return -1 - sum(d for d in dims[position + 1 :] if d > 0)
    return sum(d for d in dims[:position] if d > 0)


def _use(node: cst.Subscript, ctx: Context) -> str:
    """ "assign" for a target of `=`, "augment" for one of `+=` and the like, "other" for other
    targets (`del`, `for`, `with ... as`, annotated), "load" for a read."""
    child: cst.CSTNode = node
    parent = ctx.parent(node)
    while isinstance(parent, (cst.Element, cst.StarredElement, cst.Tuple, cst.List)):
        child, parent = parent, ctx.parent(parent)
    if isinstance(parent, cst.AssignTarget):
        return "assign"
    if isinstance(parent, cst.AugAssign) and child is parent.target:
        return "augment"
    if isinstance(parent, cst.AnnAssign) and child is parent.target:
        return "other"
    if isinstance(parent, (cst.Del, cst.AsName)):
        return "other"
    if isinstance(parent, (cst.For, cst.CompFor)) and child is parent.target:
        return "other"
    return "load"


def _statement_writes_a_subscript(node: cst.CSTNode, ctx: Context) -> bool:
    """`node` is read by a statement that writes into a subscript (`b[..., [0, 2]] = b[..., [0, 2]]`):
    a view of the same tensor there could alias what is written."""
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, cst.Assign):
            return any(_holds_subscript(t.target) for t in ancestor.targets)
        if isinstance(ancestor, (cst.AugAssign, cst.AnnAssign)):
            return _holds_subscript(ancestor.target)
        if isinstance(ancestor, cst.BaseStatement):
            return False
    return False


def _holds_subscript(target: cst.BaseExpression) -> bool:
    if isinstance(target, (cst.Tuple, cst.List)):
        return any(_holds_subscript(e.value) for e in target.elements)
    if isinstance(target, cst.StarredElement):
        return _holds_subscript(target.value)
    return isinstance(target, cst.Subscript)


def _index_text(subscript: cst.Subscript, ctx: Context) -> str:
    """The brackets of `subscript` on one line, as the message quotes them: `[:, 0:3:2]`."""
    parts = (" ".join(ctx.module.code_for_node(e.slice).split()) for e in subscript.slice)
    return f"[{', '.join(parts)}]"


def _with_slice(node: cst.Subscript, position: int, text: str) -> cst.Subscript:
    parsed = cst.parse_expression(f"x[{text}]")
    assert isinstance(parsed, cst.Subscript)
    elements = list(node.slice)
    elements[position] = elements[position].with_changes(slice=parsed.slice[0].slice)
    return node.with_changes(slice=elements)


@dataclasses.dataclass(frozen=True)
class Advice:
    """What the message suggests, and the fix that makes it, if any."""

    text: str
    fix: Optional[Fix] = None


class PythonRangeIndexing(Rule):
    """## What it does
    Flags a tensor subscript that contains `range(...)`, `list(range(...))`, a list display of
    ints or a list comprehension: `pred[range(n), target]`, `x[:, [2, 1, 0]]`, `v[:, [-1]]`, in
    hot code; and one indexed with a NumPy array of indices or a slice of one (`b_obs[inds[start:end]]`
    after `inds = np.arange(n); np.random.shuffle(inds)`, the minibatches of a PPO update), or
    with a tensor built on the CPU (`pair_ix[:, torch.randperm(n)[:k]]`, `x[torch.from_numpy(keep)]`)
    in a project that runs on CUDA. Inference
    steps are hot too: a loop that runs the model once per iteration outside training (a `generate`
    that samples one token per iteration, a predictor's stream over images) pays one sync per
    generated token or per image (`v[:, [-1]]` in a top-k sampler).

    ## Why it is slow
    The index is a Python object: PyTorch turns it into a CPU tensor element by element and
    copies it to the device with a blocking copy, at every call. That copy is a full
    synchronisation, not a small transfer: the host waits until every kernel already queued
    on the GPU has finished, so the next step's work cannot be queued behind the current one.
    Observed on an H100 (issue 15; not a case of the benchmark suite): `x[:, [2, 1, 0]]`,
    `x[:, [-1]]` and `x[:, range(3)]` each made the host wait for all queued GPU work (425 ms of
    host time behind 426 ms of queued matmuls), while `x[:, -1:]`, `x.flip(1)` and an index
    tensor on the device returned in under 0.1 ms. With `range(n)` the conversion is also paid
    per element, so the cost grows with n (seed 004's weighted NLL loss, measured below).

    A slice (`x[:, 0:3:2]`) indexes without any tensor; `torch.arange(..., device=...)` builds
    the index on the GPU in one kernel; an index used at every step can be built once, as a
    buffer registered in `__init__`.

    ## Fix safety
    `range(...)` and `list(range(...))` become `torch.arange(..., device=x.device)` with the same
    start, stop and step: the same elements are selected, and the result is a copy as before.
    Safe when the subscripted value is certainly a tensor (built by torch) and the bounds are
    ones `torch.arange` takes: where `range()` is empty because its stop lies behind its start
    (`range(-2)`, `range(3, 1)`), `torch.arange` raises. So the fix is safe for literal bounds and
    for one count that cannot be negative (`len(t)`, `x.shape[0]`, `x.size(0)`, `x.numel()`, a
    name bound only to one); unsafe for other bounds (`range(n)` of a parameter `n`) and when the
    value is only assumed to be a tensor (a function parameter); not offered for literal bounds
    that `torch.arange` rejects.

    A list of ints that steps evenly through indices of one sign, when it is the subscript's
    only index list (the other indices are slices, `None`, `...` or int literals), becomes the
    slice that selects the same elements: `[-1]` -> `-1:`, `[2, 3]` -> `2:4`, `[0, 2]` ->
    `0:3:2` (not `0::2`: the length of the dim is not known), `[-3, -1]` -> `-3::2`. A
    descending list becomes the ascending slice and a flip of that dim: `x[:, [2, 1, 0]]` ->
    `x[:, 0:3].flip(1)`; the message adds that `x.flip(1)` alone is the same when the dim has
    exactly 3 elements, which the linter cannot know. Where the list is a valid index for its
    dim, these select the same values in the same shape; where it is not, the list raises (or,
    on a tensor with no elements to read, gives an empty result of another shape) and the slice
    returns fewer elements.
    - Written to (`x[:, [0, 2]] = v`, or `range(...)` with literal ints), the slice writes the
      same elements: safe when the value is certainly a tensor. With `+=` and the like the
      operation runs in place on a view of `x`, so a right-hand side that overlaps the written
      elements reads them as they change: unsafe.
    - Read, the slice is a view where the list made a copy: writing into the result writes into
      `x`, in-place changes of `x` show in the result, and its strides differ, so `.view()` of it
      or of an elementwise result can fail where the copy's did not, and reductions can round
      differently. The fix is unsafe, and it is not offered in a statement that writes into a
      subscript (`b[..., [0, 2]] = b[..., [0, 2]].clip(0, w)` fixes only the target), where the
      view could alias what is written. The flip of a descending list is a copy, but laid out
      like the slice, so `.view()` of it can fail too: unsafe.
    - A `range(...)` with literal ints that is read keeps its `torch.arange` fix, a copy like the
      original; the message names the slice, a view, as the cheaper choice.
    - Not fixed: a list beside another index list or tensor (`x[[0, 1], [2, 3]]`, `x[i, [0, 1]]`),
      where a slice would change the result's shape; lists with repeated values, uneven steps or
      indices of both signs (`[0, -1]`: which elements depends on the length); descending lists
      written to; list comprehensions. Their message says to build the index once on the device.
    - Not fixed: a NumPy index array; the message says to make it on the device
      (`torch.randperm(n, device=...)` shuffles there). Nor a CPU index tensor: the message says
      to build it on the device, or to move it there once where it is made.

    ## When it stays silent
    Cold code (an index built once costs nothing per step), including branches a step does not
    take, a loop over layers (each iteration calls another module: not a step) and a loop that
    calls a model's own `generate` once per sample (the per-token loop inside is the step) (`if x.device.type == "cpu":`, an `except` handler); tensors on the host (a
    `torch.tensor(shape)` indexed by a list copies nothing to the device); subscripts of lists,
    dicts and NumPy arrays; `range` rebound by the file; single ints and slices; one element of a
    NumPy array (`inds[0]`, an int); a 0-dim CPU tensor (`x[torch.tensor(3)]`, read as a number);
    a CPU index built once (`self.idx = torch.randperm(n)` in `__init__`: TPL102's constant);
    a CPU index that is not certainly a tensor (a parameter every caller hands a host value:
    a dict key, a string).
    """

    code = "TPL103"
    name = "python-range-indexing"
    summary = "Tensor indexed with a Python range or list"
    message = f"{{what}} index is {SYNC}; {{advice}}"
    fix_safety = Safety.SAFE
    where = "hot code"
    node_types = (cst.Subscript,)
    benchmark = "TPL103"

    BAD = {
        "seed-weighted-nll": """
            import torch
            from torch import nn

            def weighted_nll(pred, target, weight):
                nll = -pred[range(target.shape[0]), target]  # expect: TPL103
                return (nll * weight[target]).mean()

            class CrossEntropyLoss(nn.Module):
                def forward(self, input, target):
                    pred = torch.log_softmax(input, dim=1)
                    return weighted_nll(pred, target, self.weight)
            """,
        "list-range-in-forward": """
            import torch
            from torch import nn

            class Head(nn.Module):
                def forward(self, logits, labels):
                    picked = logits[list(range(len(labels))), labels]  # expect: TPL103
                    return picked.sum()
            """,
        "int-list-in-step-loop": """
            import torch

            def train(model, loader, optimizer):
                for x, y in loader:
                    out = model(x)
                    loss = out[[0, 1, 2]].sum()  # expect: TPL103
                    loss.backward()
                    optimizer.step()
            """,
        # audiocraft's top-k sampling and MONAI's autoregressive inferer, once per generated token
        "last-position-in-decoding": """
            import torch
            from torch import nn

            class Sampler(nn.Module):
                def forward(self, logits):
                    last = logits[:, [-1]]  # expect: TPL103
                    return torch.softmax(last, dim=-1)
            """,
        # nanoGPT's top-k sampling: the generation loop runs the model once per token
        "top-k-in-generation-loop": """
            import torch
            from torch import nn

            class GPT(nn.Module):
                def forward(self, idx):
                    return self.head(self.embed(idx))

                @torch.no_grad()
                def generate(self, idx, max_new_tokens, top_k):
                    for _ in range(max_new_tokens):
                        logits = self(idx)[:, -1, :]
                        v, _ = torch.topk(logits, top_k)
                        logits = logits.masked_fill(logits < v[:, [-1]], -float("inf"))  # expect: TPL103
                        next_token = torch.multinomial(logits.softmax(-1), num_samples=1)
                        idx = torch.cat((idx, next_token), dim=1)
                    return idx
            """,
        # MONAI's perceptual loss, RGB to BGR at every training step
        "reversed-channels-in-loss": """
            import torch
            from torch import nn

            class PerceptualLoss(nn.Module):
                def forward(self, input, target):
                    input = input[:, [2, 1, 0], ...]  # expect: TPL103
                    return (self.net(input) - self.net(target)).abs().mean()
            """,
        # yolov5's and ultralytics' box scaling: the target takes the slice, the read keeps its
        # list (its view could alias what the statement writes)
        "box-columns-written": """
            import torch
            from torch import nn

            class Detect(nn.Module):
                def forward(self, x):
                    boxes = torch.sigmoid(self.head(x))
                    boxes[..., [0, 2]] = boxes[..., [0, 2]] * x.shape[-1]  # expect: TPL103,TPL103
                    return boxes
            """,
        # diffusers' rotary embedding ([0, -1]: which elements depends on the length) and an
        # index list beside another: no slice selects them
        "no-slice-selects-them": """
            import torch
            from torch import nn

            class Rotary(nn.Module):
                def forward(self, freqs, x):
                    ends = freqs[[0, -1]]  # expect: TPL103
                    pairs = x[[0, 1], [2, 3]]  # expect: TPL103
                    return ends * pairs
            """,
        # cleanrl's PPO update: minibatches of CUDA rollout buffers drawn with a shuffled NumPy index
        "numpy-minibatch-index": """
            import numpy as np
            import torch

            def update(agent, optimizer, obs_dim, batch_size, minibatch_size, device):
                b_obs = torch.zeros((batch_size, obs_dim), device=device)
                b_returns = torch.zeros(batch_size, device=device)
                b_inds = np.arange(batch_size)
                np.random.shuffle(b_inds)
                for start in range(0, batch_size, minibatch_size):
                    mb_inds = b_inds[start : start + minibatch_size]
                    value = agent(b_obs[mb_inds])  # expect: TPL103
                    loss = ((value - b_returns[mb_inds]) ** 2).mean()  # expect: TPL103
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
            """,
        # torch-geometric's LPFormer: a CPU permutation drops pairs of a CUDA edge index every step
        "cpu-permutation-index": """
            import math
            import torch
            from torch import nn

            class Drop(nn.Module):
                def forward(self, pair_ix, scores):
                    keep = math.ceil(pair_ix.size(1) * 0.9)
                    indices = torch.randperm(pair_ix.size(1))[:keep]
                    pair_ix = pair_ix[:, indices]  # expect: TPL103
                    return pair_ix, scores[indices]  # expect: TPL103

            drop = Drop().cuda()
            """,
        "index-from-numpy-in-step-loop": """
            import numpy as np
            import torch

            def train(model, loader, optimizer):
                for x, y in loader:
                    x, y = x.cuda(), y.cuda()
                    keep = torch.from_numpy(np.flatnonzero(np.random.rand(len(y)) > 0.1))
                    loss = model(x[keep]).sum()  # expect: TPL103
                    loss.backward()
                    optimizer.step()
            """,
        "matcher-indices-in-loss": """
            import torch
            from scipy.optimize import linear_sum_assignment
            from torch import nn

            class Matcher(nn.Module):
                @torch.no_grad()
                def forward(self, logits, targets):
                    cost = logits.softmax(-1).cpu()
                    pairs = [linear_sum_assignment(c) for c in cost]
                    return [(torch.as_tensor(i), torch.as_tensor(j)) for i, j in pairs]

            class Criterion(nn.Module):
                def __init__(self, matcher):
                    super().__init__()
                    self.matcher = matcher

                def forward(self, logits, targets):
                    indices = self.matcher(logits, targets)
                    return self.loss_labels(logits, targets, indices)

                def loss_labels(self, logits, targets, indices):
                    idx = self.permutation(indices)
                    labels = torch.cat([t["labels"][j] for t, (_, j) in zip(targets, indices)])  # expect: TPL103
                    return logits[idx].sum() + labels.sum()  # expect: TPL103

                def permutation(self, indices):
                    batch = torch.cat([torch.full_like(src, i) for i, (src, _) in enumerate(indices)])
                    return batch, torch.cat([src for src, _ in indices])

            criterion = Criterion(Matcher()).cuda()
            """,
    }
    FIXED = {
        "seed-weighted-nll": """
            import torch
            from torch import nn

            def weighted_nll(pred, target, weight):
                nll = -pred[torch.arange(target.shape[0], device=pred.device), target]
                return (nll * weight[target]).mean()

            class CrossEntropyLoss(nn.Module):
                def forward(self, input, target):
                    pred = torch.log_softmax(input, dim=1)
                    return weighted_nll(pred, target, self.weight)
            """,
        "list-range-in-forward": """
            import torch
            from torch import nn

            class Head(nn.Module):
                def forward(self, logits, labels):
                    picked = logits[torch.arange(len(labels), device=logits.device), labels]
                    return picked.sum()
            """,
        "int-list-in-step-loop": """
            import torch

            def train(model, loader, optimizer):
                for x, y in loader:
                    out = model(x)
                    loss = out[0:3].sum()
                    loss.backward()
                    optimizer.step()
            """,
        "last-position-in-decoding": """
            import torch
            from torch import nn

            class Sampler(nn.Module):
                def forward(self, logits):
                    last = logits[:, -1:]
                    return torch.softmax(last, dim=-1)
            """,
        "top-k-in-generation-loop": """
            import torch
            from torch import nn

            class GPT(nn.Module):
                def forward(self, idx):
                    return self.head(self.embed(idx))

                @torch.no_grad()
                def generate(self, idx, max_new_tokens, top_k):
                    for _ in range(max_new_tokens):
                        logits = self(idx)[:, -1, :]
                        v, _ = torch.topk(logits, top_k)
                        logits = logits.masked_fill(logits < v[:, -1:], -float("inf"))
                        next_token = torch.multinomial(logits.softmax(-1), num_samples=1)
                        idx = torch.cat((idx, next_token), dim=1)
                    return idx
            """,
        "reversed-channels-in-loss": """
            import torch
            from torch import nn

            class PerceptualLoss(nn.Module):
                def forward(self, input, target):
                    input = input[:, 0:3, ...].flip(1)
                    return (self.net(input) - self.net(target)).abs().mean()
            """,
        "box-columns-written": """
            import torch
            from torch import nn

            class Detect(nn.Module):
                def forward(self, x):
                    boxes = torch.sigmoid(self.head(x))
                    boxes[..., 0:3:2] = boxes[..., [0, 2]] * x.shape[-1]
                    return boxes
            """,
    }
    GOOD = {
        # one element of a NumPy array is an int, and a NumPy array indexed by one stays on the host
        "numpy-element-and-numpy-table": """
            import numpy as np
            import torch

            def update(agent, optimizer, obs_dim, weights, batch_size, device):
                b_obs = torch.zeros((batch_size, obs_dim), device=device)
                b_inds = np.random.permutation(batch_size)
                for step in range(batch_size):
                    first = b_inds[step]
                    scale = float(weights[b_inds[:4]].sum())
                    loss = agent(b_obs[first]).mean() * scale
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
            """,
        # Found in real code (kornia's DKD.__init__, yolov5's val.py): a tensor built once, or one
        # on the host, pays no per-step copy.
        "certain-tensor-in-cold-code": """
            import torch

            scores = torch.randn(100, 10)
            best = scores[range(100), scores.argmax(1)]
            """,
        "host-tensor-in-hot-code": """
            import torch

            def train(model, loader, optimizer):
                for x, shape in loader:
                    gain = torch.tensor(shape)[[1, 0, 1, 0]]
                    model(x, gain).sum().backward()
                    optimizer.step()
            """,
        # a 0-dim CPU tensor is read as a number; a parameter of host values is not a tensor; an
        # index built once (`__init__`, module level) is a constant copied per step (TPL102's)
        "host-scalar-and-host-keys": """
            import torch
            from torch import nn

            def pick(table, key):
                return table[key]

            ORDER = torch.arange(4)

            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.idx = torch.randperm(4)

                def forward(self, x, lengths):
                    last = torch.tensor(3)
                    kept = torch.arange(4)
                    table = {"a": x}
                    lengths = lengths[self.idx] + lengths[ORDER]
                    return x[last] + pick(table, "a") + x.cpu()[kept].sum() + lengths

            net = Net().cuda()
            """,
        "matcher-indices-on-the-device-or-unknown": """
            import torch
            from scipy.optimize import linear_sum_assignment
            from torch import nn

            class Matcher(nn.Module):
                @torch.no_grad()
                def forward(self, logits, targets):
                    cost = logits.softmax(-1).cpu()
                    pairs = [linear_sum_assignment(c) for c in cost]
                    return [(torch.as_tensor(i, device=logits.device), torch.as_tensor(j)) for i, j in pairs]

            class Picker(nn.Module):
                def forward(self, logits, targets):
                    return [(torch.as_tensor(t["keep"]), torch.as_tensor(t["labels"])) for t in targets]

            class Criterion(nn.Module):
                def __init__(self, matcher):
                    super().__init__()
                    self.matcher = matcher

                def forward(self, logits, targets):
                    indices = self.matcher(logits, targets)
                    counts = [(i, len(t["labels"])) for i, t in enumerate(targets)]
                    return self.loss_labels(logits, targets, indices) + self.loss_counts(logits, counts)

                def loss_labels(self, logits, targets, indices):
                    labels = torch.cat([t["labels"][j] for t, (_, j) in zip(targets, indices)])
                    return logits[self.permutation(indices)].sum() + labels.sum()

                def loss_counts(self, logits, counts):
                    return sum(logits[i, n] for i, n in counts)

                def permutation(self, indices):
                    batch = torch.cat([torch.full_like(src, i) for i, (src, _) in enumerate(indices)])
                    return batch, torch.cat([src for src, _ in indices])

            criterion = Criterion(Matcher()).cuda()
            other = Criterion(Picker()).cuda()
            """,
        "same-line-in-init": """
            import torch
            from torch import nn

            class Net(nn.Module):
                def __init__(self, table):
                    super().__init__()
                    self.register_buffer("picked", table[range(4)])

                def forward(self, x):
                    return x + self.picked
            """,
        "shadowed-range": """
            import torch
            from torch import nn
            from mylib import range

            class Net(nn.Module):
                def forward(self, x):
                    return x[range(4)]
            """,
        "numpy-and-lists-in-hot-code": """
            import numpy as np
            import torch
            from torch import nn

            class Net(nn.Module):
                def forward(self, x):
                    table = np.arange(10)
                    rows = [layer for layer in self.layers]
                    return x * float(table[[1, 2]].sum()) + len(rows[0:2])
            """,
        "arange-and-slices": """
            import torch
            from torch import nn

            class Net(nn.Module):
                def forward(self, x, t):
                    rows = torch.arange(x.shape[0], device=x.device)
                    return x[rows, t] + x[0] + x[:, 1:3].sum()
            """,
        "cold-helper-on-parameter": """
            import torch

            def pick(values, n):
                return values[range(n)]
            """,
        # branches a step does not take are cold, whatever function holds them
        "cpu-branch-and-error-handler": """
            import torch
            from torch import nn

            class Net(nn.Module):
                def forward(self, x):
                    if x.device.type == "cpu":
                        return x[:, [2, 1, 0]]
                    try:
                        return self.body(x)
                    except RuntimeError:
                        return x[:, [-1]]
            """,
        # a loop over layers calls a different module each iteration: not a step (the shape probe
        # runs once, at construction); a loop that calls the model's generate once per sample
        # leaves the per-token loop inside generate to be the step, not itself
        "layers-probed-and-samples-drawn": """
            import torch
            from torch import nn

            class GPT(nn.Module):
                def __init__(self, blocks):
                    super().__init__()
                    self.blocks = blocks
                    x = torch.zeros(2, 8, 4).cuda()
                    widths = []
                    for block in self.blocks:
                        x = block(x)
                        widths.append(x[:, [-1]].shape[-1])

                def forward(self, idx):
                    return self.head(idx)

                def generate(self, idx, steps):
                    for _ in range(steps):
                        idx = torch.cat((idx, self(idx)[:, -1:].argmax(-1)), dim=1)
                    return idx

            def sample(blocks, prompts):
                model = GPT(blocks).cuda()
                for prompt in prompts:
                    out = model.generate(prompt, 16)
                    print(out[:, [0, 1, 2]].sum())
            """,
        "slice-flip-and-index-buffer": """
            import torch
            from torch import nn

            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.register_buffer("order", torch.tensor([2, 0, 1]))

                def forward(self, x):
                    return x[:, -1:] + x.flip(1) + x[:, self.order]
            """,
    }

    def check(self, node: cst.Subscript, ctx: Context) -> Iterator[Report]:
        for position, element in enumerate(node.slice):
            if not isinstance(element.slice, cst.Index):
                continue
            found = _index_kind(element.slice.value, ctx)
            if found is None:
                continue
            what, range_call = found
            reason = ctx.hot_reason(node)
            if reason is None or not ctx.is_tensor(node.value) or ctx.is_host_tensor(node.value):
                return
            if what == "a NumPy array":
                advice = Advice(NUMPY_ADVICE)
            elif what == "a CPU tensor":
                advice = Advice(HOST_TENSOR_ADVICE)
            else:
                advice = self._advice(node, position, range_call, ctx)
            yield self.report(node, reason=reason, fix=advice.fix, what=what, advice=advice.text)
            return

    def _advice(
        self, node: cst.Subscript, position: int, range_call: Optional[cst.Call], ctx: Context
    ) -> Advice:
        """The cheapest equivalent the message names, and the fix that makes it, if any."""
        index = node.slice[position].slice
        assert isinstance(index, cst.Index)
        arange = _arange(node, range_call, ctx) if range_call is not None else None
        fallback = arange or Advice(ON_DEVICE)
        dim = _result_dim(node.slice, position)
        progression: Optional[Progression] = None
        if range_call is not None:
            literal = _literal_range(range_call)
            progression = Progression.of_range(literal) if literal is not None else None
        elif isinstance(index.value, cst.List):
            values = [v for v in (_int_value(e.value) for e in index.value.elements) if v is not None]
            progression = Progression.of(values)
        if dim is None or progression is None:
            # another index list beside it, values no slice can select, or a comprehension
            return fallback
        sliced = _with_slice(node, position, progression.ascending().slice_text())
        new_index = sliced.slice[position].slice
        shown = _index_text(sliced, ctx)
        use = _use(node, ctx)
        if use in ("assign", "augment") and progression.step > 0:
            # the same elements are written; `+=` runs in place on a view, which a value that
            # overlaps them would see change
            certain = use == "assign" and ctx.is_tensor(node.value, certain=True)
            safety = Safety.SAFE if certain else Safety.UNSAFE
            return Advice(f"index with the slice {shown}", Fix.replace(index, new_index, safety, SLICE_FIX))
        if use != "load":
            return fallback
        if progression.step > 0:
            suggestion = f"index with the slice {shown} (a view, not a copy)"
            fix = Fix.replace(index, new_index, Safety.UNSAFE, SLICE_FIX)
        else:
            suggestion = f"use {shown}.flip({dim})"
            if progression.reverses_a_whole_dim():
                suggestion += f" (.flip({dim}) alone if that dim has exactly {progression.count} elements)"
            fix = Fix.replace(node, _flip(sliced, dim, node), Safety.UNSAFE, "index with a slice and flip")
        if arange is not None:
            # `range()` keeps its safe fix, a copy like the original; the message names the view
            return Advice(f"{arange.text}, or {suggestion}", arange.fix)
        if _statement_writes_a_subscript(node, ctx):
            return Advice(suggestion)
        return Advice(suggestion, fix)


def _flip(sliced: cst.Subscript, dim: int, original: cst.Subscript) -> cst.Call:
    """`sliced.flip(dim)`, in the parentheses `original` had."""
    number: cst.BaseExpression = cst.Integer(str(abs(dim)))
    if dim < 0:
        number = cst.UnaryOperation(operator=cst.Minus(), expression=number)
    return cst.Call(
        func=cst.Attribute(value=sliced.with_changes(lpar=[], rpar=[]), attr=cst.Name("flip")),
        args=[cst.Arg(number)],
        lpar=original.lpar,
        rpar=original.rpar,
    )


def _arange(node: cst.Subscript, range_call: cst.Call, ctx: Context) -> Advice:
    """`range(...)` -> `torch.arange(..., device=x.device)`: the same index, built on the device."""
    text = "use torch.arange(..., device=...)"
    if isinstance(node.value, (cst.Name, cst.Attribute)):
        device: Optional[cst.BaseExpression] = cst.Attribute(value=node.value, attr=cst.Name("device"))
    else:
        device = ctx.device_for(node)
    if device is None:
        return Advice(text)
    bounds = _arange_bounds(range_call, ctx)
    if bounds is None:
        return Advice(ON_DEVICE)
    arange, needs_import = torch_attribute(ctx, "arange")
    args = [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in _range_call(range_call).args]
    call = add_keyword(cst.Call(func=arange, args=args), "device", device)
    safety = (
        Safety.SAFE if bounds is Safety.SAFE and ctx.is_tensor(node.value, certain=True) else Safety.UNSAFE
    )
    return Advice(text, Fix.replace(range_call, call, safety, "use torch.arange on the device", needs_import))


def _arange_bounds(range_call: cst.Call, ctx: Context) -> Optional[Safety]:
    """Whether `torch.arange` takes the bounds `range` was given: where `range()` is empty because
    its stop lies behind its start (`range(-2)`, `range(3, 1)`), `torch.arange` raises. SAFE for
    literals it takes and for one count that cannot be negative (`len(t)`, `x.shape[0]`,
    `x.size(0)`, `x.numel()`); UNSAFE for other expressions; None for literals it rejects."""
    literal = _literal_range(range_call)
    if literal is not None:
        stop_behind = (literal.stop - literal.start) * literal.step < 0
        return None if stop_behind else Safety.SAFE
    args = _range_call(range_call).args
    if len(args) == 1 and not args[0].star and _is_count(args[0].value, ctx):
        return Safety.SAFE
    return Safety.UNSAFE


def _is_count(expr: cst.BaseExpression, ctx: Context) -> bool:
    """`len(t)`, `x.shape[0]`, `x.size(0)`, `x.numel()`, or a name only ever bound to one."""
    if isinstance(expr, cst.Name):
        bindings = ctx.bindings(expr.value, expr)
        return bool(bindings) and all(
            b.kind == "assign" and isinstance(b.node, cst.BaseExpression) and _is_count(b.node, ctx)
            for b in bindings
        )
    if isinstance(expr, cst.Call):
        if ctx.qualified_name(expr) == "builtins.len":
            return True
        func = expr.func
        return isinstance(func, cst.Attribute) and (
            (func.attr.value == "size" and len(expr.args) == 1)
            or (func.attr.value == "numel" and not expr.args)
        )
    if (
        isinstance(expr, cst.Subscript)
        and len(expr.slice) == 1
        and isinstance(expr.slice[0].slice, cst.Index)
    ):
        shape = expr.value
        return isinstance(shape, cst.Attribute) and shape.attr.value == "shape"
    return False

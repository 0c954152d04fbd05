"""TPL201 loop-over-tensor-dim: Python loop over the elements of a tensor dimension in hot code."""

from __future__ import annotations

from typing import Iterator, Optional

import libcst as cst

from ...analysis.iteration import ragged_list
from ...analysis.sequential import Read
from ...engine.context import Context
from ...engine.findings import Report
from ...syntax.walker import dotted_name, visit
from ..base import Rule
from ..shared_examples import FEATURE_EXTRACTION_IN_DATASET_PROCESS
from .common import SCOPES


# -- TPL201 -------------------------------------------------------------------------------
def _dim_of(
    expr: cst.BaseExpression, ctx: Context, follow_names: bool = True
) -> Optional[cst.BaseExpression]:
    """The tensor X when `expr` is the size of one of its dimensions: `X.shape[d]`, `X.size(d)`,
    `X.size()[d]`, `len(X)` (X certainly a tensor), or a name bound only to such a size
    (`B = x.shape[0]`, `B, T, D = x.shape`)."""
    tensor: Optional[cst.BaseExpression] = None
    if isinstance(expr, cst.Subscript):
        holder = expr.value
        if isinstance(holder, cst.Attribute) and holder.attr.value == "shape":
            tensor = holder.value
        elif _is_size_call(holder, args=0):
            assert isinstance(holder, cst.Call) and isinstance(holder.func, cst.Attribute)
            tensor = holder.func.value
    elif _is_size_call(expr, args=1):
        assert isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute)
        tensor = expr.func.value
    elif isinstance(expr, cst.Call) and ctx.qualified_name(expr) == "builtins.len" and len(expr.args) == 1:
        counted = expr.args[0].value
        return counted if ctx.is_tensor(counted, certain=True) else None
    elif isinstance(expr, cst.Name) and follow_names:
        return _dim_name(expr, ctx)
    if tensor is not None and ctx.is_tensor(tensor):
        return tensor
    return None


def _is_size_call(expr: cst.BaseExpression, args: int) -> bool:
    return (
        isinstance(expr, cst.Call)
        and isinstance(expr.func, cst.Attribute)
        and expr.func.attr.value == "size"
        and len(expr.args) == args
        and all(a.keyword is None and not a.star for a in expr.args)
    )


def _dim_name(name: cst.Name, ctx: Context) -> Optional[cst.BaseExpression]:
    bindings = ctx.bindings(name.value, name)
    found: Optional[cst.BaseExpression] = None
    for binding in bindings:
        value = binding.node
        if binding.kind == "assign" and isinstance(value, cst.BaseExpression):
            tensor = _dim_of(value, ctx, follow_names=False)
        elif binding.kind == "unpack" and isinstance(value, cst.BaseExpression):
            tensor = _shape_of(value, ctx)
        else:
            return None
        if tensor is None:
            return None
        found = found or tensor
    return found


def _shape_of(value: cst.BaseExpression, ctx: Context) -> Optional[cst.BaseExpression]:
    """X for `X.shape`, `X.shape[a:b]`, `X.size()`: what `B, T = ...` unpacks."""
    if isinstance(value, cst.Subscript):
        value = value.value
    tensor: Optional[cst.BaseExpression] = None
    if isinstance(value, cst.Attribute) and value.attr.value == "shape":
        tensor = value.value
    elif _is_size_call(value, args=0):
        assert isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)
        tensor = value.func.value
    return tensor if tensor is not None and ctx.is_tensor(tensor) else None


def _range_stop(call: cst.Call, ctx: Context) -> Optional[cst.BaseExpression]:
    """`stop` of `range(stop)`, `range(start, stop)` or `range(start, stop, 1)`; None for a
    chunked range (another step): each iteration then handles a slice, not one element."""
    if ctx.qualified_name(call) != "builtins.range" or any(a.keyword or a.star for a in call.args):
        return None
    args = [a.value for a in call.args]
    if len(args) == 3 and not (isinstance(args[2], cst.Integer) and args[2].evaluated_value == 1):
        return None
    if not 1 <= len(args) <= 3:
        return None
    return args[0] if len(args) == 1 else args[1]


def _names(target: cst.BaseExpression) -> list[str]:
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for e in target.elements for n in _names(e.value)]
    return []


def _feeds_tensor_op(read: Read, walked: str, ctx: Context) -> bool:
    """The loop index subscripts the walked tensor or a tensor built by torch (`x[i]`,
    `out[:, i]`), or is an argument of a torch function or of a method of such a tensor
    (`torch.roll(x, i)`, `x.select(0, i)`), within its own statement. A subscript of a mere
    parameter (`targets[b]`) does not count: it may be a list of per-sample tensors."""

    def tensor(expr: cst.BaseExpression) -> bool:
        return ctx.code(expr) == walked or ctx.is_tensor(expr, certain=True)

    child: cst.CSTNode = read.node
    for ancestor in ctx.ancestors(read.node):
        if isinstance(ancestor, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
            return False
        if isinstance(ancestor, cst.Subscript) and child is not ancestor.value and tensor(ancestor.value):
            return True
        if isinstance(ancestor, cst.Call) and child is not ancestor.func:
            if (ctx.qualified_name(ancestor) or "").startswith("torch."):
                return True
            if isinstance(ancestor.func, cst.Attribute) and tensor(ancestor.func.value):
                return True
        child = ancestor
    return False


def _picks_from_container(read: Read, walked: str, ctx: Context) -> bool:
    """The loop index also picks from a Python container: a list built in the function
    (`lengths = lens.tolist()`, then `x[i, :lengths[i]]`), a parameter declared a list
    (`images: list[Tensor]`: ragged images or keypoint sets), or a list of dicts
    (`targets[b]["boxes"]`). Each row then meets data of its own size, which rarely batches."""
    parent = ctx.parent(read.node)
    element = ctx.parent(parent) if isinstance(parent, cst.Index) else None
    subscript = ctx.parent(element) if isinstance(element, cst.SubscriptElement) else None
    if not isinstance(subscript, cst.Subscript) or len(subscript.slice) != 1:
        return False
    picked = subscript.value
    if ctx.code(picked) == walked:
        return False
    outer = ctx.parent(subscript)
    if isinstance(outer, cst.Subscript) and outer.value is subscript:
        index = outer.slice[0].slice
        if isinstance(index, cst.Index) and isinstance(index.value, cst.SimpleString):
            return True
    is_attribute = isinstance(picked, cst.Attribute) and dotted_name(picked.value) == "self"
    return (
        isinstance(picked, cst.Name)
        and not is_attribute
        and (not ctx.is_tensor(picked) or ctx.is_declared_sequence(picked))
    )


class _Work(cst.CSTVisitor):
    """Whether a loop body may launch a kernel: any call but a list's `append`, arithmetic
    outside an index (`x[i - 1]` is Python arithmetic on the index), an augmented assignment, a
    store into an element or a slice (`out[i] = ...` copies)."""

    def __init__(self) -> None:
        self.found = False
        self._in_index = 0

    def visit_Call(self, node: cst.Call) -> Optional[bool]:
        appends = (
            isinstance(node.func, cst.Attribute)
            and node.func.attr.value == "append"
            and isinstance(node.func.value, cst.Name)
        )
        self.found = self.found or not appends
        return not self.found

    def visit_SubscriptElement(self, node: cst.SubscriptElement) -> None:
        self._in_index += 1

    def leave_SubscriptElement(self, original_node: cst.SubscriptElement) -> None:
        self._in_index -= 1

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        self.found = self.found or not self._in_index

    def visit_UnaryOperation(self, node: cst.UnaryOperation) -> None:
        self.found = self.found or not self._in_index

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self.found = True

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        self.found = self.found or isinstance(node.target, cst.Subscript)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False


def _gathers_views_only(loop: cst.For) -> bool:
    """The body only takes rows or slices (views) and collects them in lists: no kernel runs per
    element, the one `torch.stack` after the loop does the copying."""
    work = _Work()
    visit(loop.body, work)
    return not work.found


class LoopOverTensorDim(Rule):
    """## What it does
    Flags a Python `for` loop in hot code that walks a tensor dimension element by element:
    `for i in range(x.shape[d])`, `range(x.size(d))`, `range(len(x))`, `range(B)` where
    `B, T = x.shape`, `for row in x` or `for i, row in enumerate(x)`, when the body indexes a
    tensor with the loop index (`x[i]`, `out[:, i]`), passes it to a tensor op, or uses the row.

    It also flags a loop over the items of a step (images, ground-truth boxes, levels, classes:
    any `for` inside forward, loss or step code that is not the step loop itself) whose body
    selects from device tensors with boolean masks (`boxes[mask]`, `t[:, keep]`), reported once
    with the count of selections: each one is a `nonzero`, and the host waits for the device to
    learn how many elements it keeps, once per selection and iteration.

    ## Why it is slow
    Every iteration launches its own kernels (often several: index, compute, write back), so a
    batch of 4096 rows costs thousands of launches and Python round trips where one batched op
    does the whole dimension. Rewrite with broadcasting, `torch.gather`, `torch.einsum`,
    `torch.bmm`, `torch.bucketize`, or a reduction over the dimension. The measured effect on
    an H100 is in the Measured section below.

    A per-item mask loop waits for the device at every selection: the batched form selects once
    for the whole batch (a gather with batch indices, `torch.where`) and reduces per item with
    `scatter_reduce`/`index_add_`. Issue 39 measured a three-level detector's training step on an
    H200 (torch 2.11, batch 16, bf16): the per-image loop with five mask selections per image and
    level 53.5 ms, the same gathers done once for the batch 12.6 ms (4.26x).

    ## Fix safety
    No automatic fix: the vectorised form depends on what the body computes.

    ## When it stays silent
    For mask selections: a write through a mask (`t[mask] = v`, an `index_put_` that does not
    wait), a selection once per step, outside any loop over items (the ordinary dynamic-shape cost
    of many losses: in a whole detector step on an H200, `objectness[keep].mean()` against its
    `torch.where` form measured 0.96x (0.94-0.97), the selection the faster; the case
    tpl201_detector_one_mask), masks and tensors on the
    host, code that does not run on CUDA, and per-image post-processing under `no_grad()` or
    reached only from an evaluation or generation loop (NMS, metrics: ragged by nature).
    For element loops:
    Loops that are sequential by nature: a name (or `self.` attribute) assigned in the body is
    read by the next iteration before the body assigns it again, as in an RNN step
    (`h = cell(x[t], h)`) or autoregressive decoding (`tok = model(tok).argmax(-1)`), or a
    tensor or list is read elsewhere than where it is written (`y[:, t] = y[:, t - 1] * a`,
    `toks.append(model(toks[-1]))`), or a cache of empty slots (`self._feat_map = [None] * n`)
    is handed to a call on every iteration (`decoder(z[:, :, k], feat_cache=self._feat_map)`:
    the callee fills it, the next frame reads it). Appending to a list the body never reads is
    not such a dependence, and neither is a *reduction*, a single update that folds independent
    terms into an accumulator (`acc = acc + f(x[i])`, `total += x[i].sum()`): both are
    vectorisable and flagged. Also silent: loops that leave early (`break`, `return`, `yield`:
    the trip count depends on the data), chunked loops (`range(0, n, batch_size)`, or the rows of
    `torch.randperm(n).view(-1, k)`: k indices per iteration), loops over
    Python lists of modules or tensors (`for layer in self.layers`, `range(len(features))` on a
    parameter that may be a list), counts that are not tensor sizes (`range(self.num_layers)`),
    loops over the classes or channels of a map that take the whole batch each time
    (`x[:, c, ...]`, `x[:, [c]]`, `x[:, c : c + 1]`; a plain `x[:, t]` may walk tokens and is
    flagged), loops that return a ragged list, one entry per row of a size read from the data
    (`nonzero`, `unique`: keypoints per image; concatenated after the loop, it is flagged), loops
    that only gather rows as views into lists (`xs.append(x[i])`, `ys.append(y[i - 1])`: no kernel
    runs per row, one `torch.stack` after the loop copies them all), the
    step loop
    itself, inner loops of a loop already reported, and cold code (`__init__`, module level, a
    dataset's one-off `process()`).
    """

    code = "TPL201"
    name = "loop-over-tensor-dim"
    summary = "Python loop over the elements of a tensor dimension in hot code"
    message = (
        "loop over {over} launches tensor ops once per {var}; "
        "vectorise it (broadcasting, torch.gather, torch.einsum, torch.bmm, torch.bucketize)"
    )
    mask_message = (
        "loop over items makes {count} boolean-mask {selections} of device tensors, {syncs} per iteration "
        "(each counts its elements on the host); select for the whole batch at once (a gather with "
        "batch indices, torch.where) and reduce per item with scatter_reduce/index_add_"
    )
    default_on = True  # in its default form, code a step loop of the project runs (precision.json)
    stepping_evidence = True  # its default form: code a step loop of the project runs (RULES.md)
    where = "hot code"
    node_types = (cst.For,)
    benchmark = "TPL201"

    BAD = {
        "row-loop-in-helper-called-from-step-loop": """
            import torch

            def smooth(logits):
                rows = []
                for i in range(logits.shape[0]):  # expect: TPL201
                    rows.append(logits[i] - logits[i].max())
                return torch.stack(rows)

            def train(model, loader, optimizer, criterion):
                for images, labels in loader:
                    loss = criterion(smooth(model(images)), labels)
                    loss.backward()
                    optimizer.step()
            """,
        "bucketize-by-hand-in-forward": """
            import torch
            from torch import nn

            class Binner(nn.Module):
                def forward(self, values, edges):
                    bins = torch.empty_like(values, dtype=torch.long)
                    for i in range(values.size(0)):  # expect: TPL201
                        bins[i] = (edges < values[i]).sum()
                    return bins
            """,
        "per-sample-matmul-over-unpacked-batch": """
            import torch
            from torch import nn

            class Attention(nn.Module):
                def forward(self, q, k):
                    B, T, D = q.shape
                    scores = []
                    for b in range(B):  # expect: TPL201
                        scores.append(q[b] @ k[b].transpose(0, 1) / D ** 0.5)
                    return torch.stack(scores).softmax(-1)
            """,
        "iterating-rows-of-a-derived-tensor": """
            import torch
            from torch import nn

            class Picker(nn.Module):
                def forward(self, logits):
                    probs = torch.softmax(logits, dim=-1)
                    picks = []
                    for row in probs:  # expect: TPL201
                        picks.append(row.argmax())
                    return torch.stack(picks)
            """,
        "reduction-over-rows-is-vectorisable": """
            import torch
            from torch import nn

            class Energy(nn.Module):
                def forward(self, x):
                    flat = x.flatten(1)
                    total = torch.zeros((), device=x.device)
                    for i in range(len(flat)):  # expect: TPL201
                        total = total + flat[i].pow(2).sum()
                    return total
            """,
        "per-token-projection-of-a-sequence": """
            import torch
            from torch import nn

            class TokenHeads(nn.Module):
                def forward(self, x):
                    outs = []
                    for t in range(x.shape[1]):  # expect: TPL201
                        outs.append(self.proj(x[:, t]))
                    return torch.stack(outs, 1)
            """,
        "frames-decoded-independently": """
            import torch
            from torch import nn

            class FrameDecoder(nn.Module):
                def forward(self, z):
                    _, _, num_frames, _, _ = z.shape
                    frames = []
                    for k in range(num_frames):  # expect: TPL201
                        frames.append(self.decoder(z[:, :, k : k + 1]))
                    return torch.cat(frames, dim=2)
            """,
        "per-class-detections-concatenated-after-the-loop": """
            import torch
            from torch import nn

            class Postprocess(nn.Module):
                def forward(self, scores, boxes):
                    kept_boxes, kept_scores = [], []
                    for c in range(scores.shape[0]):  # expect: TPL201
                        keep = (scores[c] > self.threshold).nonzero().squeeze(1)
                        kept_boxes.append(boxes[keep])
                        kept_scores.append(scores[c, keep])
                    return torch.cat(kept_boxes), torch.cat(kept_scores)
            """,
        "single-indices-of-a-permutation": """
            import torch
            from torch import nn

            class Shuffler(nn.Module):
                def forward(self, z):
                    out = torch.empty_like(z)
                    for idx in torch.randperm(z.shape[0]).view(-1, 1):  # expect: TPL201
                        out[idx] = self.proj(z[idx])
                    return out
            """,
        "rows-paired-with-a-tensor-parameter": """
            import torch
            from torch import Tensor, nn

            class Scaler(nn.Module):
                def forward(self, images: Tensor, scales: Tensor) -> Tensor:
                    out = torch.empty_like(images)
                    for i in range(images.shape[0]):  # expect: TPL201
                        out[i] = images[i] * scales[i]
                    return out
            """,
        "mask-selections-per-level-in-a-detection-loss": """
            import torch

            class ComputeLoss:
                def __init__(self, anchors):
                    self.anchors = anchors
                    self.nl = len(anchors)

                def __call__(self, preds, targets):
                    gain = torch.ones(7, device=targets.device)
                    loss = torch.zeros((), device=targets.device)
                    for i in range(self.nl):  # expect: TPL201
                        t = targets * gain
                        r = t[..., 4:6] / self.anchors[i][:, None]
                        keep = torch.max(r, 1 / r).max(2)[0] < 4.0
                        t = t[keep]
                        near = (t[:, 2:4] % 1 < 0.5) & (t[:, 2:4] > 1)
                        t = t[near.all(1)]
                        loss = loss + (preds[i] - t.mean()).pow(2).mean()
                    return loss

            def train(model, loader, optimizer, anchors):
                compute_loss = ComputeLoss(anchors)
                for images, targets in loader:
                    loss = compute_loss(model(images.cuda()), targets.cuda())
                    loss.backward()
                    optimizer.step()
            """,
        "mask-selections-per-image-in-forward": """
            import torch
            from torch import nn

            class BoxLoss(nn.Module):
                def forward(self, pred_boxes, targets, batch_size):
                    total = torch.zeros((), device="cuda")
                    for b in range(batch_size):  # expect: TPL201
                        mine = targets[:, 0] == b
                        gt = targets[mine][:, 1:5]
                        pred = pred_boxes[mine]
                        total = total + (pred - gt).abs().sum()
                    return total
            """,
    }
    GOOD = {
        "one-off-feature-extraction-in-dataset-process": FEATURE_EXTRACTION_IN_DATASET_PROCESS,
        "mask-writes-per-image-and-a-selection-once-per-step": """
            import torch
            from torch import nn

            class BoxLoss(nn.Module):
                def forward(self, pred_boxes, targets, batch_size):
                    weights = torch.ones(pred_boxes.shape[:2], device="cuda")
                    for b in range(batch_size):
                        mine = targets[:, 0] == b
                        weights[mine] = 0.5
                        weights[b][pred_boxes[b, :, 0] < 0] = 2.0
                    positive = weights > 0.75
                    return (pred_boxes[positive] * weights[positive][:, None]).sum()

            def train(model, loader, optimizer, criterion):
                for images, targets in loader:
                    out = model(images.cuda())
                    valid = targets[:, 4] > 0
                    loss = criterion(out, targets.cuda(), 16) + out[valid.cuda()].mean()
                    loss.backward()
                    optimizer.step()
            """,
        "mask-selections-on-host-tensors-and-python-flags": """
            import torch
            from torch import nn

            class Sampler(nn.Module):
                def forward(self, x, flag, batch_size):
                    table = torch.arange(64)
                    out = []
                    for b in range(batch_size):
                        picked = table[table % 4 == b]
                        out.append(x[b, :, flag > 0] + picked.sum().cuda())
                    return out
            """,
        "per-image-post-processing-under-no-grad": """
            import torch

            @torch.no_grad()
            def postprocess(predictions, conf_thres):
                kept = []
                for xi, x in enumerate(predictions):
                    kept.append(x[x[:, 4] > conf_thres])
                return kept

            def evaluate(model, loader):
                for images, _ in loader:
                    detections = postprocess(model(images.cuda()), 0.25)
            """,
        "mask-selections-per-image-in-a-cpu-only-loss": """
            import torch
            from torch import nn

            class BoxLoss(nn.Module):
                def forward(self, pred_boxes, targets, batch_size):
                    total = torch.zeros(())
                    for b in range(batch_size):
                        mine = targets[:, 0] == b
                        total = total + (pred_boxes[mine] - targets[mine][:, 1:5]).abs().sum()
                    return total
            """,
        "causal-decoding-through-a-frame-cache": """
            import torch
            from torch import nn

            class CausalVideoDecoder(nn.Module):
                def clear_cache(self):
                    self._feat_map = [None] * self._conv_num

                def forward(self, z):
                    _, _, num_frames, _, _ = z.shape
                    self.clear_cache()
                    frames = []
                    for k in range(num_frames):
                        frames.append(self.decoder(z[:, :, k : k + 1], feat_cache=self._feat_map))
                    return torch.cat(frames, dim=2)
            """,
        "keypoints-of-their-own-count-per-image": """
            import torch
            from torch import nn

            class Detector(nn.Module):
                def forward(self, heatmap):
                    peaks = heatmap > self.threshold
                    keypoints = []
                    for b in range(heatmap.shape[0]):
                        yx = peaks[b].nonzero()
                        keypoints.append((yx.flip(1), heatmap[b][peaks[b]]))
                    return keypoints
            """,
        "one-loss-per-class-channel": """
            import torch
            from torch import nn

            class PerClassFocal(nn.Module):
                def forward(self, logits, masks):
                    losses = []
                    for c in range(logits.size(1)):
                        losses.append(self.focal(logits[:, c, ...], masks[:, [c]]))
                    return torch.stack(losses).mean()
            """,
        "index-picks-a-configuration-entry": """
            import torch
            from torch import nn

            class FluxPosEmbed(nn.Module):
                def forward(self, ids):
                    n_axes = ids.shape[-1]
                    cos_out = []
                    for i in range(n_axes):
                        cos_out.append(rotary(self.axes_dim[i], ids[:, i], theta=self.theta))
                    return torch.cat(cos_out, dim=-1)
            """,
        "sub-batches-of-a-permutation": """
            import torch
            from torch import nn

            class WhitenedLoss(nn.Module):
                def forward(self, z):
                    out = torch.empty_like(z)
                    perm = torch.randperm(z.shape[0]).view(-1, self.w_size)
                    for idx in perm:
                        out[idx] = self.whitening(z[idx])
                    return out
            """,
        "hierarchy-levels-of-labels-moved-to-numpy": """
            import numpy as np
            import torch
            from torch import nn

            class HierarchicalLabels(nn.Module):
                def forward(self, labels):
                    if isinstance(labels, (list, tuple)):
                        labels = np.stack([l.cpu().numpy() for l in labels], axis=1)
                    else:
                        labels = labels.cpu().numpy()
                    out = np.zeros(labels.shape, dtype=int)
                    for h in range(labels.shape[1]):
                        out[:, h] = self.label_map(labels[:, h], h)
                    return torch.from_numpy(out)
            """,
        "rnn-recurrence": """
            import torch
            from torch import nn

            class Encoder(nn.Module):
                def forward(self, x):
                    h = x.new_zeros(x.size(1), self.hidden)
                    outputs = []
                    for t in range(x.size(0)):
                        h = self.cell(x[t], h)
                        outputs.append(h)
                    return torch.stack(outputs)
            """,
        "autoregressive-decoding": """
            import torch
            from torch import nn

            class Decoder(nn.Module):
                def forward(self, memory, start):
                    tokens = [start]
                    for t in range(memory.shape[1]):
                        logits = self.step(memory[:, t], tokens[-1])
                        tokens.append(logits.argmax(-1))
                    return torch.stack(tokens, 1)
            """,
        "module-lists-and-layer-counts": """
            import torch
            from torch import nn

            class FPN(nn.Module):
                def forward(self, features):
                    outs = []
                    for i in range(len(features)):
                        outs.append(self.lateral[i](features[i]))
                    for layer in self.layers:
                        outs = [layer(o) for o in outs]
                    for i in range(self.num_layers):
                        outs[i] = outs[i] * self.scale[i]
                    return outs
            """,
        "same-loop-in-init-and-module-level": """
            import torch
            from torch import nn

            TABLE = torch.randn(16, 4)
            for i in range(TABLE.shape[0]):
                TABLE[i] = TABLE[i] / TABLE[i].norm()

            class Net(nn.Module):
                def __init__(self, weight):
                    super().__init__()
                    for i in range(weight.shape[0]):
                        weight[i] = weight[i] / weight[i].norm()
                    self.weight = nn.Parameter(weight)

                def forward(self, x):
                    return x @ self.weight
            """,
        "chunked-minibatches-and-early-exit": """
            import torch
            from torch import nn

            class Chunked(nn.Module):
                def forward(self, x):
                    outs = []
                    for start in range(0, x.shape[0], 256):
                        outs.append(self.body(x[start:start + 256]))
                    for i in range(x.shape[0]):
                        if x[i].sum() == 0:
                            break
                    return torch.cat(outs)
            """,
        "linear-recurrence-filter": """
            import torch
            from torch import nn

            class Smoother(nn.Module):
                def forward(self, x):
                    y = torch.empty_like(x)
                    y[:, 0] = x[:, 0]
                    for t in range(1, x.shape[1]):
                        y[:, t] = self.alpha * x[:, t] + (1 - self.alpha) * y[:, t - 1]
                    return y
            """,
        "rows-paired-with-ragged-python-data": """
            import torch
            from torch import nn

            class SetCriterion(nn.Module):
                def forward(self, logits, targets, lengths):
                    sizes = lengths.tolist()
                    losses = []
                    for b in range(logits.shape[0]):
                        labels = targets[b]["labels"]
                        losses.append(self.match(logits[b, : sizes[b]], labels))
                    return torch.stack(losses).mean()
            """,
        "images-of-their-own-sizes-padded-into-a-batch": """
            import torch
            from torch import Tensor, nn

            class Batcher(nn.Module):
                def forward(self, images: list[Tensor]) -> Tensor:
                    batch = images[0].new_zeros(len(images), 3, 512, 512)
                    for i in range(batch.shape[0]):
                        img = images[i]
                        batch[i, :, : img.shape[1], : img.shape[2]].copy_(img)
                    return batch
            """,
        "rows-gathered-as-views-then-stacked": """
            import torch
            from torch import nn

            class PairBuilder(nn.Module):
                def forward(self, x, ids):
                    batch_size = x.size(0)
                    xs, negatives = [], []
                    for i in range(batch_size):
                        xs.append(x[i])
                        negatives.append(ids[i - 1 if i == batch_size - 1 else i + 1, :])
                    return self.head(torch.stack(xs), torch.stack(negatives))
            """,
        "loop-index-used-only-on-the-host": """
            import torch
            from torch import nn

            class Net(nn.Module):
                def forward(self, x):
                    for i in range(x.shape[0]):
                        self.log(f"sample {i}")
                    return self.body(x)
            """,
    }

    def check(self, node: cst.For, ctx: Context) -> Iterator[Report]:
        selections = ctx.mask_selections(node.body) if self._per_item_in_a_step(node, ctx) else []
        if selections:
            yield self._mask_report(node, len(selections), ctx)
            return
        found = self._vectorisable(node, ctx)
        if found is None:
            return
        child: cst.CSTNode = node
        for ancestor in ctx.ancestors(node):
            if isinstance(ancestor, SCOPES):
                break
            if isinstance(ancestor, cst.For) and child is ancestor.body and self._vectorisable(ancestor, ctx):
                return  # the outer loop's finding covers this one
            child = ancestor
        over, var = found
        yield self.report(node, reason=ctx.hot_reason(node), over=over, var=var)

    @staticmethod
    def _per_item_in_a_step(loop: cst.For, ctx: Context) -> bool:
        """A loop over the items of a training step or of forward: not one reached only from an
        evaluation or generation loop, nor one under `no_grad()`, whose per-image post-processing
        (NMS, metrics) is ragged by nature and often runs on the host."""
        reason = ctx.hot_reason(loop)
        if reason is None or reason.inference_only or ctx.item_loop(loop) is not loop:
            return False
        return not ctx.grad_disabled(loop)

    def _mask_report(self, loop: cst.For, count: int, ctx: Context) -> Report:
        syncs = "1 sync" if count == 1 else f"{count} syncs"
        selections = "selection" if count == 1 else "selections"
        message = self.mask_message.format(count=count, selections=selections, syncs=syncs)
        return Report(self.code, self.name, loop, message, ctx.hot_reason(loop))

    @staticmethod
    def _vectorisable(loop: cst.For, ctx: Context) -> Optional[tuple[str, str]]:
        """(what the loop walks, its variable) when `loop` is a per-element loop worth a finding."""
        if loop.asynchronous is not None or ctx.hot_reason(loop) is None:
            return None
        if ctx.step_loop(loop.body) is loop:
            return None
        index_vars: list[str] = []
        element_vars: list[str] = []
        source = loop.iter
        if isinstance(source, cst.Call) and ctx.qualified_name(source) == "builtins.range":
            stop = _range_stop(source, ctx)
            walked_tensor = _dim_of(stop, ctx) if stop is not None else None
            if walked_tensor is None or not isinstance(loop.target, cst.Name):
                return None
            walked = ctx.code(walked_tensor)
            index_vars = [loop.target.value]
            over = ctx.code(source)
        else:
            if (
                isinstance(source, cst.Call)
                and ctx.qualified_name(source) == "builtins.enumerate"
                and len(source.args) == 1
                and isinstance(loop.target, cst.Tuple)
                and len(loop.target.elements) == 2
            ):
                index_vars = _names(loop.target.elements[0].value)
                element_vars = _names(loop.target.elements[1].value)
                source = source.args[0].value
            else:
                element_vars = _names(loop.target)
            if not element_vars or not ctx.is_tensor(source, certain=True):
                return None
            if ctx.index_chunks(source):
                return None  # one sub-batch of indices per iteration, as `.split(k)` gives
            walked = ctx.code(source)
            over = f"the rows of {ctx.code(source)}"
        facts = ctx.loop_facts(loop)
        if facts.exits_early or facts.sequential:
            return None
        per_element = any(facts.uses(v) for v in element_vars) or any(
            _feeds_tensor_op(read, walked, ctx) for v in index_vars for read in facts.uses(v)
        )
        if not per_element:
            return None
        if any(_picks_from_container(read, walked, ctx) for v in index_vars for read in facts.uses(v)):
            return None
        if any(ctx.indexed_configuration(loop.body, v) for v in index_vars):
            return None  # one iteration per entry of a configuration: RoPE axes, layers
        if ctx.loops_over_configuration(loop):
            return None  # one iteration per class or channel, each over the whole batch
        if ragged_list(loop, ctx.enclosing_function(loop)):
            return None  # the output is one entry of its own size per row
        if _gathers_views_only(loop):
            return None  # views gathered into lists: no kernel per row
        return over, (element_vars or index_vars)[0]

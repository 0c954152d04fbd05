"""TPL202 cat-in-loop: Tensor re-grown with torch.cat inside a loop."""

from __future__ import annotations

from typing import Iterator, Optional

import libcst as cst

from ...analysis.sequential import Read
from ...engine.context import Context
from ...engine.findings import Report
from ...syntax.walker import dotted_name
from ..base import Rule
from .common import SCOPES, data_argument

_SIZE_ATTRIBUTES = frozenset({"shape", "size", "numel", "nelement", "dim", "ndim", "ndimension"})


def _enclosing_loop(node: cst.CSTNode, ctx: Context) -> Optional[cst.For | cst.While]:
    """The innermost loop of the same function whose body (not `else`) holds `node`."""
    child = node
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, SCOPES):
            return None
        if isinstance(ancestor, (cst.For, cst.While)) and child is ancestor.body:
            return ancestor
        child = ancestor
    return None


# -- TPL202 -------------------------------------------------------------------------------
CONCATENATIONS = frozenset(
    f"torch.{name}"
    for name in "cat concat concatenate stack hstack vstack dstack column_stack row_stack".split()
)


def _assignment_of(call: cst.Call, ctx: Context) -> Optional[cst.Assign]:
    """The `acc = <call>` (or `acc = <call> if ... else ...`) statement whose value is `call`."""
    child: cst.CSTNode = call
    for ancestor in ctx.ancestors(call):
        if isinstance(ancestor, cst.IfExp) and child is not ancestor.test:
            child = ancestor
            continue
        if isinstance(ancestor, cst.Assign) and child is ancestor.value and len(ancestor.targets) == 1:
            return ancestor
        return None
    return None


def _size_query(read: Read, key: str, ctx: Context) -> bool:
    """`acc is None`, `len(acc)`, `acc.shape[0]`, `acc.numel()`: a counter could answer these."""
    if read.key != key:
        return read.key.startswith(key + ".") and read.key[len(key) + 1 :].split(".")[0] in _SIZE_ATTRIBUTES
    parent = ctx.parent(read.node)
    if isinstance(parent, cst.Comparison):
        return all(
            isinstance(t.operator, (cst.Is, cst.IsNot))
            and isinstance(t.comparator, cst.Name)
            and t.comparator.value == "None"
            for t in parent.comparisons
        )
    if isinstance(parent, cst.Arg):
        call = ctx.parent(parent)
        return isinstance(call, cst.Call) and ctx.qualified_name(call) == "builtins.len"
    return False


class CatInLoop(Rule):
    """## What it does
    Flags `acc = torch.cat([acc, y])` (or `torch.stack`, `torch.vstack`, `torch.hstack`...)
    inside a loop, where `acc` carries over from the previous iteration: the accumulator is
    re-grown by one piece per iteration. Looks in hot code, and outside it in loops whose trip
    count grows with the data: over a loader, a dataset, the rows or pieces of a tensor, a range
    counted by a tensor dimension or by a number that is not a small constant (`range(n)`), or a
    `while` loop (analysis/trip_counts.py).

    ## Why it is slow
    Each `torch.cat` allocates a new tensor and copies everything accumulated so far, so n
    iterations copy O(n^2) elements and allocate n ever larger buffers. Appending the pieces to
    a list and concatenating once after the loop copies every element once; the gap grows with
    the number of iterations. The measured effect on an H100 is in the Measured section below.

    ## Fix safety
    No automatic fix: the rewrite moves code out of the loop (`parts.append(y)` inside,
    `acc = torch.cat(parts)` after), and the first piece often needs care.

    ## When it stays silent
    One `torch.cat` after the loop; a cat of fresh tensors that does not include the
    accumulator (`pair = torch.cat([a[i], b[i]])`); an accumulator reset earlier in the same
    iteration; an accumulator the loop body reads for another purpose than the cat, as in a
    DenseNet block (`x = torch.cat([x, layer(x)], 1)`, where every step needs the whole
    concatenation) or a bounded queue (`self.queue = torch.cat([self.queue, k])[-size:]`).
    Reads that only ask the size (`acc is None`, `len(acc)`, `acc.shape[0]`) do not count: a
    counter can replace them. Loops over configuration, not data (analysis/configuration.py): a
    literal tuple or list, a `self` attribute that is not a tensor (`self.config.cond_types`,
    `self.layers`), a mapping's entries (`conditions.items()`), `range(self.num_layers)` or
    `range(len(self.blocks))`: a handful of iterations fixed when the model is built; and loops
    over the classes or channels of a map (`x[:, c, ...]`, `x[:, [c]]`, `x[:, c : c + 1]`); and
    loops that run only while scripting, tracing or exporting (under `if torch.jit.is_tracing():`,
    or in a private helper only such a branch calls): an export runs them once. Outside hot code,
    loops of a handful of iterations: a pipeline's set-up that concatenates the keyframes or
    reference latents it was handed once per call (`for frame in keyframes:`, `range(3)`) copies a
    few pieces, once.
    """

    code = "TPL202"
    name = "cat-in-loop"
    summary = "Tensor re-grown with torch.cat inside a loop"
    message = (
        "{func}() re-grows {acc} on every iteration, copying everything accumulated so far; "
        "append the pieces to a list and call {func}() once after the loop"
    )
    default_on = False  # below the real-code precision bar (evidence.py, precision.json)
    where = "hot code, or a data-sized loop"
    node_types = (cst.Call,)
    benchmark = "TPL202"

    BAD = {
        "features-over-a-loader": """
            import torch

            @torch.no_grad()
            def extract_features(backbone, loader):
                feats = torch.empty(0, 512, device="cuda")
                for images, _ in loader:
                    feats = torch.cat([feats, backbone(images.cuda())])  # expect: TPL202
                return feats
            """,
        "collect-predictions-in-eval-loop": """
            import torch

            @torch.no_grad()
            def predict(model, loader):
                preds = torch.empty(0, dtype=torch.long)
                for images, _ in loader:
                    preds = torch.cat([preds, model(images).argmax(1)])  # expect: TPL202
                return preds
            """,
        "first-piece-then-cat": """
            import torch

            def embed_all(encoder, batches):
                feats = None
                for batch in batches:
                    out = encoder(batch)
                    if feats is None:
                        feats = out
                    else:
                        feats = torch.cat((feats, out), dim=0)  # expect: TPL202
                return feats
            """,
        "vstack-in-while-sampling": """
            import torch

            def sample(proposal, accept, n):
                kept = torch.empty(0, 2)
                while kept.shape[0] < n:
                    draw = proposal(1024)
                    kept = torch.vstack([kept, draw[accept(draw)]])  # expect: TPL202
                return kept[:n]
            """,
        "self-buffer-grown-in-forward": """
            import torch
            from torch import nn

            class Recorder(nn.Module):
                def forward(self, xs):
                    for x in xs:
                        self.seen = torch.cat([self.seen, x.detach()], dim=0)  # expect: TPL202
                    return xs
            """,
        "per-token-features-grown": """
            import torch
            from torch import nn

            class TokenFeatures(nn.Module):
                def forward(self, x):
                    feats = self.net(x[:, 0])
                    for t in range(1, x.shape[1]):
                        feats = torch.cat([feats, self.net(x[:, t])], dim=1)  # expect: TPL202
                    return feats
            """,
    }
    GOOD = {
        # set-up of a video pipeline, once per call: a few keyframes, a fixed number of references
        "keyframes-once-per-call": """
            import torch

            @torch.no_grad()
            def prepare_conditions(vae, keyframes, reference):
                latents = None
                for frame in keyframes:
                    z = vae.encode(frame.cuda())
                    latents = z if latents is None else torch.cat([latents, z], dim=2)
                refs = reference[:, :0]
                for i in range(3):
                    refs = torch.cat([refs, vae.encode(reference[:, i])], dim=1)
                return latents, refs
            """,
        "one-feature-pass-per-image-channel": """
            import torch
            from torch import nn

            class PerChannelPerceptual(nn.Module):
                def forward(self, image):
                    feats = self.net(image[:, 0, ...].unsqueeze(1))
                    for c in range(1, image.shape[1]):
                        feats = torch.cat([feats, self.net(image[:, c, ...].unsqueeze(1))], dim=1)
                    return feats
            """,
        "loops-over-configuration": """
            import torch
            from torch import nn

            class Fuser(nn.Module):
                def forward(self, x, conditions):
                    cross = None
                    for name, cond in conditions.items():
                        cross = cond if cross is None else torch.cat([cross, cond], dim=1)
                    embed = x.new_zeros(x.shape[0], 0)
                    for kind in self.config.conditioning_types:
                        embed = torch.cat([embed, self.embed(kind, x)], dim=1)
                    for i in range(self.num_layers):
                        x = self.layers[i](x)
                        cross = torch.cat([cross, x], dim=1)
                    for scale in (1, 2, 4):
                        embed = torch.cat([embed, x[:, ::scale].mean(1)], dim=1)
                    return cross, embed
            """,
        "single-cat-after-the-loop": """
            import torch

            @torch.no_grad()
            def predict(model, loader):
                preds = []
                for images, _ in loader:
                    preds.append(model(images).argmax(1))
                return torch.cat(preds)
            """,
        "cat-of-fresh-tensors": """
            import torch

            def pairs(a, b):
                out = []
                for i in range(a.shape[0]):
                    pair = torch.cat([a[i], b[i]])
                    out.append(pair)
                return out
            """,
        "densenet-block-reads-the-concatenation": """
            import torch
            from torch import nn

            class DenseBlock(nn.Module):
                def forward(self, x):
                    for layer in self.layers:
                        x = torch.cat([x, layer(x)], 1)
                    return x
            """,
        "bounded-queue": """
            import torch
            from torch import nn

            class MoCoQueue(nn.Module):
                def forward(self, keys):
                    for k in keys.split(64):
                        self.queue = torch.cat([self.queue, k])[-4096:]
                    return self.queue
            """,
        "export-only-helper": """
            import torch

            def _paste_loop_for_onnx(masks, h, w):
                out = torch.zeros(0, h, w)
                for i in range(masks.size(0)):
                    out = torch.cat((out, masks[i].unsqueeze(0)))
                return out

            def paste(masks, h, w):
                if torch.jit.is_tracing():
                    return _paste_loop_for_onnx(masks, h, w)
                return torch.stack([m for m in masks])
            """,
        "reset-every-iteration": """
            import torch

            def windows(x, pad):
                out = []
                for i in range(x.shape[0]):
                    row = x[i]
                    row = torch.cat([row, pad])
                    out.append(row)
                return out
            """,
    }

    def check(self, node: cst.Call, ctx: Context) -> Iterator[Report]:
        func = ctx.qualified_name(node)
        if func not in CONCATENATIONS:
            return
        pieces = data_argument(node, "tensors")
        if not isinstance(pieces, (cst.List, cst.Tuple)):
            return
        assign = _assignment_of(node, ctx)
        if assign is None:
            return
        acc = dotted_name(assign.targets[0].target)
        if acc is None:
            return
        own = [e.value for e in pieces.elements if dotted_name(e.value) == acc]
        loop = _enclosing_loop(assign, ctx)
        if not own or loop is None:
            return
        if isinstance(loop, cst.For) and ctx.loops_over_configuration(loop):
            return  # a handful of iterations fixed by the model: condition types, layers
        if ctx.runs_only_in_special_mode(loop):
            return  # an export path: it runs once, while tracing
        facts = ctx.loop_facts(loop)
        if acc not in facts.carried:
            return
        for read in facts.uses(acc):
            if read.node not in own and not _size_query(read, acc, ctx):
                return
        if not ctx.is_hot(node) and ctx.data_sized(loop) is None:
            return  # outside hot code, a handful of pieces once per call (keyframes) costs nothing
        yield self.report(node, reason=ctx.hot_reason(node), func=ctx.code(node.func), acc=acc)

"""TPL2xx: Python loops instead of tensor ops."""

from __future__ import annotations

from typing import Iterator, Optional

import libcst as cst

from ..engine.context import Context
from ..engine.findings import Report
from ..engine.sequential import Read
from ..engine.walker import dotted_name
from .base import Rule

_SIZE_ATTRIBUTES = frozenset({"shape", "size", "numel", "nelement", "dim", "ndim", "ndimension"})
_SCOPES = (cst.FunctionDef, cst.Lambda, cst.ClassDef)


def _enclosing_loop(node: cst.CSTNode, ctx: Context) -> Optional[cst.For | cst.While]:
    """The innermost loop of the same function whose body (not `else`) holds `node`."""
    child = node
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, _SCOPES):
            return None
        if isinstance(ancestor, (cst.For, cst.While)) and child is ancestor.body:
            return ancestor
        child = ancestor
    return None


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
    (`lengths = lens.tolist()`, then `x[i, :lengths[i]]`) or a list of dicts
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
    return isinstance(picked, cst.Name) and not is_attribute and not ctx.is_tensor(picked)


class LoopOverTensorDim(Rule):
    """## What it does
    Flags a Python `for` loop in hot code that walks a tensor dimension element by element:
    `for i in range(x.shape[d])`, `range(x.size(d))`, `range(len(x))`, `range(B)` where
    `B, T = x.shape`, `for row in x` or `for i, row in enumerate(x)`, when the body indexes a
    tensor with the loop index (`x[i]`, `out[:, i]`), passes it to a tensor op, or uses the row.

    ## Why it is slow
    Every iteration launches its own kernels (often several: index, compute, write back), so a
    batch of 4096 rows costs thousands of launches and Python round trips where one batched op
    does the whole dimension. Rewrite with broadcasting, `torch.gather`, `torch.einsum`,
    `torch.bmm`, `torch.bucketize`, or a reduction over the dimension. The measured effect on
    an H100 is in the Measured section below.

    ## Fix safety
    No automatic fix: the vectorised form depends on what the body computes.

    ## When it stays silent
    Loops that are sequential by nature: a name (or `self.` attribute) assigned in the body is
    read by the next iteration before the body assigns it again, as in an RNN step
    (`h = cell(x[t], h)`) or autoregressive decoding (`tok = model(tok).argmax(-1)`), or a
    tensor or list is read elsewhere than where it is written (`y[:, t] = y[:, t - 1] * a`,
    `toks.append(model(toks[-1]))`). Appending to a list the body never reads is not such a
    dependence, and neither is a *reduction*, a single update that folds independent terms into
    an accumulator (`acc = acc + f(x[i])`, `total += x[i].sum()`): both are vectorisable and
    flagged. Also silent: loops that leave early (`break`, `return`, `yield`: the trip count
    depends on the data), chunked loops (`range(0, n, batch_size)`), loops over Python lists of
    modules or tensors (`for layer in self.layers`, `range(len(features))` on a parameter that
    may be a list), counts that are not tensor sizes (`range(self.num_layers)`), the step loop
    itself, inner loops of a loop already reported, and cold code (`__init__`, module level).
    """

    code = "TPL201"
    name = "loop-over-tensor-dim"
    summary = "Python loop over the elements of a tensor dimension in hot code"
    message = (
        "loop over {over} launches tensor ops once per {var}; "
        "vectorise it (broadcasting, torch.gather, torch.einsum, torch.bmm, torch.bucketize)"
    )
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
    }
    GOOD = {
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
        found = self._vectorisable(node, ctx)
        if found is None:
            return
        child: cst.CSTNode = node
        for ancestor in ctx.ancestors(node):
            if isinstance(ancestor, _SCOPES):
                break
            if isinstance(ancestor, cst.For) and child is ancestor.body and self._vectorisable(ancestor, ctx):
                return  # the outer loop's finding covers this one
            child = ancestor
        over, var = found
        yield self.report(node, reason=ctx.hot_reason(node), over=over, var=var)

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
        return over, (element_vars or index_vars)[0]


# -- TPL202 -------------------------------------------------------------------------------
CONCATENATIONS = frozenset(
    f"torch.{name}"
    for name in "cat concat concatenate stack hstack vstack dstack column_stack row_stack".split()
)


def _data_argument(call: cst.Call, keyword: str) -> Optional[cst.BaseExpression]:
    """The first positional argument, or the one passed as `keyword=`."""
    for arg in call.args:
        if not arg.star and (arg.keyword is None or arg.keyword.value == keyword):
            return arg.value
    return None


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
    re-grown by one piece per iteration. Looks in every loop, hot or not.

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
    counter can replace them.
    """

    code = "TPL202"
    name = "cat-in-loop"
    summary = "Tensor re-grown with torch.cat inside a loop"
    message = (
        "{func}() re-grows {acc} on every iteration, copying everything accumulated so far; "
        "append the pieces to a list and call {func}() once after the loop"
    )
    where = "any loop"
    node_types = (cst.Call,)
    benchmark = "TPL202"

    BAD = {
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
    }
    GOOD = {
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
        pieces = _data_argument(node, "tensors")
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
        facts = ctx.loop_facts(loop)
        if acc not in facts.carried:
            return
        for read in facts.uses(acc):
            if read.node not in own and not _size_query(read, acc, ctx):
                return
        yield self.report(node, reason=ctx.hot_reason(node), func=ctx.code(node.func), acc=acc)


# -- TPL203 -------------------------------------------------------------------------------
def _is_item_call(expr: cst.BaseExpression) -> bool:
    return (
        isinstance(expr, cst.Call)
        and isinstance(expr.func, cst.Attribute)
        and expr.func.attr.value == "item"
        and not expr.args
    )


def _scalar_of_tensor(expr: cst.BaseExpression, ctx: Context) -> bool:
    """`t.item()`, `float(t)`/`int(t)` of a tensor, or a tensor derived by torch."""
    if _is_item_call(expr):
        return True
    if (
        isinstance(expr, cst.Call)
        and ctx.qualified_name(expr) in ("builtins.float", "builtins.int", "builtins.bool")
        and len(expr.args) == 1
    ):
        return ctx.is_tensor(expr.args[0].value, certain=True)  # `Tensor | float` params are often floats
    return ctx.is_tensor(expr, certain=True)


def _tensor_elements(data: cst.BaseExpression, ctx: Context, follow_names: bool = True) -> Optional[str]:
    """What `data` is when it is a Python list of tensors or of their `.item()` values."""
    if isinstance(data, (cst.List, cst.Tuple)):
        if any(_scalar_of_tensor(e.value, ctx) for e in data.elements if isinstance(e, cst.Element)):
            return "a list of tensors"
        return None
    if isinstance(data, (cst.ListComp, cst.GeneratorExp)):
        if _is_item_call(data.elt):
            return "a list of .item() values"
        return "a list of tensors" if _scalar_of_tensor(data.elt, ctx) else None
    if isinstance(data, cst.Name) and follow_names:
        return _appended_tensors(data, ctx)
    return None


def _appended_tensors(name: cst.Name, ctx: Context) -> Optional[str]:
    """`vals = []` then `vals.append(t.item())` in the same scope."""
    bindings = ctx.bindings(name.value, name)
    if not bindings:
        return None
    found: Optional[str] = None
    for binding in bindings:
        value = binding.node
        if binding.kind != "assign" or not isinstance(value, (cst.List, cst.ListComp, cst.GeneratorExp)):
            return None
        if not (isinstance(value, cst.List) and not value.elements):
            found = found or _tensor_elements(value, ctx, follow_names=False)
    for call in ctx.facts.method_calls.get("append", ()):
        assert isinstance(call.func, cst.Attribute)
        receiver = call.func.value
        if (
            isinstance(receiver, cst.Name)
            and receiver.value == name.value
            and len(call.args) == 1
            and ctx.bindings(name.value, call) is bindings
            and _scalar_of_tensor(call.args[0].value, ctx)
        ):
            found = found or "a list of tensors"
    return found


class TensorFromTensorList(Rule):
    """## What it does
    Flags `torch.tensor(...)` (also `torch.as_tensor`, `torch.Tensor` and the legacy
    `torch.FloatTensor`-style constructors) applied to a Python list of tensors or of their
    `.item()` values: `torch.tensor([t.item() for t in losses])`,
    `torch.tensor([loss_a.detach(), loss_b.detach()])`, or a list filled by
    `vals.append(t.item())` in the same function. Looks everywhere.

    ## Why it is slow
    `torch.tensor` reads a list element by element on the host: every CUDA tensor in it is
    copied to the host with a device sync (every `.item()` is one too), then the result is
    built on the CPU and copied back. `torch.stack(list)` keeps the data on the device in one
    kernel. The measured effect on an H100 is in the Measured section below.

    ## Fix safety
    No automatic fix: `torch.stack` keeps the values' device and autograd history (call
    `.detach()` where the list held `.item()` values), and where `.item()` was called the list
    comprehension should keep the tensors instead.

    ## When it stays silent
    Python numbers, literal lists and shapes (`torch.tensor([x.shape[0], 5])`), NumPy arrays,
    `torch.tensor(x.tolist())` (one transfer), and lists whose elements are not known to be
    tensors (a parameter that may hold floats).
    """

    code = "TPL203"
    name = "tensor-from-tensor-list"
    summary = "torch.tensor() built from a list of tensors"
    message = (
        "{func}() on {what} copies and syncs once per element; "
        "use torch.stack() on the tensors to keep them on the device"
    )
    where = "anywhere"
    node_types = (cst.Call,)
    benchmark = "TPL203"

    BAD = {
        "item-comprehension": """
            import torch

            def epoch_summary(step_losses):
                history = torch.tensor([loss.item() for loss in step_losses])  # expect: TPL203
                return history.mean(), history.std()
            """,
        "list-of-scalar-tensors": """
            import torch
            from torch import nn

            class MultiTaskLoss(nn.Module):
                def forward(self, pred, target):
                    parts = torch.tensor([  # expect: TPL203
                        (pred - target).abs().mean(),
                        (pred - target).pow(2).mean(),
                    ])
                    return parts @ self.weights
            """,
        "appended-list-in-eval-loop": """
            import torch

            @torch.no_grad()
            def evaluate(model, loader):
                accuracies = []
                for x, y in loader:
                    accuracies.append((model(x).argmax(1) == y).float().mean())
                return torch.as_tensor(accuracies).mean()  # expect: TPL203
            """,
    }
    GOOD = {
        "python-numbers-and-literals": """
            import torch

            WEIGHTS = torch.tensor([0.1, 0.2, 0.7])

            def class_weights(counts):
                total = sum(counts)
                return torch.tensor([total / c for c in counts])
            """,
        "numpy-array-and-tolist": """
            import numpy as np
            import torch

            def load(path, x):
                table = np.load(path)
                return torch.tensor(table), torch.tensor(x.tolist())
            """,
        "shape-ints": """
            import torch
            from torch import nn

            class Net(nn.Module):
                def forward(self, x):
                    size = torch.tensor([x.shape[0], x.shape[1]])
                    return x.view(-1) * size.prod()
            """,
        "stack-instead": """
            import torch

            def epoch_summary(step_losses):
                history = torch.stack([loss.detach() for loss in step_losses])
                return history.mean()
            """,
        "floats-appended": """
            import torch

            def read_values(lines):
                values = []
                for line in lines:
                    values.append(float(line))
                return torch.tensor(values)
            """,
    }

    def check(self, node: cst.Call, ctx: Context) -> Iterator[Report]:
        func = ctx.qualified_name(node)
        if func is None or not func.startswith("torch."):
            return
        constructor = func[len("torch.") :]
        if constructor not in ("tensor", "as_tensor") and not (
            "." not in constructor and constructor.endswith("Tensor")
        ):
            return
        data = _data_argument(node, "data")
        what = _tensor_elements(data, ctx) if data is not None else None
        if what is None:
            return
        yield self.report(node, reason=ctx.hot_reason(node), func=ctx.code(node.func), what=what)

"""TPL306 hand-written-attention: softmax(q @ k^T) @ v written out instead of one fused kernel."""

from __future__ import annotations

import dataclasses
import enum
import itertools
import re
from collections.abc import Iterable, Sequence
from typing import Iterator, Optional, Union

import libcst as cst

from ...engine.context import Context
from ...engine.edits import functional_attribute, keyword
from ...engine.findings import Fix, Replacement, Report, Safety
from ...syntax.walker import children, dotted_name, signed_int
from ..base import Rule
from .common import is_name, is_number, without_parens

_SOFTMAX = frozenset({"torch.softmax", "torch.nn.functional.softmax", "torch.special.softmax"})
_DROPOUT = frozenset({"torch.nn.functional.dropout", "torch.dropout"})
_MATMUL = frozenset({"torch.matmul", "torch.bmm"})
_CASTS = frozenset({"float", "half", "bfloat16", "double", "to", "type", "type_as"})
# Calls of a fused attention kernel: a function that makes one is dispatching between it and the
# hand-written path (nanoGPT's `if self.flash:`, timm's `if self.fused_attn:`).
_FUSED = frozenset(
    {
        "scaled_dot_product_attention",
        "flash_attn_func",
        "flash_attn_varlen_func",
        "flash_attn_qkvpacked_func",
        "flash_attn_kvpacked_func",
        "memory_efficient_attention",
        "flex_attention",
    }
)
# Transposes that swap the last two dimensions of a key: (-2, -1) always; (1, 2) and (2, 3) of a 3-D
# and a 4-D key (on any other rank they would not make a product of the right shape).
_KEY_TRANSPOSES = frozenset({(-2, -1), (1, 2), (2, 3)})
_NEGATIVE_FILL_NAME = re.compile(r"inf|neg|min|mask_value|large", re.IGNORECASE)
# Names that hold a Python number where nothing in the file says otherwise (`self.head_dim`).
_NUMBER_NAME = re.compile(r"scale|temperature|factor|dim|size|head", re.IGNORECASE)
_MAX_DEPTH = 24  # steps followed back from the softmax; real chains have fewer than 8
_SDPA = "scaled_dot_product_attention"
_NO_BLOCK: tuple[cst.BaseStatement, ...] = ()
_METADATA = frozenset({"dtype", "device", "shape", "ndim", "is_cuda", "size", "dim"})
# In-place steps written as statements: `att.masked_fill_(mask, -inf)`, `att.mul_(scale)`.
_IN_PLACE = {"masked_fill_": "masked_fill", "add_": "add", "mul_": "mul", "div_": "div"}


# -- the chain ------------------------------------------------------------------------------


class _Kind(enum.Enum):
    SCALE = "scale"  # scores * s
    DIVIDE = "divide"  # scores / s
    BIAS = "bias"  # scores + b
    FILL = "fill"  # scores.masked_fill(m, value): masked where m is true
    KEEP = "keep"  # torch.where(m, scores, value): kept where m is true
    CAST = "cast"  # scores.float(), .to(dtype), softmax(..., dtype=...)


@dataclasses.dataclass(frozen=True)
class _Step:
    kind: _Kind
    operand: Optional[cst.BaseExpression] = None  # the factor, bias or mask
    fill: Optional[cst.BaseExpression] = None  # what masked scores become
    guard: Optional[cst.If] = None  # the `if` that runs the step, when it is conditional


@dataclasses.dataclass(frozen=True)
class _Product:
    node: cst.BaseExpression  # `q @ k.transpose(-2, -1)`, `torch.matmul(...)`, `torch.einsum(...)`
    left: cst.BaseExpression  # the query (or the probabilities)
    right: cst.BaseExpression  # the key, untransposed (or the values)
    sdpa_layout: bool = True  # the operands are laid out as SDPA takes them (einsum may differ)
    shared_heads: bool = False  # the key lacks a batch index of the scores: one key for every head


@dataclasses.dataclass(frozen=True)
class _Scores:
    """The score product behind a softmax's input and the steps between, in the order they run."""

    product: _Product
    steps: tuple[_Step, ...] = ()
    units: tuple[cst.CSTNode, ...] = ()  # the statements that hold them, in source order
    names: frozenset[str] = frozenset()  # the local names the scores pass through

    def then(
        self, step: Optional[_Step] = None, unit: Optional[cst.CSTNode] = None, name: Optional[str] = None
    ) -> _Scores:
        return _Scores(
            self.product,
            self.steps + ((step,) if step else ()),
            self.units + ((unit,) if unit is not None and unit not in self.units else ()),
            self.names | ({name} if name else set()),
        )


@dataclasses.dataclass(frozen=True)
class _Forward:
    """The way from the softmax to the product with the values."""

    output: _Product  # `probs @ v`
    line: cst.SimpleStatementLine  # the statement that holds it
    units: tuple[cst.SimpleStatementLine, ...]  # the statements after the softmax's, in order
    names: frozenset[str]  # the local names the probabilities pass through
    dropout: Optional[cst.Call]
    cast: bool


@dataclasses.dataclass(frozen=True)
class _Chain:
    scores: _Scores
    softmax: cst.Call
    softmax_dtype: bool
    output: _Product  # `probs @ v`
    dropout: Optional[cst.Call]
    cast_after: bool
    units: tuple[cst.CSTNode, ...]  # every statement of the chain, in source order
    names: frozenset[str]
    line: cst.SimpleStatementLine  # the statement that holds the output product
    block: Sequence[cst.BaseStatement]
    function: cst.FunctionDef


@dataclasses.dataclass(frozen=True)
class _Place:
    """Where a name's value is looked for: the statements of `block` before `index`."""

    block: Sequence[cst.BaseStatement]
    index: int


# -- syntax helpers -------------------------------------------------------------------------


def _positional(call: cst.Call) -> Optional[list[cst.BaseExpression]]:
    """The positional arguments, or None when a `*args`/`**kwargs` hides some."""
    if any(arg.star for arg in call.args):
        return None
    return [arg.value for arg in call.args if arg.keyword is None]


def _argument(call: cst.Call, index: int, name: str) -> Optional[cst.BaseExpression]:
    positional = _positional(call) or []
    if index < len(positional):
        return positional[index]
    given = keyword(call, name)
    return given.value if given is not None else None


def _int(expr: cst.BaseExpression) -> Optional[int]:
    return signed_int(without_parens(expr))


def _method(expr: cst.BaseExpression, *names: str) -> Optional[tuple[cst.Call, cst.BaseExpression]]:
    """(call, receiver) when `expr` calls a method named one of `names`."""
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in names:
        return expr, expr.func.value
    return None


def _string(expr: cst.BaseExpression) -> Optional[str]:
    if isinstance(expr, cst.SimpleString):
        value = expr.evaluated_value
        return value if isinstance(value, str) else None
    return None


def _tokens(term: str) -> Optional[tuple[str, ...]]:
    """`...hid` -> ("...", "h", "i", "d"); None for anything but letters and one ellipsis."""
    tokens: list[str] = []
    index = 0
    while index < len(term):
        if term.startswith("...", index):
            tokens.append("...")
            index += 3
        elif term[index].isalpha():
            tokens.append(term[index])
            index += 1
        else:
            return None
    return tuple(tokens) if len(set(tokens)) == len(tokens) else None


def _einsum_terms(spec: str) -> Optional[tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]]:
    text = "".join(spec.split())
    if text.count("->") != 1:
        return None
    inputs, output = text.split("->")
    operands = inputs.split(",")
    if len(operands) != 2:
        return None
    first, second, result = (_tokens(t) for t in (*operands, output))
    if first is None or second is None or result is None:
        return None
    return first, second, result


def _score_einsum(spec: str) -> Optional[tuple[bool, bool]]:
    """For a query-key einsum (one index contracted; the output ends with a query index, then a key
    index, the dimension the softmax normalises): whether its layout is SDPA's `P i d, P j d -> P i j`,
    and whether the key lacks a batch index of the scores (one key for every head); None for any
    other einsum. Channel-first `bct,bcs->bts` is attention too, but not in SDPA's layout, and so is
    a key shared by the heads (imagen's multi-query `b h i d, b j d -> b h i j`)."""
    terms = _einsum_terms(spec)
    if terms is None:
        return None
    query, key, scores = terms
    contracted = (set(query) & set(key)) - set(scores)
    if len(scores) < 2 or len(contracted) != 1 or "..." in contracted:
        return None
    i, j = scores[-2], scores[-1]
    batch = set(scores[:-2])
    if i not in query or i in key or j not in key or j in query:
        return None
    # the key may lack batch indexes of the scores (shared across heads), never have others
    if set(query) != batch | {i} | contracted or not set(key) - {j} - contracted <= batch:
        return None
    (d,) = contracted
    layout = query == (*scores[:-2], i, d) and key == (*scores[:-2], j, d)
    return layout, not batch <= set(key)


def _output_einsum(spec: str) -> Optional[bool]:
    """For a probabilities-values einsum (the probabilities' last index, the keys, contracted with
    the values), whether its layout is SDPA's `P i j, P j e -> P i e`; None for any other einsum."""
    terms = _einsum_terms(spec)
    if terms is None:
        return None
    probs, values, out = terms
    if len(probs) < 2:
        return None
    i, j = probs[-2], probs[-1]
    batch = set(probs[:-2])
    extra = set(values) - set(probs)
    if j not in values or j in out or i not in out or len(extra) != 1 or "..." in extra | {i, j}:
        return None
    # the values may lack batch indexes of the probabilities (shared across heads), as the key may
    if i in values or not set(values) - {j} - extra <= batch or set(out) != batch | {i} | extra:
        return None
    (e,) = extra
    return values == (*probs[:-2], j, e) and out == (*probs[:-2], i, e)


def _atomic(expr: cst.BaseExpression) -> bool:
    """`expr` can sit as an operand without parentheses."""
    return isinstance(
        expr, (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.Integer, cst.Float)
    ) or bool(getattr(expr, "lpar", None))


def _parenthesized(expr: cst.BaseExpression) -> cst.BaseExpression:
    if _atomic(expr):
        return expr
    return expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def _uses(node: cst.CSTNode, names: Optional[frozenset[str]], metadata: bool = False) -> Iterator[cst.Name]:
    """Every `Name` in `node` that reads or binds a variable in `names` (any, for None): not
    attribute names nor keyword names, and unless `metadata`, not a tensor's metadata
    (`att.dtype`, `att.size(-1)`), which says nothing about its values."""
    stack: list[cst.CSTNode] = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Name):
            if names is None or current.value in names:
                yield current
            continue
        if isinstance(current, cst.Attribute):
            if metadata or not (isinstance(current.value, cst.Name) and current.attr.value in _METADATA):
                stack.append(current.value)
            continue
        if isinstance(current, cst.Arg):
            stack.append(current.value)
            continue
        stack.extend(reversed(children(current)))


def _subtree(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(children(current))


def _mentions(node: cst.CSTNode, name: str) -> bool:
    return next(_uses(node, frozenset({name})), None) is not None


def _statement_line(node: cst.CSTNode, ctx: Context) -> Optional[cst.SimpleStatementLine]:
    """The statement line that holds `node`, unless a function, lambda or comprehension is nearer."""
    for ancestor in ctx.ancestors(node):
        if isinstance(ancestor, cst.SimpleStatementLine):
            return ancestor
        if isinstance(
            ancestor, (cst.BaseCompoundStatement, cst.Lambda, cst.BaseComp, cst.SimpleStatementSuite)
        ):
            return None
    return None


def _block_of(line: cst.CSTNode, ctx: Context) -> Sequence[cst.BaseStatement]:
    block = ctx.parent(line)
    if isinstance(block, (cst.IndentedBlock, cst.Module)):
        return block.body
    return _NO_BLOCK


def _index(block: Sequence[cst.BaseStatement], statement: cst.CSTNode) -> int:
    return next(i for i, s in enumerate(block) if s is statement)


# -- the rule -------------------------------------------------------------------------------


class HandWrittenAttention(Rule):
    """## What it does
    Flags attention written out by hand in hot code: a softmax over the last dimension
    (`F.softmax(x, dim=-1)`, `x.softmax(-1)`, an `nn.Softmax(dim=-1)` module) of a query-key product
    (`q @ k.transpose(-2, -1)`, `q @ k.mT`, `torch.matmul`, `torch.bmm`, or a `torch.einsum` that
    contracts one index of both, also with a key shared by the heads), optionally scaled, masked (`masked_fill(mask, -inf)`,
    `masked_fill_`, `torch.where`, an added mask or position bias) and dropped out, then multiplied by
    the values (`probs @ v`). The chain may run through the local names of one block of a function:
    the four-line `att = ...; att = att.masked_fill(...); att = F.softmax(att, dim=-1); y = att @ v`
    is recognised as well as a single expression, and so is a step under `if mask is not None:`. The
    finding is reported at the score product (`q @ k.transpose(-2, -1)`), where the T x T matrix is
    made.

    ## Why it is slow
    The hand-written form materialises the T x T score matrix (per batch element and head) and runs
    one kernel per step: the product, the scale, the mask, the softmax, the dropout and the second
    product each read and write that matrix in GPU memory, and autograd keeps several copies of it
    for the backward pass. `torch.nn.functional.scaled_dot_product_attention` computes the same
    result in one fused kernel (FlashAttention or memory-efficient attention) that never stores the
    matrix, so both time and peak memory grow far more slowly with the sequence length. The measured
    effect on an H100 is in the Measured section below.

    ## Fix safety
    Unsafe: the fused kernels round differently (most visibly in bf16), the dropout draws a
    different random pattern, and the mask moves into SDPA's arguments. The fix replaces the chain
    by `F.scaled_dot_product_attention(q, k, v, ...)` (spelled with the file's alias for
    `torch.nn.functional`) and removes the statements that only fed it. It is offered for chains
    with at most one mask and one scale:
    - `masked_fill(m, float("-inf"))` becomes `attn_mask=~m` (SDPA's boolean mask marks the
      positions that take part; `m == 0` becomes `m != 0`); `torch.where(m, scores, -inf)` becomes
      `attn_mask=m`; an added mask or bias `scores + b` becomes `attn_mask=b` (when it is added after
      the scale, or there is none), also when guarded by `if b is not None:`.
    - the causal buffer of minGPT and nanoGPT, `masked_fill(self.bias[:, :, :T, :T] == 0, -inf)` with
      `self.bias` registered as `torch.tril(torch.ones(n, n))`, becomes `is_causal=True`. The equal
      slices mean that queries and keys have the same length; a key/value cache that makes them differ
      would not fit the `[:T, :T]` mask either.
    - dropout: `self.drop(probs)` with `self.drop = nn.Dropout(p)` becomes
      `dropout_p=self.drop.p if self.training else 0.0`; `F.dropout(probs, p, training=t)` becomes
      `dropout_p=p if t else 0.0`.
    - scale: SDPA's default is `1 / sqrt(head_dim)`. When the code's factor is provably that
      (`* k.size(-1) ** -0.5`, `* (1.0 / math.sqrt(k.size(-1)))`, `/ math.sqrt(q.shape[-1])`) nothing
      is passed; otherwise `scale=s` (or `scale=1 / s`) keeps the code's own factor, and a chain with
      no factor gets `scale=1.0`. `scale=` needs torch 2.1; a project that targets 2.0 gets no fix then.

    A fully masked row differs: the hand-written softmax of a row of `-inf` is NaN, SDPA (torch 2.13)
    returns zeros there. Other forms get the message only: two masks or two factors, a finite fill
    such as `-1e9` or `finfo.min`, casts around the softmax (`softmax(x.float()).type(dtype)`), a
    learnable tensor scale, an einsum in another layout than SDPA's (channel-first `bct,bcs->bts`, a
    key and values shared by the heads: the message then says to give them a heads dimension of size 1
    and pass `enable_gqa=True`),
    an `if` that does more than add its mask, and a statement left behind that reads the shape of
    a name the fix would remove.

    ## When it stays silent
    Cold code (`__init__`, module level, functions no hot path reaches); a function that also calls
    `scaled_dot_product_attention` or another fused attention kernel (a capability check with the
    SDPA path beside the manual one) where the default run may take it, or one whose every caller
    in the file does (a fused path under a setting off by default, `FLASH = 0` at the top of the
    module or `--flash` 0, then `if FLASH:`, leaves the manual path the one that runs: reported); attention that
    returns, stores or otherwise reads the probabilities or the scores (`return out, att`,
    `self.attn_weights = att`, `if output_attentions: ...`; reading `att.dtype` or `att.size(-1)` is
    fine, and so are the same names reused in another branch or after a rebinding); a softmax over
    another dimension; a softmax inside a branch whose probabilities are read after the `if`
    (Swin's window attention adds its shift mask on one side, then softmaxes on both: with its
    learned position bias as a float mask, SDPA measured 0.63x-1.04x the hand-written chain at
    SwinIR's sizes and 0.94x-1.26x at SwinV2-T's on an H200,
    benchmarks/results/window-attention-2026-12-01-h200.json); any other function applied to the
    scores or probabilities (`att.clamp(...)`,
    `torch.tanh(att)`, a subtraction, talking-heads projections); a softmax whose result is not
    multiplied by a third tensor (`softmax(x @ w)`), or is multiplied by another softmax's product
    (Nystrom's `softmax(q @ k_l^T) @ pinv(softmax(...))`); a project that targets torch older than
    2.0, which has no SDPA.
    """

    code = "TPL306"
    name = "hand-written-attention"
    summary = "Attention written as softmax(q @ k^T) @ v instead of the fused SDPA kernel"
    message = (
        "hand-written attention materialises the T x T score matrix and runs a kernel per step; use {call}"
    )
    default_on = True  # meets both populations' bars (evidence.py, precision.json), as designed (RULES.md)
    fix_safety = Safety.UNSAFE
    node_types = (cst.Call,)
    benchmark = "TPL306"

    BAD = {
        "fused-path-behind-a-setting-off-by-default": """
            import argparse
            import math

            import torch.nn.functional as F
            from torch import nn

            FLASH = 0

            class CausalSelfAttention(nn.Module):
                def forward(self, q, k, v):
                    if FLASH:
                        y = F.scaled_dot_product_attention(q, k, v)
                    else:
                        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))  # expect: TPL306
                        att = F.softmax(att, dim=-1)
                        y = att @ v
                    return y

            if __name__ == "__main__":
                parser = argparse.ArgumentParser()
                parser.add_argument("--flash", type=int, default=0)
                args = parser.parse_args()
                FLASH = args.flash
            """,
        "mingpt-four-lines": """
            import math

            import torch
            import torch.nn.functional as F
            from torch import nn

            class CausalSelfAttention(nn.Module):
                def __init__(self, n_embd, n_head, block_size, dropout):
                    super().__init__()
                    self.c_attn = nn.Linear(n_embd, 3 * n_embd)
                    self.attn_dropout = nn.Dropout(dropout)
                    self.n_head = n_head
                    self.register_buffer(
                        "bias", torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size, block_size)
                    )

                def forward(self, x):
                    B, T, C = x.size()
                    q, k, v = self.c_attn(x).split(C, dim=2)
                    q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
                    k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
                    v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
                    # manual implementation of attention
                    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))  # expect: TPL306
                    att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
                    att = F.softmax(att, dim=-1)
                    att = self.attn_dropout(att)
                    y = att @ v
                    return y.transpose(1, 2).contiguous().view(B, T, C)
            """,
        "one-expression": """
            import torch
            from torch import nn

            class Attention(nn.Module):
                def forward(self, q, k, v):
                    scale = q.shape[-1] ** -0.5
                    return torch.softmax(q @ k.mT * scale, dim=-1) @ v  # expect: TPL306
            """,
        "einsum-with-boolean-mask": """
            import torch
            import torch.nn.functional as F
            from torch import nn

            class CrossAttention(nn.Module):
                def __init__(self, dim):
                    super().__init__()
                    self.scale = dim**-0.5

                def forward(self, q, k, v, padding_mask):
                    sim = torch.einsum("bhid,bhjd->bhij", q, k) * self.scale  # expect: TPL306
                    sim = sim.masked_fill(padding_mask, float("-inf"))
                    attn = sim.softmax(dim=-1)
                    return torch.einsum("bhij,bhjd->bhid", attn, v)
            """,
        "additive-mask-and-functional-dropout": """
            import math

            import torch
            from torch import nn

            class SelfAttention(nn.Module):
                def forward(self, query, key, value, attention_mask=None):
                    scores = torch.matmul(query, key.transpose(-1, -2))  # expect: TPL306
                    scores = scores / math.sqrt(self.head_dim)
                    if attention_mask is not None:
                        scores = scores + attention_mask
                    probs = nn.functional.softmax(scores, dim=-1)
                    probs = nn.functional.dropout(probs, p=0.1, training=self.training)
                    return torch.matmul(probs, value)
            """,
        "key-and-values-shared-by-the-heads": """
            import torch
            from torch import nn

            class MultiQueryAttention(nn.Module):
                def forward(self, q, k, v):
                    sim = torch.einsum("b h i d, b j d -> b h i j", q, k) * self.scale  # expect: TPL306
                    attn = sim.softmax(dim=-1)
                    return torch.einsum("b h i j, b j d -> b h i d", attn, v)
            """,
        "batched-without-scale": """
            import torch

            def attend(q, k, v):
                weights = torch.bmm(q, k.transpose(1, 2)).softmax(-1)  # expect: TPL306
                return torch.bmm(weights, v)

            def train(model, loader, optimizer):
                for x, y in loader:
                    loss = (attend(x, x, x) - y).square().mean()
                    loss.backward()
                    optimizer.step()
            """,
    }
    FIXED = {
        "mingpt-four-lines": """
            import torch
            import torch.nn.functional as F
            from torch import nn

            class CausalSelfAttention(nn.Module):
                def __init__(self, n_embd, n_head, block_size, dropout):
                    super().__init__()
                    self.c_attn = nn.Linear(n_embd, 3 * n_embd)
                    self.attn_dropout = nn.Dropout(dropout)
                    self.n_head = n_head
                    self.register_buffer(
                        "bias", torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size, block_size)
                    )

                def forward(self, x):
                    B, T, C = x.size()
                    q, k, v = self.c_attn(x).split(C, dim=2)
                    q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
                    k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
                    v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
                    # manual implementation of attention
                    y = F.scaled_dot_product_attention(q, k, v, dropout_p=self.attn_dropout.p if self.training else 0.0, is_causal=True)
                    return y.transpose(1, 2).contiguous().view(B, T, C)
            """,
        "one-expression": """
            import torch
            from torch import nn

            class Attention(nn.Module):
                def forward(self, q, k, v):
                    scale = q.shape[-1] ** -0.5
                    return torch.nn.functional.scaled_dot_product_attention(q, k, v, scale=scale)
            """,
        "einsum-with-boolean-mask": """
            import torch
            import torch.nn.functional as F
            from torch import nn

            class CrossAttention(nn.Module):
                def __init__(self, dim):
                    super().__init__()
                    self.scale = dim**-0.5

                def forward(self, q, k, v, padding_mask):
                    return F.scaled_dot_product_attention(q, k, v, attn_mask=~padding_mask, scale=self.scale)
            """,
        "additive-mask-and-functional-dropout": """
            import math

            import torch
            from torch import nn

            class SelfAttention(nn.Module):
                def forward(self, query, key, value, attention_mask=None):
                    return nn.functional.scaled_dot_product_attention(query, key, value, attn_mask=attention_mask, dropout_p=0.1 if self.training else 0.0, scale=1 / math.sqrt(self.head_dim))
            """,
        "batched-without-scale": """
            import torch

            def attend(q, k, v):
                return torch.nn.functional.scaled_dot_product_attention(q, k, v, scale=1.0)

            def train(model, loader, optimizer):
                for x, y in loader:
                    loss = (attend(x, x, x) - y).square().mean()
                    loss.backward()
                    optimizer.step()
            """,
    }
    GOOD = {
        "fused-path-behind-a-setting-on-by-default": """
            import math

            import torch.nn.functional as F
            from torch import nn

            FLASH = 1

            class CausalSelfAttention(nn.Module):
                def forward(self, q, k, v):
                    if FLASH:
                        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                    else:
                        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
                        att = F.softmax(att, dim=-1)
                        y = att @ v
                    return y
            """,
        "flash-branch-beside-the-manual-path": """
            import math

            import torch
            import torch.nn.functional as F
            from torch import nn

            class CausalSelfAttention(nn.Module):
                def forward(self, q, k, v):
                    if self.flash:
                        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                    else:
                        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
                        att = F.softmax(att, dim=-1)
                        y = att @ v
                    return y
            """,
        "probabilities-returned-or-stored": """
            import torch
            from torch import nn

            class Attention(nn.Module):
                def forward(self, q, k, v):
                    attn = (q @ k.transpose(-2, -1) * self.scale).softmax(dim=-1)
                    return attn @ v, attn

            class Recording(nn.Module):
                def forward(self, q, k, v, output_attentions=False):
                    attn = (q @ k.transpose(-2, -1) * self.scale).softmax(dim=-1)
                    out = attn @ v
                    if output_attentions:
                        self.attn_weights = attn
                    return out
            """,
        "key-with-an-index-of-its-own": """
            import torch
            from torch import nn

            class PerSlot(nn.Module):
                def forward(self, q, k, v):
                    sim = torch.einsum("b h i d, b s j d -> b h i j", q, k)
                    attn = sim.softmax(dim=-1)
                    return torch.einsum("b h i j, b j d -> b h i d", attn, v)
            """,
        "window-attention-with-a-softmax-on-each-side": """
            from torch import nn

            class WindowAttention(nn.Module):
                def __init__(self, dim, num_heads):
                    super().__init__()
                    self.num_heads = num_heads
                    self.scale = (dim // num_heads) ** -0.5
                    self.softmax = nn.Softmax(dim=-1)

                def forward(self, q, k, v, bias, mask=None):
                    B_, H, N, C = q.shape
                    attn = (q * self.scale) @ k.transpose(-2, -1)
                    attn = attn + bias.unsqueeze(0)
                    if mask is not None:
                        nW = mask.shape[0]
                        attn = attn.view(B_ // nW, nW, H, N, N) + mask.unsqueeze(1).unsqueeze(0)
                        attn = attn.view(-1, H, N, N)
                        attn = self.softmax(attn)
                    else:
                        attn = self.softmax(attn)
                    return attn @ v
            """,
        "softmax-over-another-dimension": """
            import torch
            from torch import nn

            class SlotAttention(nn.Module):
                def forward(self, q, k, v):
                    attn = torch.softmax(q @ k.transpose(-2, -1) * self.scale, dim=1)
                    return attn @ v
            """,
        "other-function-of-the-scores": """
            import torch
            from torch import nn

            class SoftCapped(nn.Module):
                def forward(self, q, k, v):
                    att = q @ k.transpose(-2, -1) * self.scale
                    att = 30.0 * torch.tanh(att / 30.0)
                    att = att.softmax(dim=-1)
                    return att @ v
            """,
        "cold-code": """
            import torch
            import torch.nn.functional as F
            from torch import nn

            def reference_attention(q, k, v):
                return F.softmax(q @ k.transpose(-2, -1), dim=-1) @ v

            class Probe(nn.Module):
                def __init__(self, q, k, v):
                    super().__init__()
                    att = F.softmax(q @ k.transpose(-2, -1), dim=-1)
                    self.register_buffer("summary", att @ v)

                def forward(self, x):
                    return x + self.summary
            """,
        "softmax-classifier-without-values": """
            import torch
            import torch.nn.functional as F
            from torch import nn

            class PrototypeHead(nn.Module):
                def forward(self, x, prototypes):
                    probs = F.softmax(x @ prototypes.transpose(-2, -1), dim=-1)
                    return probs
            """,
    }

    def check(self, node: cst.Call, ctx: Context) -> Iterator[Report]:
        found = self._softmax(node, ctx)
        if found is None or not ctx.is_hot(node):
            return
        sdpa = ctx.api("scaled_dot_product_attention")
        if not sdpa.usable:
            return
        chain = _Matcher(ctx).chain(node, *found)
        if chain is None or self._dispatches(node, ctx):
            return
        built = _FixBuilder(ctx, chain).build() if sdpa.writable else None
        fix, call = built if built is not None else (None, None)
        shown = _shown(call, chain, ctx) + ("" if sdpa.writable else f" ({sdpa.needs()})")
        yield self.report(chain.scores.product.node, reason=ctx.hot_reason(node), fix=fix, call=shown)

    # -- the softmax ------------------------------------------------------------------------
    @staticmethod
    def _softmax(call: cst.Call, ctx: Context) -> Optional[tuple[cst.BaseExpression, bool]]:
        """(input, whether a dtype is given) of a softmax over the last dimension."""
        qualified = ctx.qualified_name(call)
        if qualified in _SOFTMAX:
            if any(
                arg.keyword is not None and arg.keyword.value not in ("input", "dim", "dtype")
                for arg in call.args
            ):
                return None
            given, dim = _argument(call, 0, "input"), _argument(call, 1, "dim")
        elif (
            qualified is None
            and isinstance(call.func, cst.Attribute)
            and call.func.attr.value == "softmax"
            and not is_name(call.func.value, "self")
        ):
            receiver = call.func.value
            if ctx.tensors.is_module_value(receiver):
                return None
            if any(
                arg.keyword is not None and arg.keyword.value not in ("dim", "dtype") for arg in call.args
            ):
                return None
            given, dim = receiver, _argument(call, 0, "dim")
        elif qualified is None and isinstance(call.func, cst.Attribute) and is_name(call.func.value, "self"):
            positional = _positional(call)  # `self.attend(dots)` with `self.attend = nn.Softmax(dim=-1)`
            if positional is None or len(positional) != 1 or len(call.args) != 1:
                return None
            built = ctx.module_graph.constructor_calls(call.func)
            if not built or not all(
                ctx.qualified_name(c) == "torch.nn.Softmax"
                and _int(_argument(c, 0, "dim") or cst.Name("_")) == -1
                for c in built
            ):
                return None
            return positional[0], False
        else:
            return None
        if given is None or dim is None or _int(dim) != -1:
            return None
        return given, keyword(call, "dtype") is not None or len(_positional(call) or []) > (
            2 if qualified in _SOFTMAX else 1
        )

    @staticmethod
    def _dispatches(node: cst.CSTNode, ctx: Context) -> bool:
        """The function around `node`, or every caller of it in the file, also calls a fused
        attention kernel: the hand-written path is the fallback of a capability check."""
        function = ctx.enclosing_function(node)
        if function is None:
            return False
        if _calls_fused(function, ctx):
            return True
        callers = [
            caller
            for call in ctx.facts.calls
            if function in ctx.hot.resolve_call(call)
            and (caller := ctx.enclosing_function(call)) is not None
            and caller is not function
        ]
        return bool(callers) and all(_calls_fused(caller, ctx) for caller in callers)


def _shown(call: Optional[cst.Call], chain: _Chain, ctx: Context) -> str:
    """The SDPA call for the message: the fix's own, its long arguments elided; else a sketch."""
    if call is None:
        sketch = f"{ctx.code(_sdpa_function(chain.softmax, ctx)[0])}(q, k, v, ...)"
        if chain.scores.product.shared_heads:
            # SDPA takes a key per head, or one per group of heads with enable_gqa (torch 2.5)
            sketch += (
                " with a heads dimension of size 1 on k and v and enable_gqa=True (torch 2.5),"
                " or k and v expanded over the heads"
            )
        return sketch
    parts = []
    for arg, stand_in in itertools.zip_longest(call.args, ("q", "k", "v")):
        value = ctx.code(arg.value)
        if len(value) > 24:
            value = stand_in or "..."
        parts.append(f"{arg.keyword.value}={value}" if arg.keyword is not None else value)
    return f"{ctx.code(call.func)}({', '.join(parts)})"


def _sdpa_function(softmax: cst.Call, ctx: Context) -> tuple[cst.BaseExpression, bool]:
    """SDPA spelled like the softmax (`F.`, `nn.functional.`), else with the file's alias for
    torch.nn.functional; and whether the fix must add `import torch`."""
    if ctx.qualified_name(softmax) == "torch.nn.functional.softmax" and isinstance(
        softmax.func, cst.Attribute
    ):
        return softmax.func.with_changes(attr=cst.Name(_SDPA)), False
    return functional_attribute(ctx, _SDPA)


def _calls_fused(function: cst.FunctionDef, ctx: Context, through: bool = True) -> bool:
    """`function` calls a fused attention kernel, or (`through`) a function of the file that does
    (`self.flash_attn(q, k, v)`), where the default run may take it (not under `if FLASH:` with
    the setting off by default)."""
    info = ctx.facts.functions.get(function)
    if info is None:
        return False
    for call in info.calls:
        fused = (dotted_name(call.func) or "").rsplit(".", 1)[-1] in _FUSED or (
            through
            and any(
                callee is not function and _calls_fused(callee, ctx, through=False)
                for callee in ctx.hot.resolve_call(call)
            )
        )
        # where the default run may take it: asked only of a fused call, not of every call
        if fused and ctx.setting_taken_by_default(call):
            return True
    return False


# -- matching -------------------------------------------------------------------------------


class _Matcher:
    """Follows the scores back from a softmax and the probabilities forward to the values,
    through the local names of one block of one function."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def chain(self, softmax: cst.Call, given: cst.BaseExpression, dtype: bool) -> Optional[_Chain]:
        ctx = self.ctx
        function = ctx.enclosing_function(softmax)
        line = _statement_line(softmax, ctx)
        if function is None or line is None:
            return None
        block = _block_of(line, ctx)
        if not block:
            return None
        scores = self._peel(given, _Place(block, _index(block, line)), 0)
        if scores is None:
            return None
        forward = self._forward(softmax, line, block)
        if forward is None or self._normalised(forward.output.right):
            return None
        units = tuple(dict.fromkeys((*scores.units, line, *forward.units)))
        names = scores.names | forward.names
        if not _confined(ctx, function, names, units, forward.line):
            return None
        return _Chain(
            scores,
            softmax,
            dtype,
            forward.output,
            forward.dropout,
            forward.cast,
            units,
            names,
            forward.line,
            block,
            function,
        )

    # -- backward: from the softmax's input to the score product -------------------------------
    def _peel(self, expr: cst.BaseExpression, place: _Place, depth: int) -> Optional[_Scores]:
        if depth > _MAX_DEPTH:
            return None
        product = self._score_product(expr)
        if product is not None:
            return _Scores(product)
        if isinstance(expr, cst.Name):
            return self._definition(expr.value, place, depth + 1)
        for inner, step in self._steps(expr):
            found = self._peel(inner, place, depth + 1)
            if found is not None:
                return found.then(step)
        return None

    def _definition(self, name: str, place: _Place, depth: int) -> Optional[_Scores]:
        """The scores behind `name`, from the nearest statement before `place` that mentions it:
        `name = <scores>`, `name += bias` (and `*=`, `/=`, `name.masked_fill_(...)`), or an `if`
        that applies one such step."""
        for position in range(place.index - 1, -1, -1):
            statement = place.block[position]
            if not _mentions(statement, name):
                continue
            earlier = _Place(place.block, position)
            if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1:
                small = statement.body[0]
                if isinstance(small, cst.Assign):
                    if len(small.targets) != 1 or not is_name(small.targets[0].target, name):
                        return None
                    found = self._peel(small.value, earlier, depth + 1)
                    return found.then(unit=statement, name=name) if found is not None else None
                step = self._augmented(small, name)
                if step is None:
                    return None
                found = self._definition(name, earlier, depth + 1)
                return found.then(step, statement, name) if found is not None else None
            if isinstance(statement, cst.If):
                step = self._guarded(statement, name)
                if step is None:
                    return None
                found = self._definition(name, earlier, depth + 1)
                return found.then(step, statement, name) if found is not None else None
            return None
        return None

    def _augmented(self, small: cst.BaseSmallStatement, name: str) -> Optional[_Step]:
        """The step of `name += b`, `name *= s`, `name /= s`, or an in-place method statement
        (`name.masked_fill_(m, -inf)`, `name.add_(b)`, `name.mul_(s)`, `name.div_(s)`)."""
        if isinstance(small, cst.AugAssign) and is_name(small.target, name):
            kinds = {
                cst.AddAssign: _Kind.BIAS,
                cst.MultiplyAssign: _Kind.SCALE,
                cst.DivideAssign: _Kind.DIVIDE,
            }
            kind = kinds.get(type(small.operator))
            if kind is None or _mentions(small.value, name):
                return None
            return _Step(kind, small.value)
        if not isinstance(small, cst.Expr) or not isinstance(small.value, cst.Call):
            return None
        call = small.value
        func = call.func
        if not (
            isinstance(func, cst.Attribute) and is_name(func.value, name) and func.attr.value in _IN_PLACE
        ):
            return None
        out_of_place = call.with_changes(func=func.with_changes(attr=cst.Name(_IN_PLACE[func.attr.value])))
        steps = [step for inner, step in self._steps(out_of_place) if inner is func.value]
        if len(steps) != 1 or (steps[0].operand is not None and _mentions(steps[0].operand, name)):
            return None
        return steps[0]

    def _guarded(self, statement: cst.If, name: str) -> Optional[_Step]:
        """The step of an `if` (no `else`, a test that does not read `name`) whose body applies one
        step to `name` among statements that do not read it (`mask = rearrange(mask, ...)`)."""
        if statement.orelse is not None or _mentions(statement.test, name):
            return None
        body = statement.body
        smalls: list[cst.BaseSmallStatement] = []
        if isinstance(body, cst.SimpleStatementSuite):
            smalls = list(body.body)
        else:
            for line in body.body:
                if not isinstance(line, cst.SimpleStatementLine):
                    return None
                smalls.extend(line.body)
        reading = [small for small in smalls if _mentions(small, name)]
        if len(reading) != 1:
            return None
        small = reading[0]
        step = self._augmented(small, name)
        if step is None and isinstance(small, cst.Assign):
            if len(small.targets) != 1 or not is_name(small.targets[0].target, name):
                return None
            step = next((s for inner, s in self._steps(small.value) if is_name(inner, name)), None)
        if step is None or (step.operand is not None and _mentions(step.operand, name)):
            return None
        return dataclasses.replace(step, guard=statement)

    def _steps(self, expr: cst.BaseExpression) -> list[tuple[cst.BaseExpression, _Step]]:
        """(scores, step) readings of `expr` as one step applied to some scores."""
        ctx = self.ctx
        if isinstance(expr, cst.BinaryOperation):
            left, right, operator = expr.left, expr.right, expr.operator
            if isinstance(operator, cst.Multiply):
                return [(left, _Step(_Kind.SCALE, right)), (right, _Step(_Kind.SCALE, left))]
            if isinstance(operator, cst.Divide):
                return [(left, _Step(_Kind.DIVIDE, right))]
            if isinstance(operator, cst.Add):
                return [(left, _Step(_Kind.BIAS, right)), (right, _Step(_Kind.BIAS, left))]
            return []
        if not isinstance(expr, cst.Call):
            return []
        qualified = ctx.qualified_name(expr)
        positional = _positional(expr)
        if positional is None:
            return []
        if qualified == "torch.where" and len(positional) == 3 and len(expr.args) == 3:
            mask, kept, other = positional
            if _fill_kind(other, ctx) is not None:
                return [(kept, _Step(_Kind.KEEP, mask, other))]
            if _fill_kind(kept, ctx) is not None:
                return [(other, _Step(_Kind.FILL, mask, kept))]
            return []
        if qualified == "torch.masked_fill" and len(positional) == 3:
            if _fill_kind(positional[2], ctx) is not None:
                return [(positional[0], _Step(_Kind.FILL, positional[1], positional[2]))]
            return []
        if qualified is not None or not isinstance(expr.func, cst.Attribute):
            return []
        receiver, method = expr.func.value, expr.func.attr.value
        if method == "masked_fill":
            where, value = _argument(expr, 0, "mask"), _argument(expr, 1, "value")
            if where is not None and value is not None and _fill_kind(value, ctx) is not None:
                return [(receiver, _Step(_Kind.FILL, where, value))]
            return []
        if method in ("mul", "div") and len(positional) == 1 and len(expr.args) == 1:
            kind = _Kind.SCALE if method == "mul" else _Kind.DIVIDE
            return [(receiver, _Step(kind, positional[0]))]
        if method in _CASTS and not is_name(receiver, "self"):
            return [(receiver, _Step(_Kind.CAST))]
        return []

    def _score_product(self, expr: cst.BaseExpression) -> Optional[_Product]:
        """`q @ k.transpose(-2, -1)` and its spellings: the query and the untransposed key."""
        ctx = self.ctx
        if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.MatrixMultiply):
            key = _untransposed(expr.right, ctx)
            return _Product(expr, expr.left, key) if key is not None else None
        if not isinstance(expr, cst.Call):
            return None
        qualified = ctx.qualified_name(expr)
        positional = _positional(expr)
        if positional is None or len(positional) != len(expr.args):
            return None
        if qualified in _MATMUL and len(positional) == 2:
            key = _untransposed(positional[1], ctx)
            return _Product(expr, positional[0], key) if key is not None else None
        if qualified == "torch.einsum" and len(positional) == 3:
            spec = _string(positional[0])
            read = _score_einsum(spec) if spec is not None else None
            return _Product(expr, positional[1], positional[2], *read) if read is not None else None
        found = _method(expr, "matmul", "bmm")
        if found is not None and qualified is None and len(positional) == 1:
            key = _untransposed(positional[0], ctx)
            return _Product(expr, found[1], key) if key is not None else None
        return None

    # -- forward: from the softmax to the product with the values -------------------------------
    def _forward(
        self, softmax: cst.Call, line: cst.SimpleStatementLine, block: Sequence[cst.BaseStatement]
    ) -> Optional[_Forward]:
        ctx = self.ctx
        current: cst.BaseExpression = softmax
        dropout: Optional[cst.Call] = None
        cast = False
        units: list[cst.SimpleStatementLine] = []
        names: set[str] = set()

        def reached(output: _Product) -> _Forward:
            return _Forward(output, line, tuple(units), frozenset(names), dropout, cast)

        for _ in range(_MAX_DEPTH):
            parent = ctx.parent(current)
            if isinstance(parent, cst.BinaryOperation):
                if isinstance(parent.operator, cst.MatrixMultiply) and parent.left is current:
                    return reached(_Product(parent, current, parent.right))
                return None
            if isinstance(parent, cst.Arg):
                call = ctx.parent(parent)
                if not isinstance(call, cst.Call) or parent.keyword is not None or parent.star:
                    return None
                output = self._output_call(call, current)
                if output is not None:
                    return reached(output)
                if dropout is None and self._is_dropout(call, current):
                    dropout = current = call
                    continue
                return None
            if isinstance(parent, cst.Attribute) and parent.value is current:
                call = ctx.parent(parent)
                if not (isinstance(call, cst.Call) and call.func is parent):
                    return None
                positional = _positional(call)
                if parent.attr.value in ("matmul", "bmm") and positional is not None and len(call.args) == 1:
                    return reached(_Product(call, current, positional[0]))
                if parent.attr.value in _CASTS:
                    cast = True
                    current = call
                    continue
                return None
            if isinstance(parent, cst.Assign) and parent.value is current:
                if len(parent.targets) != 1 or not isinstance(parent.targets[0].target, cst.Name):
                    return None
                name = parent.targets[0].target.value
                use = self._next_use(name, line, block)
                if use is None:
                    return None
                current, line = use
                units.append(line)
                names.add(name)
                continue
            return None
        return None

    def _next_use(
        self, name: str, line: cst.SimpleStatementLine, block: Sequence[cst.BaseStatement]
    ) -> Optional[tuple[cst.Name, cst.SimpleStatementLine]]:
        """The one read of `name` in the next statement of the block that mentions it."""
        for statement in block[_index(block, line) + 1 :]:
            if not _mentions(statement, name):
                continue
            if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
                return None
            small = statement.body[0]
            read: cst.CSTNode = small
            if isinstance(small, cst.Assign):
                if any(not isinstance(t.target, cst.Name) for t in small.targets):
                    return None
                read = small.value
            uses = list(_uses(read, frozenset({name})))
            return (uses[0], statement) if len(uses) == 1 else None
        return None

    def _output_call(self, call: cst.Call, probs: cst.BaseExpression) -> Optional[_Product]:
        """`torch.matmul(probs, v)`, `torch.bmm(probs, v)`, `torch.einsum("...ij,...jd->...id", probs, v)`."""
        qualified = self.ctx.qualified_name(call)
        positional = _positional(call)
        if positional is None or len(positional) != len(call.args):
            return None
        if qualified in _MATMUL and len(positional) == 2 and positional[0] is probs:
            return _Product(call, probs, positional[1])
        if qualified == "torch.einsum" and len(positional) == 3 and positional[1] is probs:
            spec = _string(positional[0])
            layout = _output_einsum(spec) if spec is not None else None
            if layout is not None:
                return _Product(call, probs, positional[2], layout)
        return None

    def _is_dropout(self, call: cst.Call, probs: cst.BaseExpression) -> bool:
        """`F.dropout(probs, ...)`, or `self.<drop>(probs)` for a dropout module."""
        ctx = self.ctx
        positional = _positional(call)
        if positional is None or not positional or positional[0] is not probs:
            return False
        if ctx.qualified_name(call) in _DROPOUT:
            return True
        func = call.func
        if not (isinstance(func, cst.Attribute) and is_name(func.value, "self") and len(call.args) == 1):
            return False
        return _dropout_module(func, ctx) or "drop" in func.attr.value.lower()

    def _normalised(self, values: cst.BaseExpression) -> bool:
        """The "values" are themselves made from a softmax, directly or through a local name:
        products of normalised kernels (Nystrom's `softmax(q @ k_l^T) @ pinv(softmax(...))`), not
        attention over values."""
        candidates: list[cst.CSTNode] = [values]
        for name in _uses(values, None):
            candidates.extend(
                b.node for b in self.ctx.bindings(name.value, name) if b.kind in ("assign", "unpack")
            )
        return any(
            isinstance(node, cst.Call) and (dotted_name(node.func) or "").endswith("softmax")
            for candidate in candidates
            for node in _subtree(candidate)
        )

    # -- the probabilities and scores are read nowhere else ---------------------------------------


def _confined(
    ctx: Context,
    function: cst.FunctionDef,
    names: frozenset[str],
    units: tuple[cst.CSTNode, ...],
    last: cst.SimpleStatementLine,
    metadata: bool = False,
) -> bool:
    """No statement outside the chain can read a value the chain gave one of its names (with
    `metadata`, nor its dtype or shape either)."""
    if not names:
        return True
    inside = set(units)
    block = _block_of(last, ctx)
    chain = _Span(
        _path(last, function, ctx),
        min(_index(block, u) for u in units),
        _index(block, last),
        any(
            isinstance(a, (cst.For, cst.While))
            for a in itertools.takewhile(lambda a: a is not function, ctx.ancestors(last))
        ),
    )
    for name in names:
        rebound = _rebinding_after(name, block, chain.last)
        for use in _uses(function.body, frozenset({name}), metadata):
            if any(ancestor in inside for ancestor in ctx.ancestors(use)):
                continue
            if not chain.unreached(_path(use, function, ctx), rebound):
                return False
    return True


_StatementPath = list[tuple[Union[cst.IndentedBlock, cst.Module, cst.SimpleStatementSuite], int]]


@dataclasses.dataclass(frozen=True)
class _Span:
    """Where the chain sits in its function: the path to its last statement, the indexes of its
    first and last statements in their block, and whether a loop runs it more than once."""

    path: _StatementPath
    first: int
    last: int
    looped: bool

    def unreached(self, use: _StatementPath, rebound: Optional[int]) -> bool:
        """A mention at `use` cannot read what the chain assigned: it runs before the chain, in a
        branch of an `if` that the chain is not in (neither inside a loop around the chain, which
        could carry the value round), or after the chain's block rebinds the name (at `rebound`)."""
        level = 0
        while level < min(len(use), len(self.path)) and _same_entry(use[level], self.path[level]):
            level += 1
        innermost = len(self.path) - 1
        if level < len(use) and level <= innermost and use[level][0] is self.path[level][0]:
            index = use[level][1]
            start, end = (self.first, self.last) if level == innermost else (self.path[level][1],) * 2
            if index < start:
                return not self.looped
            if index > end:
                return rebound is not None and (level < innermost or index >= rebound)
            return False
        if level == 0:
            return not self.looped  # a default value in the signature
        container, position = self.path[level - 1]
        compound = container.body[position]
        header = level == len(use)
        if isinstance(compound, cst.If) or (header and isinstance(compound, cst.With)):
            return not self.looped
        return False


def _same_entry(a: tuple[cst.CSTNode, int], b: tuple[cst.CSTNode, int]) -> bool:
    return a[0] is b[0] and a[1] == b[1]


def _path(node: cst.CSTNode, function: cst.FunctionDef, ctx: Context) -> _StatementPath:
    """(block, index) of each statement around `node`, from the function's body inwards."""
    path: _StatementPath = []
    child = node
    for ancestor in ctx.ancestors(node):
        if ancestor is function:
            break
        if isinstance(ancestor, (cst.IndentedBlock, cst.Module, cst.SimpleStatementSuite)):
            path.append((ancestor, next(i for i, s in enumerate(ancestor.body) if s is child)))
        child = ancestor
    path.reverse()
    return path


def _rebinding_after(name: str, block: Sequence[cst.BaseStatement], last: int) -> Optional[int]:
    """The index of the first statement after `last` that mentions `name`, when it is
    `name = <value that does not read it>`."""
    for index in range(last + 1, len(block)):
        statement = block[index]
        if not _mentions(statement, name):
            continue
        if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1:
            small = statement.body[0]
            if (
                isinstance(small, cst.Assign)
                and len(small.targets) == 1
                and is_name(small.targets[0].target, name)
                and not _mentions(small.value, name)
            ):
                return index
        return None
    return None


def _untransposed(expr: cst.BaseExpression, ctx: Context) -> Optional[cst.BaseExpression]:
    """`k` for `k.transpose(-2, -1)`, `k.mT`, `k.T`, `k.t()`, `k.permute(0, 1, 3, 2)`,
    `torch.transpose(k, -2, -1)`: a key with its last two dimensions swapped."""
    expr = without_parens(expr)
    if isinstance(expr, cst.Attribute) and expr.attr.value in ("mT", "T"):
        return expr.value
    if not isinstance(expr, cst.Call):
        return None
    positional = _positional(expr)
    if positional is None or len(positional) != len(expr.args):
        return None
    if ctx.qualified_name(expr) == "torch.transpose" and len(positional) == 3:
        return positional[0] if _swaps_last_two(positional[1:]) else None
    if ctx.qualified_name(expr) is not None or not isinstance(expr.func, cst.Attribute):
        return None
    receiver, method = expr.func.value, expr.func.attr.value
    if method in ("transpose", "swapaxes", "swapdims") and len(positional) == 2:
        return receiver if _swaps_last_two(positional) else None
    if method == "t" and not positional:
        return receiver
    if method == "permute" and len(positional) >= 2:
        order = [_int(p) for p in positional]
        expected = list(range(len(order) - 2)) + [len(order) - 1, len(order) - 2]
        return receiver if order == expected else None
    return None


def _swaps_last_two(dims: Sequence[cst.BaseExpression]) -> bool:
    first, second = (_int(d) for d in dims)
    if first is None or second is None:
        return False
    pair = (min(first, second), max(first, second))
    return pair in _KEY_TRANSPOSES


def _fill_kind(expr: cst.BaseExpression, ctx: Context) -> Optional[str]:
    """ "inf" for minus infinity, "finite" for a large negative number standing in for it, else None."""
    expr = without_parens(expr)
    if isinstance(expr, cst.Call) and ctx.qualified_name(expr) == "builtins.float":
        positional = _positional(expr) or []
        text = _string(positional[0]) if len(positional) == 1 else None
        return "inf" if text is not None and text.strip().lower() in ("-inf", "-infinity") else None
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        inner = without_parens(expr.expression)
        if isinstance(inner, cst.Call) and ctx.qualified_name(inner) == "builtins.float":
            positional = _positional(inner) or []
            text = _string(positional[0]) if len(positional) == 1 else None
            return "inf" if text is not None and text.strip().lower() in ("inf", "infinity") else None
        if ctx.qualified_name(inner) in ("math.inf", "torch.inf", "numpy.inf"):
            return "inf"
        if isinstance(inner, (cst.Integer, cst.Float)):
            return "finite" if float(inner.evaluated_value) >= 1e3 else None
        if isinstance(inner, cst.Attribute) and inner.attr.value == "max":
            return "finite"  # -torch.finfo(dtype).max
    if isinstance(expr, cst.Attribute) and expr.attr.value == "min":
        return "finite"  # torch.finfo(dtype).min
    named = dotted_name(expr.func if isinstance(expr, cst.Call) else expr)
    if named is not None and _NEGATIVE_FILL_NAME.search(named.rsplit(".", 1)[-1]):
        return "finite"  # mask_value, max_neg_value(t), NEG_INF
    return None


def _dropout_module(func: cst.Attribute, ctx: Context) -> bool:
    built = ctx.module_graph.constructor_calls(func)
    return bool(built) and all(ctx.qualified_name(c) == "torch.nn.Dropout" for c in built or ())


# -- the fix --------------------------------------------------------------------------------


class _FixBuilder:
    def __init__(self, ctx: Context, chain: _Chain) -> None:
        self.ctx = ctx
        self.chain = chain

    def build(self) -> Optional[tuple[Fix, cst.Call]]:
        chain = self.chain
        if chain.softmax_dtype or chain.cast_after:
            return None
        if not (chain.scores.product.sdpa_layout and chain.output.sdpa_layout):
            return None
        steps = chain.scores.steps
        if any(step.kind is _Kind.CAST for step in steps):
            return None
        query, query_factor = self._query(chain.scores.product.left)
        if query is None:
            return None
        factors = [s for s in steps if s.kind in (_Kind.SCALE, _Kind.DIVIDE)]
        if query_factor is not None:
            factors.insert(0, query_factor)
        masks = [s for s in steps if s.kind in (_Kind.BIAS, _Kind.FILL, _Kind.KEEP)]
        if len(factors) > 1 or len(masks) > 1:
            return None
        if any(s.guard is not None and not self._guard_is_none_check(s) for s in steps):
            return None
        keywords: list[tuple[str, cst.BaseExpression]] = []
        moved: list[cst.BaseExpression] = [query, chain.scores.product.right]
        if masks:
            mask = masks[0]
            order = {id(step): index for index, step in enumerate(steps)}
            if mask.kind is _Kind.BIAS and factors and order[id(mask)] < order.get(id(factors[-1]), -1):
                return None  # the bias would be scaled too
            argument = self._mask_argument(mask)
            if argument is None:
                return None
            keywords.append(argument)
            assert mask.operand is not None
            moved.append(mask.operand)
        if chain.dropout is not None:
            dropout_p = self._dropout_p(chain.dropout)
            if dropout_p is None:
                return None
            if not is_number(dropout_p, 0):
                keywords.append(("dropout_p", dropout_p))
                moved.extend(arg.value for arg in chain.dropout.args[1:])
                moved.append(chain.dropout.func)
        if keywords and keywords[0][0] == "is_causal":
            keywords.append(keywords.pop(0))
        scale = self._scale(factors[0] if factors else None, query, chain.scores.product.right)
        if scale is False:
            return None
        if isinstance(scale, cst.BaseExpression):
            if not self.ctx.api("scaled_dot_product_attention(scale=)").writable:
                return None
            keywords.append(("scale", scale))
            moved.extend(f.operand for f in factors if f.operand is not None)
        if not self._still_valid(moved):
            return None
        if not _confined(self.ctx, chain.function, chain.names, chain.units, chain.line, metadata=True):
            return None  # `x = self.table[: att.size(-1)]` would lose `att`
        func, needs_import = _sdpa_function(chain.softmax, self.ctx)
        call = cst.Call(
            func=func,
            args=[
                cst.Arg(without_parens(query)),
                cst.Arg(without_parens(chain.scores.product.right)),
                cst.Arg(without_parens(chain.output.right)),
                *(
                    cst.Arg(
                        value=value,
                        keyword=cst.Name(name),
                        equal=cst.AssignEqual(
                            whitespace_before=cst.SimpleWhitespace(""),
                            whitespace_after=cst.SimpleWhitespace(""),
                        ),
                    )
                    for name, value in keywords
                ),
            ],
        )
        call = _with_commas(call)
        replacements = self._replacements(call)
        if replacements is None:
            return None
        return Fix(replacements, Safety.UNSAFE, "use scaled_dot_product_attention", needs_import), call

    # -- operands ---------------------------------------------------------------------------
    def _query(self, left: cst.BaseExpression) -> tuple[Optional[cst.BaseExpression], Optional[_Step]]:
        """The query, and a factor applied to it inline: `(q * s) @ k.T` -> (q, s)."""
        inner = without_parens(left)
        if isinstance(inner, cst.BinaryOperation) and isinstance(inner.operator, (cst.Multiply, cst.Divide)):
            ctx = self.ctx
            if isinstance(inner.operator, cst.Divide):
                return inner.left, _Step(_Kind.DIVIDE, inner.right)
            left_tensor = ctx.is_tensor(inner.left)
            right_tensor = ctx.is_tensor(inner.right)
            if left_tensor and not right_tensor:
                return inner.left, _Step(_Kind.SCALE, inner.right)
            if right_tensor and not left_tensor:
                return inner.right, _Step(_Kind.SCALE, inner.left)
            return None, None
        return left, None

    @staticmethod
    def _guard_is_none_check(step: _Step) -> bool:
        """`if b is not None: scores = scores + b` and nothing else: SDPA's `attn_mask=b` takes None
        as no mask."""
        guard = step.guard
        if guard is None or step.kind is not _Kind.BIAS or step.operand is None:
            return False
        body = guard.body
        lines = [body] if isinstance(body, cst.SimpleStatementSuite) else list(body.body)
        if len(lines) != 1 or len(getattr(lines[0], "body", ())) != 1:
            return False
        test = guard.test
        if not isinstance(test, cst.Comparison):
            return False
        if len(test.comparisons) != 1 or not isinstance(test.comparisons[0].operator, cst.IsNot):
            return False
        if not is_name(test.comparisons[0].comparator, "None"):
            return False
        return _same_code(test.left, step.operand)

    def _mask_argument(self, step: _Step) -> Optional[tuple[str, cst.BaseExpression]]:
        assert step.operand is not None
        if step.kind is _Kind.BIAS:
            return "attn_mask", without_parens(step.operand)
        assert step.fill is not None
        if _fill_kind(step.fill, self.ctx) != "inf":
            return None
        if step.kind is _Kind.KEEP:
            return "attn_mask", without_parens(step.operand)
        if self._is_causal_buffer(step.operand):
            return "is_causal", cst.Name("True")
        return "attn_mask", _negated(step.operand)

    def _dropout_p(self, call: cst.Call) -> Optional[cst.BaseExpression]:
        ctx = self.ctx
        qualified = ctx.qualified_name(call)
        if qualified in _DROPOUT:
            p = _argument(call, 1, "p")
            training = _argument(
                call, 2, "training" if qualified == "torch.nn.functional.dropout" else "train"
            )
            if p is None:
                if qualified == "torch.dropout":
                    return None
                p = cst.Float("0.5")
            if qualified == "torch.dropout" and training is None:
                return None
        else:
            func = call.func
            if not (isinstance(func, cst.Attribute) and _dropout_module(func, ctx)):
                return None
            p = cst.Attribute(value=func, attr=cst.Name("p"))
            training = cst.parse_expression("self.training")
        if training is None or is_name(training, "True"):
            return without_parens(p)
        if is_name(training, "False"):
            return cst.Float("0.0")
        return cst.IfExp(
            test=without_parens(training),
            body=_parenthesized(without_parens(p)),
            orelse=cst.Float("0.0"),
        )

    def _scale(
        self, factor: Optional[_Step], query: cst.BaseExpression, key: cst.BaseExpression
    ) -> Union[cst.BaseExpression, None, bool]:
        """The `scale=` value; None when SDPA's default is the code's factor; False when no fix."""
        if factor is None:
            return cst.Float("1.0")
        assert factor.operand is not None
        operand = without_parens(factor.operand)
        if not self._scalar(operand, 0):
            return False
        head_dims = {self.ctx.code(without_parens(e)) for e in (query, key)}
        if factor.kind is _Kind.SCALE:
            return None if _is_inverse_sqrt_of(operand, head_dims, self.ctx) else operand
        if _is_sqrt_of(operand, head_dims, self.ctx):
            return None
        return cst.BinaryOperation(
            left=cst.Integer("1"),
            operator=cst.Divide(
                whitespace_before=cst.SimpleWhitespace(" "), whitespace_after=cst.SimpleWhitespace(" ")
            ),
            right=_parenthesized(operand),
        )

    def _scalar(self, expr: cst.BaseExpression, depth: int) -> bool:
        """`expr` is a Python number, never a tensor: SDPA's `scale` takes a float."""
        ctx = self.ctx
        expr = without_parens(expr)
        if depth > 6:
            return False
        if isinstance(expr, (cst.Integer, cst.Float)):
            return True
        if isinstance(expr, cst.UnaryOperation):
            return self._scalar(expr.expression, depth + 1)
        if isinstance(expr, cst.BinaryOperation):
            return self._scalar(expr.left, depth + 1) and self._scalar(expr.right, depth + 1)
        if isinstance(expr, cst.BooleanOperation):
            return self._scalar(expr.left, depth + 1) and self._scalar(expr.right, depth + 1)
        if isinstance(expr, cst.IfExp):
            return self._scalar(expr.body, depth + 1) and self._scalar(expr.orelse, depth + 1)
        if isinstance(expr, cst.Call):
            qualified = ctx.qualified_name(expr) or ""
            if qualified.startswith("math.") or qualified in (
                "builtins.float",
                "builtins.int",
                "builtins.len",
            ):
                return True  # Python numbers whatever their argument
            if qualified.startswith("numpy."):
                return all(self._scalar(a.value, depth + 1) or _is_size(a.value) for a in expr.args)
            return _is_size(expr)
        if isinstance(expr, cst.Subscript):
            return _is_size(expr)
        if isinstance(expr, cst.Attribute):
            if not is_name(expr.value, "self"):
                return bool(_NUMBER_NAME.search(expr.attr.value))  # config.num_heads, args.head_dim
            cls = ctx.hot.enclosing_class(expr)
            values = ctx.hot.attribute_values(cls, expr.attr.value) if cls is not None else []
            if not values:
                return bool(_NUMBER_NAME.search(expr.attr.value))
            return all(self._scalar(v, depth + 1) for v in values)
        if isinstance(expr, cst.Name):
            bindings = ctx.bindings(expr.value, expr)
            if not bindings:
                return False
            for binding in bindings:
                if binding.kind == "assign" and isinstance(binding.node, cst.BaseExpression):
                    if not self._scalar(binding.node, depth + 1):
                        return False
                elif binding.kind == "param" and isinstance(binding.node, cst.Param):
                    annotation = binding.node.annotation
                    if annotation is None:
                        if not _NUMBER_NAME.search(expr.value):
                            return False
                    elif ctx.code(annotation.annotation) not in ("float", "int", "Optional[float]"):
                        return False
                else:
                    return False
            return True
        return False

    def _is_causal_buffer(self, mask: cst.BaseExpression) -> bool:
        """`self.bias[:, :, :T, :T] == 0` (or `~self.mask[..., :T, :T]`) on a buffer that is only ever
        `torch.tril(torch.ones(n, n))`, reshaped."""
        mask = without_parens(mask)
        if isinstance(mask, cst.Comparison):
            if len(mask.comparisons) != 1 or not isinstance(mask.comparisons[0].operator, cst.Equal):
                return False
            if not is_number(mask.comparisons[0].comparator, 0):
                return False
            sliced = without_parens(mask.left)
        elif isinstance(mask, cst.UnaryOperation) and isinstance(mask.operator, cst.BitInvert):
            sliced = without_parens(mask.expression)
        else:
            return False
        if not (isinstance(sliced, cst.Subscript) and isinstance(sliced.value, cst.Attribute)):
            return False
        if not is_name(sliced.value.value, "self") or not _square_top_left(sliced.slice, self.ctx):
            return False
        values = self._buffer_values(sliced.value)
        return bool(values) and all(self._is_tril_of_ones(v) for v in values)

    def _buffer_values(self, attribute: cst.Attribute) -> list[cst.BaseExpression]:
        """What `self.<name>` is set to in its class: `self.register_buffer("<name>", value)` and
        `self.<name> = value`."""
        ctx = self.ctx
        cls = ctx.hot.enclosing_class(attribute)
        if cls is None:
            return []
        name = attribute.attr.value
        registered = ctx.hot.registered_values(cls, name)
        known = [v for v in registered if v is not None]
        if len(known) < len(registered):
            return []  # a registration hides its value
        return [*ctx.hot.attribute_values(cls, name), *known]

    def _is_tril_of_ones(self, value: cst.BaseExpression) -> bool:
        ctx = self.ctx
        value = without_parens(value)
        while True:
            reshaped = _method(value, "view", "reshape", "bool", "to", "unsqueeze", "contiguous")
            if reshaped is not None and ctx.qualified_name(reshaped[0]) is None:
                value = without_parens(reshaped[1])
            elif isinstance(value, cst.Subscript):
                value = without_parens(value.value)
            else:
                break
        if not isinstance(value, cst.Call):
            return False
        if ctx.qualified_name(value) == "torch.tril":
            positional = _positional(value)
            if positional is None or len(positional) != 1 or len(value.args) != 1:
                return False
            ones = without_parens(positional[0])
        else:
            found = _method(value, "tril")
            if found is None or value.args or ctx.qualified_name(value) is not None:
                return False
            ones = without_parens(found[1])
        if not (isinstance(ones, cst.Call) and ctx.qualified_name(ones) == "torch.ones"):
            return False
        sizes = [a.value for a in ones.args if a.keyword is None and not a.star]
        if len(sizes) == 1 and isinstance(sizes[0], (cst.Tuple, cst.List)):
            sizes = [e.value for e in sizes[0].elements]
        return len(sizes) == 2 and _same_code(sizes[0], sizes[1])

    # -- where the call goes ------------------------------------------------------------------
    def _still_valid(self, moved: Iterable[cst.BaseExpression]) -> bool:
        """Each expression moved into the SDPA call sees the same values at the chain's last
        statement as where it was written: it reads none of the chain's names, and no statement in
        between rebinds a name it reads."""
        chain = self.chain
        block = chain.block
        last = _index(block, chain.line)
        units = set(chain.units)
        for expr in moved:
            names = frozenset(n.value for n in _uses(expr, None, metadata=True))
            if names & chain.names:
                return False
            unit = next((a for a in self.ctx.ancestors(expr) if a in units), None)
            if unit is None:
                return False
            for statement in block[_index(block, unit) + 1 : last]:
                if statement not in units and _rebinds(statement, names):
                    return False
        return True

    def _replacements(self, call: cst.Call) -> Optional[tuple[tuple[cst.CSTNode, Replacement], ...]]:
        """Remove the chain's statements before the last and put the call where `probs @ v` was
        (the fixer moves the comments and blank lines above removed statements onto the next)."""
        chain = self.chain
        removed = [u for u in chain.units if u is not chain.line]
        for unit in removed:
            if isinstance(unit, cst.SimpleStatementLine) and len(unit.body) != 1:
                return None
            if not isinstance(unit, (cst.SimpleStatementLine, cst.If)):
                return None
        if chain.line not in chain.units or len(chain.line.body) != 1:
            return None
        line = chain.line.deep_replace(chain.output.node, call)
        assert isinstance(line, cst.SimpleStatementLine)
        orphaned = self._orphaned_imports([*removed, chain.line], line)
        if orphaned is None:
            return None  # an import the chain alone used shares its statement with others
        return (
            *((unit, cst.RemovalSentinel.REMOVE) for unit in [*orphaned, *removed]),
            (chain.line, line),
        )

    def _orphaned_imports(self, replaced: list[cst.CSTNode], new: cst.CSTNode) -> Optional[list[cst.CSTNode]]:
        """Module-level import statements that only the replaced statements used (`import math`
        for `math.sqrt(d)`, `from torch import einsum`): the fix removes them too, so it leaves
        nothing unused. None when such a name shares its import statement with other names."""
        ctx = self.ctx
        old_code = "\n".join(ctx.code(unit) for unit in replaced)
        new_code = cst.Module(body=[]).code_for_node(new)
        orphaned: list[cst.CSTNode] = []
        for name in set(ctx.facts.imports):
            word = re.compile(rf"(?<![\w.]){re.escape(name)}\b")
            gone = len(word.findall(old_code)) - len(word.findall(new_code))
            if gone <= 0 or len(word.findall(ctx.source)) - gone > 1:
                continue
            statement = next((s for s in ctx.module.body if _imports_only(s, name)), None)
            if statement is None:
                return None
            orphaned.append(statement)
        return orphaned


def _imports_only(statement: cst.CSTNode, name: str) -> bool:
    """`import name` or `from x import name` (with or without `as`), alone on its line."""
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return False
    node = statement.body[0]
    if not isinstance(node, (cst.Import, cst.ImportFrom)) or isinstance(node.names, cst.ImportStar):
        return False
    if len(node.names) != 1:
        return False
    alias = node.names[0]
    bound = alias.asname.name if alias.asname is not None else alias.name
    return isinstance(bound, cst.Name) and bound.value == name


def _rebinds(statement: cst.BaseStatement, names: frozenset[str]) -> bool:
    """`statement` may assign one of `names` (any compound statement that mentions one may)."""
    if not isinstance(statement, cst.SimpleStatementLine):
        return next(_uses(statement, names, metadata=True), None) is not None
    for small in statement.body:
        targets: list[cst.CSTNode] = []
        if isinstance(small, cst.Assign):
            targets = [t.target for t in small.targets]
        elif isinstance(small, (cst.AugAssign, cst.AnnAssign, cst.Del)):
            targets = [small.target]
        if any(next(_uses(t, names, metadata=True), None) is not None for t in targets):
            return True
    return False


def _with_commas(call: cst.Call) -> cst.Call:
    args = list(call.args)
    spaced = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    return call.with_changes(
        args=[
            arg.with_changes(comma=spaced if i < len(args) - 1 else cst.MaybeSentinel.DEFAULT)
            for i, arg in enumerate(args)
        ]
    )


def _same_code(a: cst.CSTNode, b: cst.CSTNode) -> bool:
    module = cst.Module(body=[])
    if isinstance(a, cst.BaseExpression):
        a = without_parens(a)
    if isinstance(b, cst.BaseExpression):
        b = without_parens(b)
    return module.code_for_node(a).replace(" ", "") == module.code_for_node(b).replace(" ", "")


def _negated(mask: cst.BaseExpression) -> cst.BaseExpression:
    """The boolean mask of the positions that stay: `m == 0` -> `m != 0`, `~m` -> `m`, else `~m`."""
    mask = without_parens(mask)
    if isinstance(mask, cst.Comparison) and len(mask.comparisons) == 1:
        target = mask.comparisons[0]
        flipped: Optional[cst.BaseCompOp] = None
        if isinstance(target.operator, cst.Equal):
            flipped = cst.NotEqual(
                whitespace_before=target.operator.whitespace_before,
                whitespace_after=target.operator.whitespace_after,
            )
        elif isinstance(target.operator, cst.NotEqual):
            flipped = cst.Equal(
                whitespace_before=target.operator.whitespace_before,
                whitespace_after=target.operator.whitespace_after,
            )
        if flipped is not None:
            return mask.with_changes(comparisons=[target.with_changes(operator=flipped)])
    if isinstance(mask, cst.UnaryOperation) and isinstance(mask.operator, cst.BitInvert):
        return without_parens(mask.expression)
    return cst.UnaryOperation(operator=cst.BitInvert(), expression=_parenthesized(mask))


def _is_size(expr: cst.BaseExpression) -> bool:
    """`x.size(d)`, `x.size()[d]`, `x.shape[d]`: Python ints."""
    expr = without_parens(expr)
    if isinstance(expr, cst.Call):
        return _method(expr, "size", "dim") is not None
    if isinstance(expr, cst.Subscript):
        value = without_parens(expr.value)
        return (isinstance(value, cst.Attribute) and value.attr.value == "shape") or _method(
            value, "size"
        ) is not None
    return False


def _head_dim(expr: cst.BaseExpression, tensors: set[str], ctx: Context) -> bool:
    """`t.size(-1)` or `t.shape[-1]` of the query or key: the head dimension."""
    expr = without_parens(expr)
    if isinstance(expr, cst.Call):
        found = _method(expr, "size")
        positional = _positional(expr)
        return (
            found is not None
            and positional is not None
            and len(positional) == 1
            and _int(positional[0]) == -1
            and ctx.code(without_parens(found[1])) in tensors
        )
    if isinstance(expr, cst.Subscript) and len(expr.slice) == 1:
        value = without_parens(expr.value)
        index = expr.slice[0].slice
        return (
            isinstance(value, cst.Attribute)
            and value.attr.value == "shape"
            and isinstance(index, cst.Index)
            and _int(index.value) == -1
            and ctx.code(without_parens(value.value)) in tensors
        )
    return False


def _is_sqrt_of(expr: cst.BaseExpression, tensors: set[str], ctx: Context) -> bool:
    """`math.sqrt(d)` or `d ** 0.5` for the head dimension `d`."""
    expr = without_parens(expr)
    if isinstance(expr, cst.Call) and ctx.qualified_name(expr) in ("math.sqrt", "numpy.sqrt"):
        positional = _positional(expr)
        return positional is not None and len(positional) == 1 and _head_dim(positional[0], tensors, ctx)
    return (
        isinstance(expr, cst.BinaryOperation)
        and isinstance(expr.operator, cst.Power)
        and is_number(without_parens(expr.right), 0.5)
        and _head_dim(expr.left, tensors, ctx)
    )


def _is_inverse_sqrt_of(expr: cst.BaseExpression, tensors: set[str], ctx: Context) -> bool:
    """`d ** -0.5` or `1 / math.sqrt(d)` (`1.0 / d ** 0.5`) for the head dimension `d`."""
    expr = without_parens(expr)
    if not isinstance(expr, cst.BinaryOperation):
        return False
    if isinstance(expr.operator, cst.Power):
        exponent = without_parens(expr.right)
        return (
            isinstance(exponent, cst.UnaryOperation)
            and isinstance(exponent.operator, cst.Minus)
            and is_number(without_parens(exponent.expression), 0.5)
            and _head_dim(expr.left, tensors, ctx)
        )
    return (
        isinstance(expr.operator, cst.Divide)
        and is_number(without_parens(expr.left), 1)
        and _is_sqrt_of(expr.right, tensors, ctx)
    )


def _square_top_left(elements: Sequence[cst.SubscriptElement], ctx: Context) -> bool:
    """`[:, :, :T, :T]`, `[..., :T, :T]`, `[:T, :T]`: whole leading dimensions, then the same
    top-left square."""
    if len(elements) < 2:
        return False
    for element in elements[:-2]:
        part = element.slice
        whole = (
            isinstance(part, cst.Slice) and part.lower is None and part.upper is None and part.step is None
        )
        ellipsis = isinstance(part, cst.Index) and isinstance(part.value, cst.Ellipsis)
        if not (whole or ellipsis):
            return False
    bounds = []
    for element in elements[-2:]:
        part = element.slice
        if not isinstance(part, cst.Slice) or part.step is not None or part.upper is None:
            return False
        if part.lower is not None and not is_number(part.lower, 0):
            return False
        bounds.append(part.upper)
    return _same_code(bounds[0], bounds[1])

"""TPL405 size-off-tensor-cores: large vocabulary or head size not a multiple of 64."""

from __future__ import annotations

import re
from typing import Iterator, Optional

import libcst as cst

from ...engine.context import Context
from ...engine.findings import Report
from ..base import Rule
from .common import nn_class

# From here on a layer is a vocabulary or an LM/classifier head whose matmul is a large part of a
# step, while padding to 64 adds at most 63/2048 (3%) rows; below it, padding buys little.
LARGE = 2048
TILE = 64
# Call keywords that set a vocabulary or an output layer's size (`GPTConfig(vocab_size=50257)`).
SIZE_KEYWORDS = frozenset(
    {"vocab_size", "n_vocab", "ntoken", "ntokens", "num_tokens", "n_tokens", "padded_vocab_size"}
)


def off_tiles(size: int) -> bool:
    return size >= LARGE and size % TILE != 0


def padded(size: int) -> int:
    return -(-size // TILE) * TILE


class SizeOffTensorCores(Rule):
    """## What it does
    Flags an `nn.Linear` whose output size, or an `nn.Embedding` used as the output head (its
    weight multiplied by the hidden states: `F.linear(h, self.wte.weight)`, `h @ self.wte.weight.T`),
    whose vocabulary is at least 2048 and not a multiple of 64, when the size can be read: a
    literal, a name bound once to one, or a field of a configuration class in the file
    (`vocab_size: int = 50257`); and a call keyword that sets a vocabulary (`vocab_size=50257`),
    in a file that runs on CUDA. Off by default.

    ## Why it is slow
    Tensor-core matmuls work on tiles; a dimension that is not a multiple of the tile (64 for
    bf16 on recent GPUs) leaves a ragged edge that cuBLAS pads on the fly or serves with slower
    kernels, in the forward and both backward matmuls of the head, and in the softmax and
    cross-entropy over the logits. nanoGPT pads GPT-2's 50257 tokens to 50304 for this reason.
    The measured effect on an H100 is in the Measured section below.

    ## Fix safety
    No fix: padding the vocabulary changes the checkpoint's shapes and the class range of the loss;
    the extra logits must be masked (or never be targets) and a pretrained checkpoint needs its
    embedding padded on load.

    ## When it stays silent
    Sizes below 2048 (ImageNet's 1000 classes) and multiples of 64 (50304, 32000); sizes computed
    at run time or passed in (`len(tokenizer)`, a parameter); embeddings only looked up (the
    lookup is a gather, no matmul), whose tied head is flagged instead when it is an `nn.Linear`,
    and a vocabulary keyword (`Encoder(vocab_size=30001)`) whose size reaches only such
    embeddings among the file's layers;
    `nn.Linear` input sizes; files that never run on CUDA, and layers outside a model class in a
    file without a step loop; test files.
    """

    code = "TPL405"
    name = "size-off-tensor-cores"
    summary = "Vocabulary or head size not a multiple of 64"
    message = (
        "{what} {size}{source} is not a multiple of 64, so the head's matmuls miss the tensor cores' "
        "tiles; pad it to {padded} and mask the {extra} extra logits"
    )
    default_on = False
    where = "construction"
    node_types = (cst.Call,)
    benchmark = "TPL405"

    BAD = {
        "config-dataclass-default": """
            from dataclasses import dataclass
            import torch.nn as nn

            @dataclass
            class GPTConfig:
                vocab_size: int = 50257
                n_embd: int = 768

            class GPT(nn.Module):
                def __init__(self, config):
                    super().__init__()
                    self.wte = nn.Embedding(config.vocab_size, config.n_embd)
                    self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)  # expect: TPL405
                    self.wte.weight = self.lm_head.weight

                def forward(self, idx):
                    return self.lm_head(self.wte(idx))

            model = GPT(GPTConfig()).cuda()
            """,
        "literal-head": """
            import torch
            from torch import nn

            class Classifier(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.body = nn.Linear(512, 1024)
                    self.head = nn.Linear(1024, 21841)  # expect: TPL405

                def forward(self, x):
                    return self.head(self.body(x).relu())

            net = Classifier().to("cuda")
            """,
        "embedding-as-head": """
            import torch
            import torch.nn as nn
            import torch.nn.functional as F

            VOCAB = 30522

            class LM(nn.Module):
                def __init__(self, d):
                    super().__init__()
                    self.tok = nn.Embedding(VOCAB, d)  # expect: TPL405

                def forward(self, idx):
                    return F.linear(self.tok(idx), self.tok.weight)

            model = LM(768).cuda()
            """,
        "vocabulary-keyword": """
            import torch
            from model import GPT, GPTConfig

            model = GPT(GPTConfig(n_layer=12, vocab_size=50257)).cuda()  # expect: TPL405
            for x, y in train_loader:
                model(x.cuda(), y.cuda()).backward()
            """,
    }
    GOOD = {
        "padded-vocabulary": """
            import torch.nn as nn

            class GPT(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.wte = nn.Embedding(50304, 768)
                    self.lm_head = nn.Linear(768, 50304, bias=False)

            model = GPT().cuda()
            """,
        "small-head": """
            import torch.nn as nn

            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(2048, 1000)

            model = Net().cuda()
            """,
        "runtime-computed-size": """
            import torch.nn as nn

            class LM(nn.Module):
                def __init__(self, tokenizer, d):
                    super().__init__()
                    self.head = nn.Linear(d, len(tokenizer))

            model = LM(tok, 768).cuda()
            """,
        "embedding-lookup-only": """
            import torch.nn as nn

            class Recommender(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.users = nn.Embedding(6040, 64)
                    self.items = nn.Embedding(3706, 64)

                def forward(self, u, i):
                    return (self.users(u) * self.items(i)).sum(-1)

            model = Recommender().cuda()
            """,
        "vocabulary-keyword-of-an-encoder-that-only-embeds": """
            import torch
            import torch.nn as nn

            class Encoder(nn.Module):
                def __init__(self, vocab_size, d=256, classes=4):
                    super().__init__()
                    self.tok = nn.Embedding(vocab_size, d)
                    self.rnn = nn.GRU(d, d, batch_first=True)
                    self.head = nn.Linear(d, classes)

                def forward(self, idx):
                    return self.head(self.rnn(self.tok(idx))[0][:, -1])

            model = Encoder(vocab_size=30001).cuda()
            for x, y in train_loader:
                nn.functional.cross_entropy(model(x.cuda()), y.cuda()).backward()
            """,
        "cpu-only-script": """
            import torch.nn as nn

            class LM(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.head = nn.Linear(768, 50257)

            model = LM()
            """,
        "not-on-a-training-path": """
            import torch
            import torch.nn as nn

            def export_head(path):
                head = nn.Linear(768, 50257)
                torch.save(head.state_dict(), path)

            device = "cuda"
            """,
    }

    def check(self, node: cst.Call, ctx: Context) -> Iterator[Report]:
        if ctx.is_test_file or not (ctx.shows_cuda_use or ctx.entry.runs_on_cuda):
            return
        layer = nn_class(node, ctx, frozenset({"Linear", "Embedding"}))
        if layer is not None:
            yield from self._layer(node, layer, ctx)
            return
        if not ctx.hot.step_loops:
            return
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value in SIZE_KEYWORDS:
                found = ctx.sizes.value(arg.value)
                if found is None or found[1] != "" or not off_tiles(found[0]):
                    continue
                if self._only_embedded(arg.keyword.value, ctx):
                    continue
                yield self._report(arg.value, arg.keyword.value, found[0], "")

    def _layer(self, call: cst.Call, layer: str, ctx: Context) -> Iterator[Report]:
        in_model = self._in_model_class(call, ctx)
        if not in_model and (not ctx.hot.step_loops or ctx.enclosing_function(call) is not None):
            return
        size = _argument(
            call, 1 if layer == "Linear" else 0, "out_features" if layer == "Linear" else "num_embeddings"
        )
        if size is None:
            return
        found = ctx.sizes.value(size)
        if found is None or not off_tiles(found[0]):
            return
        if layer == "Embedding" and not self._used_as_head(call, ctx):
            return
        what = "nn.Linear's output size" if layer == "Linear" else "the vocabulary of nn.Embedding"
        yield self._report(call, what, found[0], f" ({found[1]})" if found[1] else "")

    def _report(self, node: cst.CSTNode, what: str, size: int, source: str) -> Report:
        return self.report(
            node, what=what, size=size, source=source, padded=padded(size), extra=padded(size) - size
        )

    def _only_embedded(self, keyword: str, ctx: Context) -> bool:
        """The layers of this file that read the size by the keyword's name (`nn.Embedding(
        config.vocab_size, d)`) are all embeddings only looked up: the size enters no matmul. A
        model defined elsewhere cannot be read, and the keyword is reported."""
        layers = []
        for call in ctx.facts.calls:
            layer = nn_class(call, ctx, frozenset({"Linear", "Embedding"}))
            if layer is None:
                continue
            sizes = [_argument(call, 0, "in_features"), _argument(call, 1, "out_features")]
            if layer == "Embedding":
                sizes = [_argument(call, 0, "num_embeddings")]
            if any(size is not None and _last_name(size) == keyword for size in sizes):
                layers.append((call, layer))
        return bool(layers) and all(
            layer == "Embedding" and not self._used_as_head(call, ctx) for call, layer in layers
        )

    @staticmethod
    def _in_model_class(call: cst.Call, ctx: Context) -> bool:
        cls = ctx.hot.enclosing_class(call)
        return cls is not None and ctx.hot.is_module_class(cls)

    @staticmethod
    def _used_as_head(call: cst.Call, ctx: Context) -> bool:
        """The embedding's weight is multiplied by hidden states in its class: `F.linear(h,
        self.tok.weight)`, `h @ self.tok.weight.T`, `torch.matmul(h, self.tok.weight.t())`."""
        statement = ctx.parent(call)
        cls = ctx.hot.enclosing_class(call)
        if not isinstance(statement, cst.Assign) or len(statement.targets) != 1 or cls is None:
            return False
        target = statement.targets[0].target
        if not (
            isinstance(target, cst.Attribute)
            and isinstance(target.value, cst.Name)
            and target.value.value == "self"
        ):
            return False
        weight = rf"self\.{re.escape(target.attr.value)}\.weight"
        head = rf"(linear\([^\n]*{weight}|{weight}\s*\.\s*(T\b|t\(\)|transpose)|matmul\([^\n]*{weight}|@\s*{weight})"
        return re.search(head, ctx.code(cls.node)) is not None


def _last_name(expr: cst.BaseExpression) -> Optional[str]:
    """`vocab_size` for `config.vocab_size` or `vocab_size`."""
    if isinstance(expr, cst.Attribute):
        return expr.attr.value
    return expr.value if isinstance(expr, cst.Name) else None


def _argument(call: cst.Call, position: int, name: str) -> Optional[cst.BaseExpression]:
    positional = [a for a in call.args if a.keyword is None]
    if any(a.star for a in positional[: position + 1]):
        return None
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg.value
    return positional[position].value if len(positional) > position else None

"""TPL401 conv-bias-before-batchnorm: Conv bias followed by a BatchNorm that cancels it."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from ...analysis.vocabulary import NN_CONVS
from ...engine.context import Context
from ...engine.edits import add_keyword, passed_argument
from ...engine.findings import Fix, Report, Safety
from ...syntax.walker import dotted_name
from ..base import Rule
from .common import nn_class

# Norms that subtract a per-channel mean, which cancels a per-channel bias added before them.
_MEAN_NORMS = frozenset(
    f"{kind}Norm{n}d" for kind in ("Batch", "LazyBatch", "Instance", "LazyInstance") for n in (1, 2, 3)
) | {"SyncBatchNorm"}
_BIAS_POSITION = 7  # Conv*d(in, out, kernel, stride, padding, dilation, groups, bias)


def _convolution(call: cst.Call, ctx: Context) -> tuple[str, str, int] | None:
    """(how the message names it, the parameter that turns its bias off, that parameter's
    position) for an `nn.Conv*d` call, or a call of a project module that is one convolution
    under another name (tacotron2's `ConvNorm(..., bias=True)`: EntryFacts.conv_wrappers)."""
    conv_class = nn_class(call, ctx, NN_CONVS)
    if conv_class is not None:
        return f"nn.{conv_class}", "bias", _BIAS_POSITION
    written = dotted_name(call.func)
    for name, param, position, wrapped in ctx.entry.conv_wrappers:
        if name == written:
            return f"{name} (an nn.{wrapped})", param, position
    return None


def _literal(expr: cst.BaseExpression) -> bool | None:
    if isinstance(expr, cst.Name) and expr.value in ("True", "False"):
        return expr.value == "True"
    return None


class ConvBiasBeforeBatchnorm(Rule):
    """## What it does
    Flags an `nn.Conv{1,2,3}d` or `nn.ConvTranspose{1,2,3}d` built without `bias=False` whose output
    goes straight into a norm that subtracts the per-channel mean: `BatchNorm{1,2,3}d`,
    `LazyBatchNorm*`, `SyncBatchNorm`, `InstanceNorm{1,2,3}d`. It sees the pair next to each other in
    `nn.Sequential(...)` (positional, an `OrderedDict`, or `*layers` built in the same function), as
    `self.bn(self.conv(x))`, or as consecutive statements `x = self.conv(x)`; `x = self.bn(x)`,
    resolving `self.conv` and `self.bn` to their constructors in `__init__`. The finding is on the
    conv's constructor, where the fix goes. A project module that is one convolution under another
    name counts as that convolution: its `forward` returns what one attribute makes of its input,
    and `__init__` builds that attribute as `nn.Conv*d(..., bias=bias)` with `bias=True` by default
    (tacotron2's `ConvNorm`); the fix passes `bias=False` where the module is built.

    ## Why it is slow
    The norm subtracts the per-channel mean, so the bias the conv adds to every output element is
    removed again: the conv pays an extra bias pass (and its gradient) in every forward and backward
    for nothing. The measured effect on an H100 is in the Measured section below.

    ## Fix safety
    Unsafe: `bias=False` removes the `bias` entry from the conv's `state_dict`, so loading a
    checkpoint saved before the fix fails with unexpected keys (load with `strict=False` or drop the
    keys). What the network computes does not change, since the norm cancels the bias.

    ## When it stays silent
    `bias=False` passed, or `bias=` given as an expression (a decision, often `bias=not use_bn`);
    GroupNorm and LayerNorm (they normalise over groups of channels or the whole sample, so a
    per-channel bias is not cancelled); anything between the conv and the norm (an activation,
    pooling, dropout, an `if`); modules whose constructor cannot be resolved (factory functions,
    `norm_layer(...)` parameters); `**kwargs` that could supply `bias`; a conv built by a method
    that deletes the norm (`delattr(self, "bn")`, `del self.bn`): a `fuse()` for deployment that
    folds the norm's statistics into a new conv, whose bias then carries them; a model whose weights are
    published (built by a function that downloads its checkpoint with `load_state_dict_from_url`,
    `hf_hub_download`, `model_zoo.load_url` or torchvision's weights enums, or by a timm/torchvision
    `@register_model` factory, through everything such a function reaches in the project): every
    published checkpoint holds the bias, and `load_state_dict(strict=True)` would reject it without.
    `--show-context` prints a note at such a conv that names the function fetching the weights
    (torchvision 0.29): `torchvision/models/vgg.py:81:22: TPL401 note: nn.Conv2d keeps its bias before
    nn.BatchNorm2d: the weights are published (_vgg (torchvision/models/vgg.py:98) calls
    get_state_dict)`.

    By default it looks only at models the project's own programs build: those built (directly, as a
    part, through a builder or a class handed on) by the code around a step or inference loop of the
    project, or by a Lightning module. A model class no program of the project builds, a library's
    model zoo above all, is reported only with `--library`: there the bias is most often in the
    layout of published weights (RULES.md, "Defaults follow evidence").
    """

    code = "TPL401"
    name = "conv-bias-before-batchnorm"
    summary = "Conv bias followed by a BatchNorm that cancels it"
    message = "{conv} adds a bias that the nn.{norm} after it subtracts again; pass {param}=False"
    # on in its precise form: models a step or inference loop of the project builds (RULES.md,
    # "Defaults follow evidence"); the broad form, with --library, keeps pretrained layouts (libraries)
    default_on = True
    stepping_evidence = True
    fix_safety = Safety.UNSAFE
    where = "anywhere"
    node_types = (cst.Call,)
    benchmark = "TPL401"

    BAD = {
        "sequential-block": """
            import torch.nn as nn

            def conv_block(c_in, c_out):
                return nn.Sequential(
                    nn.Conv2d(c_in, c_out, 3, padding=1),  # expect: TPL401
                    nn.BatchNorm2d(c_out),
                    nn.ReLU(inplace=True),
                )
            """,
        "attributes-applied-in-forward": """
            import torch.nn as nn
            import torch.nn.functional as F

            class Stem(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.conv1 = nn.Conv2d(3, 32, 3, stride=2)  # expect: TPL401
                    self.bn1 = nn.BatchNorm2d(32)
                    self.conv2 = nn.Conv2d(32, 64, 3, bias=True)  # expect: TPL401
                    self.bn2 = nn.SyncBatchNorm(64)

                def forward(self, x):
                    x = F.relu(self.bn1(self.conv1(x)))
                    x = self.conv2(x)
                    x = self.bn2(x)
                    return F.relu(x)
            """,
        "layers-list-built-in-a-loop": """
            from torch import nn

            def make_features(cfg):
                layers = []
                in_channels = 3
                for v in cfg:
                    if v == "M":
                        layers += [nn.MaxPool2d(kernel_size=2, stride=2)]
                    else:
                        conv = nn.Conv2d(in_channels, v, kernel_size=3, padding=1)  # expect: TPL401
                        layers += [conv, nn.BatchNorm2d(v), nn.ReLU(inplace=True)]
                        in_channels = v
                return nn.Sequential(*layers)
            """,
        "ordered-dict-and-appends": """
            from collections import OrderedDict

            import torch

            head = torch.nn.Sequential(OrderedDict([
                ("deconv", torch.nn.ConvTranspose2d(64, 32, 2, stride=2)),  # expect: TPL401
                ("norm", torch.nn.InstanceNorm2d(32)),
            ]))

            def tail(channels):
                layers = [torch.nn.Upsample(scale_factor=2)]
                layers.append(torch.nn.Conv3d(channels, channels, 3))  # expect: TPL401
                layers.append(torch.nn.BatchNorm3d(channels))
                return torch.nn.Sequential(*layers)
            """,
        "from-scratch-model-resumed-from-its-own-checkpoint": """
            import torch
            import torch.nn as nn

            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.conv = nn.Conv2d(3, 32, 3)  # expect: TPL401
                    self.bn = nn.BatchNorm2d(32)

                def forward(self, x):
                    return self.bn(self.conv(x))

            def build(resume=None):
                model = Net()
                if resume:
                    model.load_state_dict(torch.load(resume))
                return model
            """,
        "conv-under-another-name": """
            import torch
            from torch import nn

            class ConvNorm(nn.Module):
                def __init__(self, in_channels, out_channels, kernel_size=1, bias=True, w_init_gain="linear"):
                    super().__init__()
                    self.conv = nn.Conv1d(in_channels, out_channels, kernel_size, padding=kernel_size // 2, bias=bias)
                    nn.init.xavier_uniform_(self.conv.weight, gain=nn.init.calculate_gain(w_init_gain))

                def forward(self, signal):
                    conv_signal = self.conv(signal)
                    return conv_signal

            class Postnet(nn.Module):
                def __init__(self, channels):
                    super().__init__()
                    self.block = nn.Sequential(
                        ConvNorm(80, channels, kernel_size=5, w_init_gain="tanh"),  # expect: TPL401
                        nn.BatchNorm1d(channels),
                    )

                def forward(self, x):
                    return torch.tanh(self.block(x))
            """,
    }
    FIXED = {
        "sequential-block": """
            import torch.nn as nn

            def conv_block(c_in, c_out):
                return nn.Sequential(
                    nn.Conv2d(c_in, c_out, 3, padding=1, bias=False),
                    nn.BatchNorm2d(c_out),
                    nn.ReLU(inplace=True),
                )
            """,
        "attributes-applied-in-forward": """
            import torch.nn as nn
            import torch.nn.functional as F

            class Stem(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.conv1 = nn.Conv2d(3, 32, 3, stride=2, bias=False)
                    self.bn1 = nn.BatchNorm2d(32)
                    self.conv2 = nn.Conv2d(32, 64, 3, bias=False)
                    self.bn2 = nn.SyncBatchNorm(64)

                def forward(self, x):
                    x = F.relu(self.bn1(self.conv1(x)))
                    x = self.conv2(x)
                    x = self.bn2(x)
                    return F.relu(x)
            """,
        "layers-list-built-in-a-loop": """
            from torch import nn

            def make_features(cfg):
                layers = []
                in_channels = 3
                for v in cfg:
                    if v == "M":
                        layers += [nn.MaxPool2d(kernel_size=2, stride=2)]
                    else:
                        conv = nn.Conv2d(in_channels, v, kernel_size=3, padding=1, bias=False)
                        layers += [conv, nn.BatchNorm2d(v), nn.ReLU(inplace=True)]
                        in_channels = v
                return nn.Sequential(*layers)
            """,
        "ordered-dict-and-appends": """
            from collections import OrderedDict

            import torch

            head = torch.nn.Sequential(OrderedDict([
                ("deconv", torch.nn.ConvTranspose2d(64, 32, 2, stride=2, bias=False)),
                ("norm", torch.nn.InstanceNorm2d(32)),
            ]))

            def tail(channels):
                layers = [torch.nn.Upsample(scale_factor=2)]
                layers.append(torch.nn.Conv3d(channels, channels, 3, bias=False))
                layers.append(torch.nn.BatchNorm3d(channels))
                return torch.nn.Sequential(*layers)
            """,
        "from-scratch-model-resumed-from-its-own-checkpoint": """
            import torch
            import torch.nn as nn

            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.conv = nn.Conv2d(3, 32, 3, bias=False)
                    self.bn = nn.BatchNorm2d(32)

                def forward(self, x):
                    return self.bn(self.conv(x))

            def build(resume=None):
                model = Net()
                if resume:
                    model.load_state_dict(torch.load(resume))
                return model
            """,
        "conv-under-another-name": """
            import torch
            from torch import nn

            class ConvNorm(nn.Module):
                def __init__(self, in_channels, out_channels, kernel_size=1, bias=True, w_init_gain="linear"):
                    super().__init__()
                    self.conv = nn.Conv1d(in_channels, out_channels, kernel_size, padding=kernel_size // 2, bias=bias)
                    nn.init.xavier_uniform_(self.conv.weight, gain=nn.init.calculate_gain(w_init_gain))

                def forward(self, signal):
                    conv_signal = self.conv(signal)
                    return conv_signal

            class Postnet(nn.Module):
                def __init__(self, channels):
                    super().__init__()
                    self.block = nn.Sequential(
                        ConvNorm(80, channels, kernel_size=5, w_init_gain="tanh", bias=False),
                        nn.BatchNorm1d(channels),
                    )

                def forward(self, x):
                    return torch.tanh(self.block(x))
            """,
    }

    GOOD = {
        "wrappers-that-are-more-than-a-convolution": """
            from torch import nn

            class ConvAct(nn.Module):
                def __init__(self, cin, cout, bias=True):
                    super().__init__()
                    self.conv = nn.Conv2d(cin, cout, 3, padding=1, bias=bias)
                    self.act = nn.ReLU()

                def forward(self, x):
                    return self.act(self.conv(x))

            class PlainConv(nn.Module):
                def __init__(self, cin, cout, bias=False):
                    super().__init__()
                    self.conv = nn.Conv2d(cin, cout, 3, padding=1, bias=bias)

                def forward(self, x):
                    return self.conv(x)

            class Stem(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.a = nn.Sequential(ConvAct(3, 16), nn.BatchNorm2d(16))
                    self.b = nn.Sequential(PlainConv(16, 32), nn.BatchNorm2d(32))

                def forward(self, x):
                    return self.b(self.a(x))
            """,
        "bias-false-or-decided": """
            import torch.nn as nn

            def block(c, use_bn):
                return nn.Sequential(
                    nn.Conv2d(c, c, 3, bias=False),
                    nn.BatchNorm2d(c),
                    nn.Conv2d(c, c, 3, bias=not use_bn),
                    nn.BatchNorm2d(c),
                )
            """,
        "group-and-layer-norm": """
            import torch.nn as nn

            class Block(nn.Module):
                def __init__(self, c):
                    super().__init__()
                    self.conv = nn.Conv2d(c, c, 3)
                    self.gn = nn.GroupNorm(8, c)
                    self.proj = nn.Conv1d(c, c, 1)
                    self.ln = nn.LayerNorm(c)

                def forward(self, x):
                    return self.ln(self.proj(self.gn(self.conv(x)).flatten(2)).transpose(1, 2))
            """,
        "activation-or-pool-in-between": """
            import torch.nn as nn
            import torch.nn.functional as F

            pre_activation = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.BatchNorm2d(8))

            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.conv = nn.Conv2d(8, 8, 3)
                    self.bn = nn.BatchNorm2d(8)

                def forward(self, x):
                    x = self.conv(x)
                    x = F.max_pool2d(x, 2)
                    x = self.bn(x)
                    return self.bn(F.relu(self.conv(x)))
            """,
        "unresolved-norm-layer-and-conditional-norm": """
            import torch.nn as nn

            class ConvNorm(nn.Module):
                def __init__(self, c, norm_layer, use_bn=True):
                    super().__init__()
                    self.conv = nn.Conv2d(c, c, 3)
                    self.norm = norm_layer(c)
                    self.bn = nn.BatchNorm2d(c) if use_bn else nn.Identity()

                def forward(self, x):
                    x = self.conv(x)
                    x = self.norm(x)
                    return self.bn(self.conv(x))
            """,
        "conditional-norm-in-layers-list": """
            import torch.nn as nn

            def stage(c, batch_norm):
                layers = []
                layers.append(nn.Conv2d(c, c, 3))
                if batch_norm:
                    layers.append(nn.BatchNorm2d(c))
                layers.append(nn.ReLU())
                return nn.Sequential(*layers)
            """,
        "look-alike-classes-and-kwargs": """
            import torch.nn as nn
            from mylib import Conv2d, BatchNorm2d

            custom = nn.Sequential(Conv2d(3, 8, 3), BatchNorm2d(8))

            def configurable(**conv_kwargs):
                return nn.Sequential(nn.Conv2d(3, 8, 3, **conv_kwargs), nn.BatchNorm2d(8))
            """,
        "published-checkpoint-keeps-its-layout": """
            import torch.nn as nn
            from torch.hub import load_state_dict_from_url

            class Stem(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.conv = nn.Conv2d(3, 32, 3)
                    self.bn = nn.BatchNorm2d(32)

                def forward(self, x):
                    return self.bn(self.conv(x))

            class Net(nn.Module):
                def __init__(self, pretrained=True):
                    super().__init__()
                    self.stem = Stem()
                    if pretrained:
                        self.load_state_dict(load_state_dict_from_url("https://example.com/net.pth"))

                def forward(self, x):
                    return self.stem(x)
            """,
        "registered-pretrained-model": """
            import torch.nn as nn
            from timm.models import build_model_with_cfg, register_model

            def make_layers(cfg):
                layers = []
                for v in cfg:
                    layers += [nn.Conv2d(3, v, 3, padding=1), nn.BatchNorm2d(v), nn.ReLU()]
                return nn.Sequential(*layers)

            class VGG(nn.Module):
                def __init__(self, features):
                    super().__init__()
                    self.features = features

            def _create(variant, pretrained, cfg):
                return build_model_with_cfg(VGG, variant, pretrained, features=make_layers(cfg))

            @register_model
            def vgg11_bn(pretrained=False):
                return _create("vgg11_bn", pretrained, [64, 128])
            """,
        "norm-folded-into-the-conv-by-fuse": """
            import torch
            import torch.nn as nn

            class ConvBN(nn.Module):
                def __init__(self, c1, c2, k=3):
                    super().__init__()
                    self.conv = nn.Conv2d(c1, c2, k, padding=k // 2, bias=False)
                    self.bn = nn.BatchNorm2d(c2)

                def forward(self, x):
                    return torch.relu(self.bn(self.conv(x)))

                def forward_fuse(self, x):
                    return torch.relu(self.conv(x))

                @torch.no_grad()
                def fuse(self):
                    std = (self.bn.running_var + self.bn.eps).sqrt()
                    fused = nn.Conv2d(self.conv.in_channels, self.conv.out_channels, 3, padding=1, bias=True)
                    fused.weight.copy_(self.conv.weight * (self.bn.weight / std).view(-1, 1, 1, 1))
                    fused.bias.copy_(self.bn.bias - self.bn.weight * self.bn.running_mean / std)
                    self.conv = fused
                    delattr(self, "bn")
                    self.forward = self.forward_fuse
            """,
        "yolov5-fuse-from-the-model": """
            import torch
            import torch.nn as nn

            def fuse_conv_and_bn(conv, bn):
                fusedconv = nn.Conv2d(
                    conv.in_channels, conv.out_channels, kernel_size=conv.kernel_size,
                    stride=conv.stride, padding=conv.padding, groups=conv.groups, bias=True,
                ).requires_grad_(False).to(conv.weight.device)
                w_bn = torch.diag(bn.weight.div(torch.sqrt(bn.eps + bn.running_var)))
                fusedconv.weight.copy_(torch.mm(w_bn, conv.weight.view(conv.out_channels, -1)).view(fusedconv.weight.shape))
                fusedconv.bias.copy_(bn.bias - bn.weight.mul(bn.running_mean).div(torch.sqrt(bn.running_var + bn.eps)))
                return fusedconv

            class Conv(nn.Module):
                def __init__(self, c1, c2, k=1, s=1):
                    super().__init__()
                    self.conv = nn.Conv2d(c1, c2, k, s, k // 2, bias=False)
                    self.bn = nn.BatchNorm2d(c2)
                    self.act = nn.SiLU()

                def forward(self, x):
                    return self.act(self.bn(self.conv(x)))

                def forward_fuse(self, x):
                    return self.act(self.conv(x))

            class Model(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.model = nn.Sequential(Conv(3, 16, 3, 2), Conv(16, 32, 3, 2))

                def fuse(self):
                    for m in self.model.modules():
                        if isinstance(m, Conv) and hasattr(m, "bn"):
                            m.conv = fuse_conv_and_bn(m.conv, m.bn)
                            delattr(m, "bn")
                            m.forward = m.forward_fuse
                    return self
            """,
    }

    def check(self, node: cst.Call, ctx: Context) -> Iterator[Report]:
        graph = ctx.module_graph
        for first, second in self._neighbours(node, ctx):
            norm = self._mean_norm(second, ctx)
            if norm is None:
                continue
            for conv in graph.constructor_calls(first) or ():
                convolution = _convolution(conv, ctx)
                if convolution is None or any(a.star == "*" for a in conv.args):
                    continue
                conv_class, param, position = convolution
                if graph.star_kwargs_may_supply(conv, param):
                    continue
                if graph.folded_away(conv, second):
                    continue  # the conv a `fuse()` builds after folding the norm into it
                bias = passed_argument(conv, param, position)
                if bias is not None and _literal(bias.value) is not True:
                    continue
                published = ctx.published_weights(conv)
                if published is not None:
                    why = f"the weights are published ({published})"
                    yield self.note(conv, f"{conv_class} keeps its bias before nn.{norm}: {why}")
                    continue
                yield self.report(
                    conv, fix=self._fix(conv, bias, param), conv=conv_class, norm=norm, param=param
                )

    @staticmethod
    def _neighbours(node: cst.Call, ctx: Context) -> list[tuple[cst.BaseExpression, cst.BaseExpression]]:
        """Module expressions whose output goes straight into the next one's input."""
        graph = ctx.module_graph
        pairs = graph.sequential_neighbours(node)
        if pairs or len(node.args) != 1 or not isinstance(node.func, (cst.Name, cst.Attribute)):
            return pairs
        if ConvBiasBeforeBatchnorm._mean_norm(node.func, ctx) is None:
            return []  # checked first: most one-argument calls are not norms
        producer = graph.producer(node)
        return [(producer.func, node.func)] if producer is not None else []

    @staticmethod
    def _mean_norm(module: cst.BaseExpression, ctx: Context) -> str | None:
        """The norm class when every constructor `module` may come from is a mean-subtracting norm."""
        norms = ctx.module_graph.constructor_calls(module)
        if norms is None:
            return None
        classes = [nn_class(norm, ctx, _MEAN_NORMS) for norm in norms]
        return classes[0] if all(classes) else None

    @staticmethod
    def _fix(conv: cst.Call, bias: cst.Arg | None, param: str) -> Fix:
        false = cst.Name("False")
        if bias is None:
            new = add_keyword(conv, param, false)
        else:
            new = conv.with_changes(args=[a.with_changes(value=false) if a is bias else a for a in conv.args])
        return Fix.replace(conv, new, Safety.UNSAFE, f"pass {param}=False")

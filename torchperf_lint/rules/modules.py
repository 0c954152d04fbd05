"""TPL4xx: model construction."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from ..engine.context import Context
from ..engine.edits import add_keyword, insert_after_imports, keyword
from ..engine.findings import Fix, Report, Safety
from .base import Rule

_CONVS = frozenset(f"Conv{n}d" for n in (1, 2, 3)) | frozenset(f"ConvTranspose{n}d" for n in (1, 2, 3))
# Norms that subtract a per-channel mean, which cancels a per-channel bias added before them.
_MEAN_NORMS = frozenset(
    f"{kind}Norm{n}d" for kind in ("Batch", "LazyBatch", "Instance", "LazyInstance") for n in (1, 2, 3)
) | {"SyncBatchNorm"}
_NN_MODULES = (
    "torch.nn",
    "torch.nn.modules",
    "torch.nn.modules.conv",
    "torch.nn.modules.batchnorm",
    "torch.nn.modules.instancenorm",
)
_BIAS_POSITION = 7  # Conv*d(in, out, kernel, stride, padding, dilation, groups, bias)
# Settings that show cuDNN's algorithm choice was thought about (benchmark on or off, determinism).
_CUDNN_DECISIONS = frozenset(
    {
        "torch.backends.cudnn.benchmark",
        "torch.backends.cudnn.deterministic",
    }
)
_CUDNN_DECISION_CALLS = frozenset({"torch.backends.cudnn.flags", "torch.use_deterministic_algorithms"})
_DATA_PARALLEL = frozenset(
    {
        "torch.nn.DataParallel",
        "torch.nn.parallel.DataParallel",
        "torch.nn.parallel.data_parallel.DataParallel",
    }
)


def nn_class(call: cst.Call, ctx: Context, names: frozenset[str]) -> str | None:
    """The `torch.nn` class among `names` that `call` constructs, through any import spelling."""
    qualified = ctx.qualified_name(call)
    if qualified is None:
        return None
    module, _, cls = qualified.rpartition(".")
    return cls if module in _NN_MODULES and cls in names else None


def _bias_argument(call: cst.Call) -> cst.Arg | None:
    found = keyword(call, "bias")
    if found is not None:
        return found
    positional = [arg for arg in call.args if arg.keyword is None and not arg.star]
    return positional[_BIAS_POSITION] if len(positional) > _BIAS_POSITION else None


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
    conv's constructor, where the fix goes.

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
    `norm_layer(...)` parameters); `**kwargs` that could supply `bias`.
    """

    code = "TPL401"
    name = "conv-bias-before-batchnorm"
    summary = "Conv bias followed by a BatchNorm that cancels it"
    message = "nn.{conv} adds a bias that the nn.{norm} after it subtracts again; pass bias=False"
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
    }
    GOOD = {
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
    }

    def check(self, node: cst.Call, ctx: Context) -> Iterator[Report]:
        graph = ctx.module_graph
        for first, second in self._neighbours(node, ctx):
            norm = self._mean_norm(second, ctx)
            if norm is None:
                continue
            for conv in graph.constructor_calls(first) or ():
                conv_class = nn_class(conv, ctx, _CONVS)
                if conv_class is None or any(a.star == "*" for a in conv.args):
                    continue
                if graph.star_kwargs_may_supply(conv, "bias"):
                    continue
                bias = _bias_argument(conv)
                if bias is not None and _literal(bias.value) is not True:
                    continue
                yield self.report(conv, fix=self._fix(conv, bias), conv=conv_class, norm=norm)

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
    def _fix(conv: cst.Call, bias: cst.Arg | None) -> Fix:
        false = cst.Name("False")
        if bias is None:
            new = add_keyword(conv, "bias", false)
        else:
            new = conv.with_changes(args=[a.with_changes(value=false) if a is bias else a for a in conv.args])
        return Fix.replace(conv, new, Safety.UNSAFE, "pass bias=False")


class DataParallel(Rule):
    """## What it does
    Flags `nn.DataParallel(...)` (also spelled `torch.nn.parallel.DataParallel`).

    ## Why it is slow
    DataParallel runs one Python process that drives every GPU: each step it scatters the batch,
    replicates the model to every device, runs the replicas in threads that contend for the GIL and
    gathers the outputs on the first GPU, which also holds the optimizer. The PyTorch documentation
    recommends `DistributedDataParallel` (one process per GPU, gradients all-reduced while backward
    runs) even on a single machine. The benchmark needs several GPUs, so no speedup is recorded here.

    ## Fix safety
    No automatic fix: moving to DistributedDataParallel needs a launcher (`torchrun`), a process
    group and a `DistributedSampler`.

    ## When it stays silent
    `isinstance(model, nn.DataParallel)` checks and classes deriving from it (only construction is
    flagged); classes named DataParallel that do not come from `torch.nn`.
    """

    code = "TPL402"
    name = "data-parallel"
    summary = "nn.DataParallel instead of DistributedDataParallel"
    message = "nn.DataParallel drives every GPU from one process under the GIL; use DistributedDataParallel"
    where = "anywhere"
    node_types = (cst.Call,)
    benchmark = None

    BAD = {
        "wrap-the-model": """
            import torch
            import torch.nn as nn

            model = nn.Linear(1024, 1024)
            if torch.cuda.device_count() > 1:
                model = nn.DataParallel(model)  # expect: TPL402
            """,
        "parallel-module-with-device-ids": """
            import torch
            from torch.nn.parallel import DataParallel

            def build(net):
                return DataParallel(net.cuda(), device_ids=[0, 1])  # expect: TPL402
            """,
        "aliased-torch-in-a-trainer": """
            import torch as th

            class Trainer:
                def __init__(self, model):
                    self.model = th.nn.DataParallel(model).cuda()  # expect: TPL402
            """,
    }
    GOOD = {
        "distributed-data-parallel": """
            import torch
            from torch.nn.parallel import DistributedDataParallel as DDP

            def wrap(model, rank):
                return DDP(model.to(rank), device_ids=[rank])
            """,
        "isinstance-unwrap": """
            import torch.nn as nn

            def unwrap(model):
                if isinstance(model, (nn.DataParallel, nn.parallel.DistributedDataParallel)):
                    return model.module
                return model
            """,
        "subclass-definition": """
            import torch.nn as nn

            class Parallel(nn.DataParallel):
                def __getattr__(self, name):
                    return super().__getattr__(name)
            """,
        "other-library": """
            from mylib.parallel import DataParallel

            model = DataParallel(object())
            """,
    }

    def check(self, node: cst.Call, ctx: Context) -> Iterator[Report]:
        if ctx.qualified_name(node) in _DATA_PARALLEL:
            yield self.report(node)


class CudnnBenchmarkOff(Rule):
    """## What it does
    Flags a training script (a file that calls `.backward()` or runs a step loop) that builds
    convolutions (`nn.Conv*d`, `nn.ConvTranspose*d`) and never sets
    `torch.backends.cudnn.benchmark = True`. One finding per file, on the first conv constructor.
    Off by default.

    ## Why it is slow
    With `benchmark` off, cuDNN picks a convolution algorithm by heuristics; with it on, it times
    the candidates for each new input shape once and keeps the fastest, which pays off when shapes
    stay fixed. For common convolutions such as 3x3 with fixed shapes, recent cuDNN heuristics
    already pick well, so the rule is off by default. The measured effect on an H100 is in the
    Measured section below.

    ## Fix safety
    Unsafe: the fix inserts `torch.backends.cudnn.benchmark = True` after the imports. Autotuning
    makes the first step of each new input shape slow (variable shapes re-tune over and over) and
    may choose non-deterministic algorithms, so results can differ from run to run.

    ## When it stays silent
    Files that assign `torch.backends.cudnn.benchmark` (to anything) or
    `torch.backends.cudnn.deterministic`, or call `torch.use_deterministic_algorithms(...)` or
    `torch.backends.cudnn.flags(...)`: the choice was made; files without a training step or
    without convolutions; files that never use CUDA; test files.
    """

    code = "TPL403"
    name = "cudnn-benchmark-off"
    summary = "Conv training script without cudnn.benchmark"
    message = (
        "cuDNN picks convolution algorithms by heuristics instead of timing them for this training "
        "script; set torch.backends.cudnn.benchmark = True after the imports"
    )
    default_on = False
    fix_safety = Safety.UNSAFE
    where = "file with a training step and convolutions"
    node_types = (cst.Call, cst.Assign)
    benchmark = "TPL403"

    BAD = {
        "convnet-training-script": """
            import torch
            import torch.nn as nn

            model = nn.Sequential(
                nn.Conv2d(3, 64, 3, padding=1),  # expect: TPL403
                nn.ReLU(),
                nn.Conv2d(64, 64, 3, padding=1),
            ).cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

            def train(loader):
                for images, labels in loader:
                    loss = model(images.cuda()).mean()
                    loss.backward()
                    optimizer.step()
            """,
        "module-class-and-step-loop": """
            import torch.nn as nn
            from torch.optim import AdamW

            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.up = nn.ConvTranspose2d(8, 8, 2, stride=2)  # expect: TPL403

                def forward(self, x):
                    return self.up(x)

            def fit(net, train_loader, device="cuda"):
                optimizer = AdamW(net.parameters())
                for x, y in train_loader:
                    optimizer.zero_grad()
                    net(x.to(device)).sum().backward()
                    optimizer.step()
            """,
        "aliased-torch": """
            import torch as th

            net = th.nn.Conv3d(1, 4, 3).cuda()  # expect: TPL403
            for step in range(100):
                net(th.randn(2, 1, 16, 16, 16, device="cuda")).sum().backward()
            """,
    }
    FIXED = {
        "convnet-training-script": """
            import torch
            import torch.nn as nn
            torch.backends.cudnn.benchmark = True

            model = nn.Sequential(
                nn.Conv2d(3, 64, 3, padding=1),
                nn.ReLU(),
                nn.Conv2d(64, 64, 3, padding=1),
            ).cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

            def train(loader):
                for images, labels in loader:
                    loss = model(images.cuda()).mean()
                    loss.backward()
                    optimizer.step()
            """,
        "module-class-and-step-loop": """
            import torch
            import torch.nn as nn
            from torch.optim import AdamW
            torch.backends.cudnn.benchmark = True

            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.up = nn.ConvTranspose2d(8, 8, 2, stride=2)

                def forward(self, x):
                    return self.up(x)

            def fit(net, train_loader, device="cuda"):
                optimizer = AdamW(net.parameters())
                for x, y in train_loader:
                    optimizer.zero_grad()
                    net(x.to(device)).sum().backward()
                    optimizer.step()
            """,
        "aliased-torch": """
            import torch as th
            th.backends.cudnn.benchmark = True

            net = th.nn.Conv3d(1, 4, 3).cuda()
            for step in range(100):
                net(th.randn(2, 1, 16, 16, 16, device="cuda")).sum().backward()
            """,
    }
    GOOD = {
        "benchmark-already-set": """
            import torch
            from torch.backends import cudnn

            cudnn.benchmark = True
            net = torch.nn.Conv2d(3, 8, 3).cuda()
            for x in torch.randn(10, 1, 3, 8, 8, device="cuda"):
                net(x).sum().backward()
            """,
        "deterministic-on-purpose": """
            import torch

            torch.backends.cudnn.benchmark = False
            torch.backends.cudnn.deterministic = True
            net = torch.nn.Conv2d(3, 8, 3).cuda()
            net(torch.randn(1, 3, 8, 8).cuda()).sum().backward()
            """,
        "model-definition-only": """
            import torch.nn as nn

            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.conv = nn.Conv2d(3, 8, 3)

                def forward(self, x):
                    return self.conv(x).cuda()
            """,
        "training-without-convolutions": """
            import torch

            mlp = torch.nn.Linear(8, 8).cuda()
            for x in torch.randn(10, 4, 8, device="cuda"):
                mlp(x).sum().backward()
            """,
        "cpu-only-script": """
            import torch

            net = torch.nn.Conv2d(3, 8, 3)
            for x in torch.randn(10, 1, 3, 8, 8):
                net(x).sum().backward()
            """,
    }

    def check_file(self, ctx: Context) -> Iterator[Report]:
        if ctx.is_test_file or not ctx.shows_cuda_use:
            return
        if not ctx.facts.method_calls.get("backward") and not ctx.hot.step_loops:
            return
        for assign in ctx.nodes(cst.Assign):
            assert isinstance(assign, cst.Assign)
            if any(ctx.qualified_name(t.target) in _CUDNN_DECISIONS for t in assign.targets):
                return
        calls = ctx.nodes(cst.Call)
        for call in calls:
            assert isinstance(call, cst.Call)
            if ctx.qualified_name(call) in _CUDNN_DECISION_CALLS:
                return
        first = next((c for c in calls if isinstance(c, cst.Call) and nn_class(c, ctx, _CONVS)), None)
        if first is None:
            return
        alias, needs_import = ctx.torch_name()
        fix = None
        insertion = insert_after_imports(ctx, f"{alias}.backends.cudnn.benchmark = True")
        if insertion is not None:
            fix = Fix.replace(*insertion, Safety.UNSAFE, "enable cuDNN autotuning", needs_import)
        yield self.report(first, fix=fix)

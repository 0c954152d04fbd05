"""TPL404 convnet-without-channels-last: 2-D convnet trained on CUDA in NCHW layout."""

from __future__ import annotations

from typing import Iterator, Optional

import libcst as cst

from ...analysis.cold import fails_after, off_cuda_sides
from ...analysis.layers import is_library_convnet
from ...analysis.registries import RegistryMember
from ...engine.context import Context
from ...engine.edits import add_keyword, has_star_kwargs, keyword, passed_argument, torch_attribute
from ...engine.findings import Fix, Report, Safety
from ...syntax.walker import dotted_name, visit
from ..base import Rule
from ..transfer.common import device_move, to_accelerator

# The input half of the advice: channels_last is defined for 4-D tensors only.
_INPUT_ADVICE = (
    " and its 4-D input with x.to(device, memory_format=torch.channels_last) "
    "(or x.contiguous(memory_format=torch.channels_last))"
)
# Module methods that hand back the module itself: `model = model.cuda().eval()` is still the model.
_SAME_MODULE = frozenset({"to", "cuda", "train", "eval", "float", "half", "bfloat16", "requires_grad_"})


class ConvnetWithoutChannelsLast(Rule):
    """## What it does
    Flags the move to CUDA (`model.cuda()`, `model.to(device)`) of a model whose layers are mostly
    2-D convolutions (a project class whose `__init__` and helpers build them, through its blocks,
    bases and factory functions, or a torchvision convnet such as `torchvision.models.resnet50()`),
    in a training or evaluation script with a step loop (or in the model loader such a script calls
    for the model it steps), when nothing connected to it by imports mentions `channels_last`.

    ## Why it is slow
    cuDNN's fastest convolution kernels on tensor cores (fp16, bf16, TF32) work in NHWC layout.
    A model and input left in PyTorch's default NCHW layout make every convolution transpose its
    input and output around the kernel, or fall back to slower NCHW kernels; BatchNorm and
    activations pay extra passes too. Converting the model once
    (`model.to(memory_format=torch.channels_last)`) and each batch
    (`x.to(device, memory_format=torch.channels_last)`) removes that work. The measured effect on
    an H100 is in the Measured section below.

    ## Fix safety
    Unsafe: the layout changes the strides of every activation, so custom code that calls `.view`
    on a convolution's output may need `.contiguous()` or `.reshape` first. Offered only where the
    model move and the move of the batch that the model is called on are in one function; the
    input must be a 4-D tensor. A model that also has 1-D or 3-D convolutions, or folds a signal
    into 2-D, may take a 3-D or 5-D input, on which `memory_format=torch.channels_last` raises:
    the message and the fix then convert the model alone. No fix where the oldest torch the
    project supports predates channels_last (1.5).

    ## When it stays silent
    1-D and 3-D convnets (for 3-D, `channels_last_3d` is the analogue); models where convolutions
    are a small part (transformers, MLPs, a ViT's patch embedding); ConvNeXt-style designs
    (depthwise convolutions with LayerNorm), measured to gain about 2%; projects that already name
    `channels_last` (a `memory_format=`, a `--channels-last` flag) in the script or a module it
    imports or is imported by; CPU-only code; scripts without a step loop; models whose
    construction cannot be read (a parameter, `models.__dict__[name]()` with a name that is neither a
    literal nor an option with a default); test files; a runtime older than channels_last (a pin or
    upper bound at or below torch 1.5); convolutions with `(k, 1)`/`(1, k)` kernels over a 1-D signal
    folded into 2-D (a period discriminator that reshapes a waveform by its period), which count as
    1-D convolutions. A model built from a registry by an option (`models.__dict__[args.arch]()`) is
    judged by the option's default, which the message names; its moves in a branch that default never
    takes (`if args.arch.startswith("vgg"):`) stay silent. So is a project class handed such a lookup
    uncalled, whose `__init__` calls it to build the model's convolutional part
    (`SimSiam(models.__dict__[args.arch], dim)`); handed anything else, it stays silent.
    `SyncBatchNorm.convert_sync_batchnorm(model)` and the data-parallel wrappers hand back the
    convolutions of the model they are given. A model kept on `self` (`self.model, self.optimizer =
    model, optimizer`) counts as run where any method of its class runs it in a loop. A move in a
    block that ends by raising stays silent: that path never trains.
    """

    code = "TPL404"
    name = "convnet-without-channels-last"
    summary = "2-D convnet trained on CUDA in NCHW layout"
    message = (
        "{model}{assumed} is a 2-D convnet run in the default NCHW layout, which tensor-core convolutions "
        "must transpose; convert it with {model}.to(memory_format=torch.channels_last){input}"
    )
    fix_safety = Safety.UNSAFE
    where = "project"
    node_types = (cst.Call,)
    benchmark = "TPL404"

    BAD = {
        "reported-once-where-the-model-is-stepped": """
            import torch
            import torchvision

            def train(loader, device="cuda"):
                model = torchvision.models.resnet18()
                optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
                model.to(device)  # expect: TPL404
                for step, (x, y) in enumerate(loader):
                    x = x.to(device)
                    torch.nn.functional.cross_entropy(model(x), y.to(device)).backward()
                    optimizer.step()
                    if step % 2000 == 0:
                        torch.save(model.cpu().state_dict(), "ckpt.pth")
                        model.to(device)

            def stylize(image, device="cuda"):
                model = torchvision.models.resnet18()
                model.load_state_dict(torch.load("ckpt.pth"))
                model.to(device)
                with torch.no_grad():
                    return model(image.to(device))
            """,
        "resnet-like-class": """
            import torch
            import torch.nn as nn

            class Block(nn.Module):
                def __init__(self, c):
                    super().__init__()
                    self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
                    self.bn1 = nn.BatchNorm2d(c)
                    self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
                    self.bn2 = nn.BatchNorm2d(c)

                def forward(self, x):
                    return torch.relu(x + self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x))))))

            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.stem = nn.Conv2d(3, 64, 7, stride=2, padding=3)
                    self.blocks = nn.Sequential(*[Block(64) for _ in range(4)])
                    self.head = nn.Linear(64, 10)

                def forward(self, x):
                    return self.head(self.blocks(self.stem(x)).mean((2, 3)))

            def train(loader, device="cuda"):
                model = Net().to(device)  # expect: TPL404
                optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
                for images, labels in loader:
                    images = images.to(device, non_blocking=True)
                    loss = nn.functional.cross_entropy(model(images), labels.to(device))
                    loss.backward()
                    optimizer.step()
            """,
        "torchvision-resnet": """
            import torch
            import torchvision

            model = torchvision.models.resnet50(weights=None)
            model = model.cuda()  # expect: TPL404
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for x, y in train_loader:
                loss = torch.nn.functional.cross_entropy(model(x.cuda()), y.cuda())
                loss.backward()
                optimizer.step()
            """,
        "factory-and-block-passed-as-class": """
            import torch
            from torch import nn

            def conv3x3(cin, cout):
                return nn.Conv2d(cin, cout, 3, padding=1, bias=False)

            class BasicBlock(nn.Module):
                def __init__(self, c):
                    super().__init__()
                    self.a, self.b = conv3x3(c, c), conv3x3(c, c)

                def forward(self, x):
                    return x + self.b(self.a(x).relu())

            class ResNet(nn.Module):
                def __init__(self, block, n):
                    super().__init__()
                    self.stem = conv3x3(3, 32)
                    self.layers = nn.Sequential(*[block(32) for _ in range(n)])
                    self.fc = nn.Linear(32, 10)

                def forward(self, x):
                    return self.fc(self.layers(self.stem(x)).mean((2, 3)))

            def resnet18():
                return ResNet(BasicBlock, 8)

            net = resnet18().cuda()  # expect: TPL404
            opt = torch.optim.AdamW(net.parameters())
            for step, (x, y) in enumerate(loader):
                nn.functional.cross_entropy(net(x.cuda()), y.cuda()).backward()
                opt.step()
            """,
        # pytorch/examples' imagenet/main.py: the model is named by --arch, resnet18 unless told otherwise
        "registry-member-by-option-default": """
            import argparse

            import torch
            import torchvision.models as models

            parser = argparse.ArgumentParser()
            parser.add_argument("-a", "--arch", default="resnet18")

            def train(loader, model, optimizer):
                for images, target in loader:
                    loss = torch.nn.functional.cross_entropy(model(images.cuda()), target.cuda())
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()

            def main():
                args = parser.parse_args()
                model = models.__dict__[args.arch]()
                if torch.cuda.is_available():
                    model = torch.nn.DataParallel(model).cuda()  # expect: TPL404
                optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
                for epoch in range(90):
                    train(loader, model, optimizer)
            """,
        # facebookresearch/simsiam: the class calls the registry member it is handed to build its encoder
        "registry-member-handed-to-a-wrapper": """
            import argparse

            import torch
            import torch.nn as nn
            import torchvision.models as models

            parser = argparse.ArgumentParser()
            parser.add_argument("-a", "--arch", default="resnet50")

            class SimSiam(nn.Module):
                def __init__(self, base_encoder, dim=2048):
                    super().__init__()
                    self.encoder = base_encoder(num_classes=dim, zero_init_residual=True)
                    self.predictor = nn.Sequential(nn.Linear(dim, 512), nn.ReLU(), nn.Linear(512, dim))

                def forward(self, x1, x2):
                    return self.predictor(self.encoder(x1)), self.encoder(x2).detach()

            def main(loader):
                args = parser.parse_args()
                model = SimSiam(models.__dict__[args.arch], 2048)
                model = torch.nn.SyncBatchNorm.convert_sync_batchnorm(model)
                model.cuda()  # expect: TPL404
                optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
                for x1, x2 in loader:
                    p, z = model(x1.cuda(non_blocking=True), x2.cuda(non_blocking=True))
                    loss = -nn.functional.cosine_similarity(p, z).mean()
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
            """,
        # jfzhang95/pytorch-deeplab-xception: a trainer's __init__ keeps and moves the model, a method steps it
        "trainer-class-moves-the-model-it-keeps": """
            import torch
            import torchvision

            class Trainer:
                def __init__(self, loader):
                    model = torchvision.models.resnet50()
                    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
                    self.model, self.optimizer, self.loader = model, optimizer, loader
                    self.model = torch.nn.DataParallel(self.model)
                    self.model = self.model.cuda()  # expect: TPL404

                def training(self):
                    self.model.train()
                    for image, target in self.loader:
                        loss = torch.nn.functional.cross_entropy(self.model(image.cuda()), target.cuda())
                        self.optimizer.zero_grad()
                        loss.backward()
                        self.optimizer.step()
            """,
    }
    FIXED = {
        "resnet-like-class": """
            import torch
            import torch.nn as nn

            class Block(nn.Module):
                def __init__(self, c):
                    super().__init__()
                    self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
                    self.bn1 = nn.BatchNorm2d(c)
                    self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
                    self.bn2 = nn.BatchNorm2d(c)

                def forward(self, x):
                    return torch.relu(x + self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x))))))

            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.stem = nn.Conv2d(3, 64, 7, stride=2, padding=3)
                    self.blocks = nn.Sequential(*[Block(64) for _ in range(4)])
                    self.head = nn.Linear(64, 10)

                def forward(self, x):
                    return self.head(self.blocks(self.stem(x)).mean((2, 3)))

            def train(loader, device="cuda"):
                model = Net().to(device, memory_format=torch.channels_last)
                optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
                for images, labels in loader:
                    images = images.to(device, non_blocking=True, memory_format=torch.channels_last)
                    loss = nn.functional.cross_entropy(model(images), labels.to(device))
                    loss.backward()
                    optimizer.step()
            """,
        "torchvision-resnet": """
            import torch
            import torchvision

            model = torchvision.models.resnet50(weights=None)
            model = model.cuda().to(memory_format=torch.channels_last)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for x, y in train_loader:
                loss = torch.nn.functional.cross_entropy(model(x.cuda().to(memory_format=torch.channels_last)), y.cuda())
                loss.backward()
                optimizer.step()
            """,
        "factory-and-block-passed-as-class": """
            import torch
            from torch import nn

            def conv3x3(cin, cout):
                return nn.Conv2d(cin, cout, 3, padding=1, bias=False)

            class BasicBlock(nn.Module):
                def __init__(self, c):
                    super().__init__()
                    self.a, self.b = conv3x3(c, c), conv3x3(c, c)

                def forward(self, x):
                    return x + self.b(self.a(x).relu())

            class ResNet(nn.Module):
                def __init__(self, block, n):
                    super().__init__()
                    self.stem = conv3x3(3, 32)
                    self.layers = nn.Sequential(*[block(32) for _ in range(n)])
                    self.fc = nn.Linear(32, 10)

                def forward(self, x):
                    return self.fc(self.layers(self.stem(x)).mean((2, 3)))

            def resnet18():
                return ResNet(BasicBlock, 8)

            net = resnet18().cuda().to(memory_format=torch.channels_last)
            opt = torch.optim.AdamW(net.parameters())
            for step, (x, y) in enumerate(loader):
                nn.functional.cross_entropy(net(x.cuda().to(memory_format=torch.channels_last)), y.cuda()).backward()
                opt.step()
            """,
    }
    GOOD = {
        "instance-normed-style-transfer-net": """
            import torch
            import torch.nn as nn

            class ConvLayer(nn.Module):
                def __init__(self, cin, cout):
                    super().__init__()
                    self.pad = nn.ReflectionPad2d(1)
                    self.conv = nn.Conv2d(cin, cout, 3)
                    self.norm = nn.InstanceNorm2d(cout, affine=True)

                def forward(self, x):
                    return torch.relu(self.norm(self.conv(self.pad(x))))

            class TransformerNet(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.layers = nn.Sequential(ConvLayer(3, 32), ConvLayer(32, 64), ConvLayer(64, 3))

                def forward(self, x):
                    return self.layers(x)

            def train(loader, device="cuda"):
                net = TransformerNet().to(device)
                optimizer = torch.optim.Adam(net.parameters())
                for x in loader:
                    loss = net(x.to(device)).pow(2).mean()
                    loss.backward()
                    optimizer.step()
            """,
        "3d-convnet": """
            import torch
            import torch.nn as nn

            class Video(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.c1 = nn.Conv3d(3, 32, 3)
                    self.c2 = nn.Conv3d(32, 32, 3)
                    self.c3 = nn.Conv3d(32, 32, 3)

                def forward(self, x):
                    return self.c3(self.c2(self.c1(x)))

            model = Video().cuda()
            for clip in loader:
                model(clip.cuda()).mean().backward()
            """,
        "convnext-style-block": """
            import torch
            import torch.nn as nn

            class Block(nn.Module):
                def __init__(self, dim):
                    super().__init__()
                    self.dwconv = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
                    self.norm = nn.LayerNorm(dim)
                    self.pwconv1 = nn.Linear(dim, 4 * dim)
                    self.pwconv2 = nn.Linear(4 * dim, dim)

                def forward(self, x):
                    y = self.norm(self.dwconv(x).permute(0, 2, 3, 1))
                    return x + self.pwconv2(self.pwconv1(y).relu()).permute(0, 3, 1, 2)

            class ConvNeXt(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.stem = nn.Conv2d(3, 96, 4, stride=4)
                    self.down = nn.Conv2d(96, 96, 2, stride=2)
                    self.blocks = nn.Sequential(*[Block(96) for _ in range(3)])

                def forward(self, x):
                    return self.blocks(self.down(self.stem(x)))

            model = ConvNeXt().cuda()
            for x, y in loader:
                model(x.cuda()).mean().backward()
            """,
        "already-channels-last": """
            import torch
            import torchvision

            model = torchvision.models.resnet18().cuda()
            model = model.to(memory_format=torch.channels_last)
            for x, y in loader:
                model(x.cuda().contiguous(memory_format=torch.channels_last)).sum().backward()
            """,
        "cpu-only-script": """
            import torch
            import torchvision

            model = torchvision.models.resnet18().to("cpu")
            for x, y in loader:
                model(x).sum().backward()
            """,
        "mlp": """
            import torch
            import torch.nn as nn

            model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 10)).cuda()
            for x, y in loader:
                model(x.cuda()).sum().backward()
            """,
        "vit-with-conv-patch-embedding": """
            import torch
            import torch.nn as nn

            class ViT(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.patch = nn.Conv2d(3, 384, 16, stride=16)
                    layer = nn.TransformerEncoderLayer(384, 6, batch_first=True)
                    self.encoder = nn.TransformerEncoder(layer, 12)
                    self.head = nn.Linear(384, 1000)

                def forward(self, x):
                    return self.head(self.encoder(self.patch(x).flatten(2).transpose(1, 2)).mean(1))

            model = ViT().cuda()
            for x, y in loader:
                model(x.cuda()).sum().backward()
            """,
        "construction-unreadable": """
            import torch
            import torchvision.models as models

            model = models.__dict__[arch]().cuda()
            for x, y in loader:
                model(x.cuda()).sum().backward()
            """,
        # a registry member named by an option whose default is a ViT, and the move of the MPS path
        "registry-member-vit-default-and-mps-branch": """
            import argparse

            import torch
            import torchvision.models as models

            parser = argparse.ArgumentParser()
            parser.add_argument("--arch", default="vit_b_16")
            parser.add_argument("--cnn", default="resnet50")

            def main(loader, device):
                args = parser.parse_args()
                model = models.__dict__[args.arch]().cuda()
                cnn = getattr(models, args.cnn)()
                if device.type == "cuda":
                    print("training on", torch.cuda.get_device_name())
                else:
                    cnn = cnn.to(device)
                for x, y in loader:
                    (model(x.cuda()).sum() + cnn(x.cuda()).sum()).backward()
            """,
        # the same wrapper handed a registry member whose default is a ViT, or a class of its own
        "wrapper-handed-a-vit-or-a-norm": """
            import argparse

            import torch
            import torch.nn as nn
            import torchvision.models as models

            parser = argparse.ArgumentParser()
            parser.add_argument("-a", "--arch", default="vit_b_16")

            class Encoder(nn.Module):
                def __init__(self, base_encoder, dim=2048):
                    super().__init__()
                    self.encoder = base_encoder(num_classes=dim)
                    self.head = nn.Linear(dim, dim)

                def forward(self, x):
                    return self.head(self.encoder(x))

            def main(loader):
                args = parser.parse_args()
                model = Encoder(models.__dict__[args.arch]).cuda()
                other = Encoder(nn.Identity).cuda()
                for x in loader:
                    (model(x.cuda()).sum() + other(x.cuda()).sum()).backward()
            """,
        # facebookresearch/simsiam: the single-GPU path moves the model, then refuses to run
        "move-on-the-way-to-an-error": """
            import torch
            import torchvision

            def main(args, loader):
                model = torchvision.models.resnet50()
                if args.gpu is not None:
                    model = model.cuda(args.gpu)
                    raise NotImplementedError("Only DistributedDataParallel is supported.")
                for x, y in loader:
                    model(x).sum().backward()
            """,
        "dtype-cast-is-no-device-move": """
            import torch
            import torchvision

            model = torchvision.models.resnet18().to(torch.float16)
            for x, y in loader:
                model(x.cuda().half()).sum().backward()
            """,
    }

    def check(self, node: cst.Call, ctx: Context) -> Iterator[Report]:
        func = node.func
        if not isinstance(func, cst.Attribute) or func.attr.value not in ("to", "cuda"):
            return
        if ctx.is_test_file or ctx.entry.channels_last_near:
            return
        if not ctx.hot.step_loops and not _builds_a_model_stepped_elsewhere(node, ctx):
            return
        if keyword(node, "memory_format") is not None or has_star_kwargs(node):
            return
        if func.attr.value == "to" and (device_move(node, ctx) is None or not to_accelerator(node, ctx)):
            return
        if not (ctx.shows_cuda_use or ctx.entry.runs_on_cuda) or _in_off_cuda_branch(node, ctx):
            return
        constructors = self._constructors(func.value, ctx)
        if not constructors or not all(_builds_a_convnet(c, ctx) for c in constructors):
            return
        if not ctx.api("channels_last").usable:
            return
        assumed = _assumed(constructors, ctx)
        if assumed and _in_branch_the_defaults_skip(node, ctx):
            return  # `if args.arch.startswith("vgg"):` moves another member than the one assumed
        model = self._model_name(node, ctx)
        if model is not None and not _first_move_of_a_model_it_runs(node, model, ctx):
            return
        image_batch = not any(
            dotted_name(c.func) in ctx.entry.signal_convnet_constructors for c in constructors
        )
        yield self.report(
            node,
            fix=self._fix(node, model, image_batch, ctx),
            model=model or "the model",
            assumed=assumed,
            input=_INPUT_ADVICE if image_batch else "",
        )

    # -- which model ------------------------------------------------------------------
    def _constructors(self, expr: cst.BaseExpression, ctx: Context) -> Optional[list[cst.Call]]:
        """The calls that built the module `expr` is: a constructor chained with `.cuda()`, or every
        value its name is assigned (`model = model.cuda()` keeps the model it had)."""
        if isinstance(expr, cst.Call):
            expr = _unchain(expr)
            wrapped = _wrapped_model(expr, ctx) if isinstance(expr, cst.Call) else None
            if wrapped is not None:
                return self._constructors(wrapped, ctx)  # `DataParallel(model).cuda()` moves `model`
            return [expr] if isinstance(expr, cst.Call) and not _is_chain(expr) else None
        if isinstance(expr, cst.Attribute):
            # every value `self.model` is given in its class
            values: Optional[list[cst.Call]] = ctx.module_graph.constructor_calls(expr)
        elif isinstance(expr, cst.Name):
            bindings = ctx.bindings(expr.value, expr)
            if any(b.kind != "assign" or not isinstance(b.node, cst.Call) for b in bindings):
                return None
            values = [b.node for b in bindings]  # type: ignore[misc]  # checked: calls
        else:
            return None
        calls: list[cst.Call] = []
        for call in values or ():
            value = _unchain(call)
            if isinstance(value, cst.Call):
                value = _wrapped_model(value, ctx) or value
            if dotted_name(value) == dotted_name(expr):
                continue  # model = model.cuda(), self.model = DataParallel(self.model)
            if not isinstance(value, cst.Call) or _is_chain(value):
                return None
            calls.append(value)
        return calls or None

    @staticmethod
    def _model_name(move: cst.Call, ctx: Context) -> Optional[str]:
        """How the code names the model: the receiver, or the name the moved model is bound to."""
        receiver = move.func.value  # type: ignore[attr-defined]  # checked: an attribute call
        name = dotted_name(receiver)
        if name is not None:
            return name
        statement = ctx.parent(move)
        if isinstance(statement, cst.Assign) and len(statement.targets) == 1:
            return dotted_name(statement.targets[0].target)
        return None

    # -- the fix ------------------------------------------------------------------------
    def _fix(self, move: cst.Call, model: Optional[str], image_batch: bool, ctx: Context) -> Optional[Fix]:
        if model is None or not ctx.api("channels_last").writable:
            return None
        layout, needs_import = torch_attribute(ctx, "channels_last")
        if not image_batch:  # channels_last raises on a 3-D or 5-D input: the model alone
            return Fix(
                ((move, _with_layout(move, layout)),),
                Safety.UNSAFE,
                "move the model in channels_last layout",
                needs_import,
            )
        batch = self._batch_move(move, model, ctx)
        if batch is None:
            return None
        return Fix(
            ((move, _with_layout(move, layout)), (batch, _with_layout(batch, layout))),
            Safety.UNSAFE,
            "move the model and its input in channels_last layout",
            needs_import,
        )

    @staticmethod
    def _batch_move(move: cst.Call, model: str, ctx: Context) -> Optional[cst.Call]:
        """The one move of DataLoader data that the model is called on, in the model move's
        function: `model(x.cuda())`, or `model(x)` after `x = x.to(device)`."""
        function = ctx.enclosing_function(move)
        found: list[cst.Call] = []
        for call in ctx.facts.calls:
            if dotted_name(call.func) != model or ctx.enclosing_function(call) is not function:
                continue
            positional = [a.value for a in call.args if a.keyword is None and not a.star]
            if not positional:
                continue
            first = positional[0]
            candidates: list[cst.BaseExpression] = [first]
            if isinstance(first, cst.Name):
                candidates = [b.node for b in ctx.bindings(first.value, call) if b.kind == "assign"]  # type: ignore[misc]
            for value in candidates:
                if _is_batch_move(value, ctx) and all(value is not f for f in found):
                    assert isinstance(value, cst.Call)
                    found.append(value)
        return found[0] if len(found) == 1 else None


class _Mentions(cst.CSTVisitor):
    """Where a scope names the model, in source order: whether inside a loop, and its moves."""

    def __init__(self, model: str, move: cst.Call) -> None:
        self.model = model
        self.move = move  # the reported move, whatever its receiver (`model = Net().to(d)`)
        self.loops = 0
        self.in_loop = False
        self.moves: list[cst.Call] = []
        self.in_loop_moves: list[cst.Call] = []  # moves inside a loop: re-moves once one came before
        self.returned = False  # `return model` / `return model, x`: handed to the caller

    def _enter_loop(self, _node: cst.CSTNode) -> None:
        self.loops += 1

    def _leave_loop(self, _node: cst.CSTNode) -> None:
        self.loops -= 1

    visit_For = visit_While = _enter_loop  # type: ignore[assignment]
    leave_For = leave_While = _leave_loop  # type: ignore[assignment]

    def _add(self, move: cst.Call) -> None:
        if not any(m is move for m in self.moves):
            self.moves.append(move)
            if self.loops:
                self.in_loop_moves.append(move)

    def visit_Assign(self, node: cst.Assign) -> None:
        # `model = Net().to(device)`: a move of the model the name is bound to
        value = node.value
        if len(node.targets) == 1 and dotted_name(node.targets[0].target) == self.model:
            if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute):
                if value.func.attr.value in ("to", "cuda"):
                    self._add(value)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if node is self.move:
            self._add(node)
        elif isinstance(func, cst.Attribute) and func.attr.value in ("to", "cuda"):
            if dotted_name(func.value) == self.model:
                self._add(node)

    def visit_Return(self, node: cst.Return) -> None:
        value = node.value
        values = [e.value for e in value.elements] if isinstance(value, cst.Tuple) else [value]
        if any(v is not None and dotted_name(v) == self.model for v in values):
            self.returned = True

    def _mention(self, node: cst.BaseExpression) -> None:
        if self.loops and dotted_name(node) == self.model:
            self.in_loop = True

    def visit_Name(self, node: cst.Name) -> None:
        self._mention(node)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._mention(node)


def _first_move_of_a_model_it_runs(move: cst.Call, model: str, ctx: Context) -> bool:
    """The move is not a move back inside a loop after an earlier one, and a loop there runs the model
    or hands it on (`for x in loader: model(x)`, `for epoch ...: train(model, ...)`), or the function
    returns it to its caller (a `build_model()`): a re-move after saving a checkpoint is the same
    model, and a model moved to stylize one image is never stepped. A model kept on `self` runs
    wherever a method of its class runs it (a trainer's `__init__` moves it, `training()` loops)."""
    scope: cst.CSTNode = ctx.facts.enclosing_function(move) or ctx.facts.module
    if model.startswith("self."):
        scope = next((a for a in ctx.ancestors(move) if isinstance(a, cst.ClassDef)), scope)
    mentions = _Mentions(model, move)
    visit(scope, mentions)
    runs = mentions.in_loop or mentions.returned
    moved_again = mentions.moves[:1] != [move] and any(m is move for m in mentions.in_loop_moves)
    return runs and not moved_again and not fails_after(ctx.ancestors(move))


def _builds_a_model_stepped_elsewhere(move: cst.Call, ctx: Context) -> bool:
    """The move is in a model builder that a training script of the project calls for the model
    it steps (`def load_model(path): model = Darknet(path).to(device); ...; return model`)."""
    index = ctx.enclosing_function_index(move)
    return index is not None and index in ctx.entry.stepped_model_builders


def _in_off_cuda_branch(move: cst.Call, ctx: Context) -> bool:
    """The move sits in a branch a CUDA run does not take: the else of `if device.type == "cuda":`
    (the MPS or CPU path of a script that supports several)."""
    child: cst.CSTNode = move
    for ancestor in ctx.ancestors(move):
        if isinstance(ancestor, cst.If):
            body, orelse = off_cuda_sides(ancestor.test)
            if (body and child is ancestor.body) or (orelse and child is ancestor.orelse):
                return True
        if isinstance(ancestor, cst.FunctionDef):
            return False
        child = ancestor
    return False


def _in_branch_the_defaults_skip(move: cst.Call, ctx: Context) -> bool:
    """The move sits in a branch that the command-line defaults never take."""
    child: cst.CSTNode = move
    for ancestor in ctx.ancestors(move):
        if isinstance(ancestor, cst.If):
            taken = ctx.under_option_defaults(ancestor.test)
            if (taken is False and child is ancestor.body) or (taken is True and child is ancestor.orelse):
                return True
        if isinstance(ancestor, cst.FunctionDef):
            return False
        child = ancestor
    return False


# Calls that hand back the model they are given, wrapped or with some layers swapped: moving or
# running the result moves or runs those convolutions.
_SAME_CONVOLUTIONS = frozenset(
    {
        "torch.nn.DataParallel",
        "torch.nn.parallel.DataParallel",
        "torch.nn.parallel.DistributedDataParallel",
        "torch.nn.SyncBatchNorm.convert_sync_batchnorm",
        "torch.nn.modules.batchnorm.SyncBatchNorm.convert_sync_batchnorm",
    }
)


def _wrapped_model(call: cst.Call, ctx: Context) -> Optional[cst.BaseExpression]:
    """`model` of `DataParallel(model)`, `SyncBatchNorm.convert_sync_batchnorm(model)`: the result
    moves and runs the convolutions of the model it is handed."""
    if ctx.qualified_name(call) in _SAME_CONVOLUTIONS and call.args and call.args[0].keyword is None:
        return call.args[0].value
    return None


def _builds_a_convnet(constructor: cst.Call, ctx: Context) -> bool:
    """A project or library convnet constructor, or a registry lookup whose member is a library
    convnet or a project one (`resnet.__dict__[args.arch]()` over the project's resnet.py), called
    or handed to a project class that is a convnet around it."""
    if dotted_name(constructor.func) in ctx.entry.convnet_constructors:
        return True
    member = _registry_member(constructor, ctx)
    return member is not None and (
        is_library_convnet(member.qualified) or member.written in ctx.entry.registry_convnets
    )


def _registry_member(constructor: cst.Call, ctx: Context) -> Optional[RegistryMember]:
    """The registry member a constructor builds: it calls the lookup (`models.__dict__[arch]()`),
    or hands it to a project class whose `__init__` calls it to build its convolutional part
    (`SimSiam(models.__dict__[args.arch], dim)`: EntryFacts.encoder_wrappers)."""
    member = ctx.registry_member(constructor)
    if member is not None:
        return member
    written = dotted_name(constructor.func)
    for callee, param, position in ctx.entry.encoder_wrappers:
        if callee == written:
            handed = passed_argument(constructor, param, position)
            return ctx.registry_lookup(handed.value) if handed is not None else None
    return None


def _assumed(constructors: list[cst.Call], ctx: Context) -> str:
    """` (resnet18 assumed: the default of --arch)` when a registry lookup's member came from a default."""
    for constructor in constructors:
        member = _registry_member(constructor, ctx)
        if member is not None and member.option is not None:
            return f" ({member.qualified.rsplit('.', 1)[-1]} assumed: the default of {member.option})"
    return ""


def _is_chain(call: cst.Call) -> bool:
    return isinstance(call.func, cst.Attribute) and call.func.attr.value in _SAME_MODULE


def _unchain(call: cst.Call) -> cst.BaseExpression:
    """`Net()` for `Net().cuda().eval()`; `model` for `model.cuda()`."""
    current: cst.BaseExpression = call
    while isinstance(current, cst.Call) and _is_chain(current):
        current = current.func.value  # type: ignore[attr-defined]  # _is_chain: an attribute
    return current


def _is_batch_move(value: cst.CSTNode, ctx: Context) -> bool:
    return (
        isinstance(value, cst.Call)
        and isinstance(value.func, cst.Attribute)
        and value.func.attr.value in ("to", "cuda")
        and keyword(value, "memory_format") is None
        and not any(a.star for a in value.args)
        and ctx.batch_loop(value.func.value) is not None
    )


def _with_layout(move: cst.Call, layout: cst.BaseExpression) -> cst.Call:
    """`x.to(d)` -> `x.to(d, memory_format=L)`; `x.cuda()` -> `x.cuda().to(memory_format=L)`."""
    if move.func.attr.value == "to":  # type: ignore[attr-defined]  # a move: an attribute call
        return add_keyword(move, "memory_format", layout)
    return add_keyword(cst.Call(func=cst.Attribute(value=move, attr=cst.Name("to"))), "memory_format", layout)

"""TPL404 convnet-without-channels-last (off by default): 2-D convnets trained in NCHW vs channels_last."""

from __future__ import annotations

import contextlib

import torch

from ..harness import Case, Tolerance
from . import common

MODELS = '''
import torch
from torch import nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class Bottleneck(nn.Module):
    def __init__(self, cin, width, stride):
        super().__init__()
        cout = width * 4
        self.body = nn.Sequential(
            nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(inplace=True),
            nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(inplace=True),
            nn.Conv2d(width, cout, 1, bias=False), nn.BatchNorm2d(cout),
        )
        self.skip = (
            nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
            if stride != 1 or cin != cout else nn.Identity()
        )

    def forward(self, x):
        return torch.relu(self.body(x) + self.skip(x))


class Basic(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
            nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout),
        )
        self.skip = (
            nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
            if stride != 1 or cin != cout else nn.Identity()
        )

    def forward(self, x):
        return torch.relu(self.body(x) + self.skip(x))


class ResNet(nn.Sequential):
    """torchvision's ResNet-18 (Basic, [2, 2, 2, 2]) or ResNet-50 (Bottleneck, [3, 4, 6, 3]) layout."""

    def __init__(self, depths, bottleneck, classes=1000):
        layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1)]
        cin = 64
        for stage, count in enumerate(depths):
            width = 64 * 2**stage
            for i in range(count):
                stride = 2 if stage > 0 and i == 0 else 1
                if bottleneck:
                    layers.append(Bottleneck(cin, width, stride))
                    cin = width * 4
                else:
                    layers.append(Basic(cin, width, stride))
                    cin = width
        super().__init__(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, classes))


class LayerNorm2d(nn.LayerNorm):
    def forward(self, x):
        return super().forward(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


class ConvNeXtBlock(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dwconv = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim)
        self.pwconv1 = nn.Linear(dim, 4 * dim)
        self.pwconv2 = nn.Linear(4 * dim, dim)

    def forward(self, x):
        y = self.norm(self.dwconv(x).permute(0, 2, 3, 1))
        return x + self.pwconv2(nn.functional.gelu(self.pwconv1(y))).permute(0, 3, 1, 2)


class ConvNeXt(nn.Sequential):
    """ConvNeXt-T: depthwise 7x7 convolutions, LayerNorm and pointwise Linear layers."""

    def __init__(self, classes=1000):
        dims, depths = (96, 192, 384, 768), (3, 3, 9, 3)
        layers = [nn.Conv2d(3, dims[0], 4, 4), LayerNorm2d(dims[0])]
        for stage, (dim, depth) in enumerate(zip(dims, depths)):
            if stage:
                layers += [LayerNorm2d(dims[stage - 1]), nn.Conv2d(dims[stage - 1], dim, 2, 2)]
            layers += [ConvNeXtBlock(dim) for _ in range(depth)]
        super().__init__(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.LayerNorm(dims[-1]), nn.Linear(dims[-1], classes))


def train(model, loader, optimizer):
    for x, y in loader:
        optimizer.zero_grad(set_to_none=True)
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
    return loss.detach()
'''

BAD = (
    MODELS
    + """

def place(kind, x, device):
    if kind == "convnext":
        return ConvNeXt().to(device), x.to(device)
    depths = [3, 4, 6, 3] if kind == "resnet50" else [2, 2, 2, 2]
    model = ResNet(depths, bottleneck=kind == "resnet50").to(device)
    return model, x.to(device)
"""
)

GOOD = (
    MODELS
    + """

def place(kind, x, device):
    layout = torch.channels_last
    if kind == "convnext":
        return ConvNeXt().to(device, memory_format=layout), x.to(device, memory_format=layout)
    depths = [3, 4, 6, 3] if kind == "resnet50" else [2, 2, 2, 2]
    model = ResNet(depths, bottleneck=kind == "resnet50").to(device, memory_format=layout)
    return model, x.to(device, memory_format=layout)
"""
)


def make_step(module, size, device):
    torch.manual_seed(0)
    x = torch.randn(size["batch"], 3, size["hw"], size["hw"])
    model, x = module.place(size["model"], x, device)
    common.init_by_name(model)  # the same weights in both variants; copy_ keeps each parameter's layout
    y = torch.randint(0, 1000, (size["batch"],), generator=torch.Generator().manual_seed(1)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    precision = (
        torch.autocast(device.type, dtype=torch.bfloat16)
        if size["dtype"] == "bf16"
        else contextlib.nullcontext()
    )

    def step():
        with precision:
            loss = module.train(model, [(x, y)], optimizer)
        return loss, common.state_summary(model)

    return step


_BF16 = Tolerance(5e-2, 1e-2, "loss and first/last weights after a step; bf16 convolutions round by layout")
_FP32 = Tolerance(
    1e-2, 1e-3, "loss and first/last weights after a step; cuDNN's TF32 kernels differ by layout"
)


def _size(model, batch, dtype, regime):
    label = f"{model} b={batch} {'bf16 autocast' if dtype == 'bf16' else 'fp32 (TF32 convolutions)'}"
    return {
        "label": label,
        "regime": regime,
        "model": model,
        "batch": batch,
        "hw": 224,
        "dtype": dtype,
        "tolerance": _BF16 if dtype == "bf16" else _FP32,
    }


CASES = [
    Case(
        name="tpl404_channels_last",
        code="TPL404",
        title="ImageNet-sized training step (SGD): model and input in NCHW vs channels_last",
        bad=BAD,
        good=GOOD,
        make=make_step,
        sizes=[
            _size("resnet50", 128, "bf16", "ResNet-50, b=128, 224x224, bf16 autocast"),
            _size("resnet18", 256, "bf16", "ResNet-18, b=256, 224x224, bf16 autocast"),
            _size("resnet50", 128, "fp32", "ResNet-50, b=128, 224x224, fp32 with cuDNN's default TF32"),
            _size("convnext", 128, "bf16", "ConvNeXt-T (depthwise 7x7 + LayerNorm), b=128, bf16 autocast"),
        ],
        smoke_sizes=[
            {**_size("resnet18", 2, "bf16", ""), "hw": 32},
            {**_size("resnet50", 2, "fp32", ""), "hw": 32},
            {**_size("convnext", 2, "bf16", ""), "hw": 32},
        ],
        tolerance=_FP32,
        note="hand-written good variant: the rule's fix needs the model move and the batch move in one function",
    )
]

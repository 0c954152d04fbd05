"""Models and data shared by the cases: the parts that are the same in a bad and a good variant."""

from __future__ import annotations

import zlib
from typing import Any

import torch
from torch import nn

from ..harness import Tolerance


def mlp(width: int, depth: int, classes: int, device: torch.device) -> nn.Sequential:
    """`depth` Linear+ReLU layers of `width` features and a classifier head."""
    layers: list[nn.Module] = []
    for _ in range(depth):
        layers += [nn.Linear(width, width, device=device), nn.ReLU()]
    layers.append(nn.Linear(width, classes, device=device))
    return nn.Sequential(*layers)


def conv_bn_relu(cin: int, cout: int, stride: int = 1) -> list[nn.Module]:
    return [nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True)]


def resnet18_sized(classes: int = 1000) -> nn.Sequential:
    """A plain convnet with ResNet-18's stem, stage widths and depth (no shortcuts): 224x224 ImageNet input."""
    layers: list[nn.Module] = [
        nn.Conv2d(3, 64, 7, 2, 3, bias=False),
        nn.BatchNorm2d(64),
        nn.ReLU(inplace=True),
        nn.MaxPool2d(3, 2, 1),
    ]
    cin = 64
    for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        for block in range(4):
            layers += conv_bn_relu(cin, cout, stride if block == 0 else 1)
            cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, classes)]
    return nn.Sequential(*layers)


def small_convnet(classes: int = 1000) -> nn.Sequential:
    """A small ImageNet convnet (224x224 input): ResNet's stem and two strided stages, about 0.5 GFLOP per
    image forward (ResNet-18-sized: 3.6), so that the input pipeline and the copies weigh more."""
    return nn.Sequential(
        nn.Conv2d(3, 64, 7, 2, 3, bias=False),
        nn.BatchNorm2d(64),
        nn.ReLU(inplace=True),
        nn.MaxPool2d(3, 2, 1),
        *conv_bn_relu(64, 128, 2),
        *conv_bn_relu(128, 256, 2),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(256, classes),
    )


class Autocast(nn.Module):
    """Runs the wrapped model under bf16 autocast, as a mixed-precision training script does (TPL701's
    advice): the same data then costs the GPU less time, so copies and the host weigh more."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.autocast(x.device.type, dtype=torch.bfloat16):
            return self.model(x).float()


class ResidualMLP(nn.Module):
    """The MLP half of a pre-norm transformer block: x + W2 gelu(W1 norm(x))."""

    def __init__(self, width: int):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.fc1 = nn.Linear(width, 4 * width)
        self.fc2 = nn.Linear(4 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc2(nn.functional.gelu(self.fc1(self.norm(x))))


def token_mlp(width: int, depth: int, classes: int) -> nn.Sequential:
    """`depth` transformer MLP blocks over (batch, tokens, width) and a per-token classifier."""
    return nn.Sequential(*[ResidualMLP(width) for _ in range(depth)], nn.Linear(width, classes))


class TextClassifier(nn.Module):
    """A small encoder fed the way Hugging Face-style loops feed one: token ids, attention mask and token
    types, mean-pooled over the unmasked tokens into a classifier."""

    def __init__(self, vocab: int, width: int, depth: int, classes: int):
        super().__init__()
        self.tokens = nn.Embedding(vocab, width)
        self.types = nn.Embedding(2, width)
        self.blocks = nn.Sequential(*[ResidualMLP(width) for _ in range(depth)])
        self.head = nn.Linear(width, classes)

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor
    ) -> torch.Tensor:
        h = self.blocks(self.tokens(input_ids) + self.types(token_type_ids))
        mask = attention_mask.unsqueeze(-1).to(h.dtype)
        return self.head((h * mask).sum(1) / mask.sum(1).clamp(min=1))


def text_batches(
    count: int, batch: int, tokens: int, vocab: int, classes: int
) -> list[dict[str, torch.Tensor]]:
    """`count` host batches of five tensors (ids, mask, token types, labels, per-sample loss weights)."""
    found = []
    for _ in range(count):
        lengths = torch.randint(tokens // 4, tokens + 1, (batch, 1))
        positions = torch.arange(tokens).expand(batch, tokens)
        found.append(
            {
                "input_ids": torch.randint(0, vocab, (batch, tokens)),
                "attention_mask": (positions < lengths).long(),
                "token_type_ids": (positions >= lengths // 2).long(),
                "labels": torch.randint(0, classes, (batch,)),
                "weights": torch.rand(batch) + 0.5,
            }
        )
    return found


def pinned(value: Any, device: torch.device) -> Any:
    """Host tensors (in tuples, lists, dicts) in pinned memory, as a DataLoader with pin_memory=True
    delivers them; unchanged off the GPU."""
    if device.type != "cuda":
        return value
    if isinstance(value, torch.Tensor):
        return value.pin_memory()
    if isinstance(value, dict):
        return {key: pinned(item, device) for key, item in value.items()}
    return type(value)(pinned(item, device) for item in value)


def cifar_convnet(classes: int = 10) -> nn.Sequential:
    """A small CIFAR-10 convnet (32x32 input): three conv stages and a linear head."""
    return nn.Sequential(
        *conv_bn_relu(3, 64),
        *conv_bn_relu(64, 128, 2),
        *conv_bn_relu(128, 256, 2),
        *conv_bn_relu(256, 256),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(256, classes),
    )


def batches(count: int, batch: int, shape: tuple[int, ...], classes: int, device: torch.device) -> list[Any]:
    """`count` (input, label) pairs of random data on `device`."""
    return [
        (torch.randn(batch, *shape, device=device), torch.randint(0, classes, (batch,), device=device))
        for _ in range(count)
    ]


def init_by_name(model: nn.Module, seed: int = 0) -> nn.Module:
    """Re-initialise every parameter from a generator keyed by its name, so that two models whose
    construction draws different random numbers (a conv with and without bias) hold the same weights."""
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            generator = torch.Generator().manual_seed(seed + zlib.crc32(name.encode()))
            fan_in = parameter[0].numel() if parameter.dim() > 1 else parameter.numel()
            values = torch.randn(parameter.shape, generator=generator) / fan_in**0.5
            parameter.copy_(values.to(parameter.device))
    return model


def state_summary(model: nn.Module) -> list[torch.Tensor]:
    """The first and last parameters: enough to see that two training runs updated the same weights."""
    parameters = [p.detach() for p in model.parameters()]
    return [parameters[0], parameters[-1]]


def sgd(model: nn.Module) -> torch.optim.Optimizer:
    """The optimizer of cases that do not measure the optimizer (PyTorch's defaults otherwise)."""
    return torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)


def train_step(model: nn.Module, optimizer: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor) -> Any:
    """One classification training step; returns the loss and the weights it moved."""
    optimizer.zero_grad(set_to_none=True)
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    return loss.detach(), state_summary(model)


class TinyGPT(nn.Module):
    """Token and position embeddings, pre-norm causal transformer layers, a head tied to the embedding."""

    def __init__(self, vocab: int, width: int, depth: int, heads: int, tokens: int):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.position = nn.Parameter(torch.zeros(tokens, width))
        layer = nn.TransformerEncoderLayer(
            width, heads, 4 * width, dropout=0.0, activation="gelu", batch_first=True, norm_first=True
        )
        self.layers = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)
        self.head.weight = self.embed.weight
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(tokens), persistent=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.embed(tokens) + self.position[: tokens.shape[1]]
        h = self.layers(h, mask=self.mask, is_causal=True)
        return self.head(self.norm(h))


class ThreeLevelDetector(nn.Module):
    """A YOLO-style detector over three levels: ResNet-18's plain convolution stack (its stem and stage widths,
    no shortcuts) with predictions at strides 8, 16 and 32, one 1x1 head per level giving 4 box values,
    objectness and `classes` logits per cell. It runs under bf16 autocast and returns float32 predictions laid
    out (batch, height, width, 5 + classes), as a loss reads them."""

    def __init__(self, classes: int, width: int = 64):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, width, 7, 2, 3, bias=False),
            nn.BatchNorm2d(width),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, 2, 1),
            *[layer for _ in range(4) for layer in conv_bn_relu(width, width)],
        )
        stages, heads, cin = [], [], width
        for cout in (2 * width, 4 * width, 8 * width):
            blocks = [
                conv_bn_relu(cin if block == 0 else cout, cout, 2 if block == 0 else 1) for block in range(4)
            ]
            stages.append(nn.Sequential(*[layer for block in blocks for layer in block]))
            heads.append(nn.Conv2d(cout, 5 + classes, 1))
            cin = cout
        self.stages = nn.ModuleList(stages)
        self.heads = nn.ModuleList(heads)

    def forward(self, images: torch.Tensor) -> list[torch.Tensor]:
        outputs = []
        with torch.autocast(images.device.type, dtype=torch.bfloat16):
            x = self.stem(images)
            for stage, head in zip(self.stages, self.heads, strict=True):
                x = stage(x)
                outputs.append(head(x))
        return [out.float().permute(0, 2, 3, 1) for out in outputs]


DETECTOR_STRIDES = (8, 16, 32)


def detection_targets(
    batch: int, per_image: int, classes: int, canvas: int, border: int, device: torch.device
) -> tuple[list[tuple[torch.Tensor, ...]], list[torch.Tensor]]:
    """Random targets for each level of ThreeLevelDetector, as a YOLO-style target builder hands them to the
    loss: per level, each image's ~`per_image` targets (between 0.8x and 1.2x, at least one) concatenated for
    the batch, as a tuple (YOLOv5's build_targets returns one per level) of the image each belongs to, its
    centre and size as fractions of the image (the canvas less its letterbox `border`), its class, the anchor
    it was matched to (width and height in cells) and a weight; and per level a map of the cells inside the
    image whose objectness is ignored (crowd regions, ~5%)."""
    content = canvas - border
    targets, ignore = [], []
    for stride in DETECTOR_STRIDES:
        counts = torch.randint(max(1, per_image * 4 // 5), per_image * 6 // 5 + 1, (batch,))
        total = int(counts.sum())
        anchors = torch.tensor([[1.25, 1.6], [2.0, 3.75], [4.1, 2.9]], device=device)
        targets.append(
            (
                torch.repeat_interleave(torch.arange(batch), counts).to(device),
                torch.rand(total, 2, device=device),
                0.02 + 0.25 * torch.rand(total, 2, device=device),
                torch.randint(0, classes, (total,), device=device),
                anchors[torch.randint(0, 3, (total,), device=device)],
                0.5 + 0.5 * torch.rand(total, device=device),
            )
        )
        inside = -(-content // stride)
        ignore.append(torch.rand(batch, inside, inside, device=device) < 0.05)
    return targets, ignore


def make_detection_step(module: Any, size: dict, device: torch.device) -> Any:
    """One training step of ThreeLevelDetector behind the variant's letterbox, with the variant's loss (both
    from the variant's `build`, which moves them with `.cuda()`: a no-op on the CPU smoke run); it returns the
    loss and the weights the step moved."""
    classes, canvas, border = 20, size["canvas"], size["border"]
    detector = ThreeLevelDetector(classes, size["width"])
    model, criterion = (
        part.to(device) for part in module.build(detector, border, DETECTOR_STRIDES, canvas - border)
    )
    optimizer = sgd(model)
    images = torch.randn(size["batch"], 3, canvas - border, canvas - border, device=device)
    targets, ignore = detection_targets(size["batch"], size["targets"], classes, canvas, border, device)

    def step() -> Any:
        optimizer.zero_grad(set_to_none=True)
        loss = criterion(model(images), targets, ignore)
        loss.backward()
        optimizer.step()
        return loss.detach(), state_summary(model)

    return step


# The detection cases' variants (TPL201's per-image mask loop, TPL105's device scalars, one mask selection per
# step) are edits of this source: a letterbox in front of ThreeLevelDetector and a YOLO-style loss over its
# three levels that does every gather and per-image reduction once for the batch, with Python ints for the
# strides, the cell counts and the padding.
DETECTION = '''
import torch
import torch.nn.functional as F
from torch import nn


def giou(a, b):
    """Generalised IoU of boxes given as (centre x, centre y, width, height), pair by pair."""
    a_lo, a_hi = a[:, :2] - a[:, 2:] / 2, a[:, :2] + a[:, 2:] / 2
    b_lo, b_hi = b[:, :2] - b[:, 2:] / 2, b[:, :2] + b[:, 2:] / 2
    inter = (torch.minimum(a_hi, b_hi) - torch.maximum(a_lo, b_lo)).clamp(min=0).prod(1)
    union = a[:, 2:].prod(1) + b[:, 2:].prod(1) - inter
    hull = (torch.maximum(a_hi, b_hi) - torch.minimum(a_lo, b_lo)).prod(1)
    return inter / union - (hull - union) / hull


def decode(raw, anchors):
    """YOLOv5's box decoding: the centre within [-0.5, 1.5] of its cell, the size up to 4x its anchor."""
    xy = raw[:, :2].sigmoid() * 2 - 0.5
    wh = (raw[:, 2:4].sigmoid() * 2) ** 2 * anchors
    return torch.cat([xy, wh], 1)


class Letterbox(nn.Module):
    """Pads the images on the right and at the bottom to the detector's square input."""

    def __init__(self, detector, border):
        super().__init__()
        self.detector = detector
        self.pad = [0, border, 0, border]

    def forward(self, images):
        return self.detector(F.pad(images, self.pad))


class DetectionLoss(nn.Module):
    """Per level, each target's cell predicts its box (GIoU) and class (cross-entropy), weighted per target
    and averaged per image; every cell inside the image predicts objectness, except the ignored ones."""

    def __init__(self, strides, content):
        super().__init__()
        self.strides = tuple(strides)
        self.content = content

    def forward(self, preds, targets, ignore):
        batch = preds[0].shape[0]
        box_cls = preds[0].new_zeros(())
        objectness, keep = [], []
        for level, p in enumerate(preds):
            image, centres, sizes, labels, anchors, weights = targets[level]
            stride = self.strides[level]
            inside = (self.content + stride - 1) // stride
            obj = p[:, :inside, :inside, 4]
            present = torch.zeros_like(obj)
            xy = centres * self.content / stride
            wh = sizes * self.content / stride
            cells = xy.long().clamp_(0, inside - 1)
            raw = p[image, cells[:, 1], cells[:, 0]]
            boxes = torch.cat([xy - cells, wh], 1)
            per_target = weights * (
                1.0
                - giou(decode(raw[:, :4], anchors), boxes)
                + F.cross_entropy(raw[:, 5:], labels, reduction="none")
            )
            totals = p.new_zeros(batch).index_add_(0, image, per_target)
            weight_sums = p.new_zeros(batch).index_add_(0, image, weights)
            box_cls = box_cls + (totals / weight_sums).sum()
            present[image, cells[:, 1], cells[:, 0]] = 1.0
            objectness.append(F.binary_cross_entropy_with_logits(obj, present, reduction="none").flatten())
            keep.append(~ignore[level].flatten())
        objectness, keep = torch.cat(objectness), torch.cat(keep)
        return box_cls / batch + torch.where(keep, objectness, 0.0).sum() / keep.sum()


def build(detector, border, strides, content):
    """The model behind its letterbox, and the loss, on the GPU."""
    return Letterbox(detector, border).cuda(), DetectionLoss(strides, content).cuda()
'''

# The step (ResNet-18's widths), and the same step with twice the widths (about 4x the convolutions'
# work): a sync costs what the host could have queued meanwhile, so less where the GPU's work dominates.
DETECTION_SIZES = [
    {
        "label": "batch 16, 320x320, ~100 targets per image and level",
        "regime": "whole training step, ResNet-18-width detector, bf16 autocast",
        "batch": 16,
        "canvas": 320,
        "border": 16,
        "width": 64,
        "targets": 100,
    },
    {
        "label": "batch 16, 320x320, twice the widths",
        "regime": "whole training step, 2x ResNet-18-width detector, bf16 autocast (GPU-bound)",
        "batch": 16,
        "canvas": 320,
        "border": 16,
        "width": 128,
        "targets": 100,
    },
]
DETECTION_SMOKE_SIZES = [
    {"label": "batch 2, 64x64, ~6 targets", "batch": 2, "canvas": 64, "border": 8, "width": 8, "targets": 6}
]

# The loss to float rounding, and the weights after the step: the variants sum in other orders (per image or
# per batch; index_add_'s atomics on a GPU), which can flip a bf16 rounding in the backward of a convolution
# (a relative 2**-8 of one gradient element, times the learning rate).
DETECTION_TOLERANCE = Tolerance(1e-4, 1e-4, "the loss and the weights after one step")


def edited(source: str, *edits: tuple[str, str]) -> str:
    """`source` with each (old, new) replaced; an `old` that does not occur exactly once is an error, so that a
    variant cannot silently stay the same as the source it edits."""
    for old, new in edits:
        if source.count(old) != 1:
            raise ValueError(f"expected one occurrence of {old!r}, found {source.count(old)}")
        source = source.replace(old, new)
    return source

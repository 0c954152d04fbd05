"""Models and data shared by the cases: the parts that are the same in a bad and a good variant."""

from __future__ import annotations

import zlib
from typing import Any

import torch
from torch import nn


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

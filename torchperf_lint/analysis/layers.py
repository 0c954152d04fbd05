"""What kind of compute a layer is, by the qualified name of what builds it, and whether a model's
layers make it a 2-D convnet (RULES.md, TPL404). Shared by the project pass (which adds up the
layers each module class builds) and the rules; nothing here imports libcst.

A model is a 2-D convnet when its dense 2-D convolutions outnumber everything else that does
heavy math (linear layers, attention, recurrent cells, 1-D and 3-D convolutions): what a class
builds is counted once per call site, since how often a block repeats is rarely written as a
literal, and a call site inside a loop or comprehension counts LOOP_REPEATS times, whatever layer
it builds: a loop that builds layers (a cfg-driven Darknet, `for _ in range(depth)`) runs at least
twice in any model worth training, and more is not known. Where it is known, the project pass
counts it: a builder's loop over the configuration it is handed (VGG's `for v in cfg:`) runs once
per item of the fewest the module's own calls hand in as literals (`make_layers(cfg["A"])`). A ConvNeXt-style design (depthwise convolutions with LayerNorm and no BatchNorm) is not:
it was measured to gain 1.02x from channels_last, against 1.7-3.1x for ResNets and MobileNets.
Nor is a model normalised by InstanceNorm alone (style-transfer and image-to-image nets): ATen's
instance_norm makes its input contiguous in NCHW, so channels_last adds a transpose around every
normalisation instead of saving one. Nor are `(k, 1)`/`(1, k)` convolutions over a 1-D signal folded
into 2-D (a period discriminator reshaping a waveform by its period): they count beside 1-D convolutions.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Optional

_NN = ("torch.nn.", "torch.nn.modules.")
CONV2D = frozenset({"Conv2d", "ConvTranspose2d", "LazyConv2d", "LazyConvTranspose2d"})
OTHER_CONVS = frozenset(
    {"Conv1d", "Conv3d", "ConvTranspose1d", "ConvTranspose3d", "LazyConv1d", "LazyConv3d"}
)
DENSE = frozenset(
    {
        "Linear",
        "LazyLinear",
        "Bilinear",
        "MultiheadAttention",
        "Transformer",
        "TransformerEncoder",
        "TransformerDecoder",
        "TransformerEncoderLayer",
        "TransformerDecoderLayer",
        "LSTM",
        "GRU",
        "RNN",
        "LSTMCell",
        "GRUCell",
        "RNNCell",
    }
)
BATCH_NORMS = frozenset({"BatchNorm2d", "SyncBatchNorm", "LazyBatchNorm2d"})
INSTANCE_NORMS = frozenset({"InstanceNorm2d", "LazyInstanceNorm2d"})
# torchvision's 2-D convnet constructors (not ViT, Swin, MaxViT or ConvNeXt); also timm's
# modules of the same families, called as functions (`timm.models.resnet50()`).
_CONVNET_FAMILIES = re.compile(
    r"(resnet|resnext|wide_resnet|vgg|mobilenet|efficientnet|densenet|regnet|mnasnet|shufflenet|"
    r"squeezenet|googlenet|inception|alexnet|fcn_resnet|deeplabv3|lraspp)"
)
_CONVNET_PACKAGES = ("torchvision.models.", "timm.models.")
# How many layers one call site inside a loop counts for: the fewest a repeated build makes.
LOOP_REPEATS = 2
# Constructors of the containers a builder function fills and returns (`module_list =
# nn.ModuleList()`, `layers = []`, `return nn.Sequential(*layers)`): what its body builds is what
# it returns.
CONTAINERS = frozenset({"Sequential", "ModuleList", "ModuleDict", "list", "dict", "OrderedDict"})
# What a library convnet adds to a profile: more than any classifier head beside it.
_LIBRARY_CONVNET_WEIGHT = 8


@dataclasses.dataclass
class LayerCounts:
    """How many call sites build each kind of layer, in a model and everything it builds."""

    conv2d: int = 0  # dense 2-D convolutions
    grouped2d: int = 0  # 2-D convolutions with `groups=` (depthwise, grouped)
    other_convs: int = 0
    folded2d: int = 0  # 2-D convolutions with `(k, 1)`/`(1, k)` kernels: a 1-D signal folded into 2-D
    dense: int = 0
    layer_norms: int = 0
    batch_norms: int = 0
    instance_norms: int = 0

    def add(self, other: LayerCounts) -> None:
        for field in dataclasses.fields(self):
            setattr(self, field.name, getattr(self, field.name) + getattr(other, field.name))

    @property
    def convnext_style(self) -> bool:
        return self.grouped2d > 0 and self.layer_norms > 0 and self.batch_norms == 0

    @property
    def instance_normed(self) -> bool:
        return self.instance_norms > 0 and self.batch_norms == 0

    @property
    def is_2d_convnet(self) -> bool:
        convs = self.conv2d + self.grouped2d
        return (
            convs >= 2
            and convs > self.dense + self.other_convs + self.folded2d
            and not self.convnext_style
            and not self.instance_normed
        )

    @property
    def takes_image_batch(self) -> bool:
        """Nothing in the model works on a signal or a volume (1-D or 3-D convolutions, a signal
        folded into 2-D): its input is a 4-D batch, which channels_last is defined for."""
        return self.other_convs == 0 and self.folded2d == 0


def library_layer(qualified: str) -> Optional[LayerCounts]:
    """The counts one call of an outside name adds (`torch.nn.Conv2d#grouped`, a torchvision
    model constructor), or None when it is no layer this analysis counts."""
    name, _, tag = qualified.partition("#")
    last = name.rsplit(".", 1)[-1]
    if name.startswith(_NN):
        if last in CONV2D:
            if tag == "folded":
                return LayerCounts(folded2d=1)
            return LayerCounts(grouped2d=1) if tag == "grouped" else LayerCounts(conv2d=1)
        if last in OTHER_CONVS:
            return LayerCounts(other_convs=1)
        if last in DENSE:
            return LayerCounts(dense=1)
        if last == "LayerNorm":
            return LayerCounts(layer_norms=1)
        if last in BATCH_NORMS:
            return LayerCounts(batch_norms=1)
        if last in INSTANCE_NORMS:
            return LayerCounts(instance_norms=1)
        return None
    if is_library_convnet(name):
        return LayerCounts(conv2d=_LIBRARY_CONVNET_WEIGHT, batch_norms=1)
    if last.endswith(("LayerNorm", "LayerNorm2d")):
        return LayerCounts(layer_norms=1)  # timm's and many projects' own LayerNorm2d
    return None


def is_library_convnet(qualified: str) -> bool:
    """`torchvision.models.resnet50`, `torchvision.models.segmentation.deeplabv3_resnet50`."""
    if not qualified.startswith(_CONVNET_PACKAGES):
        return False
    last = qualified.rsplit(".", 1)[-1]
    return last[:1].islower() and _CONVNET_FAMILIES.match(last) is not None

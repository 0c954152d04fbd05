"""TPL106 blocking-host-to-device: `batch.to(device)` from pinned memory without non_blocking=True.

On one stream a blocking copy does not make the copy slower: it makes the host wait, at every copy, for
the GPU to finish all the work queued before it. It costs what the host would have done meanwhile: queue
the forward pass (whose Python runs after the copy) while the GPU still runs the previous step's backward,
and, with several tensors per batch, queue the next copy instead of waiting for each one in turn. So the
cases sweep from GPU-bound steps (where the GPU never waits for the host) to balanced ones, with one tensor
per batch and with five. The hand-written third variant copies the next batch on a side stream while the
current step computes (a prefetcher, as NVIDIA's ImageNet example has): it is not what the fixer writes,
and it shows the gain that only overlapping the copy with compute can give.
"""

from __future__ import annotations

from ..harness import Case, Tolerance
from . import common

BAD = """
import torch
import torch.nn.functional as F


def train(model, train_loader, optimizer, device):
    for images, labels in train_loader:
        images = images.to(device)
        labels = labels.to(device)
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(images), labels)
        loss.backward()
        optimizer.step()
    return loss.detach()
"""

PREFETCHER = '''
class Prefetcher:
    """Iterates `loader`, copying the next batch to `device` on a side stream while the current step runs."""

    def __init__(self, loader, device):
        self.batches = iter(loader)
        self.device = device
        self.stream = torch.cuda.Stream(device) if device.type == "cuda" else None
        self.next = self.load()

    def load(self):
        batch = next(self.batches, None)
        if batch is None:
            return None
        if self.stream is None:
            return moved(batch, self.device)
        with torch.cuda.stream(self.stream):
            return moved(batch, self.device)

    def __iter__(self):
        return self

    def __next__(self):
        batch = self.next
        if batch is None:
            raise StopIteration
        if self.stream is not None:
            current = torch.cuda.current_stream(self.device)
            current.wait_stream(self.stream)
            for tensor in batch.values() if isinstance(batch, dict) else batch:
                tensor.record_stream(current)
        self.next = self.load()
        return batch


def moved(batch, device):
    if isinstance(batch, dict):
        return {key: value.to(device, non_blocking=True) for key, value in batch.items()}
    return [value.to(device, non_blocking=True) for value in batch]
'''

PREFETCH = (
    """
import torch
import torch.nn.functional as F

"""
    + PREFETCHER
    + """

def train(model, train_loader, optimizer, device):
    for images, labels in Prefetcher(train_loader, device):
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(images), labels)
        loss.backward()
        optimizer.step()
    return loss.detach()
"""
)


def make_pinned_loop(module, size, device):
    """Two batches of images in pinned host memory, as a DataLoader with pin_memory=True delivers them."""
    model = common.resnet18_sized().to(device)
    if size.get("bf16"):
        model = common.Autocast(model)
    optimizer = common.sgd(model)
    loader = common.pinned(
        [
            (x.cpu(), y.cpu())
            for x, y in common.batches(2, size["batch"], (3, size["hw"], size["hw"]), 1000, device)
        ],
        device,
    )
    return lambda: (module.train(model, loader, optimizer, device), common.state_summary(model))


DICT_BATCH = """
import torch
import torch.nn.functional as F


def train(model, train_loader, optimizer, device):
    for batch in train_loader:
        batch = {k: v.to(device) for k, v in batch.items()}
        optimizer.zero_grad(set_to_none=True)
        logits = model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
        loss = (F.cross_entropy(logits, batch["labels"], reduction="none") * batch["weights"]).mean()
        loss.backward()
        optimizer.step()
    return loss.detach()
"""

DICT_PREFETCH = (
    """
import torch
import torch.nn.functional as F

"""
    + PREFETCHER
    + """

def train(model, train_loader, optimizer, device):
    for batch in Prefetcher(train_loader, device):
        optimizer.zero_grad(set_to_none=True)
        logits = model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
        loss = (F.cross_entropy(logits, batch["labels"], reduction="none") * batch["weights"]).mean()
        loss.backward()
        optimizer.step()
    return loss.detach()
"""
)

VOCAB = 8192


def make_text_loop(module, size, device):
    """Four batches of five pinned tensors (a text classifier's ids, mask, token types, labels, weights)."""
    model = common.TextClassifier(VOCAB, size["width"], size["depth"], 4).to(device)
    optimizer = common.sgd(model)
    loader = common.pinned(common.text_batches(4, size["batch"], size["tokens"], VOCAB, 4), device)
    return lambda: (module.train(model, loader, optimizer, device), common.state_summary(model))


COMPARISONS = (("bad", "good"), ("bad", "prefetch"), ("good", "prefetch"))
VARIANT_REGIME = {"good": "non_blocking=True", "prefetch": "side-stream prefetch (hand-written)"}

CASES = [
    Case(
        name="tpl106_pinned_copy",
        code="TPL106",
        title="ResNet-18-sized train steps fed from pinned memory: .to(device) vs non_blocking=True "
        "vs a side-stream prefetcher",
        bad=BAD,
        fixes=("TPL106",),
        alternatives={"prefetch": PREFETCH},
        comparisons=COMPARISONS,
        variant_regime=VARIANT_REGIME,
        make=make_pinned_loop,
        # 256 ImageNet images of 3x224x224 in fp32: a 154 MB batch per copy, about 3 ms at PCIe 5 speed;
        # under bf16 autocast the GPU needs less time for the same step, so the copy weighs more.
        sizes=[
            {
                "label": "batch 256x3x224x224 (154 MB), 2 steps, fp32",
                "regime": "GPU-bound ResNet-18-sized fp32, 1 big tensor per batch",
                "batch": 256,
                "hw": 224,
            },
            {
                "label": "batch 256x3x224x224 (154 MB), 2 steps, bf16 autocast",
                "regime": "ResNet-18-sized bf16 autocast, 1 big tensor per batch (copy weighs more)",
                "batch": 256,
                "hw": 224,
                "bf16": True,
                "tolerance": Tolerance(
                    2e-2, 1e-3, "bf16 convolutions, cuDNN backward not bitwise deterministic"
                ),
            },
        ],
        smoke_sizes=[{"label": "batch 2x3x32x32, 2 steps", "batch": 2, "hw": 32}],
        tolerance=Tolerance(1e-3, 1e-5),
        note="cuDNN convolution backward is not bitwise deterministic: tolerance 1e-3; "
        "prefetch is hand-written, not the fixer's output",
    ),
    Case(
        name="tpl106_dict_batch",
        code="TPL106",
        title="text classifier fed dict batches of 5 pinned tensors: {k: v.to(device)} vs non_blocking=True "
        "vs a side-stream prefetcher",
        bad=DICT_BATCH,
        fixes=("TPL106",),
        alternatives={"prefetch": DICT_PREFETCH},
        comparisons=COMPARISONS,
        variant_regime=VARIANT_REGIME,
        make=make_text_loop,
        sizes=[
            {
                "label": "2 blocks d=256, batch 8x64, 4 steps",
                "regime": "launch-bound encoder (2 blocks d=256, 512 tokens), 5 tensors per batch",
                "width": 256,
                "depth": 2,
                "batch": 8,
                "tokens": 64,
            },
            {
                "label": "2 blocks d=512, batch 16x128, 4 steps",
                "regime": "balanced encoder (2 blocks d=512, 2k tokens), 5 tensors per batch",
                "width": 512,
                "depth": 2,
                "batch": 16,
                "tokens": 128,
            },
            {
                "label": "4 blocks d=1024, batch 32x128, 4 steps",
                "regime": "GPU-bound encoder (4 blocks d=1024, 4k tokens), 5 tensors per batch",
                "width": 1024,
                "depth": 4,
                "batch": 32,
                "tokens": 128,
            },
        ],
        smoke_sizes=[
            {"label": "2 blocks d=16, batch 2x8, 4 steps", "width": 16, "depth": 2, "batch": 2, "tokens": 8}
        ],
        tolerance=Tolerance(1e-5, 1e-6),
        note="prefetch is hand-written, not the fixer's output",
    ),
]

"""TPL501 dataloader-num-workers: loading and augmentation in the training process while the GPU waits.

Two regimes. The one users meet: an ImageNet-style epoch that decodes JPEG files and augments them
(RandomResizedCrop(224) and a horizontal flip, then a normalised float tensor: what torchvision's transforms
do with PIL images, written out with PIL alone so the case needs no torchvision) for a ResNet-18-sized
model, with 0 worker processes against 4, 8 and 12 (the GPU machine has 16 cores). And one where workers
cannot pay: a short epoch of images already decoded in memory, where starting 8 workers costs more than the
per-item resize they take over.

The JPEG files (500x375, quality 90, about 90 kB: the size of a typical ImageNet photo) are written into a
temporary directory when the case is first built; an epoch of 2048 items reads 256 distinct files 8 times,
each time with its own crop. Each item's augmentation is drawn from a generator seeded by its index, so the
epoch is the same whichever process decodes it: the check compares a checksum of every batch the model saw
(exactly) and the loss and weights after the epoch (cuDNN's backward is not bitwise deterministic).
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

import torch
import torch.nn.functional as F

from ..harness import EXACT, Case, Tolerance, allclose
from . import common

JPEG_BAD = '''
import torch
import torch.nn.functional as F
from PIL import Image
from torch.utils.data import DataLoader, Dataset

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

MEAN = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)
STD = torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)


class JpegImages(Dataset):
    """Training images as files: decode, RandomResizedCrop, horizontal flip, normalise."""

    def __init__(self, paths, labels, size=224):
        self.paths = paths
        self.labels = labels
        self.size = size

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, index):
        generator = torch.Generator().manual_seed(index)
        with Image.open(self.paths[index % len(self.paths)]) as image:
            image = image.convert("RGB")
        box = random_resized_crop(image.width, image.height, generator)
        image = image.resize((self.size, self.size), Image.BILINEAR, box=box)
        if torch.rand((), generator=generator) < 0.5:
            image = image.transpose(Image.FLIP_LEFT_RIGHT)
        pixels = torch.frombuffer(bytearray(image.tobytes()), dtype=torch.uint8)
        x = pixels.view(self.size, self.size, 3).permute(2, 0, 1).float().div(255)
        return (x - MEAN) / STD, self.labels[index]


def random_resized_crop(width, height, generator, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)):
    """A box of random area and aspect ratio (torchvision's RandomResizedCrop), else the central square."""
    area = width * height
    low, high = torch.tensor(ratio).log().tolist()
    for _ in range(10):
        target = area * torch.empty(()).uniform_(*scale, generator=generator).item()
        aspect = torch.empty(()).uniform_(low, high, generator=generator).exp().item()
        w, h = round((target * aspect) ** 0.5), round((target / aspect) ** 0.5)
        if 0 < w <= width and 0 < h <= height:
            left = int(torch.randint(0, width - w + 1, (), generator=generator))
            top = int(torch.randint(0, height - h + 1, (), generator=generator))
            return (left, top, left + w, top + h)
    side = min(width, height)
    return ((width - side) // 2, (height - side) // 2, (width + side) // 2, (height + side) // 2)


def train_epoch(model, dataset, optimizer):
    loader = DataLoader(dataset, batch_size=64, shuffle=True, pin_memory=True)
    for images, labels in loader:
        images = images.to(device, non_blocking=True)
        labels = labels.to(device, non_blocking=True)
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(images), labels)
        loss.backward()
        optimizer.step()
    return loss.detach()
'''

JPEG_LOADER = "DataLoader(dataset, batch_size=64, shuffle=True, pin_memory=True)"


def with_workers(source: str, loader: str, workers: int) -> str:
    return source.replace(
        loader, loader.replace("pin_memory=True)", f"pin_memory=True, num_workers={workers})")
    )


JPEG_COUNT = 256  # distinct files; an epoch reads them in turn
_written: dict[tuple[int, int, int], list[str]] = {}


def jpeg_files(count: int, width: int, height: int) -> list[str]:
    """`count` JPEG photos-to-be (smooth colour fields with grain), written once per run into a temporary
    directory that is removed at exit."""
    key = (count, width, height)
    if key not in _written:
        from PIL import Image

        directory = tempfile.mkdtemp(prefix="torchperf-lint-jpegs-")
        atexit.register(shutil.rmtree, directory, ignore_errors=True)
        generator = torch.Generator().manual_seed(0)
        grain = 0.05 * torch.randn(3, height, width, generator=generator)
        paths = []
        for index in range(count):
            coarse = torch.rand(1, 3, max(height // 16, 2), max(width // 16, 2), generator=generator)
            image = F.interpolate(coarse, size=(height, width), mode="bicubic", align_corners=False)[0]
            image = image + grain.roll(shifts=(37 * index, 101 * index), dims=(1, 2))
            pixels = (image.clamp(0, 1) * 255).to(torch.uint8).permute(1, 2, 0).contiguous()
            path = os.path.join(directory, f"{index:04d}.jpg")
            Image.fromarray(pixels.numpy()).save(path, quality=90)
            paths.append(path)
        _written[key] = paths
    return _written[key]


def make_jpeg_epoch(module, size, device):
    """One epoch through the source's own DataLoader; the model records a checksum of every batch it sees."""
    paths = jpeg_files(min(size["items"], JPEG_COUNT), size["width"], size["height"])
    labels = torch.randint(0, 1000, (size["items"],)).tolist()
    dataset = module.JpegImages(paths, labels, size["crop"])
    model = common.resnet18_sized().to(device)
    optimizer = common.sgd(model)
    seen: list[torch.Tensor] = []
    model.register_forward_pre_hook(lambda _, inputs: seen.append(inputs[0].sum(dtype=torch.float64)))

    def epoch():
        seen.clear()
        loss = module.train_epoch(model, dataset, optimizer)
        return torch.stack(seen), loss, common.state_summary(model)

    return epoch


def same_batches(reference: list, result: list, tol: Tolerance) -> str | None:
    """The batches' checksums exactly (same images, crops and order), the training within `tol`."""
    problem = allclose(reference[:1], result[:1], EXACT)
    if problem is not None:
        return f"the model saw other batches: {problem}"
    return allclose(reference[1:], result[1:], tol)


DECODED_BAD = '''
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class Images(Dataset):
    """Decoded uint8 images, resized and normalised per item as a torchvision transform would."""

    def __init__(self, images, labels, size):
        self.images = images
        self.labels = labels
        self.size = size

    def __len__(self):
        return len(self.images)

    def __getitem__(self, index):
        image = self.images[index].float().div(255).unsqueeze(0)
        image = F.interpolate(image, size=self.size, mode="bilinear", antialias=True, align_corners=False)
        return (image[0] - 0.5) / 0.5, self.labels[index]


def train_epoch(model, dataset, optimizer):
    loader = DataLoader(dataset, batch_size=64, shuffle=True, pin_memory=True)
    for images, labels in loader:
        images = images.to(device, non_blocking=True)
        labels = labels.to(device, non_blocking=True)
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(images), labels)
        loss.backward()
        optimizer.step()
    return loss.detach()
'''


def make_decoded_epoch(module, size, device):
    images = torch.randint(0, 256, (size["items"], 3, size["stored"], size["stored"]), dtype=torch.uint8)
    labels = torch.randint(0, 10, (size["items"],))
    dataset = module.Images(images, labels, (size["hw"], size["hw"]))
    model = common.cifar_convnet().to(device)
    optimizer = common.sgd(model)
    return lambda: (module.train_epoch(model, dataset, optimizer), common.state_summary(model))


CASES = [
    Case(
        name="tpl501_jpeg_workers",
        code="TPL501",
        title="ImageNet-style epoch (JPEG decode, RandomResizedCrop 224, flip; ResNet-18-sized model, batch 64): "
        "num_workers=0 vs 4, 8, 12",
        bad=JPEG_BAD,
        # 8 worker processes, as the message asks ("a few per GPU"); 4 and 12 show the slope.
        good=with_workers(JPEG_BAD, JPEG_LOADER, 8),
        alternatives={
            "workers4": with_workers(JPEG_BAD, JPEG_LOADER, 4),
            "workers12": with_workers(JPEG_BAD, JPEG_LOADER, 12),
        },
        comparisons=(("bad", "workers4"), ("bad", "good"), ("bad", "workers12")),
        variant_regime={"good": "8 workers", "workers4": "4 workers", "workers12": "12 workers"},
        make=make_jpeg_epoch,
        requires=("PIL", "numpy"),
        warmup=False,  # a call is a whole epoch with fresh workers: the checked call has warmed up the rest
        sizes=[
            {
                "label": "2048 JPEGs 500x375 -> 224, batch 64",
                "regime": "JPEG epoch, 2048 images",
                "items": 2048,
                "width": 500,
                "height": 375,
                "crop": 224,
            }
        ],
        smoke_sizes=[{"label": "8 JPEGs 48x36 -> 16", "items": 8, "width": 48, "height": 36, "crop": 16}],
        tolerance=Tolerance(2e-2, 5e-3, "batch checksums exactly; loss and weights after 32 cuDNN steps"),
        compare=same_batches,
        note="one epoch per call, worker start-up included (not persistent); 256 distinct files read in turn",
    ),
    Case(
        name="tpl501_loader_workers",
        code="TPL501",
        title="one epoch, 512 decoded images resized 256->224 per item: num_workers=0 vs 8",
        bad=DECODED_BAD,
        good=with_workers(DECODED_BAD, JPEG_LOADER, 8),
        variant_regime={"good": "8 workers"},
        make=make_decoded_epoch,
        # ImageNet-style preprocessing of images already decoded in memory: stored 256x256, resized to 224.
        sizes=[
            {
                "label": "512 images, 256->224, batch 64",
                "regime": "short epoch of pre-decoded images, 512 images (worker start-up dominates)",
                "items": 512,
                "stored": 256,
                "hw": 224,
            }
        ],
        smoke_sizes=[{"label": "16 images, 16->12", "items": 16, "stored": 16, "hw": 12}],
        tolerance=Tolerance(1e-3, 1e-5),
        note="one epoch per call, worker start-up included (the loader is not persistent)",
    ),
]

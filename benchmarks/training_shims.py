"""Synthetic data for running training scripts of the corpus without their datasets (no download, no
disk): in-memory torchvision dataset stand-ins, and the data files some scripts read.

    python benchmarks/training_shims.py SHIM SCRIPT [ARGS...]

runs SCRIPT as `python SCRIPT ARGS` would (as __main__, its folder first on sys.path, its arguments
in sys.argv) after replacing the torchvision dataset class that SHIM names (cifar10, cifar100, mnist)
by an in-memory one of the same shapes and class count: the user's files are run unchanged.
Importing this module imports neither torch nor torchvision; the stand-ins need numpy and pillow."""

from __future__ import annotations

import os
import pickle
import runpy
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np


class SyntheticImages:
    """A map-style dataset of random images, as torchvision's CIFAR and MNIST classes give them: a
    PIL image and an int label per index, through the same transform arguments. Image i is the same
    on every call and in every DataLoader worker (seeded by its index); labels cycle over the classes."""

    shape: tuple[int, ...] = (32, 32, 3)  # height, width[, channels]
    classes_count = 10
    train_size = 50000
    test_size = 10000

    def __init__(
        self,
        root: str = "",
        train: bool = True,
        transform: Callable[[Any], Any] | None = None,
        target_transform: Callable[[Any], Any] | None = None,
        download: bool = False,
        **_: Any,
    ) -> None:
        self.root = root
        self.train = train
        self.transform = transform
        self.target_transform = target_transform
        self.size = self.train_size if train else self.test_size
        self.classes = [f"class {k}" for k in range(self.classes_count)]
        self.targets = [index % self.classes_count for index in range(self.size)]

    def __len__(self) -> int:
        return self.size

    def pixels(self, index: int) -> np.ndarray:
        seed = index + (0 if self.train else 1 << 30)
        return np.random.default_rng(seed).integers(0, 256, self.shape, dtype=np.uint8)

    def __getitem__(self, index: int) -> tuple[Any, Any]:
        from PIL import Image

        image: Any = Image.fromarray(self.pixels(index))  # uint8: "L" for (H, W), "RGB" for (H, W, 3)
        target: Any = self.targets[index]
        if self.transform is not None:
            image = self.transform(image)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return image, target

    @property
    def data(self) -> np.ndarray:
        """Every image at once (CIFAR's `.data`), built only when a script asks for it."""
        return np.stack([self.pixels(index) for index in range(self.size)])


class SyntheticCIFAR10(SyntheticImages):
    pass


class SyntheticCIFAR100(SyntheticImages):
    classes_count = 100


class SyntheticMNIST(SyntheticImages):
    shape = (28, 28)
    train_size = 60000


# the torchvision.datasets attribute each shim replaces, and its stand-in
SHIMS: dict[str, tuple[str, type[SyntheticImages]]] = {
    "cifar10": ("CIFAR10", SyntheticCIFAR10),
    "cifar100": ("CIFAR100", SyntheticCIFAR100),
    "mnist": ("MNIST", SyntheticMNIST),
}


def install(shim: str) -> None:
    """Replace torchvision's dataset class by its stand-in, before the script imports it."""
    import torchvision.datasets

    attribute, stand_in = SHIMS[shim]
    setattr(torchvision.datasets, attribute, stand_in)


def write_text_corpus(folder: Path, names: dict[str, int], seed: int = 0) -> None:
    """Plain-text files of random sentences over a 1000-word vocabulary (Zipf-like frequencies), for
    word-level language models: names maps a file name to its number of words."""
    rng = np.random.default_rng(seed)
    vocabulary = np.array([f"w{k}" for k in range(1000)])
    weights = 1.0 / np.arange(1, len(vocabulary) + 1)
    weights /= weights.sum()
    folder.mkdir(parents=True, exist_ok=True)
    for name, words in names.items():
        drawn = rng.choice(vocabulary, size=words, p=weights)
        lines = [" ".join(drawn[start : start + 12]) for start in range(0, words, 12)]
        (folder / name).write_text("\n".join(lines) + "\n", encoding="utf-8")


def write_token_bins(folder: Path, tokens: int, vocab_size: int, seed: int = 0) -> None:
    """nanoGPT's prepared dataset: train.bin and val.bin of uint16 token ids, and meta.pkl with the
    vocabulary size (so that the model's embedding is that small)."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("train.bin", "val.bin"):
        rng.integers(0, vocab_size, tokens, dtype=np.uint16).tofile(folder / name)
    with open(folder / "meta.pkl", "wb") as file:
        pickle.dump({"vocab_size": vocab_size}, file)


def launch(argv: list[str]) -> None:
    """Run SCRIPT [ARGS] with the shim installed (the shims of this module as imported by name, so that
    DataLoader workers that unpickle a stand-in find its class)."""
    if len(argv) < 2 or argv[0] not in SHIMS:
        sys.exit(f"usage: training_shims.py {{{','.join(SHIMS)}}} SCRIPT [ARGS...]")
    shim, script = argv[0], os.path.realpath(argv[1])
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from benchmarks import training_shims

    training_shims.install(shim)
    sys.argv = [script, *argv[2:]]
    here = str(Path(__file__).resolve().parent)
    sys.path[:] = [os.path.dirname(script), *(p for p in sys.path if os.path.realpath(p or ".") != here)]
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    launch(sys.argv[1:])

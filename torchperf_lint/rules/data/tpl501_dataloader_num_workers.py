"""TPL501 dataloader-num-workers: DataLoader loads batches in the training process."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from ...engine.context import Context
from ...engine.findings import Report
from ..base import Rule
from ..shared_examples import FEATURE_EXTRACTION_IN_DATASET_PROCESS
from .common import argument, dataloader, dataset_on_device, int_literal, read_once


class DataloaderNumWorkers(Rule):
    """## What it does
    Flags `torch.utils.data.DataLoader(...)` with no `num_workers` or with `num_workers=0` written
    as a literal, in a file that shows CUDA use.

    ## Why it is slow
    With zero workers the training process itself reads, decodes, augments and collates every batch
    between two steps, and the GPU waits for it. Worker processes prepare the next batches while the
    GPU computes. The measured effect on an H100 is in the Measured section below.

    ## Fix safety
    No automatic fix: the right number depends on the CPU cores per GPU, and code that runs in
    workers must be picklable and must not touch CUDA.

    ## When it stays silent
    `num_workers` given as an expression (`num_workers=args.workers`: the user decides); `**kwargs`
    or `*args` that could supply it; datasets built from tensors already on the GPU
    (`TensorDataset(x.cuda(), y.cuda())`, where workers would fail); files that never use CUDA;
    classes named `DataLoader` that are not torch's; loaders of a dataset's one-off preparation
    (its `process()` or `download()`, run once when the dataset is first built); a loader read for a
    few batches once, every loop over it leaving when its counter reaches a bound (`for i, x in
    enumerate(test_loader): ...; if i == n - 1: break`: MelGAN's reference clips); datasets held in
    memory, where workers would have nothing to load, only processes to spawn and batches to send
    back: a `TensorDataset`, or a project dataset whose `__getitem__` only indexes what its
    `__init__` stored (no file read, decode, transform or other call), reached through a name, a
    tuple a project function returns, or a parameter every caller in the project passes one for.
    A dataset of a class the project does not define, or one whose `__init__` opens a view of a file
    (`h5py.File`, a memory map, an LMDB environment) that indexing reads, keeps the finding.
    """

    code = "TPL501"
    name = "dataloader-num-workers"
    summary = "DataLoader loads batches in the training process"
    message = (
        "DataLoader {how} loads every batch in the training process while the GPU waits; "
        "pass num_workers=<a few worker processes per GPU>"
    )
    default_on = True  # meets both populations' bars since the in-memory dataset fact (evidence.py)
    where = "file shows CUDA use"
    node_types = (cst.Call,)
    benchmark = "TPL501"

    BAD = {
        "no-num-workers": """
            import torch
            from torch.utils.data import DataLoader

            def train(model, dataset, optimizer):
                loader = DataLoader(dataset, batch_size=64, shuffle=True, pin_memory=True)  # expect: TPL501
                for x, y in loader:
                    loss = model(x.cuda(non_blocking=True), y.cuda(non_blocking=True))
                    loss.backward()
                    optimizer.step()
            """,
        "literal-zero-workers": """
            import torch

            val_loader = torch.utils.data.DataLoader(  # expect: TPL501
                torch.load("val.pt"), batch_size=256, num_workers=0, pin_memory=True
            )
            device = torch.device("cuda")
            """,
        "submodule-spelling-in-a-method": """
            from torch.utils.data.dataloader import DataLoader

            class Trainer:
                def __init__(self, dataset):
                    self.loader = DataLoader(dataset, 32, True, pin_memory=True)  # expect: TPL501
                    self.device = "cuda"
            """,
        "dataset-decodes-images-in-getitem": """
            from PIL import Image
            from torch.utils.data import DataLoader, Dataset

            class Photos(Dataset):
                def __init__(self, paths, transform):
                    self.paths = paths
                    self.transform = transform

                def __len__(self):
                    return len(self.paths)

                def __getitem__(self, index):
                    return self.transform(Image.open(self.paths[index]))

            loader = DataLoader(Photos(paths, transform), batch_size=64)  # expect: TPL501
            device = "cuda"
            """,
        "dataset-indexing-a-file-on-disk": """
            import h5py
            import numpy as np
            from torch.utils.data import DataLoader, Dataset

            class Frames(Dataset):
                def __init__(self, path):
                    self.frames = h5py.File(path, "r")["frames"]
                    self.labels = np.load(path + ".labels.npy", mmap_mode="r")

                def __len__(self):
                    return len(self.labels)

                def __getitem__(self, index):
                    return self.frames[index], self.labels[index]

            loader = DataLoader(Frames("train.h5"), batch_size=64)  # expect: TPL501
            device = "cuda"
            """,
        "dataset-of-a-library-class": """
            import torch
            from torch.utils.data import DataLoader
            from torchvision.datasets import CIFAR10

            train_set = CIFAR10("data", train=True, download=True)
            loader = DataLoader(train_set, batch_size=128, shuffle=True)  # expect: TPL501
            device = torch.device("cuda")
            """,
    }
    GOOD = {
        "a-few-reference-batches-read-once": """
            import torch
            from torch.utils.data import DataLoader

            def dump_references(test_set, n_samples, device="cuda"):
                test_loader = DataLoader(test_set, batch_size=1)
                clips = []
                for i, clip in enumerate(test_loader):
                    clips.append(clip.to(device))
                    if i == n_samples - 1:
                        break
                return clips
            """,
        "in-memory-dataset": """
            import torch
            from torch.utils.data import DataLoader, Dataset

            class MyTrainDataset(Dataset):
                def __init__(self, size):
                    self.size = size
                    self.data = [(torch.rand(20), torch.rand(1)) for _ in range(size)]

                def __len__(self):
                    return self.size

                def __getitem__(self, index):
                    return self.data[index]

            def load_train_objs():
                train_set = MyTrainDataset(2048)
                model = torch.nn.Linear(20, 1).cuda()
                return train_set, model

            train_set, model = load_train_objs()
            loader = DataLoader(train_set, batch_size=32, pin_memory=True)
            """,
        "tensor-dataset": """
            import torch
            from torch.utils.data import DataLoader, TensorDataset

            features, labels = torch.load("features.pt")
            loader = DataLoader(TensorDataset(features, labels), batch_size=256, shuffle=True)
            device = torch.device("cuda")
            """,
        "one-off-feature-extraction-in-dataset-process": FEATURE_EXTRACTION_IN_DATASET_PROCESS,
        "workers-given": """
            import torch
            from torch.utils.data import DataLoader

            def loaders(train_set, val_set, args):
                train = DataLoader(train_set, batch_size=64, num_workers=8, pin_memory=True)
                val = DataLoader(val_set, batch_size=64, num_workers=args.workers, pin_memory=True)
                return train, val.to("cuda")
            """,
        "kwargs-could-supply-it": """
            import torch
            from torch.utils.data import DataLoader

            def make_loader(dataset, **loader_kwargs):
                return DataLoader(dataset, batch_size=64, pin_memory=True, **loader_kwargs)

            device = "cuda"
            """,
        "cpu-only-file": """
            from torch.utils.data import DataLoader

            def make_loader(dataset):
                return DataLoader(dataset, batch_size=64)
            """,
        "dataset-already-on-the-gpu": """
            import torch
            from torch.utils.data import DataLoader, TensorDataset

            x = torch.randn(1024, 16).cuda()
            y = torch.randint(0, 2, (1024,), device="cuda")
            loader = DataLoader(TensorDataset(x, y), batch_size=128, shuffle=True)
            """,
        "other-dataloader-class": """
            import torch
            from torch_geometric.loader import DataLoader

            loader = DataLoader(graphs, batch_size=32)
            device = torch.device("cuda")
            """,
    }

    def check(self, node: cst.Call, ctx: Context) -> Iterator[Report]:
        if not ctx.shows_cuda_use or not dataloader(node, ctx, "num_workers"):
            return
        workers = argument(node, "num_workers")
        if workers is not None and int_literal(workers) != 0:
            return
        if dataset_on_device(node, ctx) or ctx.prepares_dataset(node) or read_once(node, ctx):
            return
        dataset = argument(node, "dataset")
        if dataset is not None and ctx.holds_in_memory(dataset):
            return  # workers would have nothing to load, only processes to spawn
        yield self.report(node, how="without num_workers" if workers is None else "with num_workers=0")

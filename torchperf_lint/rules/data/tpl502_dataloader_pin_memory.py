"""TPL502 dataloader-pin-memory: DataLoader without pinned memory feeding a GPU."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from ...engine.context import Context
from ...engine.edits import add_keyword
from ...engine.findings import Fix, Report, Safety
from ..base import Rule
from ..shared_examples import FEATURE_EXTRACTION_IN_DATASET_PROCESS
from ..transfer.pinned import first_copies
from .common import argument, dataloader, dataset_on_device, read_once


class DataloaderPinMemory(Rule):
    """## What it does
    Flags `torch.utils.data.DataLoader(...)` without `pin_memory=True` in a file that shows CUDA use.

    ## Why it is slow
    Batches in pageable host memory are copied to the GPU synchronously, through a staging buffer:
    the copy cannot overlap with compute even with `non_blocking=True`. With `pin_memory=True` the
    loader puts batches in page-locked memory, from which `.to(device, non_blocking=True)` is a true
    asynchronous DMA copy. TPL106 is the rule for the copy's side. The measured effect on an H100 is
    in the Measured section below.

    The two rules divide the work: this rule reports a loader whose batches the file copies plainly
    (or does not copy at all); where the file copies them with `non_blocking=True`, the code already
    asks for an asynchronous copy that the loader cannot give, and TPL106 reports that once, at the
    first such copy, with the same fix on the loader. This rule stays silent on that loader, so the
    problem is reported once whichever rules are on.

    Off by default (RULES.md, "Defaults follow evidence"): on an H100, pinning gained 1.22x
    (0.82-1.54) feeding a small convnet and 1.11x (1.03-1.49) a ResNet-18-sized one: the low ends of
    the intervals stay under 1.05x, and on the ecosystem check none of 10 findings was judged worth
    the change. Enable it with `--extend-select TPL502` for copy-heavy input pipelines.

    ## Fix safety
    Safe: pinning changes where a batch lives in host memory, not its values. The fix adds
    `pin_memory=True`.

    ## When it stays silent
    `pin_memory` written out, whatever its value (`pin_memory=False` and `pin_memory=args.pin` are
    decisions: pinning costs host memory); `**kwargs` or `*args` that could supply it; datasets built
    from tensors already on the GPU (they cannot be pinned); a `collate_fn` that packs the batch into a
    project class with a `to` of its own and no `pin_memory()` (DETR's `NestedTensor`, also when the
    collate lives in another module): the loader's pinning hands such an object back unpinned, so
    the flag would pin only the rest of the batch; files that never use CUDA; classes named
    `DataLoader` that are not torch's; loaders of a dataset's one-off preparation (its
    `process()` or `download()`, run once when the dataset is first built); a loader read for a few
    batches once, every loop over it leaving when its counter reaches a bound.
    """

    code = "TPL502"
    default_on = False
    name = "dataloader-pin-memory"
    summary = "DataLoader without pinned memory feeding a GPU"
    message = (
        "DataLoader returns batches in pageable memory, so their copy to the GPU cannot overlap "
        "compute; pass pin_memory=True"
    )
    fix_safety = Safety.SAFE
    where = "file shows CUDA use"
    node_types = (cst.Call,)
    benchmark = "TPL106"

    BAD = {
        "training-loader": """
            import torch
            from torch.utils.data import DataLoader

            def train(model, dataset, optimizer):
                loader = DataLoader(dataset, batch_size=64, num_workers=4)  # expect: TPL502
                for x, y in loader:
                    loss = model(x.cuda(), y.cuda())
                    loss.backward()
                    optimizer.step()
            """,
        "multi-line-call": """
            import torch
            import torch.utils.data as data

            loader = data.DataLoader(  # expect: TPL502
                data.TensorDataset(*torch.load("train.pt")),
                batch_size=256,
                num_workers=8,
            )
            device = "cuda:0"
            """,
        "loaders-in-a-trainer": """
            import torch
            from torch.utils.data import DataLoader

            class Trainer:
                def __init__(self, train_set, val_set):
                    self.device = torch.device("cuda")
                    self.train_loader = DataLoader(train_set, 32, True, num_workers=4)  # expect: TPL502
                    self.val_loader = DataLoader(val_set, batch_size=64, num_workers=4)  # expect: TPL502
            """,
        "collated-into-a-pinnable-batch-class": """
            import torch
            from torch.utils.data import DataLoader

            class Batch:
                def __init__(self, images, labels):
                    self.images, self.labels = images, labels

                def pin_memory(self):
                    return Batch(self.images.pin_memory(), self.labels.pin_memory())

                def to(self, device, non_blocking=False):
                    return Batch(self.images.to(device, non_blocking=non_blocking), self.labels.to(device))

            def collate(items):
                images, labels = zip(*items)
                return Batch(torch.stack(images), torch.stack(labels))

            loader = DataLoader(dataset, batch_size=64, num_workers=4, collate_fn=collate)  # expect: TPL502
            device = torch.device("cuda")
            """,
    }
    FIXED = {
        "training-loader": """
            import torch
            from torch.utils.data import DataLoader

            def train(model, dataset, optimizer):
                loader = DataLoader(dataset, batch_size=64, num_workers=4, pin_memory=True)
                for x, y in loader:
                    loss = model(x.cuda(), y.cuda())
                    loss.backward()
                    optimizer.step()
            """,
        "multi-line-call": """
            import torch
            import torch.utils.data as data

            loader = data.DataLoader(
                data.TensorDataset(*torch.load("train.pt")),
                batch_size=256,
                num_workers=8,
                pin_memory=True,
            )
            device = "cuda:0"
            """,
        "loaders-in-a-trainer": """
            import torch
            from torch.utils.data import DataLoader

            class Trainer:
                def __init__(self, train_set, val_set):
                    self.device = torch.device("cuda")
                    self.train_loader = DataLoader(train_set, 32, True, num_workers=4, pin_memory=True)
                    self.val_loader = DataLoader(val_set, batch_size=64, num_workers=4, pin_memory=True)
            """,
        "collated-into-a-pinnable-batch-class": """
            import torch
            from torch.utils.data import DataLoader

            class Batch:
                def __init__(self, images, labels):
                    self.images, self.labels = images, labels

                def pin_memory(self):
                    return Batch(self.images.pin_memory(), self.labels.pin_memory())

                def to(self, device, non_blocking=False):
                    return Batch(self.images.to(device, non_blocking=non_blocking), self.labels.to(device))

            def collate(items):
                images, labels = zip(*items)
                return Batch(torch.stack(images), torch.stack(labels))

            loader = DataLoader(dataset, batch_size=64, num_workers=4, collate_fn=collate, pin_memory=True)
            device = torch.device("cuda")
            """,
    }
    GOOD = {
        "one-off-feature-extraction-in-dataset-process": FEATURE_EXTRACTION_IN_DATASET_PROCESS,
        "batches-copied-with-non-blocking-reported-by-tpl106": """
            import torch
            from torch.utils.data import DataLoader

            def train(model, dataset, optimizer):
                loader = DataLoader(dataset, batch_size=64, num_workers=4)  # TPL106, at the first copy
                for x, y in loader:
                    loss = model(x.cuda(non_blocking=True), y.cuda(non_blocking=True))
                    loss.backward()
                    optimizer.step()
            """,
        "pinned-or-decided": """
            import torch
            from torch.utils.data import DataLoader

            def loaders(train_set, val_set, args):
                train = DataLoader(train_set, batch_size=64, num_workers=8, pin_memory=True)
                val = DataLoader(val_set, batch_size=64, num_workers=8, pin_memory=args.pin)
                test = DataLoader(val_set, batch_size=64, num_workers=8, pin_memory=False)
                return train, val, test, torch.device("cuda")
            """,
        "kwargs-could-supply-it": """
            import torch
            from torch.utils.data import DataLoader

            def make_loader(dataset, **loader_kwargs):
                return DataLoader(dataset, batch_size=64, num_workers=4, **loader_kwargs)

            device = "cuda"
            """,
        "cpu-only-file": """
            from torch.utils.data import DataLoader

            def make_loader(dataset):
                return DataLoader(dataset, batch_size=64, num_workers=4)
            """,
        "dataset-already-on-the-gpu": """
            import torch
            from torch.utils.data import DataLoader, TensorDataset

            dataset = TensorDataset(torch.randn(1024, 16, device="cuda"), torch.ones(1024).cuda())
            loader = DataLoader(dataset, batch_size=128, shuffle=True)
            """,
        "collated-into-a-class-pinning-cannot-reach": """
            import torch
            from torch.utils.data import DataLoader

            class NestedTensor:
                def __init__(self, tensors, mask):
                    self.tensors, self.mask = tensors, mask

                def to(self, device):
                    return NestedTensor(self.tensors.to(device), self.mask.to(device))

            def nested_tensor_from_tensor_list(tensors):
                batch = torch.stack(tensors)
                return NestedTensor(batch, torch.zeros(batch.shape[0], dtype=torch.bool))

            def collate_fn(items):
                items = list(zip(*items))
                items[0] = nested_tensor_from_tensor_list(items[0])
                return tuple(items)

            # pinning hands a NestedTensor back as it is: only the small targets would be pinned
            loader = DataLoader(dataset, batch_size=2, num_workers=4, collate_fn=collate_fn)
            device = torch.device("cuda")
            """,
        "other-dataloader-class": """
            import torch
            from torch_geometric.loader import DataLoader

            loader = DataLoader(graphs, batch_size=32, num_workers=4)
            device = torch.device("cuda")
            """,
    }

    def check(self, node: cst.Call, ctx: Context) -> Iterator[Report]:
        if not ctx.shows_cuda_use or not dataloader(node, ctx, "pin_memory"):
            return
        if argument(node, "pin_memory") is not None or dataset_on_device(node, ctx):
            return
        if ctx.collates_unpinned(node) or ctx.prepares_dataset(node) or read_once(node, ctx):
            return
        if first_copies(node, ctx):
            return  # its batches are copied with non_blocking=True: TPL106 reports it there, once
        fix = Fix.replace(node, add_keyword(node, "pin_memory", cst.Name("True")), Safety.SAFE, "pin batches")
        yield self.report(node, fix=fix)

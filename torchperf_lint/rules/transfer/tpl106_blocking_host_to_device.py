"""TPL106 blocking-host-to-device: Batch copied to the device without non_blocking=True."""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from ...engine.context import Context
from ...engine.edits import add_keyword, has_star_kwargs, keyword
from ...engine.findings import Fix, Report, Safety
from ..base import Rule
from .common import (
    cuda_tensor_type,
    to_accelerator,
)
from .pinned import asynchronous_copy, first_copies, pageable_source

_BLOCKING = "of a DataLoader batch blocks the host until the copy ends"
_NON_BLOCKING = "pass non_blocking=True (with pin_memory=True on the DataLoader)"


class BlockingHostToDevice(Rule):
    """## What it does
    Flags `.to(device)`/`.cuda()` (or `.type(torch.cuda.FloatTensor)`, the legacy form, also through
    a name bound to `torch.cuda.FloatTensor if torch.cuda.is_available() else torch.FloatTensor`)
    of a DataLoader batch (the loop target, or an element of it:
    unpacked, indexed, or a value of `{k: v.to(dev) for k, v in batch.items()}`) without
    `non_blocking=True`, in the step loop. A batch drawn in the step loop with `next(it)` counts
    too, where `it` iterates a DataLoader (`iter(loader)`, `itertools.cycle(loader)`, or a
    generator of the file that yields the loader's items, as in `self.dl = cycle(dl)`).

    It also flags a copy that asks for `non_blocking=True` and cannot have it, because it reads
    pageable memory: a batch of a DataLoader of the file built without `pin_memory=True` (or with
    `pin_memory=False`), and a tensor built on the host in the step itself (`torch.cat`/`torch.stack`
    of host tensors, `torch.from_numpy` or `torch.tensor` of data that changes every step, and their
    layout or dtype conversions). Such a copy is staged through a driver buffer, and the host waits
    for it, and for the work queued on the stream before it, as if `non_blocking` were not there.

    ## Why it is slow
    A blocking copy makes the CPU wait until the batch has reached the GPU before it can queue
    the forward pass. With pinned memory (`pin_memory=True` on the DataLoader, TPL502) and
    `non_blocking=True` the copy runs asynchronously and overlaps with queued work. The
    measured effect on an H100 is in the Measured section below.

    How this rule and TPL502 divide the work: TPL502 reports a DataLoader without `pin_memory=True`
    at its construction, for the loaders whose batches the file copies plainly (TPL106's first
    case then names `non_blocking=True` at each copy). Where the file already copies a loader's
    batches with `non_blocking=True`, the one problem is the loader's pinning: this rule reports it
    once, at the first such copy, naming the loader's line, with the fix on the loader; TPL502 stays
    silent on that loader. Tensors built in the step are this rule's alone: no loader setting pins them.

    ## Fix safety
    Safe for tensors: adding `non_blocking=True` to a host-to-device copy never changes the values
    the device computes with, as the copy is ordered on the stream before the kernels that use
    it. Unsafe when the moved value is the loop's whole item (`for batch in loader:
    batch.to(device)`, `next(self.dl).to(device)`), which may be a custom batch class whose `.to` does not accept
    `non_blocking`, and wherever the project defines a class with a `to`/`cuda` of its own that
    takes it (the batch may be one, collated in another module).

    ## When it stays silent
    Calls that pass `non_blocking` (any value, a decision) or `**kwargs`; batches that are not
    certainly tensors in a project that defines a class whose own `to`/`cuda` takes no
    `non_blocking` (DETR's `NestedTensor.to(self, device)`): the argument would raise; `model.to(device)` and
    other values that are not batches; batches of a loader handed to `accelerator.prepare(...)`,
    which places them on the device itself, or of a loader built over data already moved to the
    device (`NeighborLoader(data.to(device), ...)`); a batch drawn once before the step loop;
    dtype casts (`x.to(torch.float16)`) and `.to("cpu")`; moves outside the step loop.
    For `non_blocking=True`: memory that is pinned (a loader with `pin_memory=True`, a
    `.pin_memory()` on the way) or not known to be pageable: a loader passed in or built in another
    module, `pin_memory=args.pin`, `**kwargs` that could supply it, a dtype cast of a pinned batch
    (`y.float()` is a new pageable tensor only where `y` is not float already), a collate into a
    class that pinning cannot reach; data that is the same every step (`torch.from_numpy(GRID)`:
    TPL102's constant to keep on the device). The fix adds `pin_memory=True` to the loader (safe, as
    TPL502's) where the loader leaves it out; `pin_memory=False` written out gets the message only.
    """

    code = "TPL106"
    name = "blocking-host-to-device"
    summary = "Batch copied to the device without non_blocking=True"
    message = "{what} {cause}; {remedy}"
    fix_safety = Safety.SAFE
    where = "step loop"
    node_types = (cst.Call,)
    benchmark = "TPL106"

    BAD = {
        "legacy-cuda-tensor-type": """
            import torch
            from torch.utils.data import DataLoader

            Tensor = torch.cuda.FloatTensor if torch.cuda.is_available() else torch.FloatTensor

            def evaluate(model, dataset):
                loader = DataLoader(dataset, batch_size=8, pin_memory=True, num_workers=4)
                for imgs, targets in loader:
                    imgs = imgs.type(Tensor)  # expect: TPL106
                    with torch.no_grad():
                        outputs = model(imgs)
            """,
        "unpacked-batch": """
            import torch
            from torch.utils.data import DataLoader

            def train(model, dataset, optimizer, device):
                loader = DataLoader(dataset, batch_size=256, pin_memory=True, num_workers=4)
                for imgs, labels in loader:
                    imgs, labels = imgs.to(device), labels.to(device)  # expect: TPL106,TPL106
                    loss = model(imgs, labels)
                    loss.backward()
                    optimizer.step()
            """,
        "whole-batch-cuda": """
            import torch

            def train(model, train_loader, optimizer):
                for step, batch in enumerate(train_loader):
                    batch = batch.cuda()  # expect: TPL106
                    loss = model(batch)
                    loss.backward()
                    optimizer.step()
            """,
        "dict-batch-values": """
            import torch

            def train(model, loader, optimizer, device):
                for batch in loader:
                    batch = {k: v.to(device) for k, v in batch.items()}  # expect: TPL106
                    loss = model(**batch).loss
                    loss.backward()
                    optimizer.step()
            """,
        "indexed-elements-with-dtype": """
            import torch

            device = torch.device("cuda:0")

            def train(model, loader, optimizer):
                for data in loader:
                    inputs = data[0].to(device=device)  # expect: TPL106
                    labels = data[1].to(  # expect: TPL106
                        device, torch.long
                    )
                    loss = model(inputs.float(), labels)
                    loss.backward()
                    optimizer.step()
            """,
        "drawn-with-next-in-step-loop": """
            import torch

            def training_loop(net, dataset, optimizer, device, rounds):
                loader = torch.utils.data.DataLoader(dataset, batch_size=64, pin_memory=True, num_workers=4)
                dataset_iterator = iter(loader)
                while True:
                    for round_idx in range(rounds):
                        images, labels = next(dataset_iterator)
                        images = images.to(device).to(torch.float32) / 127.5 - 1  # expect: TPL106
                        loss = net(images, labels.to(device))  # expect: TPL106
                        loss.sum().backward()
                    optimizer.step()
            """,
        "cycled-loader-in-trainer": """
            import torch
            from torch.utils.data import DataLoader

            def cycle(dl):
                while True:
                    for data in dl:
                        yield data

            class Trainer:
                def __init__(self, model, dataset, device):
                    self.model, self.device = model, device
                    self.dl = cycle(DataLoader(dataset, batch_size=32, pin_memory=True, num_workers=4))
                    self.opt = torch.optim.Adam(model.parameters())

                def train(self, steps, accumulate):
                    for step in range(steps):
                        for _ in range(accumulate):
                            data = next(self.dl).to(self.device)  # expect: TPL106
                            self.model(data).backward()
                        self.opt.step()
                        self.opt.zero_grad()
            """,
        "non-blocking-from-an-unpinned-loader": """
            import torch
            from torch.utils.data import DataLoader

            def train(model, dataset, optimizer, device):
                loader = DataLoader(dataset, batch_size=256, num_workers=4)
                for imgs, labels in loader:
                    imgs = imgs.to(device, non_blocking=True)  # expect: TPL106
                    labels = labels.to(device, non_blocking=True)  # the same loader: reported once
                    loss = model(imgs, labels)
                    loss.backward()
                    optimizer.step()
            """,
        "non-blocking-from-tensors-built-in-the-step": """
            import numpy as np
            import torch

            def train(model, loader, optimizer, envs):
                for views, target in loader:
                    both = torch.cat(views).cuda(non_blocking=True)  # expect: TPL106
                    frames = np.stack([env.render() for env in envs])
                    obs = torch.from_numpy(frames).float().cuda(non_blocking=True)  # expect: TPL106
                    loss = model(both, obs, target.cuda(non_blocking=True))
                    loss.backward()
                    optimizer.step()
            """,
    }
    FIXED = {
        "legacy-cuda-tensor-type": """
            import torch
            from torch.utils.data import DataLoader

            Tensor = torch.cuda.FloatTensor if torch.cuda.is_available() else torch.FloatTensor

            def evaluate(model, dataset):
                loader = DataLoader(dataset, batch_size=8, pin_memory=True, num_workers=4)
                for imgs, targets in loader:
                    imgs = imgs.type(Tensor, non_blocking=True)
                    with torch.no_grad():
                        outputs = model(imgs)
            """,
        "unpacked-batch": """
            import torch
            from torch.utils.data import DataLoader

            def train(model, dataset, optimizer, device):
                loader = DataLoader(dataset, batch_size=256, pin_memory=True, num_workers=4)
                for imgs, labels in loader:
                    imgs, labels = imgs.to(device, non_blocking=True), labels.to(device, non_blocking=True)
                    loss = model(imgs, labels)
                    loss.backward()
                    optimizer.step()
            """,
        "whole-batch-cuda": """
            import torch

            def train(model, train_loader, optimizer):
                for step, batch in enumerate(train_loader):
                    batch = batch.cuda(non_blocking=True)
                    loss = model(batch)
                    loss.backward()
                    optimizer.step()
            """,
        "dict-batch-values": """
            import torch

            def train(model, loader, optimizer, device):
                for batch in loader:
                    batch = {k: v.to(device, non_blocking=True) for k, v in batch.items()}
                    loss = model(**batch).loss
                    loss.backward()
                    optimizer.step()
            """,
        "indexed-elements-with-dtype": """
            import torch

            device = torch.device("cuda:0")

            def train(model, loader, optimizer):
                for data in loader:
                    inputs = data[0].to(device=device, non_blocking=True)
                    labels = data[1].to(
                        device, torch.long, non_blocking=True
                    )
                    loss = model(inputs.float(), labels)
                    loss.backward()
                    optimizer.step()
            """,
        "drawn-with-next-in-step-loop": """
            import torch

            def training_loop(net, dataset, optimizer, device, rounds):
                loader = torch.utils.data.DataLoader(dataset, batch_size=64, pin_memory=True, num_workers=4)
                dataset_iterator = iter(loader)
                while True:
                    for round_idx in range(rounds):
                        images, labels = next(dataset_iterator)
                        images = images.to(device, non_blocking=True).to(torch.float32) / 127.5 - 1
                        loss = net(images, labels.to(device, non_blocking=True))
                        loss.sum().backward()
                    optimizer.step()
            """,
        "cycled-loader-in-trainer": """
            import torch
            from torch.utils.data import DataLoader

            def cycle(dl):
                while True:
                    for data in dl:
                        yield data

            class Trainer:
                def __init__(self, model, dataset, device):
                    self.model, self.device = model, device
                    self.dl = cycle(DataLoader(dataset, batch_size=32, pin_memory=True, num_workers=4))
                    self.opt = torch.optim.Adam(model.parameters())

                def train(self, steps, accumulate):
                    for step in range(steps):
                        for _ in range(accumulate):
                            data = next(self.dl).to(self.device, non_blocking=True)
                            self.model(data).backward()
                        self.opt.step()
                        self.opt.zero_grad()
            """,
        "non-blocking-from-an-unpinned-loader": """
            import torch
            from torch.utils.data import DataLoader

            def train(model, dataset, optimizer, device):
                loader = DataLoader(dataset, batch_size=256, num_workers=4, pin_memory=True)
                for imgs, labels in loader:
                    imgs = imgs.to(device, non_blocking=True)
                    labels = labels.to(device, non_blocking=True)  # the same loader: reported once
                    loss = model(imgs, labels)
                    loss.backward()
                    optimizer.step()
            """,
    }
    GOOD = {
        "host-tensor-type-and-dtype-query": """
            import torch
            from torch.utils.data import DataLoader

            def evaluate(model, dataset):
                loader = DataLoader(dataset, batch_size=8, pin_memory=True, num_workers=4)
                for imgs, targets in loader:
                    imgs = imgs.type(torch.FloatTensor)
                    kind = targets.type()
                    with torch.no_grad():
                        outputs = model(imgs.cuda(non_blocking=True))
            """,
        "second-move-of-a-batch-already-moved": """
            import torch

            def train(netD, loader, optimizer):
                for x, y in loader:
                    x = x.cuda(non_blocking=True)
                    y = y.cuda(non_blocking=True)
                    loss = netD(x.cuda(), y.cuda()).mean()  # no-ops: both are on the device already
                    loss.backward()
                    optimizer.step()
            """,
        "non-blocking-given": """
            import torch

            def train(model, loader, optimizer, device, fast):
                for x, y in loader:
                    x = x.to(device, non_blocking=True)
                    y = y.cuda(non_blocking=fast)
                    loss = model(x, y)
                    loss.backward()
                    optimizer.step()
            """,
        "model-and-outputs": """
            import torch

            def evaluate(model, loader, device):
                model.to(device)
                outputs = []
                for step, (x, y) in enumerate(loader):
                    out = model(x.to(device, non_blocking=True))
                    outputs.append(out.to("cpu"))
                    step_tensor = torch.tensor(step).to(device)
                return outputs, step_tensor
            """,
        "non-blocking-from-pinned-or-unknown-memory": """
            import numpy as np
            import torch
            from torch.utils.data import DataLoader

            GRID = np.linspace(0, 1, 64)

            def train(model, dataset, optimizer, args):
                pinned = DataLoader(dataset, batch_size=64, num_workers=4, pin_memory=True)
                chosen = DataLoader(dataset, batch_size=64, num_workers=4, pin_memory=args.pin_mem)
                for (x, y), (u, v) in zip(pinned, chosen):
                    x = x.cuda(non_blocking=True)
                    y = y.float().cuda(non_blocking=True)  # a new tensor unless y is float already
                    u = u.cuda(non_blocking=True)
                    both = torch.stack([x.cpu(), u.cpu()]).pin_memory().cuda(non_blocking=True)
                    grid = torch.from_numpy(GRID).cuda(non_blocking=True)  # the same data: TPL102's
                    loss = model(x, y, u, v.cuda(non_blocking=True), both, grid)
                    loss.backward()
                    optimizer.step()
            """,
        "dtype-casts": """
            import torch

            def train(model, loader, optimizer):
                for x, y in loader:
                    x = x.to(torch.float16)
                    y = y.to(dtype=torch.long)
                    loss = model(x, y)
                    loss.backward()
                    optimizer.step()
            """,
        "outside-the-step-loop": """
            import torch

            def first_batch(loader, device):
                x, y = next(iter(loader))
                return x.to(device), y.to(device)

            def warm_up(model, loader, device):
                for x, y in loader:
                    pass
                return model(x.to(device))
            """,
        "batch-class-whose-to-takes-no-non-blocking": """
            import torch

            class NestedTensor:
                def __init__(self, tensors, mask):
                    self.tensors, self.mask = tensors, mask

                def to(self, device):
                    return NestedTensor(self.tensors.to(device), self.mask.to(device))

            def train_one_epoch(model, data_loader, optimizer, device):
                for samples, targets in data_loader:
                    samples = samples.to(device)
                    loss = model(samples, targets.to(device))
                    loss.backward()
                    optimizer.step()
            """,
        "keys-and-counters": """
            import torch

            def train(model, loader, optimizer, device, masks):
                for step, batch in enumerate(loader):
                    mask = masks[step].to(device)
                    names = [k.to(device) for k in batch.keys()]
                    loss = model(batch, mask, names)
                    loss.backward()
                    optimizer.step()
            """,
        "drawn-from-a-loader-that-places-batches": """
            import torch
            from torch.utils.data import DataLoader

            def cycle(dl):
                while True:
                    for data in dl:
                        yield data

            def train(model, dataset, optimizer, accelerator, device, steps):
                dl = DataLoader(dataset, batch_size=32, pin_memory=True, num_workers=4)
                dl = accelerator.prepare(dl)
                batches = cycle(dl)
                for step in range(steps):
                    data = next(batches).to(device)
                    loss = model(data)
                    accelerator.backward(loss)
                    optimizer.step()
                for batch in dl:
                    model(batch.to(device))

            def evaluate(model, accelerator, train_dataloader, eval_dataloader):
                model, train_dataloader, eval_dataloader = accelerator.prepare(
                    model, train_dataloader, eval_dataloader
                )
                for step, batch in enumerate(eval_dataloader):
                    batch.to(accelerator.device)
                    outputs = model(**batch)
                    outputs.loss.backward()
            """,
        "loader-over-data-already-on-the-device": """
            import torch
            from torch_geometric.loader import NeighborLoader

            @torch.no_grad()
            def precompute(model, data, device):
                model, data = model.to(device), data.to(device)
                loader = NeighborLoader(data, num_neighbors=[10, 10], batch_size=1024)
                outs = []
                for batch in loader:
                    out = model(batch.to(device))
                    outs.append(out[: batch.batch_size].cpu())
                return torch.cat(outs)
            """,
        "drawn-from-other-iterators": """
            import torch

            def train(model, optimizer, device, steps, noise, loader):
                first = next(iter(loader))
                for step in range(steps):
                    z = next(noise).to(device)
                    weights = next(model.parameters()).to(device)
                    loss = model(z, weights, first.to(device))
                    loss.backward()
                    optimizer.step()
            """,
    }

    def check(self, node: cst.Call, ctx: Context) -> Iterator[Report]:
        func = node.func
        if not isinstance(func, cst.Attribute) or func.attr.value not in ("to", "cuda", "type"):
            return
        retyped = func.attr.value == "type"  # `imgs.type(torch.cuda.FloatTensor)`
        if retyped and not (node.args and cuda_tensor_type(node.args[0].value, ctx)):
            return
        if not retyped and asynchronous_copy(node, ctx):
            yield from self._from_pageable_memory(node, func.value, ctx)
            return
        if keyword(node, "non_blocking") is not None or has_star_kwargs(node):
            return
        positional = sum(1 for arg in node.args if arg.keyword is None)
        if positional > (1 if func.attr.value in ("cuda", "type") else 2):
            return  # `.cuda(d, True)`, `.to(d, dtype, True)`: non_blocking given by position
        if ctx.step_loop(node) is None or not (retyped or to_accelerator(node, ctx)):
            return
        if ctx.batch_loop(func.value) is None:
            return
        custom = ctx.custom_move_takes_non_blocking(func.value)
        if custom is False:
            return  # the batch may be a project class whose `to` has no non_blocking
        safety = Safety.UNSAFE if custom or ctx.is_whole_batch(func.value) else Safety.SAFE
        fixed = add_keyword(node, "non_blocking", cst.Name("True"))
        fix = Fix.replace(node, fixed, safety, "pass non_blocking=True")
        yield self.report(
            node,
            reason=ctx.hot_reason(node),
            fix=fix,
            what=f".{func.attr.value}()",
            cause=_BLOCKING,
            remedy=_NON_BLOCKING,
        )

    def _from_pageable_memory(
        self, node: cst.Call, receiver: cst.BaseExpression, ctx: Context
    ) -> Iterator[Report]:
        """`non_blocking=True` that cannot be: the copy reads pageable memory. Once per loader (at
        its first such copy), since pinning the loader is the one change."""
        pageable = pageable_source(receiver, ctx)
        if pageable is None:
            return
        loader = pageable.loader
        if loader is not None and first_copies(loader, ctx)[:1] != [node]:
            return
        fix = None
        if loader is None:
            remedy = "pin it first with .pin_memory(), or build it in DataLoader workers with pin_memory=True"
        elif pageable.written:
            remedy = "pin_memory=True there is what makes the copy asynchronous"
        else:
            remedy = "pass pin_memory=True to that DataLoader"
            pinned = add_keyword(loader, "pin_memory", cst.Name("True"))
            fix = Fix.replace(loader, pinned, Safety.SAFE, "pin batches")
        assert isinstance(node.func, cst.Attribute)
        yield self.report(
            node,
            reason=ctx.hot_reason(node),
            fix=fix,
            what=f".{node.func.attr.value}(non_blocking=True)",
            cause=(
                f"copies from pageable memory ({pageable.source}): the copy is staged and the host waits for "
                "it and for the work queued before it"
            ),
            remedy=remedy,
        )

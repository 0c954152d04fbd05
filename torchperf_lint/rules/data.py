"""TPL5xx: data loading."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from ..engine.context import Context
from ..engine.edits import add_keyword, keyword
from ..engine.findings import Fix, Report, Safety
from .base import Rule

_DATALOADER = "torch.utils.data.DataLoader"
# DataLoader(dataset, batch_size, shuffle, sampler, batch_sampler, num_workers, collate_fn, pin_memory, ...)
_POSITIONS = {"dataset": 0, "num_workers": 5, "pin_memory": 7}
_ON_DEVICE = (".cuda(", ".to(", "device=")


def dataloader(call: cst.Call, ctx: Context, keyword: str) -> bool:
    """`call` constructs torch's DataLoader, and neither `*args` nor a `**mapping` could pass it
    `keyword`."""
    return (
        ctx.qualified_name(call) == _DATALOADER
        and not any(arg.star == "*" for arg in call.args)
        and not ctx.module_graph.star_kwargs_may_supply(call, keyword)
    )


def argument(call: cst.Call, name: str) -> cst.BaseExpression | None:
    """The value `call` passes for DataLoader's parameter `name`, by keyword or position."""
    found = keyword(call, name)
    if found is not None:
        return found.value
    position = _POSITIONS.get(name)
    positional = [arg for arg in call.args if arg.keyword is None]
    if position is not None and position < len(positional):
        return positional[position].value
    return None


def _int_literal(expr: cst.BaseExpression | None) -> int | None:
    if isinstance(expr, cst.Integer):
        return int(expr.evaluated_value)
    return None


def dataset_on_device(call: cst.Call, ctx: Context) -> bool:
    """The dataset is built from tensors already moved to a device (`TensorDataset(x.cuda(), y)`,
    or names bound to such values): worker processes cannot hold CUDA tensors and pinning them
    fails, so zero workers and no pinning are right for it."""
    dataset = argument(call, "dataset")
    if isinstance(dataset, cst.Name):
        bindings = ctx.bindings(dataset.value, dataset)
        if len(bindings) == 1 and isinstance(bindings[0].node, cst.BaseExpression):
            dataset = bindings[0].node
    if dataset is None:
        return False
    parts: list[cst.CSTNode] = [dataset]
    if isinstance(dataset, cst.Call):
        for arg in dataset.args:
            if isinstance(arg.value, cst.Name):
                bindings = ctx.bindings(arg.value.value, arg.value)
                parts.extend(b.node for b in bindings if b.kind == "assign")
    return any(marker in ctx.code(part) for part in parts for marker in _ON_DEVICE)


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
    classes named `DataLoader` that are not torch's.
    """

    code = "TPL501"
    name = "dataloader-num-workers"
    summary = "DataLoader loads batches in the training process"
    message = (
        "DataLoader {how} loads every batch in the training process while the GPU waits; "
        "pass num_workers=<a few worker processes per GPU>"
    )
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
    }
    GOOD = {
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
        if workers is not None and _int_literal(workers) != 0:
            return
        if dataset_on_device(node, ctx):
            return
        yield self.report(node, how="without num_workers" if workers is None else "with num_workers=0")


class DataloaderPinMemory(Rule):
    """## What it does
    Flags `torch.utils.data.DataLoader(...)` without `pin_memory=True` in a file that shows CUDA use.

    ## Why it is slow
    Batches in pageable host memory are copied to the GPU synchronously, through a staging buffer:
    the copy cannot overlap with compute even with `non_blocking=True`. With `pin_memory=True` the
    loader puts batches in page-locked memory, from which `.to(device, non_blocking=True)` is a true
    asynchronous DMA copy. TPL106 is the rule for the copy's side. The measured effect on an H100 is
    in the Measured section below.

    ## Fix safety
    Safe: pinning changes where a batch lives in host memory, not its values. The fix adds
    `pin_memory=True`.

    ## When it stays silent
    `pin_memory` written out, whatever its value (`pin_memory=False` and `pin_memory=args.pin` are
    decisions: pinning costs host memory); `**kwargs` or `*args` that could supply it; datasets built
    from tensors already on the GPU (they cannot be pinned); files that never use CUDA; classes named
    `DataLoader` that are not torch's.
    """

    code = "TPL502"
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
                    loss = model(x.cuda(non_blocking=True), y.cuda(non_blocking=True))
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
    }
    FIXED = {
        "training-loader": """
            import torch
            from torch.utils.data import DataLoader

            def train(model, dataset, optimizer):
                loader = DataLoader(dataset, batch_size=64, num_workers=4, pin_memory=True)
                for x, y in loader:
                    loss = model(x.cuda(non_blocking=True), y.cuda(non_blocking=True))
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
    }
    GOOD = {
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
        fix = Fix.replace(node, add_keyword(node, "pin_memory", cst.Name("True")), Safety.SAFE, "pin batches")
        yield self.report(node, fix=fix)


class DataloaderPersistentWorkers(Rule):
    """## What it does
    Flags `torch.utils.data.DataLoader(...)` with worker processes (`num_workers` a literal above 0,
    or an expression) and no `persistent_workers`, when the loader (the name or `self.<attr>` it is
    assigned to) is iterated inside an enclosing loop of the same file: an epoch loop around
    `for batch in loader`, or around the call of a function that iterates it.

    ## Why it is slow
    Without persistent workers, every `for batch in loader` starts `num_workers` new processes,
    each of which imports its modules and gets a copy of the dataset, and tears them down at the end
    of the pass: the first batches of every epoch wait for that start-up. The measured effect on an
    H100 is in the Measured section below.

    ## Fix safety
    Unsafe: persistent workers keep their copy of the dataset, so changes made to it between epochs
    in the main process (a curriculum, a resampled index list) are not seen, and their memory stays
    allocated between passes. The fix adds `persistent_workers=True` for a literal worker count and
    `persistent_workers=<expr> > 0` for an expression (PyTorch raises on `persistent_workers=True`
    with zero workers).

    ## When it stays silent
    No `num_workers` or `num_workers=0` (nothing to keep); `persistent_workers` written out, whatever
    its value; loaders iterated once (no enclosing loop), or created inside the loop that repeats the
    iteration (each pass builds a new loader anyway); `**kwargs` or `*args` that could supply it;
    classes named `DataLoader` that are not torch's.
    """

    code = "TPL503"
    name = "dataloader-persistent-workers"
    summary = "DataLoader re-spawns its workers every epoch"
    message = (
        "{loader} starts its {workers} worker processes again on every pass of an enclosing loop; "
        "pass persistent_workers={value}"
    )
    fix_safety = Safety.UNSAFE
    where = "loader re-iterated"
    node_types = (cst.Call,)
    benchmark = "TPL503"

    BAD = {
        "epoch-loop": """
            import torch
            from torch.utils.data import DataLoader

            def train(model, dataset, optimizer, epochs):
                loader = DataLoader(dataset, batch_size=64, num_workers=8)  # expect: TPL503
                for epoch in range(epochs):
                    for x, y in loader:
                        loss = model(x.cuda(), y.cuda())
                        loss.backward()
                        optimizer.step()
            """,
        "loader-passed-to-train-one-epoch": """
            import torch

            def train_one_epoch(model, data_loader, optimizer):
                for step, (images, target) in enumerate(data_loader):
                    model(images).sum().backward()
                    optimizer.step()

            def main(args, model, dataset, optimizer):
                train_loader = torch.utils.data.DataLoader(  # expect: TPL503
                    dataset,
                    batch_size=args.batch_size,
                    num_workers=args.workers,
                )
                for epoch in range(args.epochs):
                    train_one_epoch(model, train_loader, optimizer)
            """,
        "trainer-attribute": """
            from torch.utils.data import DataLoader

            class Trainer:
                def __init__(self, dataset):
                    self.loader = DataLoader(dataset, batch_size=32, num_workers=4)  # expect: TPL503

                def train_epoch(self):
                    for batch in self.loader:
                        self.step(batch)

                def fit(self, epochs):
                    for _ in range(epochs):
                        self.train_epoch()
            """,
    }
    FIXED = {
        "epoch-loop": """
            import torch
            from torch.utils.data import DataLoader

            def train(model, dataset, optimizer, epochs):
                loader = DataLoader(dataset, batch_size=64, num_workers=8, persistent_workers=True)
                for epoch in range(epochs):
                    for x, y in loader:
                        loss = model(x.cuda(), y.cuda())
                        loss.backward()
                        optimizer.step()
            """,
        "loader-passed-to-train-one-epoch": """
            import torch

            def train_one_epoch(model, data_loader, optimizer):
                for step, (images, target) in enumerate(data_loader):
                    model(images).sum().backward()
                    optimizer.step()

            def main(args, model, dataset, optimizer):
                train_loader = torch.utils.data.DataLoader(
                    dataset,
                    batch_size=args.batch_size,
                    num_workers=args.workers,
                    persistent_workers=args.workers > 0,
                )
                for epoch in range(args.epochs):
                    train_one_epoch(model, train_loader, optimizer)
            """,
        "trainer-attribute": """
            from torch.utils.data import DataLoader

            class Trainer:
                def __init__(self, dataset):
                    self.loader = DataLoader(dataset, batch_size=32, num_workers=4, persistent_workers=True)

                def train_epoch(self):
                    for batch in self.loader:
                        self.step(batch)

                def fit(self, epochs):
                    for _ in range(epochs):
                        self.train_epoch()
            """,
    }
    GOOD = {
        "iterated-once": """
            from torch.utils.data import DataLoader

            def evaluate(model, dataset):
                loader = DataLoader(dataset, batch_size=256, num_workers=8)
                return [model(x) for x in loader]

            def predict(model, dataset):
                for x in DataLoader(dataset, num_workers=8):
                    model(x)
            """,
        "persistent-or-no-workers": """
            from torch.utils.data import DataLoader

            def train(model, dataset, epochs, persist):
                a = DataLoader(dataset, num_workers=8, persistent_workers=persist)
                b = DataLoader(dataset, num_workers=0)
                c = DataLoader(dataset)
                for epoch in range(epochs):
                    for loader in (a, b, c):
                        for x in loader:
                            model(x)
            """,
        "loader-rebuilt-every-epoch": """
            from torch.utils.data import DataLoader

            def train(model, dataset, epochs):
                for epoch in range(epochs):
                    loader = DataLoader(dataset, batch_size=32, num_workers=4, shuffle=True)
                    for x in loader:
                        model(x)

            def run_epoch(model, dataset):
                loader = DataLoader(dataset, num_workers=4)
                for x in loader:
                    model(x)

            for epoch in range(10):
                run_epoch(None, None)
            """,
        "same-name-other-loader": """
            from torch.utils.data import DataLoader

            def make(dataset):
                loader = DataLoader(dataset, num_workers=4)
                return loader

            def train(model, loader, epochs):
                for epoch in range(epochs):
                    for x in loader:
                        model(x)
            """,
        "kwargs-could-supply-it": """
            from torch.utils.data import DataLoader

            def train(model, dataset, epochs, **kwargs):
                loader = DataLoader(dataset, num_workers=4, **kwargs)
                for epoch in range(epochs):
                    for x in loader:
                        model(x)
            """,
    }

    def check(self, node: cst.Call, ctx: Context) -> Iterator[Report]:
        if not dataloader(node, ctx, "persistent_workers") or keyword(node, "persistent_workers") is not None:
            return
        workers = argument(node, "num_workers")
        count = _int_literal(workers)
        if workers is None or count == 0:
            return
        repeated = ctx.iterations.repeated_pass(node)
        if repeated is None:
            return
        assert workers is not None
        if count is not None:
            value: cst.BaseExpression = cst.Name("True")
        else:
            value = cst.Comparison(
                left=_operand(workers),
                comparisons=[cst.ComparisonTarget(cst.GreaterThan(), cst.Integer("0"))],
            )
        fix = Fix.replace(
            node,
            add_keyword(node, "persistent_workers", value),
            Safety.UNSAFE,
            "keep the workers between passes",
        )
        shown_value = ctx.module.code_for_node(value)
        yield self.report(node, fix=fix, loader=repeated.target, workers=ctx.code(workers), value=shown_value)


def _operand(expr: cst.BaseExpression) -> cst.BaseExpression:
    """`expr` ready to be the left side of `> 0`: parenthesised unless it binds tighter."""
    expr = expr.deep_clone()
    if isinstance(expr, (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.Integer)) or expr.lpar:
        return expr
    return expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])

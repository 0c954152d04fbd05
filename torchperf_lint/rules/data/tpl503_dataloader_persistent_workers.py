"""TPL503 dataloader-persistent-workers: DataLoader re-spawns its workers every epoch."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from ...engine.context import Context
from ...engine.edits import add_keyword, keyword
from ...engine.findings import Fix, Report, Safety
from ...syntax.walker import dotted_name
from ..base import Rule
from .common import argument, dataloader, int_literal


class DataloaderPersistentWorkers(Rule):
    """## What it does
    Flags `torch.utils.data.DataLoader(...)` with worker processes (`num_workers` a literal above 0,
    or an expression) and no `persistent_workers`, when the loader (the name or `self.<attr>` it is
    assigned to) is iterated inside an enclosing loop: an epoch loop around `for batch in loader`,
    or around the call of a function that iterates it. Across modules, a loader handed to a
    function that iterates it in an epoch loop of its own (`simclr.train(train_loader)`), and one a
    helper builds and returns to a name the caller iterates every epoch
    (`train_loader = get_training_dataloader(...)`), are iterated again and again too.

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
    iteration (each pass builds a new loader anyway); `**kwargs` or `*args` that could supply it (a
    function's own `**kwargs` holds the keys every call of the project hands it, where those are
    known: `make_data_loader(args, **kwargs)` with `kwargs = {'num_workers': ..., 'pin_memory': True}`);
    classes named `DataLoader` that are not torch's.
    """

    code = "TPL503"
    name = "dataloader-persistent-workers"
    summary = "DataLoader re-spawns its workers every epoch"
    message = (
        "{loader} starts its {workers} again on every pass of an enclosing loop; "
        "pass persistent_workers={value}{needs}"
    )
    fix_safety = Safety.UNSAFE
    where = "loader re-iterated"
    node_types = (cst.Call,)
    benchmark = "TPL503"

    BAD = {
        "workers-in-a-dict-of-loader-arguments": """
            import os
            import torch
            from torch.utils.data import DataLoader

            def train_model(model, train_set, optimizer, epochs, batch_size):
                loader_args = dict(batch_size=batch_size, num_workers=os.cpu_count(), pin_memory=True)
                train_loader = DataLoader(train_set, shuffle=True, **loader_args)  # expect: TPL503
                for epoch in range(1, epochs + 1):
                    for batch in train_loader:
                        model(batch["image"].cuda()).sum().backward()
                        optimizer.step()
            """,
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
        "workers-in-a-dict-of-loader-arguments": """
            import os
            import torch
            from torch.utils.data import DataLoader

            def train_model(model, train_set, optimizer, epochs, batch_size):
                loader_args = dict(batch_size=batch_size, num_workers=os.cpu_count(), pin_memory=True)
                train_loader = DataLoader(train_set, shuffle=True, **loader_args, persistent_workers=os.cpu_count() > 0)
                for epoch in range(1, epochs + 1):
                    for batch in train_loader:
                        model(batch["image"].cuda()).sum().backward()
                        optimizer.step()
            """,
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
        workers = argument(node, "num_workers", ctx)
        count = int_literal(workers)
        if workers is None or count == 0:
            return
        persistent = ctx.api("persistent_workers")
        if not persistent.usable:
            return
        repeated = ctx.iterations.repeated_pass(node)
        if repeated is not None:
            loader = repeated.target
        elif ctx.entry.reiterated_loaders and ctx.line_of(node) in ctx.entry.reiterated_loaders:
            bound = ctx.iterations.bound_target(node)  # iterated again and again by another function
            loader = (dotted_name(bound) if bound is not None else None) or "this DataLoader"
        else:
            return
        assert workers is not None
        if count is not None:
            value: cst.BaseExpression = cst.Name("True")
        else:
            value = cst.Comparison(
                left=_operand(workers),
                comparisons=[cst.ComparisonTarget(cst.GreaterThan(), cst.Integer("0"))],
            )
        fix = None
        if persistent.writable:
            fix = Fix.replace(
                node,
                add_keyword(node, "persistent_workers", value),
                Safety.UNSAFE,
                "keep the workers between passes",
            )
        yield self.report(
            node,
            fix=fix,
            loader=loader,
            workers=f"{ctx.code(workers)} worker process{'' if count == 1 else 'es'}",
            value=ctx.module.code_for_node(value),
            needs="" if persistent.writable else f" ({persistent.needs()})",
        )


def _operand(expr: cst.BaseExpression) -> cst.BaseExpression:
    """`expr` ready to be the left side of `> 0`: parenthesised unless it binds tighter."""
    expr = expr.deep_clone()
    if isinstance(expr, (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.Integer)) or expr.lpar:
        return expr
    return expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])

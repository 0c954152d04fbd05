"""TPL402 data-parallel: nn.DataParallel instead of DistributedDataParallel."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from ...engine.context import Context
from ...engine.findings import Report
from ..base import Rule

_DATA_PARALLEL = frozenset(
    {
        "torch.nn.DataParallel",
        "torch.nn.parallel.DataParallel",
        "torch.nn.parallel.data_parallel.DataParallel",
    }
)


class DataParallel(Rule):
    """## What it does
    Flags `nn.DataParallel(...)` (also spelled `torch.nn.parallel.DataParallel`).

    ## Why it is slow
    DataParallel runs one Python process that drives every GPU: each step it scatters the batch,
    replicates the model to every device, runs the replicas in threads that contend for the GIL and
    gathers the outputs on the first GPU, which also holds the optimizer. The PyTorch documentation
    recommends `DistributedDataParallel` (one process per GPU, gradients all-reduced while backward
    runs) even on a single machine. Measured on two GPUs: the gap is largest when steps are short
    (launch-bound), where DataParallel's per-step scatter, replicate and gather dominate.

    ## Fix safety
    No automatic fix: moving to DistributedDataParallel needs a launcher (`torchrun`), a process
    group and a `DistributedSampler`.

    ## When it stays silent
    `isinstance(model, nn.DataParallel)` checks and classes deriving from it (only construction is
    flagged); classes named DataParallel that do not come from `torch.nn`; a module that also
    builds a `DistributedDataParallel` (itself, or through a project helper that returns one, like
    yolov5's `smart_DDP`), or that defines a class whose project base has another subclass that
    builds one (Lightning's `DataParallelStrategy` beside `DDPStrategy`): the project already
    offers DDP, DataParallel is its single-process fallback or the user's pick among
    alternatives, and moving to DDP is a launch choice, not a code change. A wrapper over one GPU on the
    default run, where DataParallel calls the module directly: the file sets `CUDA_VISIBLE_DEVICES`
    only to one device (a literal, or an option whose default names one, like `--gpu_id '0'`), or
    `device_ids` holds one device by default (a one-element list, a parameter defaulting to one, an
    option defaulting to `'0'` that the code splits). A default of `'0,1'`, `list(range(n))`, or the
    variable read from the environment leave it reported.
    """

    code = "TPL402"
    name = "data-parallel"
    summary = "nn.DataParallel instead of DistributedDataParallel"
    message = "nn.DataParallel drives every GPU from one process under the GIL; use DistributedDataParallel"
    default_on = False  # below the real-code precision bar (evidence.py, precision.json)
    where = "anywhere"
    node_types = (cst.Call,)
    benchmark = "TPL402"

    BAD = {
        "wrap-the-model": """
            import torch
            import torch.nn as nn

            model = nn.Linear(1024, 1024)
            if torch.cuda.device_count() > 1:
                model = nn.DataParallel(model)  # expect: TPL402
            """,
        "parallel-module-with-device-ids": """
            import torch
            from torch.nn.parallel import DataParallel

            def build(net):
                return DataParallel(net.cuda(), device_ids=[0, 1])  # expect: TPL402
            """,
        "aliased-torch-in-a-trainer": """
            import torch as th

            class Trainer:
                def __init__(self, model):
                    self.model = th.nn.DataParallel(model).cuda()  # expect: TPL402
            """,
        "ddp-only-in-another-script": """
            import torch.nn as nn

            def build(net, gpus):
                if len(gpus) > 1:
                    return nn.DataParallel(net, device_ids=gpus)  # expect: TPL402
                return net
            """,
        "two-gpus-by-default": """
            import argparse
            import os
            import torch.nn as nn

            parser = argparse.ArgumentParser()
            parser.add_argument("--gpu_id", type=str, default="0,1")
            opts = parser.parse_args()
            os.environ["CUDA_VISIBLE_DEVICES"] = opts.gpu_id
            model = nn.DataParallel(nn.Linear(8, 8))  # expect: TPL402
            """,
        "every-gpu-counted": """
            import torch
            import torch.nn as nn

            def wrap(model):
                return nn.DataParallel(model, device_ids=list(range(torch.cuda.device_count())))  # expect: TPL402
            """,
        "visible-gpus-from-the-environment": """
            import os
            import torch.nn as nn

            os.environ["CUDA_VISIBLE_DEVICES"] = os.environ.get("GPUS", "0")
            model = nn.DataParallel(nn.Linear(8, 8))  # expect: TPL402
            """,
    }
    GOOD = {
        "one-visible-gpu-by-default": """
            import argparse
            import os
            import torch.nn as nn

            parser = argparse.ArgumentParser()
            parser.add_argument("--gpu_id", type=str, default="0")
            opts = parser.parse_args()
            os.environ["CUDA_VISIBLE_DEVICES"] = opts.gpu_id
            model = nn.DataParallel(nn.Linear(8, 8))  # one GPU: calls the module directly
            """,
        "device-ids-split-from-a-one-gpu-option": """
            import argparse
            import torch.nn as nn

            parser = argparse.ArgumentParser()
            parser.add_argument("--gpu-ids", type=str, default="0")
            args = parser.parse_args()
            args.gpu_ids = [int(s) for s in args.gpu_ids.split(",")]
            model = nn.DataParallel(nn.Linear(8, 8), device_ids=args.gpu_ids)
            """,
        "one-device-parameter-default": """
            import torch

            class Metric:
                def initialize(self, net, gpu_ids=[0]):
                    self.net = torch.nn.DataParallel(net.to(gpu_ids[0]), device_ids=gpu_ids)
            """,
        "fallback-beside-ddp": """
            import torch
            import torch.nn as nn

            def wrap(model, args):
                if args.distributed:
                    return nn.parallel.DistributedDataParallel(model, device_ids=[args.gpu])
                if torch.cuda.device_count() > 1:
                    return nn.DataParallel(model)  # single-process fallback
                return model
            """,
        "distributed-data-parallel": """
            import torch
            from torch.nn.parallel import DistributedDataParallel as DDP

            def wrap(model, rank):
                return DDP(model.to(rank), device_ids=[rank])
            """,
        "isinstance-unwrap": """
            import torch.nn as nn

            def unwrap(model):
                if isinstance(model, (nn.DataParallel, nn.parallel.DistributedDataParallel)):
                    return model.module
                return model
            """,
        "subclass-definition": """
            import torch.nn as nn

            class Parallel(nn.DataParallel):
                def __getattr__(self, name):
                    return super().__getattr__(name)
            """,
        "other-library": """
            from mylib.parallel import DataParallel

            model = DataParallel(object())
            """,
    }

    def check(self, node: cst.Call, ctx: Context) -> Iterator[Report]:
        if (
            ctx.qualified_name(node) in _DATA_PARALLEL
            and ctx.entry.offers_ddp is None
            and not ctx.one_device_by_default(node)
        ):
            yield self.report(node)

"""TPL403 cudnn-benchmark-off: Conv training script without cudnn.benchmark."""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst

from ...analysis.vocabulary import NN_CONVS
from ...engine.context import Context
from ...engine.edits import insert_after_imports
from ...engine.findings import Fix, Report, Safety
from ..base import Rule
from .common import nn_class

# Settings that show cuDNN's algorithm choice was thought about (benchmark on or off, determinism).
_CUDNN_DECISIONS = frozenset(
    {
        "torch.backends.cudnn.benchmark",
        "torch.backends.cudnn.deterministic",
    }
)
_CUDNN_DECISION_CALLS = frozenset({"torch.backends.cudnn.flags", "torch.use_deterministic_algorithms"})


def _assigned(assign: cst.Assign) -> Iterator[cst.BaseExpression]:
    """Every target, tuple targets unpacked (`cudnn.deterministic, cudnn.benchmark = True, False`)."""
    pending: list[cst.BaseExpression] = [t.target for t in assign.targets]
    while pending:
        target = pending.pop()
        if isinstance(target, (cst.Tuple, cst.List)):
            pending.extend(element.value for element in target.elements)
        else:
            yield target


class CudnnBenchmarkOff(Rule):
    """## What it does
    Flags a training script (a file that calls `.backward()` or runs a step loop) that builds
    convolutions (`nn.Conv*d`, `nn.ConvTranspose*d`) and never sets
    `torch.backends.cudnn.benchmark = True`. One finding per file, on the first conv constructor.
    Off by default.

    ## Why it is slow
    With `benchmark` off, cuDNN picks a convolution algorithm by heuristics; with it on, it times
    the candidates for each new input shape once and keeps the fastest, which pays off when shapes
    stay fixed. For common convolutions such as 3x3 with fixed shapes, recent cuDNN heuristics
    already pick well, so the rule is off by default. The measured effect on an H100 is in the
    Measured section below.

    ## Fix safety
    Unsafe: the fix inserts `torch.backends.cudnn.benchmark = True` after the imports. Autotuning
    makes the first step of each new input shape slow (variable shapes re-tune over and over) and
    may choose non-deterministic algorithms, so results can differ from run to run.

    ## When it stays silent
    Projects with a module that assigns `torch.backends.cudnn.benchmark` (to anything, also in a
    tuple assignment) or `torch.backends.cudnn.deterministic`, or calls
    `torch.use_deterministic_algorithms(...)` or `torch.backends.cudnn.flags(...)`: the choice was
    made; helper modules that another module of the project imports (the finding belongs to the
    script that runs the training); files without a training step or without convolutions (a
    model file whose only `.backward()` is a one-step usage example under
    `if __name__ == "__main__":`, outside any loop, trains nothing); files
    that never use CUDA; test files.
    """

    code = "TPL403"
    name = "cudnn-benchmark-off"
    summary = "Conv training script without cudnn.benchmark"
    message = (
        "cuDNN picks convolution algorithms by heuristics instead of timing them for this training "
        "script; set torch.backends.cudnn.benchmark = True after the imports"
    )
    default_on = False
    fix_safety = Safety.UNSAFE
    where = "file with a training step and convolutions"
    node_types = (cst.Call, cst.Assign)
    benchmark = "TPL403"

    BAD = {
        "convnet-training-script": """
            import torch
            import torch.nn as nn

            model = nn.Sequential(
                nn.Conv2d(3, 64, 3, padding=1),  # expect: TPL403
                nn.ReLU(),
                nn.Conv2d(64, 64, 3, padding=1),
            ).cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

            def train(loader):
                for images, labels in loader:
                    loss = model(images.cuda()).mean()
                    loss.backward()
                    optimizer.step()
            """,
        "module-class-and-step-loop": """
            import torch.nn as nn
            from torch.optim import AdamW

            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.up = nn.ConvTranspose2d(8, 8, 2, stride=2)  # expect: TPL403

                def forward(self, x):
                    return self.up(x)

            def fit(net, train_loader, device="cuda"):
                optimizer = AdamW(net.parameters())
                for x, y in train_loader:
                    optimizer.zero_grad()
                    net(x.to(device)).sum().backward()
                    optimizer.step()
            """,
        "aliased-torch": """
            import torch as th

            net = th.nn.Conv3d(1, 4, 3).cuda()  # expect: TPL403
            for step in range(100):
                net(th.randn(2, 1, 16, 16, 16, device="cuda")).sum().backward()
            """,
        "training-loop-under-main": """
            import torch
            import torch.nn as nn

            if __name__ == "__main__":
                net = nn.Conv2d(3, 3, 3).cuda()  # expect: TPL403
                for _ in range(1000):
                    net(torch.randn(8, 3, 64, 64, device="cuda")).mean().backward()
            """,
    }
    FIXED = {
        "convnet-training-script": """
            import torch
            import torch.nn as nn
            torch.backends.cudnn.benchmark = True

            model = nn.Sequential(
                nn.Conv2d(3, 64, 3, padding=1),
                nn.ReLU(),
                nn.Conv2d(64, 64, 3, padding=1),
            ).cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

            def train(loader):
                for images, labels in loader:
                    loss = model(images.cuda()).mean()
                    loss.backward()
                    optimizer.step()
            """,
        "module-class-and-step-loop": """
            import torch
            import torch.nn as nn
            from torch.optim import AdamW
            torch.backends.cudnn.benchmark = True

            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.up = nn.ConvTranspose2d(8, 8, 2, stride=2)

                def forward(self, x):
                    return self.up(x)

            def fit(net, train_loader, device="cuda"):
                optimizer = AdamW(net.parameters())
                for x, y in train_loader:
                    optimizer.zero_grad()
                    net(x.to(device)).sum().backward()
                    optimizer.step()
            """,
        "aliased-torch": """
            import torch as th
            th.backends.cudnn.benchmark = True

            net = th.nn.Conv3d(1, 4, 3).cuda()
            for step in range(100):
                net(th.randn(2, 1, 16, 16, 16, device="cuda")).sum().backward()
            """,
    }
    GOOD = {
        "one-step-usage-example-in-a-model-file": """
            import torch
            import torch.nn as nn

            class Unet(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.conv = nn.Conv2d(3, 3, 3, padding=1)

                def forward(self, x):
                    return self.conv(x)

            if __name__ == "__main__":
                model = Unet().cuda()
                loss = model(torch.randn(8, 3, 64, 64).cuda()).mean()
                loss.backward()
            """,
        "benchmark-already-set": """
            import torch
            from torch.backends import cudnn

            cudnn.benchmark = True
            net = torch.nn.Conv2d(3, 8, 3).cuda()
            for x in torch.randn(10, 1, 3, 8, 8, device="cuda"):
                net(x).sum().backward()
            """,
        "deterministic-on-purpose": """
            import torch

            torch.backends.cudnn.benchmark = False
            torch.backends.cudnn.deterministic = True
            net = torch.nn.Conv2d(3, 8, 3).cuda()
            net(torch.randn(1, 3, 8, 8).cuda()).sum().backward()
            """,
        "tuple-assignment-keeps-it-off": """
            import torch

            torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = True, False
            net = torch.nn.Conv2d(3, 8, 3).cuda()
            net(torch.randn(1, 3, 8, 8).cuda()).sum().backward()
            """,
        "model-definition-only": """
            import torch.nn as nn

            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.conv = nn.Conv2d(3, 8, 3)

                def forward(self, x):
                    return self.conv(x).cuda()
            """,
        "training-without-convolutions": """
            import torch

            mlp = torch.nn.Linear(8, 8).cuda()
            for x in torch.randn(10, 4, 8, device="cuda"):
                mlp(x).sum().backward()
            """,
        "cpu-only-script": """
            import torch

            net = torch.nn.Conv2d(3, 8, 3)
            for x in torch.randn(10, 1, 3, 8, 8):
                net(x).sum().backward()
            """,
    }

    def check_file(self, ctx: Context) -> Iterator[Report]:
        # the choice made anywhere in the project, or a helper module other modules import
        if ctx.is_test_file or not ctx.shows_cuda_use or ctx.entry.cudnn_decided or ctx.entry.imported:
            return
        # a module-level `.backward()` outside loops is a one-step usage example, not training
        backwards = [c for c in ctx.facts.method_calls.get("backward", ()) if not ctx.hot.runs_once(c)]
        if not backwards and not ctx.hot.step_loops:
            return
        for assign in ctx.nodes(cst.Assign):
            assert isinstance(assign, cst.Assign)
            if any(ctx.qualified_name(t) in _CUDNN_DECISIONS for t in _assigned(assign)):
                return
        calls = ctx.nodes(cst.Call)
        for call in calls:
            assert isinstance(call, cst.Call)
            if ctx.qualified_name(call) in _CUDNN_DECISION_CALLS:
                return
        first = next((c for c in calls if isinstance(c, cst.Call) and nn_class(c, ctx, NN_CONVS)), None)
        if first is None:
            return
        alias, needs_import = ctx.torch_name()
        fix = None
        insertion = insert_after_imports(ctx, f"{alias}.backends.cudnn.benchmark = True")
        if insertion is not None:
            fix = Fix.replace(*insertion, Safety.UNSAFE, "enable cuDNN autotuning", needs_import)
        yield self.report(first, fix=fix)

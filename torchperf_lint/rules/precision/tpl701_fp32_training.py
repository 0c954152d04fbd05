"""TPL701 fp32-training: CUDA training in full fp32."""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from ...engine.context import Context
from ...engine.edits import insert_after_imports, keyword
from ...engine.findings import Fix, Report, Safety
from ...syntax.walker import dotted_name, imported_names
from ..base import Rule
from .common import torch_optimizer

# Any of these names in a file means someone chose its precision: autocast, loss scaling,
# reduced-precision dtypes and tensor types, apex's mixed precision.
_REDUCED_PRECISION = frozenset(
    {
        "torch.autocast",
        "torch.amp.autocast",
        "torch.amp.autocast_mode.autocast",
        "torch.cuda.amp.autocast",
        "torch.cuda.amp.autocast_mode.autocast",
        "torch.cpu.amp.autocast",
        "torch.GradScaler",
        "torch.amp.GradScaler",
        "torch.amp.grad_scaler.GradScaler",
        "torch.cuda.amp.GradScaler",
        "torch.cuda.amp.grad_scaler.GradScaler",
        "torch.float16",
        "torch.half",
        "torch.bfloat16",
        "torch.HalfTensor",
        "torch.BFloat16Tensor",
        "torch.cuda.HalfTensor",
        "torch.cuda.BFloat16Tensor",
        "apex.amp",
    }
)
_AUTOCASTS = frozenset(name for name in _REDUCED_PRECISION if name.endswith("autocast"))
_CAST_METHODS = frozenset({"half", "bfloat16"})
_MATMUL_PRECISION = frozenset({"torch.set_float32_matmul_precision"})
# Assignments that turn on TF32 (or lower) for matmuls. cudnn.allow_tf32 is True by default and
# covers convolutions only, so setting it says nothing about matmuls.
_TF32_FLAGS = frozenset({"torch.backends.cuda.matmul.allow_tf32"})
_FP32_PRECISION_FLAGS = frozenset(
    {"torch.backends.fp32_precision", "torch.backends.cuda.matmul.fp32_precision"}
)
# Objects that run backward for the user and own its precision (accelerate, Lightning Fabric,
# DeepSpeed engines).
_DELEGATED_BACKWARD = ("accelerator", "fabric", "engine", "strategy", "trainer")
# Names of a precision switch the project keeps itself: `with self.autocast:` built from a config,
# `self.scaler.scale(loss)`, apex's `amp.scale_loss(...)`, an `amp`/`use_amp` option. The author
# has decided the precision, whatever the config says.
_PRECISION_SWITCHES = frozenset(
    {"autocast", "scaler", "grad_scaler", "scale_loss", "amp", "use_amp", "mixed_precision"}
)


def _chooses_precision(call: cst.Call, ctx: Context) -> bool:
    """The call picks a precision other than full fp32."""
    func = call.func
    if isinstance(func, cst.Attribute) and func.attr.value in _CAST_METHODS and not call.args:
        return True
    # any argument is the author's decision, "highest" too: like `fused=False` written out for
    # TPL702, full fp32 asked for by name is a choice the rule does not second-guess
    return ctx.qualified_name(call) in _MATMUL_PRECISION and bool(call.args)


def _sets_precision_flag(attribute: cst.Attribute, ctx: Context) -> bool:
    """An assignment to `torch.backends.cuda.matmul.allow_tf32` or `...fp32_precision`, whatever
    its value: TF32 turned on, or turned off on purpose (NVlabs/edm switches it off for
    reproducibility), is a decision about matmul precision."""
    target = ctx.parent(attribute)
    assign = ctx.parent(target) if isinstance(target, cst.AssignTarget) else None
    if not isinstance(assign, cst.Assign):
        return False
    return ctx.qualified_name(attribute) in _TF32_FLAGS | _FP32_PRECISION_FLAGS


def _runs_own_backward(call: cst.Call) -> bool:
    """`loss.backward()`, not `accelerator.backward(loss)`: a trainer object owns that step."""
    assert isinstance(call.func, cst.Attribute)
    receiver = (dotted_name(call.func.value) or "").split(".")[-1].lower()
    return not any(word in receiver for word in _DELEGATED_BACKWARD)


def _inside_backward_wrapper(call: cst.Call, ctx: Context) -> bool:
    """`def backward(self, loss): loss.backward()` (LightningModule.backward, a `manual_backward`
    helper) runs backward for its callers, which own the step and its precision."""
    function = ctx.facts.enclosing_function(call)
    return function is not None and "backward" in function.name.value


class Fp32Training(Rule):
    """## What it does
    Flags a CUDA training file (it calls `.backward()`, builds or steps an optimizer, and shows
    CUDA use or runs on CUDA for a module that does: DETR's `engine.py`, whose `train_one_epoch`
    the CUDA script `main.py` calls every epoch, unless a module that imports it names a precision
    decision, as a script that sets TF32 for the engine it runs does) with no reduced precision
    anywhere in it: no `torch.autocast` / `torch.cuda.amp.autocast` /
    `torch.amp.autocast`, no `GradScaler`, no `torch.set_float32_matmul_precision(...)`, no assignment
    to `torch.backends.cuda.matmul.allow_tf32` (or `fp32_precision`),
    no `.half()` / `.bfloat16()` and no `torch.float16` / `torch.bfloat16` / `torch.half`. One finding per file, on the first `.backward()`.

    ## Why it is slow
    PyTorch runs float32 matmuls in full IEEE fp32 by default, so the tensor cores of an Ampere
    or Hopper GPU sit idle. TF32 and bf16 autocast run them on the tensor cores, which helps
    matmul-heavy models most. The measured effect on an H100 is in the Measured section below.

    ## Fix safety
    Unsafe: the fix inserts `torch.set_float32_matmul_precision("high")` after the imports. TF32
    keeps fp32's range but rounds matmul inputs to a 10-bit mantissa, so results change slightly;
    most training is indifferent to it, but the change is a numerics decision. A file without a
    top-level import gets the message only.

    ## When it stays silent
    Test files; CPU-only files (no `.cuda(`, `"cuda..."` or `torch.cuda.`); files with any of the
    reduced-precision markers above, including a precision chosen by an expression
    (`set_float32_matmul_precision(args.precision)`) and full fp32 chosen by name
    (`set_float32_matmul_precision("highest")`, `torch.backends.cuda.matmul.allow_tf32 = False`:
    a decision, like `fused=False` written out for TPL702) or a precision switch the project keeps
    itself (`with self.autocast:`, `self.scaler.scale(loss)`, apex's `amp.scale_loss(...)`, an
    `amp`/`use_amp`/`mixed_precision` option), wherever the default run may use them: a marker
    only an opt-in command-line option switches on does not count, and the message names its line
    (`if args.half: model.half()` with `--half` opt-in; `autocast(enabled=amp)` and
    `GradScaler(enabled=amp)` where every project caller passes `amp=args.amp` and `--amp` is
    opt-in; an autocast whose dtype the default run looks up as float32, `{"float32": torch.float32,
    "bfloat16": torch.bfloat16}[args.dtype]` with `--dtype` float32 by default, which CUDA autocast
    turns off, and the dict's other dtypes with it; the report then goes on the first
    `.backward()` the default run takes); a dtype that only converts a copy on the host
    (`tensor.cpu().to(torch.bfloat16)`, written to a file) is no precision decision; files that hand the step to a trainer
    (Lightning, Hugging Face `Trainer`, `accelerator.backward(loss)`, `fabric.backward(loss)`,
    `self.trainer.strategy.backward(loss)`, or a `def backward(self, loss)` hook that runs it
    for its callers), which own the precision setting; files whose every step runs in a function
    that the project calls only from other modules naming a precision decision, none behind an
    option that is off by default (a helper `train()` that `T5_training.py` calls with a model it
    wrapped in FSDP under a bfloat16 `MixedPrecision` policy; not an engine whose `main.py` has
    autocast behind `--use_amp`, False by default), whose process sets it; files whose model runs reduced precision
    by itself on its default configuration (a model class the file constructs, or one it builds,
    casts to float16/bfloat16 or enters autocast in `forward`/`__init__` on a path its defaults
    take: `use_fp16=True`, `num_fp16_res=4`; a `use_fp16=False` path is off by default and does
    not count); files with a `.backward()` but no optimizer (neither a
    `torch.optim` constructor nor an `optimizer.step()`): gradient checks and debugging helpers. `torch.backends.cudnn.allow_tf32 = True` does not count: it
    is already the default and covers convolutions only.
    """

    code = "TPL701"
    name = "fp32-training"
    summary = "CUDA training in full fp32"
    message = (
        "this CUDA training step runs its matmuls in full fp32 without tensor cores; "
        'call {torch}.set_float32_matmul_precision("high") (TF32{needs}) or train under '
        '{torch}.autocast("cuda", dtype={torch}.bfloat16) (both change numerics slightly){opt_in}'
    )
    fix_safety = Safety.UNSAFE
    where = "file with a training step"
    node_types = (cst.Call, cst.Attribute, cst.Import, cst.ImportFrom)
    benchmark = "TPL701"

    BAD = {
        "plain-training-loop": """
            import torch
            import torch.nn as nn

            model = nn.Linear(512, 10).cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1, fused=True)
            for x, y in loader:
                loss = nn.functional.cross_entropy(model(x.cuda()), y.cuda())
                loss.backward()  # expect: TPL701
                optimizer.step()
            """,
        "aliased-torch-and-device-string": """
            import torch as th
            from torch import nn

            def train(model: nn.Module, batches, optimizer):
                model.to("cuda")
                for x, y in batches:
                    out = model(x.to("cuda"))
                    (out - y.to("cuda")).pow(2).mean().backward()  # expect: TPL701
                    optimizer.step()
            """,
        "only-cudnn-tf32": """
            import torch

            torch.backends.cudnn.allow_tf32 = True

            def step(model, x, optimizer):
                model(x.cuda()).sum().backward()  # expect: TPL701
                optimizer.step()
            """,
        "no-torch-import": """
            from torch import nn

            def step(model: nn.Module, x, optimizer):
                model(x.cuda()).sum().backward()  # expect: TPL701
                optimizer.step()
            """,
        "half-precision-behind-an-opt-in-option": """
            import argparse

            import torch

            parser = argparse.ArgumentParser()
            parser.add_argument("--half", action="store_true")
            args = parser.parse_args()

            model = torch.nn.Linear(512, 10).cuda()
            if args.half:
                model.half()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1, fused=True)
            for x, y in loader:
                loss = torch.nn.functional.cross_entropy(model(x.cuda()), y.cuda())
                loss.backward()  # expect: TPL701
                optimizer.step()
            """,
        "autocast-to-float32-by-default": """
            import argparse

            import torch

            parser = argparse.ArgumentParser()
            parser.add_argument("--dtype", type=str, default="float32", help="float32|bfloat16")
            args = parser.parse_args()

            ptdtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[args.dtype]
            autocast = torch.amp.autocast(device_type="cuda", dtype=ptdtype)
            model = torch.nn.Linear(512, 10).cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1, fused=True)
            for x, y in loader:
                with autocast:
                    loss = torch.nn.functional.cross_entropy(model(x.cuda()), y.cuda())
                loss.backward()  # expect: TPL701
                optimizer.step()
            """,
        "bfloat16-only-in-a-copy-written-out": """
            import torch

            def write_bf16(tensor, file):
                file.write(tensor.detach().cpu().to(torch.bfloat16).view(torch.int16).numpy().tobytes())

            def train(model, loader, optimizer, file):
                model.cuda()
                for x, y in loader:
                    loss = torch.nn.functional.cross_entropy(model(x.cuda()), y.cuda())
                    loss.backward()  # expect: TPL701
                    optimizer.step()
                write_bf16(model.weight, file)
            """,
        "autocast-switched-off-by-an-opt-in-option": """
            import argparse

            import torch

            def train(model, loader, optimizer, amp=False):
                scaler = torch.cuda.amp.GradScaler(enabled=amp)
                for x, y in loader:
                    with torch.autocast("cuda", enabled=amp):
                        loss = model(x.cuda(), y.cuda())
                    scaler.scale(loss).backward()  # expect: TPL701
                    scaler.step(optimizer)
                    scaler.update()

            parser = argparse.ArgumentParser()
            parser.add_argument("--amp", action="store_true", default=False)
            args = parser.parse_args()
            train(model, loader, optimizer, amp=args.amp)
            """,
    }
    FIXED = {
        "plain-training-loop": """
            import torch
            import torch.nn as nn

            torch.set_float32_matmul_precision("high")

            model = nn.Linear(512, 10).cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1, fused=True)
            for x, y in loader:
                loss = nn.functional.cross_entropy(model(x.cuda()), y.cuda())
                loss.backward()
                optimizer.step()
            """,
        "aliased-torch-and-device-string": """
            import torch as th
            from torch import nn

            th.set_float32_matmul_precision("high")

            def train(model: nn.Module, batches, optimizer):
                model.to("cuda")
                for x, y in batches:
                    out = model(x.to("cuda"))
                    (out - y.to("cuda")).pow(2).mean().backward()
                    optimizer.step()
            """,
        "only-cudnn-tf32": """
            import torch

            torch.set_float32_matmul_precision("high")

            torch.backends.cudnn.allow_tf32 = True

            def step(model, x, optimizer):
                model(x.cuda()).sum().backward()
                optimizer.step()
            """,
        "no-torch-import": """
            import torch
            from torch import nn

            torch.set_float32_matmul_precision("high")

            def step(model: nn.Module, x, optimizer):
                model(x.cuda()).sum().backward()
                optimizer.step()
            """,
    }
    GOOD = {
        "full-fp32-chosen-on-purpose": """
            import torch

            # reproducibility: keep matmuls and convolutions in full fp32
            torch.backends.cudnn.allow_tf32 = False
            torch.backends.cuda.matmul.allow_tf32 = False

            def step(model, x, optimizer):
                model(x.cuda()).sum().backward()
                optimizer.step()
            """,
        "highest-precision-by-name": """
            import torch

            torch.set_float32_matmul_precision("highest")

            def step(model, x, optimizer):
                model(x.cuda()).sum().backward()
                optimizer.step()
            """,
        "autocast-dtype-looked-up-bfloat16-by-default": """
            import argparse

            import torch

            parser = argparse.ArgumentParser()
            parser.add_argument("--dtype", type=str, default="bfloat16", help="float32|bfloat16")
            args = parser.parse_args()

            ptdtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[args.dtype]
            autocast = torch.amp.autocast(device_type="cuda", dtype=ptdtype)
            model = torch.nn.Linear(512, 10).cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1, fused=True)
            for x, y in loader:
                with autocast:
                    loss = torch.nn.functional.cross_entropy(model(x.cuda()), y.cuda())
                loss.backward()
                optimizer.step()
            """,
        "autocast-bf16": """
            import torch

            def train(model, loader, optimizer):
                for x, y in loader:
                    with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
                        loss = model(x.cuda(), y.cuda())
                    loss.backward()
                    optimizer.step()
            """,
        "grad-scaler-from-cuda-amp": """
            from torch.cuda.amp import GradScaler

            scaler = GradScaler()

            def train(model, loader, optimizer):
                for x, y in loader:
                    loss = model(x.cuda(), y.cuda())
                    scaler.scale(loss).backward()
                    scaler.step(optimizer)
            """,
        "tf32-by-flag": """
            import torch

            torch.backends.cuda.matmul.allow_tf32 = True

            def train(model, loader, optimizer):
                for x, y in loader:
                    model(x.cuda(), y.cuda()).backward()
                    optimizer.step()
            """,
        "matmul-precision-medium": """
            import torch

            torch.set_float32_matmul_precision("medium")

            def train(model, loader, optimizer):
                for x, y in loader:
                    model(x.cuda(), y.cuda()).backward()
                    optimizer.step()
            """,
        "model-cast-to-bfloat16": """
            import torch

            def train(model, loader, optimizer):
                model = model.cuda().bfloat16()
                for x, y in loader:
                    model(x.cuda(), y.cuda()).backward()
                    optimizer.step()
            """,
        "batch-cast-with-dtype": """
            import torch

            def train(model, loader, optimizer):
                for x, y in loader:
                    x = x.to("cuda", dtype=torch.float16)
                    model(x, y.cuda()).backward()
                    optimizer.step()
            """,
        "cpu-only-training-script": """
            import torch

            def train(model, loader, optimizer):
                for x, y in loader:
                    model(x, y).backward()
                    optimizer.step()
            """,
        "lightning-module-without-backward": """
            import lightning as L
            import torch

            class Model(L.LightningModule):
                def training_step(self, batch, batch_idx):
                    x, y = batch
                    return torch.nn.functional.mse_loss(self.layer(x), y)

            L.Trainer(accelerator="cuda", devices=1).fit(Model())
            """,
        "accelerate-owns-backward": """
            import torch
            from accelerate import Accelerator

            accelerator = Accelerator()

            def train(model, loader, optimizer):
                model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
                for x, y in loader:
                    accelerator.backward(model(x, y))
                    optimizer.step()
            """,
        "backward-without-optimizer": """
            import torch

            def grad_norms(model, x):
                model.cuda()(x.cuda()).sum().backward()
                return [p.grad.norm() for p in model.parameters()]
            """,
        "precision-from-config": """
            import torch

            def main(cfg, model, x, optimizer):
                torch.set_float32_matmul_precision(cfg.matmul_precision)
                model(x.cuda()).sum().backward()
                optimizer.step()
            """,
        "autocast-and-scaler-kept-by-the-solver": """
            import torch

            class Solver:
                def __init__(self, cfg, model, optimizer):
                    self.autocast = build_autocast(cfg)  # a project helper, set from the config
                    self.scaler = build_scaler(cfg)
                    self.model, self.optimizer = model.cuda(), optimizer

                def step(self, x):
                    with self.autocast:
                        loss = self.model(x.cuda()).mean()
                    if self.scaler is not None:
                        loss = self.scaler.scale(loss)
                    loss.backward()
                    self.optimizer.step()
            """,
        "apex-loss-scaling-behind-an-amp-option": """
            import torch

            def search(model, loader, optimizer, amp=False):
                for x, y in loader:
                    loss = model(x.cuda(), y.cuda())
                    if amp:
                        with torch.cuda.amp.scale_loss(loss, optimizer) as scaled_loss:
                            scaled_loss.backward()
                    else:
                        loss.backward()
                    optimizer.step()
            """,
        "amp-option-on-by-default": """
            import argparse

            import torch

            def train(model, loader, optimizer, amp=False):
                scaler = torch.cuda.amp.GradScaler(enabled=amp)
                for x, y in loader:
                    with torch.autocast("cuda", enabled=amp):
                        loss = model(x.cuda(), y.cuda())
                    scaler.scale(loss).backward()
                    scaler.step(optimizer)
                    scaler.update()

            parser = argparse.ArgumentParser()
            parser.add_argument("--no-amp", dest="amp", action="store_false")
            args = parser.parse_args()
            train(model, loader, optimizer, amp=args.amp)
            """,
        "library-class-with-an-amp-keyword": """
            import torch

            class RangeTest:
                def __init__(self, model, optimizer, amp: bool = False):
                    self.model = model.cuda()
                    self.optimizer = optimizer
                    self.amp = amp

                def run(self, loader):
                    for x, y in loader:
                        loss = self.model(x.cuda(), y.cuda())
                        if self.amp:
                            with torch.cuda.amp.scale_loss(loss, self.optimizer) as scaled_loss:
                                scaled_loss.backward()
                        else:
                            loss.backward()
                        self.optimizer.step()
            """,
        "half-precision-behind-a-required-option": """
            import argparse

            import torch

            parser = argparse.ArgumentParser()
            parser.add_argument("--half", type=int, required=True)
            args = parser.parse_args()

            model = torch.nn.Linear(512, 10).cuda()
            if args.half:
                model.half()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1, fused=True)
            for x, y in loader:
                loss = torch.nn.functional.cross_entropy(model(x.cuda()), y.cuda())
                loss.backward()
                optimizer.step()
            """,
        "backward-hook-of-a-library-module": """
            import torch

            class Module(torch.nn.Module):
                def backward(self, loss, *args, **kwargs):
                    loss.backward(*args, **kwargs)

                def step(self, optimizer):
                    self.cuda()
                    optimizer.step()
            """,
        "lightning-strategy-owns-backward": """
            import torch

            class Module(torch.nn.Module):
                def manual_backward(self, loss):
                    self.trainer.strategy.backward(loss, None)

                def step(self, x, optimizer):
                    self.manual_backward(self(x.cuda()).sum())
                    optimizer.step()
            """,
    }

    def check_file(self, ctx: Context) -> Iterator[Report]:
        matmul_precision = ctx.api("set_float32_matmul_precision")
        # before 1.12 TF32 matmuls were on by default (torch.backends.cuda.matmul.allow_tf32)
        if ctx.is_test_file or not ctx.runs_on_cuda or not matmul_precision.usable:
            return
        if not ctx.shows_cuda_use and ctx.entry.precision_importer is not None:
            return  # on CUDA for the script that imports it, which may set its precision
        calls = [c for c in ctx.nodes(cst.Call) if isinstance(c, cst.Call)]
        backwards = list(_backward_calls(calls, ctx))
        if not backwards or ctx.entry.model_precision:
            return
        if all(ctx.precision_set_by_callers(b) for b in backwards):
            return  # each step runs for callers in modules that name a precision decision
        backward = backwards[0]
        opt_in = None  # a precision decision only an opt-in option takes, named in the message
        for marker in self._precision_markers(ctx, calls):
            if _casts_a_host_copy(_used_at(marker, ctx), ctx):
                continue  # a copy converted to write it out: no training runs in it
            if not _off_by_default(marker, ctx):
                return
            opt_in = opt_in or marker
        if not any(ctx.is_optimizer_step(c) or torch_optimizer(c, ctx) for c in calls):
            return  # backward without an optimizer: a gradient check or a debugging helper
        alias, needs_import = ctx.torch_name()
        fix = None
        insertion = insert_after_imports(
            ctx, f'{alias}.set_float32_matmul_precision("high")', blank_line_before=True
        )
        if insertion is not None and matmul_precision.writable:
            fix = Fix.replace(
                *insertion, Safety.UNSAFE, "enable TF32 matmuls", needs_torch_import=needs_import
            )
        needs = "" if matmul_precision.writable else f"; it {matmul_precision.needs()}"
        off = (
            f"; the reduced precision at line {ctx.line_of(opt_in)} is opt-in, off on the default run"
            if opt_in
            else ""
        )
        yield self.report(
            backward, reason=ctx.hot_reason(backward), fix=fix, torch=alias, needs=needs, opt_in=off
        )

    @staticmethod
    def _precision_markers(ctx: Context, calls: list[cst.Call]) -> Iterator[cst.CSTNode]:
        """Every place the file names a precision decision (the class docstring's "When it stays silent")."""
        for statement in ctx.nodes(cst.Import) + ctx.nodes(cst.ImportFrom):
            assert isinstance(statement, (cst.Import, cst.ImportFrom))
            if any(
                target in _REDUCED_PRECISION or target.startswith("apex.amp.")
                for _, target in imported_names(statement)
            ):
                yield statement
        for node in ctx.nodes(cst.Attribute):
            assert isinstance(node, cst.Attribute)
            if ctx.qualified_name(node) in _REDUCED_PRECISION or _sets_precision_flag(node, ctx):
                yield node
                continue
            words = {node.attr.value.lower()}
            if isinstance(node.value, cst.Name):
                words.add(node.value.value.lower())  # `scaler.scale(loss)`, `amp.initialize(...)`
            if words & _PRECISION_SWITCHES:
                yield node
        yield from (c for c in calls if _chooses_precision(c, ctx))


def _backward_calls(calls: list[cst.Call], ctx: Context) -> Iterator[cst.Call]:
    """The file's own `.backward()` calls that the default run may take."""
    for call in calls:
        if (
            isinstance(call.func, cst.Attribute)
            and call.func.attr.value == "backward"
            and _runs_own_backward(call)
            and not _inside_backward_wrapper(call, ctx)
            and ctx.setting_taken_by_default(call)
        ):
            yield call


def _used_at(node: cst.CSTNode, ctx: Context) -> cst.CSTNode:
    """The whole use a marker is part of: `torch.cuda.amp.GradScaler(enabled=amp)` for its
    `torch.cuda.amp`, `model.half()` for `model.half`."""
    current = node
    parent = ctx.parent(current)
    while isinstance(parent, cst.Attribute) and parent.value is current:
        current, parent = parent, ctx.parent(parent)
    return parent if isinstance(parent, cst.Call) and parent.func is current else current


def _disabled(call: cst.CSTNode, ctx: Context) -> bool:
    """`autocast(enabled=amp)` or `GradScaler(enabled=amp)` whose switch is off by default, or
    an autocast to float32 on the default run (`dtype=ptdtype`, looked up by `--dtype` float32
    by default): CUDA autocast takes float16 and bfloat16 only, and turns itself off for float32."""
    if not isinstance(call, cst.Call):
        return False
    enabled = keyword(call, "enabled")
    if enabled is not None and ctx.false_by_default(enabled.value):
        return True
    dtype = keyword(call, "dtype")
    if dtype is None or ctx.qualified_name(call) not in _AUTOCASTS:
        return False
    return ctx.qualified_name(ctx.value_by_default(dtype.value)) == "torch.float32"


def _casts_a_host_copy(node: cst.CSTNode, ctx: Context) -> bool:
    """`node` is the dtype of a cast of a tensor on the host (`tensor.detach().cpu().to(torch.bfloat16)`,
    written to a file): no training runs in it."""
    argument = ctx.parent(node)
    call = ctx.parent(argument) if isinstance(argument, cst.Arg) and argument.value is node else None
    return (
        isinstance(call, cst.Call)
        and isinstance(call.func, cst.Attribute)
        and call.func.attr.value in ("to", "type")
        and ctx.is_host_tensor(call.func.value)
    )


def _not_chosen(node: cst.CSTNode, ctx: Context) -> bool:
    """`node` is an item of a dict literal that the default run looks up under another key
    (`torch.bfloat16` of `{"float32": torch.float32, "bfloat16": torch.bfloat16}[args.dtype]`,
    `--dtype` float32 by default)."""
    element = ctx.parent(node)
    table = ctx.parent(element) if isinstance(element, cst.DictElement) and element.value is node else None
    lookup = ctx.parent(table) if isinstance(table, cst.Dict) else None
    if not (isinstance(lookup, cst.Subscript) and lookup.value is table):
        return False
    chosen = ctx.value_by_default(lookup)
    return chosen is not lookup and chosen is not node


def _off_by_default(marker: cst.CSTNode, ctx: Context) -> bool:
    """The default run never uses `marker`'s precision decision: it sits in a branch an opt-in
    option (or what every caller passes) never takes (`if args.half: model.half()`), switches
    itself off (`GradScaler(enabled=amp)` with `--amp` opt-in), reads an option that is off
    (`amp=args.amp`), or uses an object built switched off (`grad_scaler.scale(loss)`)."""
    used = _used_at(marker, ctx)
    if not ctx.setting_taken_by_default(used) or _disabled(used, ctx) or _not_chosen(used, ctx):
        return True
    if isinstance(marker, cst.Attribute) and ctx.false_by_default(marker):
        return True  # `amp=args.amp`: the option that would switch it on is off
    holder = marker.value if isinstance(marker, cst.Attribute) else None
    if not isinstance(holder, cst.Name):
        return False
    bindings = ctx.bindings(holder.value, holder)
    return bool(bindings) and all(b.kind == "assign" and _disabled(b.node, ctx) for b in bindings)

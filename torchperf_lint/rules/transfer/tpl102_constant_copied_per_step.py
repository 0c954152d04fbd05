"""TPL102 constant-copied-per-step: Constant host data copied to the device at every step."""

from __future__ import annotations

from typing import Iterator, Optional

import libcst as cst

from ...analysis.batches import HOST_CONVERSIONS
from ...analysis.constants import holds_no_values
from ...engine.context import Context
from ...engine.findings import Report, Safety
from ..base import Rule, hot_place
from .common import (
    names_accelerator,
    on_device,
    to_accelerator,
)

# -- shared by TPL102-TPL107 ------------------------------------------------------------

_HOST_CONSTRUCTORS = frozenset(
    {"torch.tensor", "torch.Tensor", "torch.as_tensor", "torch.asarray", "torch.from_numpy"}
)


def _is_host_constructor(qualified: str) -> bool:
    """`torch.tensor`, `torch.from_numpy`... and the legacy `torch.FloatTensor`-style classes."""
    if qualified in _HOST_CONSTRUCTORS:
        return True
    name = qualified[len("torch.") :] if qualified.startswith("torch.") else ""
    return "." not in name and name[:1].isupper() and name.endswith("Tensor")


def _move_after_conversions(call: cst.Call, ctx: Context) -> Optional[cst.Call]:
    """The `.cuda()`/`.to()`/`.type_as()` applied to `call`'s result, through `.float()`-style
    conversions."""
    current = call
    while True:
        attribute = ctx.parent(current)
        if not (isinstance(attribute, cst.Attribute) and attribute.value is current):
            return None
        outer = ctx.parent(attribute)
        if not (isinstance(outer, cst.Call) and outer.func is attribute):
            return None
        if attribute.attr.value in ("cuda", "to", "type_as"):
            return outer
        if attribute.attr.value not in HOST_CONVERSIONS:
            return None
        current = outer


def _device_keyword(call: cst.Call) -> Optional[cst.BaseExpression]:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "device":
            return arg.value
    return None


# a host-data constructor's (qualified name, data, the call that puts it on an accelerator, by device=)
ConstructedCopy = tuple[str, cst.BaseExpression, Optional[cst.Call], bool]


def _constructed_copy(node: cst.Call, ctx: Context) -> Optional[ConstructedCopy]:
    """For a host-data constructor (`torch.tensor(data, ...)`): its qualified name, the data, the
    call that puts the result on an accelerator (itself with `device=`, or the `.to()`/`.cuda()`
    after its conversions; None when none does), and whether that is its own `device=`."""
    qualified = ctx.qualified_name(node)
    if qualified is None or not _is_host_constructor(qualified) or not node.args:
        return None
    data = node.args[0].value
    device = _device_keyword(node)
    if device is not None:
        return qualified, data, node if names_accelerator(device, ctx) else None, True
    move = _move_after_conversions(node, ctx)
    return qualified, data, move if move is not None and to_accelerator(move, ctx) else None, False


def _moved_host_tensor(move: cst.Call, ctx: Context) -> Optional[cst.BaseExpression]:
    """The host tensor built once that `move` copies to the device: `self.table.to(d)`, or
    `self.table[t].cuda()` looked up with a device tensor `t` (the index comes back to the host
    first)."""
    func = move.func
    if not (isinstance(func, cst.Attribute) and func.attr.value in ("to", "cuda")):
        return None
    source = func.value
    if isinstance(source, cst.Subscript):
        indices = [e.slice.value for e in source.slice if isinstance(e.slice, cst.Index)]
        if len(indices) != len(source.slice) or not any(on_device(i, ctx) for i in indices):
            return None  # a slice or a host index: a batch read from a host array, not a table lookup
        source = source.value
    # only a tensor has .to()/.cuda(): the host array is a CPU tensor
    return source if ctx.is_host_array(source) else None


def _loop_line(node: cst.Call, ctx: Context) -> Optional[int]:
    """The line of the step loop that makes `node` hot, directly or through the calls between."""
    reason = ctx.hot_reason(node)
    while reason is not None and reason.loop is None:
        reason = reason.caller
    return ctx.line_of(reason.loop) if reason is not None and reason.loop is not None else None


def _remedy(node: cst.Call, ctx: Context) -> str:
    """Where the tensor should live: a non-persistent buffer of the module whose method copies it,
    an attribute of a class that is not a module, or a variable before the step loop."""
    cls = ctx.hot.enclosing_class(node)
    if cls is not None and ctx.hot.is_module_class(cls):
        return (
            "build it once in __init__ with self.register_buffer(name, tensor, persistent=False) "
            "(a buffer follows .to(device); persistent=False leaves checkpoints' keys unchanged)"
        )
    if cls is not None:
        return "keep it as an attribute built once on the device"
    loop = _loop_line(node, ctx)
    if loop is not None:
        return f"build it on the device once, before the loop at line {loop}"
    return (
        "build it once on the device where the model is set up (self.register_buffer(name, tensor, "
        "persistent=False) in its __init__) and pass it in"
    )


def _batch_remedy(node: cst.Call, array: str, ctx: Context) -> str:
    """Keep the whole array on the device, moved once before the loop; or, where it does not fit,
    pinned once so that each part is an asynchronous copy."""
    loop = _loop_line(node, ctx)
    where = f"before the loop at line {loop}" if loop is not None else "where it is built"
    return (
        f"move {array} to the device once, {where}, and index it there; where it does not fit, keep it "
        "as a pinned CPU tensor (.pin_memory(), once) and copy each part with non_blocking=True"
    )


class ConstantCopiedPerStep(Rule):
    """## What it does
    Flags a tensor built from host values that never change (`torch.tensor([...])`,
    `torch.Tensor(list)`, `torch.FloatTensor(...)`, `torch.as_tensor(np_array)`,
    `torch.from_numpy(...)`) and moved with `.cuda()`/`.to(...)` in hot code: literals,
    module-level names, parameters of the setup code and `self.` attributes that hot code never
    assigns. Host arrays count too: a NumPy array, a list or a CPU tensor built once (module
    level, `__init__`, set-up) and copied in hot code at every call, through a constructor with
    `device=` (`torch.tensor(self.values, device=d)`), a move of the CPU tensor itself
    (`self.logvar[t].to(d)`), or a helper that every caller hands the array
    (`_extract_into_tensor(self.sqrt_alphas_cumprod, t, shape)` running
    `torch.from_numpy(arr).to(t.device)[t]`). So does a part of such an array read at every step
    (`torch.Tensor(self.images[i]).to(dev)`, `ids[:, i : i + n].to(device)` over a corpus held as
    one tensor): the data differs from step to step, but it was all on the host from the start, and
    each step pays a pageable, blocking copy that one move before the loop would have made once.

    ## Why it is slow
    Every step builds the same tensor on the CPU and copies it from pageable memory to the
    device: a host-to-device copy and a synchronisation point the GPU waits on. Built once and
    kept as a buffer, it costs nothing. Seed 004's loss, for instance, passed
    `torch.Tensor([0.1]*10).cuda()` as class weights at every call. The measured effect on an
    H100 is in the Measured section below.

    Off by default (RULES.md, "Defaults follow evidence"): on an H100 no case gained 5% with
    confidence: seed 004's loss alone 0.99x, in a balanced training step 0.99x, GPU-bound 1.05x
    (1.04-1.05), the article's full pipeline 1.20x (0.95-1.24). The copy is real but small next to
    a step; enable it with `--extend-select TPL102` when profiling shows host-to-device copies.

    ## Fix safety
    No automatic fix: where the tensor should live (a buffer of which module, a variable before
    which loop) is a design decision. The message says what to do: in a module's method, a buffer
    registered once in `__init__` with `self.register_buffer(name, tensor, persistent=False)` (it
    follows `.to(device)`, and `persistent=False` leaves checkpoints' keys unchanged); in a class
    that is not a module, an attribute built once on the device; in a step loop, a variable built
    on the device before the loop, named by its line.

    ## When it stays silent
    Cold code (`__init__`, module level); host values that change every step (batch data,
    parameters of `forward`, attributes that `forward` assigns, a helper some caller hands
    per-step data); conversions that do not move the tensor to a device (`.to(torch.float16)`,
    `.to("cpu")`); schedules kept as buffers; a memory-mapped file read part by part
    (`np.memmap`, `np.load(path, mmap_mode="r")`: it need not fit in memory, let alone on the
    device); host data built anew at every step (a batch stacked from an episode), or written into
    by hot code (a replay buffer filled at every step).
    """

    code = "TPL102"
    default_on = False
    stepping_evidence = True  # its default form: code a step loop of the project runs (RULES.md)
    name = "constant-copied-per-step"
    summary = "Constant host data copied to the device at every step"
    message = "{source} {copies} to the device in {place} at every step; {remedy}"
    fix_safety = Safety.NONE
    where = "hot code"
    node_types = (cst.Call,)
    benchmark = "TPL102"

    BAD = {
        "seed-class-weights-in-loss": """
            import torch
            import torch.nn.functional as F
            from torch import nn

            def weighted_nll(pred, target, weight):
                nll = -pred.gather(1, target[:, None])[:, 0]
                return (nll * weight[target]).mean()

            class CrossEntropyLoss(nn.Module):
                def forward(self, input, target):
                    pred = F.log_softmax(input, dim=1)
                    return weighted_nll(pred, target, torch.Tensor([0.1] * 10).cuda())  # expect: TPL102
            """,
        "self-attributes-in-forward": """
            import torch
            from torch import nn

            class Normalize(nn.Module):
                def __init__(self, mean, std):
                    super().__init__()
                    self.mean = mean
                    self.std = std

                def forward(self, x):
                    mean = torch.tensor(self.mean).view(1, -1, 1, 1).to(x.device)  # expect: TPL102
                    std = torch.as_tensor(self.std).view(1, -1, 1, 1).to(x.device)  # expect: TPL102
                    return (x - mean) / std
            """,
        "module-constant-in-step-loop": """
            import numpy as np
            import torch
            import torch.nn.functional as F

            CLASS_WEIGHTS = np.array([1.0, 2.0, 0.5])

            def train(model, loader, optimizer, device):
                for x, y in loader:
                    weight = torch.from_numpy(CLASS_WEIGHTS).float().to(device)  # expect: TPL102
                    loss = F.cross_entropy(model(x.to(device)), y.to(device), weight=weight)
                    loss.backward()
                    optimizer.step()
            """,
        "legacy-constructor-with-alias": """
            import torch as th
            from torch import nn

            LUMA = [0.299, 0.587, 0.114]

            class Grayscale(nn.Module):
                def forward(self, rgb):
                    coefficients = th.FloatTensor(LUMA).cuda(rgb.device)  # expect: TPL102
                    return (rgb * coefficients[:, None, None]).sum(0)
            """,
        "anchors-moved-like-the-input": """
            import numpy as np
            import torch
            from torch import nn

            class YoloHead(nn.Module):
                def __init__(self, anchors):
                    super().__init__()
                    self.anchors = np.array(anchors, dtype=np.float32)

                def forward(self, x):
                    grid = torch.from_numpy(self.anchors).type_as(x)  # expect: TPL102
                    scale = torch.tensor([8.0, 16.0, 32.0]).to(x)  # expect: TPL102
                    return x * grid.sum() / scale.sum()
            """,
        "setup-value-in-step-loop": """
            import torch

            def train(model, loader, optimizer, class_counts):
                weights = [1.0 / c for c in class_counts]
                criterion = torch.nn.CrossEntropyLoss(reduction="none")
                for x, y in loader:
                    w = torch.tensor(weights).cuda()  # expect: TPL102
                    loss = (criterion(model(x.cuda()), y.cuda()) * w[y.cuda()]).mean()
                    loss.backward()
                    optimizer.step()
            """,
        "schedule-through-helper": """
            import numpy as np
            import torch
            from torch import nn

            def _extract_into_tensor(arr, timesteps, broadcast_shape):
                res = torch.from_numpy(arr).to(device=timesteps.device)[timesteps].float()  # expect: TPL102
                while len(res.shape) < len(broadcast_shape):
                    res = res[..., None]
                return res.expand(broadcast_shape)

            class GaussianDiffusion(nn.Module):
                def __init__(self, model, betas):
                    super().__init__()
                    self.model = model
                    alphas_cumprod = np.cumprod(1.0 - betas, axis=0)
                    self.sqrt_alphas_cumprod = np.sqrt(alphas_cumprod)
                    self.sqrt_one_minus_alphas_cumprod = np.sqrt(1.0 - alphas_cumprod)

                def q_sample(self, x_start, t, noise):
                    return (
                        _extract_into_tensor(self.sqrt_alphas_cumprod, t, x_start.shape) * x_start
                        + _extract_into_tensor(self.sqrt_one_minus_alphas_cumprod, t, x_start.shape) * noise
                    )

                def forward(self, x_start):
                    t = torch.randint(0, 1000, (x_start.shape[0],), device=x_start.device)
                    noise = torch.randn_like(x_start)
                    return (self.model(self.q_sample(x_start, t, noise), t) - noise).pow(2).mean()
            """,
        "host-array-with-device-keyword": """
            import numpy as np
            import torch
            from torch import nn

            class Denoiser(nn.Module):
                def __init__(self, model, sigmas):
                    super().__init__()
                    self.model = model
                    self.sigmas = np.array(sigmas, dtype=np.float32)

                def forward(self, x, index):
                    sigmas = torch.tensor(self.sigmas, device=x.device)  # expect: TPL102
                    sigma = sigmas[index][:, None, None, None]
                    return self.model(x + sigma * torch.randn_like(x))
            """,
        "host-tensor-looked-up-and-moved": """
            import torch
            from torch import nn

            class LatentDiffusion(nn.Module):
                def __init__(self, model, num_timesteps):
                    super().__init__()
                    self.model = model
                    self.logvar = torch.full(fill_value=0.0, size=(num_timesteps,))

                def forward(self, x, t):
                    loss = (self.model(x, t) - x).pow(2).mean(dim=(1, 2, 3))
                    logvar_t = self.logvar[t].to(x.device)  # expect: TPL102
                    return (loss / torch.exp(logvar_t) + logvar_t).mean()
            """,
        "dataset-array-read-per-step": """
            import numpy as np
            import torch

            class Trainer:
                def __init__(self, model, optimizer, path, device):
                    self.model, self.optimizer, self.device = model, optimizer, device
                    self.images = np.load(path)
                    self.steps = torch.arange(len(self.images))

                def train(self):
                    for i in range(len(self.images)):
                        x = torch.Tensor(self.images[i]).to(self.device)  # expect: TPL102
                        t = self.steps[i].to(self.device)  # expect: TPL102
                        loss = self.model(x[None], t)
                        loss.backward()
                        self.optimizer.step()
            """,
        "corpus-sliced-per-step": """
            import torch

            def train(model, optimizer, corpus, seq, device):
                ids = torch.tensor(corpus).view(20, -1)
                for i in range(0, ids.size(1) - seq, seq):
                    inputs = ids[:, i : i + seq].to(device)  # expect: TPL102
                    targets = ids[:, i + 1 : i + 1 + seq].to(device)  # expect: TPL102
                    loss = (model(inputs) - targets).pow(2).mean()
                    loss.backward()
                    optimizer.step()
            """,
    }
    GOOD = {
        "list-filled-per-call": """
            import torch
            from torch import nn

            class Refiner(nn.Module):
                def forward(self, logits, points):
                    inside = []
                    for i in range(logits.shape[0]):
                        inside.append(int(logits[i, 0, points[i, 0]].item() > 0))
                    return logits * torch.tensor(inside).to(logits.device).view(-1, 1, 1)
            """,
        "empty-result-for-no-matches": """
            import torch
            from torch import nn

            class Miner(nn.Module):
                def forward(self, labels, matches):
                    anchors = matches.any(dim=1).nonzero().squeeze(1)
                    if len(anchors) == 0:  # nothing to copy: typed empty results
                        empty = torch.tensor([], device=labels.device, dtype=labels.dtype)
                        return empty, torch.tensor(()).to(labels.device)
                    return anchors, matches[anchors]
            """,
        "schedule-kept-as-buffers": """
            from functools import partial

            import numpy as np
            import torch
            from torch import nn

            def extract_into_tensor(a, t, x_shape):
                return a.gather(-1, t).reshape(t.shape[0], *((1,) * (len(x_shape) - 1)))

            class DDPM(nn.Module):
                def __init__(self, model, betas):
                    super().__init__()
                    self.model = model
                    to_torch = partial(torch.tensor, dtype=torch.float32)
                    alphas_cumprod = np.cumprod(1.0 - betas, axis=0)
                    self.register_buffer("sqrt_alphas_cumprod", to_torch(np.sqrt(alphas_cumprod)))

                def forward(self, x, t):
                    return self.model(extract_into_tensor(self.sqrt_alphas_cumprod, t, x.shape) * x)
            """,
        "helper-handed-per-step-data": """
            import numpy as np
            import torch
            from torch import nn

            def _to_device_index(arr, timesteps):
                return torch.from_numpy(arr).to(timesteps.device)[timesteps]

            class Sampler(nn.Module):
                def __init__(self, betas):
                    super().__init__()
                    self.betas = np.asarray(betas)

                def forward(self, x, t, weights):
                    scale = _to_device_index(self.betas, t)
                    per_sample = _to_device_index(weights.numpy(), t)
                    return x * scale[:, None] * per_sample[:, None]
            """,
        "memory-mapped-tokens-read-per-step": """
            import numpy as np
            import torch

            TOKENS = np.memmap("train.bin", dtype=np.uint16, mode="r")

            def train(model, optimizer, steps, batch, block, device):
                for step in range(steps):
                    start = step * batch * block
                    x = torch.from_numpy(TOKENS[start : start + batch * block].astype(np.int64)).to(device)
                    loss = model(x.view(batch, block))
                    loss.backward()
                    optimizer.step()
            """,
        "host-batch-built-per-step": """
            import numpy as np
            import torch

            def train(model, optimizer, episodes, device):
                for episode in episodes:
                    frames = np.stack([step.frame for step in episode])
                    x = torch.from_numpy(frames[:, None]).float().to(device)
                    loss = model(x).mean()
                    loss.backward()
                    optimizer.step()
            """,
        "replay-buffer-filled-per-step": """
            import numpy as np
            import torch

            class ReplayBuffer:
                def __init__(self, capacity, obs_shape, device):
                    self.obs = np.zeros((capacity,) + obs_shape, dtype=np.uint8)
                    self.capacity, self.pos, self.device = capacity, 0, device

                def add(self, obs):
                    self.obs[self.pos] = obs
                    self.pos = (self.pos + 1) % self.capacity

                def sample(self, n):
                    indices = np.random.randint(0, self.capacity, n)
                    return torch.from_numpy(self.obs[indices]).to(self.device)

            def train(env, model, optimizer, buffer, steps):
                obs = env.reset()
                for step in range(steps):
                    buffer.add(obs)
                    loss = model(buffer.sample(32)).mean()
                    loss.backward()
                    optimizer.step()
                    obs = env.step(model.act(obs))
            """,
        # vwxyzjn/cleanrl's ppg_procgen.py: a host buffer refilled once per rollout phase, then trained on
        "rollout-buffer-refilled-per-phase": """
            import torch

            def train(envs, agent, optimizer, phases, rollouts, device):
                aux_obs = torch.zeros((128, rollouts, 64, 64, 3), dtype=torch.uint8)
                for phase in range(phases):
                    for update in range(rollouts):
                        obs = agent.collect(envs)
                        aux_obs[:, update] = obs.cpu().to(torch.uint8)
                    for start in range(0, rollouts, 4):
                        m_aux_obs = aux_obs[:, start : start + 4].to(device)
                        loss = agent.aux_loss(m_aux_obs)
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
            """,
        "host-array-kept-on-the-cpu": """
            import numpy as np
            import torch
            from torch import nn

            class Tokenizer(nn.Module):
                def __init__(self, table):
                    super().__init__()
                    self.table = np.asarray(table)
                    self.device_table = torch.tensor(self.table, device="cuda")

                def forward(self, ids):
                    on_host = torch.tensor(self.table, device="cpu")
                    return self.device_table[ids] + on_host.sum().item()
            """,
        "buffer-built-in-init": """
            import torch
            import torch.nn.functional as F
            from torch import nn

            class CrossEntropyLoss(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.register_buffer("weight", torch.Tensor([0.1] * 10).cuda())

                def forward(self, input, target):
                    return F.nll_loss(F.log_softmax(input, dim=1), target, weight=self.weight)
            """,
        "per-step-host-data": """
            import torch
            from torch import nn

            class Packer(nn.Module):
                def forward(self, x, lengths):
                    sizes = torch.tensor(lengths).to(x.device)
                    return x[: int(sizes.max())]

            def train(model, loader, optimizer):
                for step, (x, lengths) in enumerate(loader):
                    steps = torch.tensor([step] * len(lengths)).cuda()
                    loss = model(x.cuda(), lengths).sum() + steps.sum()
                    loss.backward()
                    optimizer.step()
            """,
        "attribute-written-in-forward": """
            import torch
            from torch import nn

            class Decay(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.weights = [1.0, 1.0]

                def forward(self, x):
                    self.weights = [w * 0.9 for w in self.weights]
                    return x * torch.tensor(self.weights).to(x.device)
            """,
        "dtype-cast-and-cpu": """
            import torch
            from torch import nn

            class Scale(nn.Module):
                def forward(self, x):
                    half = torch.tensor(0.5).to(x.dtype)
                    table = torch.tensor([1, 2, 3]).to("cpu")
                    return x * half + table.sum()
            """,
        "module-level-copy-made-once": """
            import torch

            TABLE = torch.tensor([0.1, 0.2, 0.7]).cuda()

            def lookup(i):
                return TABLE[i]
            """,
    }

    def check(self, node: cst.Call, ctx: Context) -> Iterator[Report]:
        reason = ctx.hot_reason(node)
        if reason is None:
            return
        copy = _constructed_copy(node, ctx)
        found = self._constructor(node, copy, ctx) or self._move(node, ctx)
        if found is not None:
            where, source, _ = found
            copies, remedy = "copies the same host values", _remedy(node, ctx)
        else:
            read = self._batch_read(node, copy, ctx)
            if read is None:
                return
            where, source, array = read
            copies = f"copies part of {array}, a host array held whole in memory,"
            remedy = _batch_remedy(node, array, ctx)
        yield self.report(
            where, reason=reason, source=source, copies=copies, place=hot_place(node, ctx), remedy=remedy
        )

    @staticmethod
    def _batch_read(
        node: cst.Call, copy: Optional[ConstructedCopy], ctx: Context
    ) -> Optional[tuple[cst.Call, str, str]]:
        """A per-step slice or item of a host array built once, copied to the device: `torch.Tensor(
        images[i]).to(dev)`, `ids[:, i : i + n].to(device)`. Not a memory-mapped file (it need not
        fit on the device), nor a lookup with a device index (`_move`'s table lookup)."""
        if copy is not None:
            qualified, read, where, _ = copy
            source = f"{qualified}()"
        elif isinstance(node.func, cst.Attribute) and node.func.attr.value in ("to", "cuda"):
            read, where = node.func.value, node if to_accelerator(node, ctx) else None
            source = f"{ctx.module.code_for_node(read)}.{node.func.attr.value}()"
        else:
            return None
        if where is None or not isinstance(read, cst.Subscript) or ctx.is_step_invariant(read):
            return None
        array = read.value
        while isinstance(array, cst.Subscript):
            array = array.value
        if any(on_device(e.slice.value, ctx) for e in read.slice if isinstance(e.slice, cst.Index)):
            return None
        if not ctx.is_host_array(array) or ctx.reads_a_file_map(array):
            return None
        return where, source, ctx.module.code_for_node(array)

    @staticmethod
    def _constructor(
        node: cst.Call, copy: Optional[ConstructedCopy], ctx: Context
    ) -> Optional[tuple[cst.Call, str, bool]]:
        """`torch.tensor(values).to(d)` of step-invariant values, or `torch.tensor(array,
        device=d)` of a host array built once."""
        if copy is None:
            return None
        qualified, data, where, by_keyword = copy
        if where is None or holds_no_values(data):
            return None
        # a list written out is a constant; a name or attribute bound to host data is an array
        literal = isinstance(data, (cst.List, cst.Tuple))
        if by_keyword:
            # host data only: a scalar (`torch.tensor(0.0, device=d)`) is a 4-byte write
            return (node, f"{qualified}()", not literal) if ctx.is_host_array(data) else None
        if not all(ctx.is_step_invariant(arg.value) for arg in node.args):
            return None
        return where, f"{qualified}()", not literal and ctx.is_host_array(data)

    @staticmethod
    def _move(node: cst.Call, ctx: Context) -> Optional[tuple[cst.Call, str, bool]]:
        source = _moved_host_tensor(node, ctx)
        if source is None or not to_accelerator(node, ctx):
            return None
        return node, f"moving the host tensor {ctx.module.code_for_node(source)}", True

"""TPL105 sync-in-forward: Device-to-host sync inside forward or loss code."""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from ...engine.context import Context
from ...engine.findings import Report, Safety
from ...syntax.walker import descendants
from ..base import Rule, hot_place
from .common import (
    UNCONDITIONAL,
    condition_parts,
    guards_masked_update,
    host_sync,
    in_a_syncing_branch,
    on_device,
    on_error_path,
    scalar_sync,
)


class SyncInForward(Rule):
    """## What it does
    Flags, in forward and loss code (`forward` of a module, Lightning step hooks, and the
    functions they call), what copies tensor values to the host: `.item()`, `.tolist()`,
    `.cpu()`, `.numpy()`, `float(t)`, `int(t)`, `bool(t)`, `print(t)`, a tensor formatted into a
    string (`log.info(f"{t:.3f}")`), `torch.nonzero(t)` / `t.nonzero()`, and `if t:` / `while t:`
    on a tensor computed in the function.

    It also flags a 0-dim device tensor (`t.sum()`, `t.max()` without a dimension, an element of
    a 1-D device tensor or of a buffer registered from one, `torch.tensor(n, device=d)`, arithmetic
    on those) used where Python needs a number, which reads it through `.item()`: `int()`,
    `float()` or `bool()` of it, a slice bound (`h[:, k_t:]`), a `range()`
    argument, a size (`view`, `repeat`, `torch.full`, `F.pad`), the fill value of `torch.full`,
    and a `clamp`/`clamp_` bound beside a Python number (`idx.clamp_(0, size_t - 1)` picks the
    Scalar overload). The message names the host value the tensor was built from where the code
    shows it (`pi.shape[2] - 1`), else a Python int kept beside the tensor. Issue 39 measured
    three such `clamp_` calls at 1.13x of a detector's training step on an H200. An `if` on a
    device count inside a loop over items that guards a write through a mask
    (`if m.sum() > 0: t[m] = v`) is pointed at running the write unconditionally: with an empty
    mask it changes nothing.

    ## Why it is slow
    Each of them makes the CPU wait until the GPU has finished every kernel queued so far, then
    copy the value back: the GPU idles while the CPU catches up, and under `torch.compile` each
    one is a graph break. An `if torch.isnan(x).any():` in the middle of an MLP's forward
    costs most when CPU and GPU time are balanced, and the graph break comes on top. The
    measured effect on an H100 is in the Measured section below.

    ## On real code: which syncs are worth removing
    The rule is for syncs with a device-side alternative: a check that only raises or warns
    (`if torch.isnan(x).any(): raise` -> `torch._assert_async`, or under `if self.debug:`), an
    `.item()` fed straight back into tensor math (`x / t.sum().item()` -> `x / t.sum()`), a
    guard that `torch.where` or a `clamp(min=1)` replaces (`if mask.sum() == 0:`), a value read
    back that the host already had (`lengths.amax().item()` of a Python list moved to the
    device). A shape that depends on the data and that the algorithm needs (`nonzero()` sizing
    the output, a host-side algorithm such as RANSAC or Hungarian matching, `tolist()` of sizes
    that then split a tensor) costs the same sync but cannot go: the ecosystem check labels it
    DEBATABLE. Of the labelled findings on 22 real projects, by what syncs: a check that only
    raises or warns 4 TRUE / 2 DEBATABLE / 2 FALSE; another `if` on a tensor 15 / 17 / 15;
    `.item()` 10 / 12 / 7; `.tolist()` 2 / 12 / 9; `.cpu()`/`.numpy()` 4 / 21 / 8; `nonzero()`
    2 / 10 / 1; `float()`/`int()`/`bool()` 1 / 7 / 8. No kind reaches the 90% bar, so the rule
    is off by default; turn it on for model code you own, where each finding is a question worth
    asking.

    ## Fix safety
    No automatic fix: keep the value on the device (masks, `torch.where`, `torch.clamp`,
    `torch.nonzero_static(x, size=...)`), or compute it outside the model.

    ## When it stays silent
    The input of another framework's runtime the module holds (an exported model:
    `self.session.run(..., {name: im.cpu().numpy()})`) and what such a model returns;
    shape arithmetic (`x.size(0)`, `x.shape[-1]`, `len(x)`, `x.dim()`, `x.numel()`), also as a
    slice bound or a size; a 0-dim tensor built on the host (`torch.tensor(5)`); `clamp` with
    both bounds tensors (its Tensor overload reads nothing back); a reduction over a dimension;
    `.item()` of Python or NumPy numbers; `if flag:` on a parameter, which is a Python flag as
    often as a tensor; what the body of an `if` whose test syncs does (the `if` is reported: the
    body runs after the host waited, as a degenerate-case cascade under `if denom == 0:`);
    asserts (TPL104's); step-loop bodies (TPL107's, off by default);
    `__init__` and other cold code.
    """

    code = "TPL105"
    name = "sync-in-forward"
    summary = "Device-to-host sync inside forward or loss code"
    message = "{what} makes the host wait for the device in {place} and breaks torch.compile graphs; {remedy}"
    default_on = False  # below the real-code precision bar (evidence.py, precision.json)
    fix_safety = Safety.NONE
    where = "hot roots 1, 2 and callees"
    node_types = (cst.Call, cst.If, cst.While, cst.Subscript)
    benchmark = "TPL105"

    BAD = {
        "if-on-derived-tensor": """
            import torch
            from torch import nn

            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(64, 64)

                def forward(self, x):
                    h = torch.relu(self.fc(x))
                    if torch.isnan(h).any():  # expect: TPL105
                        h = torch.nan_to_num(h)
                    while (h.abs() > 1e4).any():  # expect: TPL105
                        h = h / 2
                    return h
            """,
        "degenerate-case-cascade": """
            import torch
            from torch import nn

            class MatthewsLoss(nn.Module):
                def forward(self, logits, target):
                    pred = logits.argmax(-1)
                    tp = ((pred == 1) & (target == 1)).sum()
                    fp = ((pred == 1) & (target == 0)).sum()
                    fn = ((pred == 0) & (target == 1)).sum()
                    denom = (tp + fp) * (tp + fn)
                    if denom == 0:  # expect: TPL105
                        if tp == 0:  # runs after the host waited for the test above
                            return fp.float()
                        return fn.float()
                    return tp / denom
            """,
        "scalar-read-per-row": """
            import torch
            from torch import nn

            class SpanPooler(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.score = nn.Linear(64, 1)

                def forward(self, x):
                    lengths = self.score(x).squeeze(-1).clamp(1, 8).long()
                    pooled = []
                    for i in range(x.shape[0]):
                        k = int(lengths[i, 0])  # expect: TPL105
                        pooled.append(x[i, :k].mean(0))
                    return torch.stack(pooled)
            """,
        "finite-check-in-loss": """
            import math
            import torch.nn.functional as F
            from torch import nn

            class GuardedLoss(nn.Module):
                def forward(self, pred, target):
                    loss = F.smooth_l1_loss(pred, target)
                    if not math.isfinite(loss):  # expect: TPL105
                        raise FloatingPointError("loss is not finite")
                    return loss
            """,
        "item-and-float-in-loss": """
            import torch
            import torch.nn.functional as F
            from torch import nn

            class FocalLoss(nn.Module):
                def forward(self, logits, target):
                    ce = F.cross_entropy(logits, target, reduction="none")
                    pt = torch.exp(-ce)
                    gamma = float(pt.mean())  # expect: TPL105
                    n_pos = (target > 0).sum().item()  # expect: TPL105
                    return ((1 - pt) ** gamma * ce).sum() / max(n_pos, 1)
            """,
        "nonzero-print-cpu-in-helper": """
            import torch
            from torch import nn

            def route(x, gate):
                idx = torch.nonzero(gate > 0.5)  # expect: TPL105
                print(x.mean())  # expect: TPL105
                counts = gate.sum(0).cpu().numpy()  # expect: TPL105
                return x[idx[:, 0]], counts

            class Router(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.gate = nn.Linear(32, 4)

                def forward(self, x):
                    return route(x, torch.sigmoid(self.gate(x)))
            """,
        "device-value-beside-host-copies": """
            import numpy as np
            import torch
            from torch import nn

            class Panoptic(nn.Module):
                def forward(self, masks, seg):
                    host = torch.device("cpu")
                    kp = masks.detach().to(host).double()
                    finite = torch.isfinite(kp).all(1)
                    kp = kp.to(masks.device)
                    if not bool(torch.isfinite(kp).any()):  # expect: TPL105
                        return None
                    m_id = torch.from_numpy(np.asarray(seg))
                    m_id = m_id.to(masks.device, torch.float64)
                    return int(finite.sum()), m_id.sum().item()  # expect: TPL105
            """,
        "host-algorithms-and-kept-copies": """
            import numpy as np
            import torch
            from torch import nn

            class Sorter(nn.Module):
                def helper(self, a):
                    return a

                def forward(self, x, t):
                    order = np.lexsort((x.cpu().numpy(), t.cpu().numpy()))  # expect: TPL105,TPL105
                    a = x.cpu().numpy()  # expect: TPL105
                    self.kept.append(x.cpu())  # expect: TPL105
                    lengths = t.cpu().numpy()  # expect: TPL105
                    packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True)
                    self.lstm(packed)
                    dev = torch.cat([x[:n] + 1 for n in t.tolist()])  # expect: TPL105
                    return torch.from_numpy(order), self.helper(a), dev.cpu()  # expect: TPL105
            """,
        "lightning-step-hook": """
            import pytorch_lightning as pl
            import torch.nn.functional as F

            class Lit(pl.LightningModule):
                def training_step(self, batch, batch_idx):
                    x, y = batch
                    loss = F.cross_entropy(self(x), y)
                    self.log("train_loss", loss.item())  # expect: TPL105
                    return loss
            """,
        "zero-dim-device-tensors-where-python-needs-a-number": """
            import torch
            import torch.nn.functional as F
            from torch import nn

            class Crop(nn.Module):
                def forward(self, pi, h, idx):
                    size_t = torch.tensor(pi.shape[2], device="cuda")
                    idx = idx.clamp_(0, size_t - 1)  # expect: TPL105
                    k_t = (h[0] > 0).sum()
                    kept = h[:, k_t:]  # expect: TPL105
                    padded = F.pad(kept, [0, k_t])  # expect: TPL105
                    fill = torch.full((4,), h.amax())  # expect: TPL105
                    return padded.view(k_t, -1), fill, idx  # expect: TPL105
            """,
        "count-guarding-a-masked-update-per-item": """
            import torch
            from torch import nn

            class Refine(nn.Module):
                def forward(self, masks):
                    out = masks.clone()
                    for b in range(self.levels):
                        m = out[b] > 0.5
                        if (m & (out[b] < 0.9)).sum() > 0:  # expect: TPL105
                            out[b][m] = 1.0
                    return out.to("cuda")
            """,
    }
    GOOD = {
        "shape-arithmetic-host-scalars-and-tensor-bounds": """
            import torch
            from torch import nn

            class Crop(nn.Module):
                def forward(self, pi, h, idx, lo, hi):
                    n = pi.shape[2]
                    idx = idx.clamp_(0, n - 1).clamp(min=lo.amin(), max=hi.amax())
                    host_t = torch.tensor(5)
                    rows = h.sum(1)
                    h[h > 0] = 0
                    return h[:, host_t:].view(n, -1), rows.cuda(), idx
            """,
        "host-copies-and-rebound-names": """
            import numpy as np
            import torch
            from torch import nn

            class Panoptic(nn.Module):
                def forward(self, masks, seg, sizes):
                    m_id = masks.softmax(-1).argmax(-1)
                    m_id = torch.from_numpy(np.asarray(seg))
                    area = [m_id.eq(i).sum().item() for i in range(len(sizes))]
                    host = torch.device("cpu")
                    kp = masks.detach().to(host).double()
                    finite = torch.isfinite(kp).all(1)
                    if not bool(finite.any()):
                        return None
                    target = torch.tensor([masks.shape[-2], masks.shape[-1]])
                    target_h, target_w = target.tolist()
                    return area, int(finite.sum()), target_h * target_w
            """,
        "shape-arithmetic": """
            import torch
            from torch import nn

            class Attention(nn.Module):
                def forward(self, x):
                    b, n = x.size(0), x.shape[1]
                    scale = float(x.shape[-1]) ** -0.5
                    heads = int(x.shape[-1] // 64)
                    if x.dim() == 3 and len(x) > 0 and x.numel():
                        x = x.reshape(b, n, heads, -1)
                    return x * scale
            """,
        "flags-and-python-numbers": """
            import numpy as np
            import torch
            from torch import nn

            class Block(nn.Module):
                def forward(self, x, return_attn, mask=None):
                    if mask is not None:
                        x = x.masked_fill(mask, 0)
                    if return_attn:
                        print("returning attention")
                    gain = np.float32(2.0).item()
                    return x * gain
            """,
        "step-loop-body": """
            import torch

            def train(model, loader, optimizer):
                for x, y in loader:
                    loss = model(x, y)
                    loss.backward()
                    optimizer.step()
                    print(loss.item())
            """,
        "same-calls-in-init": """
            import torch
            from torch import nn

            class Net(nn.Module):
                def __init__(self, table):
                    super().__init__()
                    self.size = int(table.sum().item())
                    if torch.isnan(table).any():
                        table = torch.nan_to_num(table)
                    self.register_buffer("table", table)

                def forward(self, x):
                    return x[:, : self.size] + self.table
            """,
        "cpu-tensor-layer-drop": """
            import torch
            from torch import nn

            class Encoder(nn.Module):
                def forward(self, x):
                    for layer in self.layers:
                        dropout_probability = torch.rand([])
                        if self.training and dropout_probability < self.layerdrop:
                            continue
                        keep = torch.randperm(x.shape[1])[: int(torch.randint(1, 4, ()).item())]
                        x = layer(x[:, keep.tolist()])
                    return x
            """,
        "global-state-and-error-paths": """
            import torch
            from torch import nn

            class Net(nn.Module):
                def forward(self, x, target):
                    if torch.is_autocast_enabled() or torch._use_cudnn_rnn_flatten_weight():
                        x = x.float()
                    if x.shape[0] != target.shape[0]:
                        raise ValueError(f"targets in [{target.min().item()}, {target.max().item()}]")
                    return x
            """,
        "input-of-an-exported-models-runtime": """
            import numpy as np
            import torch
            from PIL import Image
            from torch import nn

            class MultiBackend(nn.Module):
                def forward(self, im):
                    if self.dnn:
                        im = im.cpu().numpy()
                        self.net.setInput(im)
                        y = self.net.forward()
                    elif self.coreml:
                        im = im.cpu().numpy()
                        im = Image.fromarray((im[0] * 255).astype("uint8"))
                        y = self.model.predict({"image": im})
                    else:
                        im = im.cpu().numpy()
                        y = self.model(im)
                        y = [x if isinstance(x, np.ndarray) else x.numpy() for x in y]
                    return torch.from_numpy(y[0])
            """,
        "host-index-built-in-a-comprehension": """
            import torch
            from torch import nn

            class Denoiser(nn.Module):
                def forward(self, x, groups):
                    idx = torch.cat([torch.tensor(range(n), dtype=torch.long) for n in groups])
                    pos = torch.stack([idx + 4 * i for i in range(3)], dim=0)
                    return x, [p.reshape(-1) for p in pos.cpu().split(groups, dim=1)]
            """,
        "assert-is-tpl104s": """
            import torch
            from torch import nn

            class Net(nn.Module):
                def forward(self, x):
                    assert x.sum().item() > 0, f"bad input {x.mean().item()}"
                    return x
            """,
    }

    def check(self, node: cst.CSTNode, ctx: Context) -> Iterator[Report]:
        reason = ctx.hot_reason(node)
        if reason is None or not reason.from_model_code:
            return
        place = hot_place(node, ctx)
        if in_a_syncing_branch(node, ctx, _test_syncs):
            return  # the `if` is reported: its body runs after the host waited
        if isinstance(node, (cst.If, cst.While)):
            if _tests_a_device_value(node.test, ctx):
                condition = "`while` on a tensor" if isinstance(node, cst.While) else "`if` on a tensor"
                remedy = _REMEDY
                if isinstance(node, cst.If) and guards_masked_update(node, ctx):
                    condition, remedy = "`if` on a device tensor in a loop over items", UNCONDITIONAL
                yield self.report(node, reason=reason, what=condition, place=place, remedy=remedy)
            return
        if on_error_path(node, ctx):
            return
        scalar = scalar_sync(node, ctx)
        if scalar is not None:
            what, remedy = scalar
            yield self.report(node, reason=reason, what=what, place=place, remedy=remedy)
            return
        if not isinstance(node, cst.Call):
            return
        sync = host_sync(node, ctx)
        if sync is not None:
            yield self.report(node, reason=reason, what=sync, place=place, remedy=_REMEDY)


def _tests_a_device_value(test: cst.BaseExpression, ctx: Context) -> bool:
    return any(on_device(part, ctx, certain=True) for part in condition_parts(test, ctx))


def _test_syncs(test: cst.BaseExpression, ctx: Context) -> bool:
    """The test is a finding of this rule: a condition on a device tensor, or a host read in it."""
    return _tests_a_device_value(test, ctx) or any(
        isinstance(n, cst.Call) and host_sync(n, ctx) is not None for n in descendants(test)
    )


_REMEDY = "keep the value on the device (masks, torch.where) or compute it outside the model"

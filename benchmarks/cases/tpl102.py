"""TPL102 constant-copied-per-step: seed 004's class weights copied to the GPU in every forward, and a
diffusion training step whose noise schedule lives in NumPy arrays copied at every lookup."""

from __future__ import annotations

import torch
from torch import nn

from ..harness import Case, Tolerance
from . import common

# Seed 004's loss with its other problems already fixed, so that only the constant copy differs.
BAD = """
import torch
import torch.nn.functional as F
from torch import nn


def weighted_nll(pred, target, weight):
    nll = -pred[torch.arange(target.shape[0], device=pred.device), target]
    nll = nll * weight[target]
    nll = nll / weight[target].sum()
    return nll.sum()


class CrossEntropyLoss(nn.Module):
    def forward(self, input, target):
        pred = F.log_softmax(input, dim=1)
        loss = weighted_nll(pred, target, torch.Tensor([0.1] * 10).cuda())
        return loss
"""

# What the message asks for: build the constant once, as a buffer that moves with the module.
GOOD = """
import torch
import torch.nn.functional as F
from torch import nn


def weighted_nll(pred, target, weight):
    nll = -pred[torch.arange(target.shape[0], device=pred.device), target]
    nll = nll * weight[target]
    nll = nll / weight[target].sum()
    return nll.sum()


class CrossEntropyLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("weight", torch.Tensor([0.1] * 10))

    def forward(self, input, target):
        pred = F.log_softmax(input, dim=1)
        loss = weighted_nll(pred, target, self.weight)
        return loss
"""


def make_loss_step(module, size, device):
    """The loss in a training step: alone on fixed logits ("width" absent: what the loss adds to a step), or
    after an MLP of `width` (4 layers) with its SGD update, from launch-bound to GPU-bound."""
    criterion = module.CrossEntropyLoss().to(device)
    target = torch.randint(0, 10, (size["batch"],), device=device)
    if "width" not in size:
        logits = torch.randn(size["batch"], 10, device=device, requires_grad=True)

        def loss_alone():
            logits.grad = None
            loss = criterion(logits, target)
            loss.backward()
            return loss.detach(), logits.grad

        return loss_alone
    model = common.mlp(size["width"], 4, 10, device)
    optimizer = common.sgd(model)
    x = torch.randn(size["batch"], size["width"], device=device)

    def train_step():
        optimizer.zero_grad(set_to_none=True)
        loss = criterion(model(x), target)
        loss.backward()
        optimizer.step()
        return loss.detach(), common.state_summary(model)

    return train_step


# Seed 004 trains on CIFAR-10-like data in batches of 1024: the loss alone at that batch (launch-bound: a
# dozen small kernels), then in a training step behind an MLP that makes the step balanced or GPU-bound.
LOSS_SIZES = [
    {
        "label": "loss alone, batch=1024",
        "regime": "loss fwd+bwd alone, batch 1024 (launch-bound)",
        "batch": 1024,
    },
    {
        "label": "MLP 1024x4 step, batch=1024",
        "regime": "train step, balanced MLP 1024x4 b=1024",
        "width": 1024,
        "batch": 1024,
    },
    {
        "label": "MLP 4096x4 step, batch=4096",
        "regime": "train step, GPU-bound MLP 4096x4 b=4096",
        "width": 4096,
        "batch": 4096,
    },
]
LOSS_SMOKE_SIZES = [
    {"label": "loss alone, batch=8", "batch": 8},
    {"label": "MLP 16x4 step, batch=8", "width": 16, "batch": 8},
]

# Guided diffusion's shape (improved-diffusion, guided-diffusion, their forks): the schedule is built once in
# NumPy (float64) and `_extract_into_tensor` copies the whole array to the device at every lookup; here three
# lookups per step (the two q_sample coefficients and a min-SNR loss weight).
DIFFUSION_BAD = """
import numpy as np
import torch
from torch import nn


def _extract_into_tensor(arr, timesteps, broadcast_shape):
    res = torch.from_numpy(arr).to(device=timesteps.device)[timesteps].float()
    while len(res.shape) < len(broadcast_shape):
        res = res[..., None]
    return res.expand(broadcast_shape)


class GaussianDiffusion(nn.Module):
    def __init__(self, num_timesteps=1000):
        super().__init__()
        self.num_timesteps = num_timesteps
        betas = np.linspace(1e-4, 0.02, num_timesteps, dtype=np.float64)
        alphas_cumprod = np.cumprod(1.0 - betas)
        self.sqrt_alphas_cumprod = np.sqrt(alphas_cumprod)
        self.sqrt_one_minus_alphas_cumprod = np.sqrt(1.0 - alphas_cumprod)
        self.loss_weight = np.minimum(alphas_cumprod / (1.0 - alphas_cumprod), 5.0)

    def q_sample(self, x_start, t, noise):
        return (
            _extract_into_tensor(self.sqrt_alphas_cumprod, t, x_start.shape) * x_start
            + _extract_into_tensor(self.sqrt_one_minus_alphas_cumprod, t, x_start.shape) * noise
        )

    def forward(self, model, x_start, t, noise):
        mse = (model(self.q_sample(x_start, t, noise)) - noise).pow(2).mean(dim=(1, 2, 3))
        return (_extract_into_tensor(self.loss_weight, t, mse.shape) * mse).mean()
"""

# What the message asks for: the same float64 tables, registered once as buffers that move with the module.
DIFFUSION_GOOD = """
import numpy as np
import torch
from torch import nn


def _extract_into_tensor(arr, timesteps, broadcast_shape):
    res = arr[timesteps].float()
    while len(res.shape) < len(broadcast_shape):
        res = res[..., None]
    return res.expand(broadcast_shape)


class GaussianDiffusion(nn.Module):
    def __init__(self, num_timesteps=1000):
        super().__init__()
        self.num_timesteps = num_timesteps
        betas = np.linspace(1e-4, 0.02, num_timesteps, dtype=np.float64)
        alphas_cumprod = np.cumprod(1.0 - betas)
        self.register_buffer("sqrt_alphas_cumprod", torch.from_numpy(np.sqrt(alphas_cumprod)))
        self.register_buffer("sqrt_one_minus_alphas_cumprod", torch.from_numpy(np.sqrt(1.0 - alphas_cumprod)))
        self.register_buffer("loss_weight", torch.from_numpy(np.minimum(alphas_cumprod / (1.0 - alphas_cumprod), 5.0)))

    def q_sample(self, x_start, t, noise):
        return (
            _extract_into_tensor(self.sqrt_alphas_cumprod, t, x_start.shape) * x_start
            + _extract_into_tensor(self.sqrt_one_minus_alphas_cumprod, t, x_start.shape) * noise
        )

    def forward(self, model, x_start, t, noise):
        mse = (model(self.q_sample(x_start, t, noise)) - noise).pow(2).mean(dim=(1, 2, 3))
        return (_extract_into_tensor(self.loss_weight, t, mse.shape) * mse).mean()
"""


def denoiser(width: int, depth: int) -> nn.Sequential:
    """A small convolutional denoiser (no timestep input: the lookups, not the model, are measured)."""
    layers: list[nn.Module] = [nn.Conv2d(3, width, 3, padding=1)]
    for _ in range(depth):
        layers += [nn.GroupNorm(8, width), nn.SiLU(), nn.Conv2d(width, width, 3, padding=1)]
    layers += [nn.GroupNorm(8, width), nn.SiLU(), nn.Conv2d(width, 3, 3, padding=1)]
    return nn.Sequential(*layers)


def make_diffusion_step(module, size, device):
    """One training step of a denoiser on 32x32 images: timesteps and noise drawn on the device, the noised
    input, the weighted loss, backward and an Adam update."""
    diffusion = module.GaussianDiffusion().to(device)
    model = denoiser(size["width"], 4).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    x_start = torch.randn(size["batch"], 3, 32, 32, device=device)

    def train_step():
        t = torch.randint(0, diffusion.num_timesteps, (x_start.shape[0],), device=device)
        noise = torch.randn_like(x_start)
        optimizer.zero_grad(set_to_none=True)
        loss = diffusion(model, x_start, t, noise)
        loss.backward()
        optimizer.step()
        return loss.detach(), common.state_summary(model)

    return train_step


DIFFUSION_SIZES = [
    {
        "label": "denoiser 64ch, batch 32",
        "regime": "launch-bound denoiser 64ch x4 b=32 32x32",
        "width": 64,
        "batch": 32,
    },
    {
        "label": "denoiser 128ch, batch 64",
        "regime": "balanced denoiser 128ch x4 b=64 32x32",
        "width": 128,
        "batch": 64,
    },
    {
        "label": "denoiser 256ch, batch 128",
        "regime": "GPU-bound denoiser 256ch x4 b=128 32x32",
        "width": 256,
        "batch": 128,
    },
]

CASES = [
    Case(
        name="tpl102_seed_weights",
        code="TPL102",
        title="seed 004 loss: torch.Tensor([0.1]*10).cuda() per call vs a registered buffer",
        bad=BAD,
        good=GOOD,
        make=make_loss_step,
        sizes=LOSS_SIZES,
        smoke_sizes=LOSS_SMOKE_SIZES,
        tolerance=Tolerance(1e-5, 1e-6),
    ),
    Case(
        name="tpl102_diffusion_schedule",
        code="TPL102",
        title="diffusion step, 3 schedule lookups: NumPy arrays copied per lookup vs float64 buffers",
        bad=DIFFUSION_BAD,
        good=DIFFUSION_GOOD,
        make=make_diffusion_step,
        sizes=DIFFUSION_SIZES,
        smoke_sizes=[{"label": "denoiser 8ch, batch 2", "width": 8, "batch": 2}],
        tolerance=Tolerance(1e-5, 1e-6),
    ),
]

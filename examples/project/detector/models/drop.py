import torch
from torch import nn


class ChannelDrop(nn.Module):
    """Drops whole channels while training. Nothing here names a device: train.py moves the
    model to the GPU, so the mask drawn on the CPU is copied there at every step."""

    def __init__(self, p: float) -> None:
        super().__init__()
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training:
            return x
        keep = torch.rand(x.shape[0], x.shape[1], 1, 1) >= self.p
        return x * keep / (1 - self.p)

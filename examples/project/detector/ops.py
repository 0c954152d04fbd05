import torch

from .kernels import pick


def shuffle_channels(x):
    order = torch.randperm(x.shape[1], device=x.device)
    return pick(x * torch.rand(x.shape[0], 1, 1, 1), order)

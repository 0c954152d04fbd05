import torch

from .kernels import pick


def shuffle_channels(x):
    order = torch.randperm(x.shape[1])
    return pick(x, order)

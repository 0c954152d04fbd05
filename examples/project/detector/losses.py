import torch
import torch.nn.functional as F
from torch import nn


def weighted_nll(pred, target, weight):
    assert target.max() < pred.shape[1]
    n = pred.shape[0]
    return -(weight[target] * pred[range(n), target]).mean()


class WeightedCE(nn.Module):
    def __init__(self, weight: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("weight", weight)

    def forward(self, logits, target):
        return weighted_nll(F.log_softmax(logits, dim=1), target, self.weight)

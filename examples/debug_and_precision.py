"""Debugging tools left on in a training script: anomaly detection, a gradient check and a
per-step synchronize.

Lint it: `torchperf-lint examples/debug_and_precision.py --show-context`.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.autograd.set_detect_anomaly(True)
torch.set_float32_matmul_precision("high")


class Swish(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * torch.sigmoid(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        s = torch.sigmoid(x)
        return grad * (s + x * s * (1 - s))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 256)
        self.fc2 = nn.Linear(256, 10)

    def forward(self, x):
        return self.fc2(Swish.apply(self.fc1(x)))


def main():
    device = torch.device("cuda")
    x = torch.randn(4, 8, dtype=torch.double, requires_grad=True)
    torch.autograd.gradcheck(Swish.apply, (x,))

    data = TensorDataset(torch.randn(8192, 64), torch.randint(0, 10, (8192,)))
    loader = DataLoader(
        data, batch_size=256, shuffle=True, num_workers=4, pin_memory=True, persistent_workers=True
    )
    model = Net().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
    for epoch in range(5):
        for inputs, labels in loader:
            inputs = inputs.to(device, non_blocking=True)
            labels = labels.to(device, non_blocking=True)
            optimizer.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(inputs), labels)
            loss.backward()
            optimizer.step()
            torch.cuda.synchronize()


if __name__ == "__main__":
    main()

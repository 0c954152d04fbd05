"""A plain fp32 CUDA training script: full-precision matmuls and an unfused optimizer.

Lint it: `torchperf-lint examples/fp32_training.py --show-context`; fix it (on a copy) with
`torchperf-lint --fix --unsafe-fixes`: TF32 matmuls and the fused AdamW kernel.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class MLP(nn.Module):
    def __init__(self, width=4096, depth=8, classes=10):
        super().__init__()
        layers = []
        for _ in range(depth):
            layers += [nn.Linear(width, width), nn.GELU()]
        self.body = nn.Sequential(*layers)
        self.head = nn.Linear(width, classes)

    def forward(self, x):
        return self.head(self.body(x))


def main():
    device = torch.device("cuda")
    data = TensorDataset(torch.randn(16384, 4096), torch.randint(0, 10, (16384,)))
    loader = DataLoader(
        data, batch_size=512, shuffle=True, num_workers=4, pin_memory=True, persistent_workers=True
    )
    model = MLP().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.05)
    for epoch in range(3):
        for inputs, labels in loader:
            inputs = inputs.to(device, non_blocking=True)
            labels = labels.to(device, non_blocking=True)
            optimizer.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(inputs), labels)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.4f}")


if __name__ == "__main__":
    main()

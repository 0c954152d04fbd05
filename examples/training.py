"""A small classifier's training and evaluation script with the TPL3xx patterns.

Lint it: `torchperf-lint --select TPL3 examples/training.py --show-context`.
Each finding's line carries a `# TPL3xx` comment saying what fires there.
"""

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class Classifier(nn.Module):
    def __init__(self, features=64, classes=10):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(features, 128), nn.ReLU(), nn.Linear(128, classes))

    def forward(self, x):
        logits = self.body(x)
        return torch.log(torch.softmax(logits, dim=1))  # TPL303: use torch.log_softmax


def train_epoch(model, loader, optimizer):
    model.train()
    running = 0.0
    for x, y in loader:
        optimizer.zero_grad(set_to_none=False)  # TPL301: pass set_to_none=True
        criterion = nn.NLLLoss()  # TPL302: build the loss once
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        running += loss  # TPL304: keeps every step's graph; use loss.item()
    return running / len(loader)


def evaluate(model, loader):
    model.eval()
    correct = 0
    for x, y in loader:
        correct += (model(x).argmax(1) == y).sum().item()  # TPL305: wrap in torch.no_grad()
    return correct / len(loader.dataset)


def main():
    data = TensorDataset(torch.randn(2048, 64), torch.randint(0, 10, (2048,)))
    train_loader = DataLoader(data, batch_size=64, shuffle=True)
    val_loader = DataLoader(data, batch_size=256)
    model = Classifier()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for epoch in range(3):
        loss = train_epoch(model, train_loader, optimizer)
        accuracy = evaluate(model, val_loader)
        print(f"epoch {epoch}: loss {float(loss):.3f}, accuracy {accuracy:.3f}")


if __name__ == "__main__":
    main()

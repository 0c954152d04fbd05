"""A small CNN training script with the slow patterns of the seed articles.

Lint it: `torchperf-lint examples/slow_training.py --show-context`.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(32)
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.conv2(x)
        x = self.bn2(x)
        x = F.relu(x)
        noise = torch.randn(x.shape[0], 32, 1, 1).cuda()
        x = (x + noise).mean(dim=(2, 3))
        return self.head(x)


def weighted_nll(pred, target, weight):
    assert target.max() < 10
    nll = -pred[range(target.shape[0]), target]
    return (nll * weight[target]).mean()


class CrossEntropyLoss(nn.Module):
    def forward(self, input, target):
        pred = F.log_softmax(input, dim=1)
        return weighted_nll(pred, target, torch.Tensor([0.1] * 10).cuda())


def smooth(logits):
    rows = []
    for i in range(logits.shape[0]):
        rows.append(logits[i] - logits[i].max())
    return torch.stack(rows)


def main():
    device = torch.device("cuda:0")
    data = TensorDataset(torch.randn(4096, 3, 32, 32), torch.randint(0, 10, (4096,)))
    train_loader = DataLoader(data, batch_size=128, shuffle=True)
    model = Net().cuda(device)
    criterion = CrossEntropyLoss().cuda(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model.train()
    for epoch in range(2):
        for images, labels in train_loader:
            images, labels = images.to(device), labels.to(device)
            optimizer.zero_grad(set_to_none=False)
            logits = smooth(model(images))
            loss = criterion(logits, labels)
            loss.backward()
            optimizer.step()


if __name__ == "__main__":
    main()

"""An image-classification training script with slow construction and data-loading settings.

Lint it: `torchperf-lint examples/modules_and_data.py --select TPL4,TPL5 --show-context`.
"""

import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset


class ConvBNReLU(nn.Sequential):
    def __init__(self, c_in, c_out, stride=1):
        super().__init__(
            nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1),
            nn.BatchNorm2d(c_out),
            nn.ReLU(inplace=True),
        )


class ResidualBlock(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.conv2(out)
        out = self.bn2(out)
        return F.relu(out + x)


def make_backbone(widths):
    layers = [ConvBNReLU(3, widths[0], stride=2)]
    for c_in, c_out in zip(widths, widths[1:]):
        layers.append(nn.Conv2d(c_in, c_out, 3, stride=2, padding=1))
        layers.append(nn.BatchNorm2d(c_out))
        layers.append(nn.ReLU(inplace=True))
        layers.append(ResidualBlock(c_out))
    return nn.Sequential(*layers)


class Classifier(nn.Module):
    def __init__(self, widths=(32, 64, 128), num_classes=10):
        super().__init__()
        self.backbone = make_backbone(widths)
        self.head = nn.Linear(widths[-1], num_classes)

    def forward(self, x):
        return self.head(self.backbone(x).mean(dim=(2, 3)))


class RandomImages(Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return torch.randn(3, 64, 64), i % 10


def train_one_epoch(model, loader, optimizer, device):
    model.train()
    for images, labels in loader:
        images = images.to(device, non_blocking=True)
        labels = labels.to(device, non_blocking=True)
        loss = F.cross_entropy(model(images), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


@torch.no_grad()
def evaluate(model, loader, device):
    model.eval()
    correct = 0
    for images, labels in loader:
        correct += (model(images.to(device)).argmax(1) == labels.to(device)).sum().item()
    return correct / len(loader.dataset)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--workers", type=int, default=8)
    args = parser.parse_args()

    device = torch.device("cuda")
    model = Classifier().to(device)
    if torch.cuda.device_count() > 1:
        model = nn.DataParallel(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    train_loader = DataLoader(
        RandomImages(50_000), batch_size=256, shuffle=True, num_workers=args.workers, drop_last=True
    )
    val_loader = DataLoader(RandomImages(10_000), batch_size=512)
    for epoch in range(args.epochs):
        train_one_epoch(model, train_loader, optimizer, device)
        print(f"epoch {epoch}: accuracy {evaluate(model, val_loader, device):.3f}")


if __name__ == "__main__":
    main()

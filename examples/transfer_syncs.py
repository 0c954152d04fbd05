"""A text classifier whose loss and training loop make the GPU wait for the host (TPL1xx).

Lint it: `torchperf-lint examples/transfer_syncs.py --select TPL1 --extend-select TPL107 --show-context`.
Expected: TPL102 (class weights rebuilt and copied at every step), TPL104 (assert on the
targets), TPL105 (`if` on a tensor and `.item()` inside the model), TPL106 (batches copied
without non_blocking=True) and, with TPL107 enabled, the per-step `loss.item()`.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

NUM_CLASSES = 4
CLASS_WEIGHTS = [1.0, 2.0, 2.0, 0.5]


class BagOfWords(nn.Module):
    def __init__(self, vocab_size=10_000, dim=128):
        super().__init__()
        self.embed = nn.EmbeddingBag(vocab_size, dim)
        self.head = nn.Linear(dim, NUM_CLASSES)

    def forward(self, tokens):
        h = self.embed(tokens)
        if torch.isnan(h).any():
            h = torch.nan_to_num(h)
        self.last_norm = h.norm(dim=1).mean().item()
        return self.head(h)


def weighted_cross_entropy(logits, target, weight):
    assert (target < NUM_CLASSES).all(), "label out of range"
    return F.cross_entropy(logits, target, weight=weight)


class WeightedLoss(nn.Module):
    def forward(self, logits, target):
        weight = torch.tensor(CLASS_WEIGHTS).to(logits.device)
        return weighted_cross_entropy(logits, target, weight)


def main():
    device = torch.device("cuda")
    data = TensorDataset(torch.randint(0, 10_000, (8192, 64)), torch.randint(0, NUM_CLASSES, (8192,)))
    loader = DataLoader(
        data, batch_size=256, shuffle=True, num_workers=4, pin_memory=True, persistent_workers=True
    )
    model = BagOfWords().to(device)
    criterion = WeightedLoss()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
    torch.set_float32_matmul_precision("high")
    history = []
    for epoch in range(3):
        for step, (tokens, labels) in enumerate(loader):
            tokens, labels = tokens.to(device), labels.to(device)
            loss = criterion(model(tokens), labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            history.append(loss.item())
            if step % 50 == 0:
                print(f"epoch {epoch} step {step}: loss {loss.item():.3f}")


if __name__ == "__main__":
    main()

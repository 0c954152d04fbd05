"""A sequence tagger whose training script runs Python loops where tensor ops belong.

Lint it: `torchperf-lint examples/loops.py --select TPL2 --show-context`.
TPL201 fires on the per-sample span pooling and the per-token bucketing, TPL202 on the
prediction buffer grown in the evaluation loop, TPL203 on the loss history. The GRU-style
recurrence in `Tagger.forward` is sequential by nature and stays silent.
"""

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Tagger(nn.Module):
    def __init__(self, vocab=1000, dim=64, tags=9):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.cell = nn.GRUCell(dim, dim)
        self.head = nn.Linear(2 * dim, tags)
        self.register_buffer("edges", torch.linspace(-3, 3, 15))

    def forward(self, tokens, spans):
        x = self.embed(tokens)  # (B, T, D)
        h = x.new_zeros(x.shape[0], x.shape[2])
        states = []
        for t in range(x.shape[1]):  # an RNN: each step needs the previous h
            h = self.cell(x[:, t], h)
            states.append(h)
        states = torch.stack(states, dim=1)

        pooled = []
        for b in range(states.size(0)):  # one gather per sample; use torch.gather on all spans
            start, end = spans[b, 0], spans[b, 1]
            pooled.append(states[b, start:end].mean(0))
        pooled = torch.stack(pooled)

        logits = self.head(torch.cat([pooled, h], dim=-1))
        return logits, self.bucket(logits)

    def bucket(self, logits):
        B, C = logits.shape
        bins = torch.empty(B, C, dtype=torch.long, device=logits.device)
        for i in range(B):  # torch.bucketize(logits, self.edges) does all rows at once
            bins[i] = (logits[i].unsqueeze(-1) > self.edges).sum(-1)
        return bins


@torch.no_grad()
def evaluate(model, loader):
    predictions = torch.empty(0, dtype=torch.long)
    for tokens, spans, _labels in loader:
        logits, _ = model(tokens, spans)
        predictions = torch.cat([predictions, logits.argmax(-1)])  # copies all earlier batches
    return predictions


def train(model, loader, epochs=2):
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for epoch in range(epochs):
        step_losses = []
        for tokens, spans, labels in loader:
            logits, _ = model(tokens, spans)
            loss = F.cross_entropy(logits, labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            step_losses.append(loss.detach())
        history = torch.tensor([loss.item() for loss in step_losses])  # one sync per step
        print(f"epoch {epoch}: mean loss {history.mean():.3f}")


def main():
    tokens = torch.randint(0, 1000, (512, 32))
    starts = torch.randint(0, 16, (512, 1))
    spans = torch.cat([starts, starts + 8], dim=1)
    labels = torch.randint(0, 9, (512,))
    loader = DataLoader(TensorDataset(tokens, spans, labels), batch_size=64, shuffle=True)
    model = Tagger()
    train(model, loader)
    print(evaluate(model, loader).bincount())


if __name__ == "__main__":
    main()

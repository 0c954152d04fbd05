"""Train the toy detector: python train.py"""

import torch
from torch.utils.data import DataLoader, TensorDataset

from detector import Net, WeightedCE
from detector.engine.loops import evaluate, train_one_epoch


def main() -> None:
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.set_float32_matmul_precision("high")
    data = TensorDataset(torch.randn(512, 3, 32, 32), torch.randint(0, 10, (512,)))
    loader = DataLoader(data, batch_size=64, shuffle=True, num_workers=4, pin_memory=True)
    model = Net().to(device)
    criterion = WeightedCE(torch.ones(10, device=device))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, fused=True)
    for _ in range(3):
        train_one_epoch(model, criterion, loader, optimizer, device)
    print(evaluate(model, loader, device, [str(i) for i in range(10)]))


if __name__ == "__main__":
    main()

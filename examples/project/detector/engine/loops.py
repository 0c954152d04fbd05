import torch

from ..utils import MetricLogger, record, smart_inference_mode


def step(loss, optimizer):
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()


def train_one_epoch(model, criterion, loader, optimizer, device):
    model.train()
    logger = MetricLogger()
    for images, targets in logger.log_every(loader):
        images = images.to(device)
        targets = targets.to(device)
        step(criterion(model(images), targets), optimizer)


def train_steps(model, criterion, batches, optimizer, device):
    for images, targets in batches:
        noise = torch.randn(images.shape).to(device)
        step(criterion(model(images + noise), targets), optimizer)


@smart_inference_mode()
def evaluate(model, loader, device, names):
    model.eval()
    scores = []
    for images, _ in loader:
        logits = model(images.to(device, non_blocking=True))
        scores.append(logits.softmax(dim=1).mean(dim=0))
    return record(torch.stack(scores).mean(dim=0).cpu(), names)

"""End to end, seed 004: a small CNN trained with the article's custom weighted cross-entropy, before and
after `torchperf-lint --fix --unsafe-fixes` plus the manual fix the TPL102 message asks for."""

from __future__ import annotations

import torch

from ..harness import Case, Tolerance

# The article's code (model, loss, training loop), with the profiler and the torchvision dataset left out:
# the batches arrive as a DataLoader with pin_memory=True would deliver them.
MODEL_AND_LOSS = """

# sample model
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 12, 3, padding=1)
        self.conv3 = nn.Conv2d(12, 16, 3, padding=1)
        self.conv4 = nn.Conv2d(16, 20, 3, padding=1)
        self.conv5 = nn.Conv2d(20, 24, 3, padding=1)
        self.conv6 = nn.Conv2d(24, 28, 3, padding=1)
        self.conv7 = nn.Conv2d(28, 32, 3, padding=1)
        self.conv8 = nn.Conv2d(32, 10, 3, padding=1)
        self.pool = nn.MaxPool2d(2, 2)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = self.pool(F.relu(self.conv3(x)))
        x = self.pool(F.relu(self.conv4(x)))
        x = self.pool(F.relu(self.conv5(x)))
        x = self.pool(F.relu(self.conv6(x)))
        x = self.pool(F.relu(self.conv7(x)))
        x = self.pool(F.relu(self.conv8(x)))
        x = torch.flatten(x, 1) # flatten all dimensions except batch
        return x


def log_softmax(x):
    return x - x.exp().sum(-1).log().unsqueeze(-1)

def weighted_nll(pred, target, weight):
    assert target.max() < 10
    nll = -pred[range(target.shape[0]), target]
    nll = nll * weight[target]
    nll = nll / weight[target].sum()
    sum_nll = nll.sum()
    return sum_nll

# custom loss definition
class CrossEntropyLoss(nn.Module):
    def forward(self, input, target):
        pred = log_softmax(input)
        loss = weighted_nll(pred, target, torch.Tensor([0.1]*10).cuda())
        return loss


def make_optimizer(model):
    return torch.optim.SGD(model.parameters(), lr=0.001, momentum=0.9)
"""

BAD = (
    """
import torch
import torch.nn as nn
import torch.nn.functional as F
"""
    + MODEL_AND_LOSS
    + """

def train(model, criterion, optimizer, train_loader, device):
    model.train()
    for step, data in enumerate(train_loader):
        inputs = data[0].to(device=device, non_blocking=True)
        labels = data[1].to(device=device, non_blocking=True)
        inputs = (inputs.to(torch.float32) / 255. - 0.5) / 0.5
        outputs = model(inputs)
        loss = criterion(outputs, labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    return loss.detach()
"""
)

# The article's own input pipeline as well: FakeCIFAR's 10000 random 32x32 images, resized to 256x256 per
# item (T.Resize(256) and T.PILToTensor(), written with PIL alone), batches of 1024 from 8 worker processes
# with pinned memory, and its loop, which stops after (1 + 4 + 3) profiled steps. The profiler is left out.
ARTICLE_BAD = (
    """
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.data
from PIL import Image
"""
    + MODEL_AND_LOSS
    + """

def transform(img):
    # T.Compose([T.Resize(256), T.PILToTensor()]) on the square images
    img = img.resize((256, 256), Image.BILINEAR)
    return torch.from_numpy(np.array(img, copy=True)).permute(2, 0, 1)


# dataset with random images that mimics the properties of CIFAR10
class FakeCIFAR(torch.utils.data.Dataset):
    def __init__(self, transform):
        self.transform = transform
        self.data = np.random.randint(low=0,high=256,size=(10000,32,32,3),dtype=np.uint8)
        self.targets = np.random.randint(low=0,high=10,size=(10000),dtype=np.uint8).tolist()

    def __getitem__(self, index):
        img, target = self.data[index], self.targets[index]
        img = Image.fromarray(img)
        if self.transform is not None:
            img = self.transform(img)
        return img, target

    def __len__(self) -> int:
        return len(self.data)


def make_loader(batch_size=1024, num_workers=8):
    train_set = FakeCIFAR(transform=transform)
    return torch.utils.data.DataLoader(train_set, batch_size=batch_size,
                                   shuffle=True, num_workers=num_workers, pin_memory=True)


def train(model, criterion, optimizer, train_loader, device, steps):
    model.train()
    for step, data in enumerate(train_loader):
        inputs = data[0].to(device=device, non_blocking=True)
        labels = data[1].to(device=device, non_blocking=True)
        inputs = (inputs.to(torch.float32) / 255. - 0.5) / 0.5
        if step >= steps:
            break
        outputs = model(inputs)
        loss = criterion(outputs, labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    return loss.detach()
"""
)

# TPL102 has no automatic fix; its message asks for the constant to be built once and kept with
# self.register_buffer(...).
MANUAL = (
    (
        "class CrossEntropyLoss(nn.Module):\n    def forward(self, input, target):\n",
        (
            "class CrossEntropyLoss(nn.Module):\n"
            "    def __init__(self):\n"
            "        super().__init__()\n"
            '        self.register_buffer("weight", torch.Tensor([0.1]*10))\n'
            "\n"
            "    def forward(self, input, target):\n"
        ),
    ),
    ("torch.Tensor([0.1]*10).cuda())", "self.weight)"),
)


def make_training(module, size, device):
    model = module.Net().to(device)
    criterion = module.CrossEntropyLoss().to(device)
    optimizer = module.make_optimizer(model)
    shape = (size["batch"], 3, size["hw"], size["hw"])
    loader = [
        (torch.randint(0, 256, shape, dtype=torch.uint8), torch.randint(0, 10, (size["batch"],)))
        for _ in range(size["steps"])
    ]
    if device.type == "cuda":
        loader = [(x.pin_memory(), y.pin_memory()) for x, y in loader]
    return lambda: (module.train(model, criterion, optimizer, loader, device), model.conv1.weight.detach())


def make_article_training(module, size, device):
    """The article's loop over its own DataLoader, from a fresh iterator per call (worker start-up included,
    as in the article's script)."""
    import numpy as np

    np.random.seed(0)  # FakeCIFAR draws its images from numpy's global generator
    model = module.Net().to(device)
    criterion = module.CrossEntropyLoss().to(device)
    optimizer = module.make_optimizer(model)
    loader = module.make_loader(size["batch"], size["workers"])
    return lambda: (
        module.train(model, criterion, optimizer, loader, device, size["steps"]),
        model.conv1.weight.detach(),
    )


CASES = [
    Case(
        name="seed004_training_step",
        code="SEED004",
        title="seed 004 end to end: CNN training with the custom weighted NLL, before and after --fix "
        "--unsafe-fixes and register_buffer",
        bad=BAD,
        fixes=("TPL103", "TPL104", "TPL701", "TPL702"),
        select=None,
        manual=MANUAL,
        make=make_training,
        # The article's sizes: batches of 1024 images resized to 3x256x256.
        sizes=[
            {
                "label": "2 steps, batch 1024x3x256x256",
                "regime": "the article's step from pinned batches (GPU-bound: 1024x3x256x256)",
                "batch": 1024,
                "hw": 256,
                "steps": 2,
            }
        ],
        smoke_sizes=[{"label": "2 steps, batch 2x3x256x256", "batch": 2, "hw": 256, "steps": 2}],
        tolerance=Tolerance(
            1e-3, 1e-5, "loss and conv1 weight after the steps; fused SGD rounds differently"
        ),
        publish=("TPL102", "TPL103", "TPL104"),
        note="all fixes of the file together (TPL103, TPL104, TPL701, TPL702 by the fixer, TPL102 by hand)",
    ),
    Case(
        name="seed004_article_pipeline",
        code="SEED004",
        title="seed 004 end to end with the article's own input pipeline (FakeCIFAR resized to 256, batch 1024, "
        "8 workers), before and after --fix --unsafe-fixes and register_buffer",
        bad=ARTICLE_BAD,
        fixes=("TPL103", "TPL104", "TPL701", "TPL702"),
        select=None,
        manual=MANUAL,
        make=make_article_training,
        requires=("PIL", "numpy"),
        warmup=False,  # each call starts the loader's 8 workers again, as the article's script does
        sizes=[
            {
                "label": "8 steps of batch 1024x3x256x256 from a fresh 8-worker loader",
                "regime": "the article's pipeline: PIL resize 32->256 in 8 workers, batch 1024",
                "batch": 1024,
                "workers": 8,
                "steps": 8,
            }
        ],
        smoke_sizes=[
            {"label": "1 step of batch 2x3x256x256, 2 workers", "batch": 2, "workers": 2, "steps": 1}
        ],
        tolerance=Tolerance(
            1e-3, 1e-5, "loss and conv1 weight after the steps; fused SGD rounds differently"
        ),
        publish=("TPL102", "TPL103", "TPL104"),
        note="the article's DataLoader in both variants; the profiler left out",
    ),
]

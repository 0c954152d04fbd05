"""A test on an attribute of a parameter that holds a model instance (`if net.n_classes == 1:`)
is decided by how every caller builds that instance: what its class's `__init__` sets the
attribute to from the construction's arguments, an option's default included
(project/arguments.py). A function that runs an evaluation or training loop of its own is hot
whoever calls it, so its parameters hold what all its callers pass, cold ones too. From real code:
Pytorch-UNet's `evaluate`, whose binary branch needs `--classes 1` (default 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import finding_lines, write_project

FILES = {
    "unet/__init__.py": "from .model import UNet\n",
    "unet/model.py": """
        from torch import nn

        class UNet(nn.Module):
            def __init__(self, n_channels, n_classes):
                super().__init__()
                self.n_classes = n_classes
                self.conv = nn.Conv2d(n_channels, n_classes, 1)

            def forward(self, x):
                return self.conv(x)
        """,
    "evaluate.py": """
        import torch

        @torch.inference_mode()
        def evaluate(net, loader, device):
            score = 0
            for image, mask in loader:
                image, mask = image.to(device), mask.to(device)
                pred = net(image)
                if net.n_classes == 1:
                    assert mask.min() >= 0 and mask.max() <= 1
                else:
                    assert mask.min() >= 0 and mask.max() < net.n_classes
                score += (pred.argmax(1) == mask).float().mean()
            return score
        """,
    "train.py": """
        import argparse
        import torch
        from unet import UNet
        from evaluate import evaluate

        def train_model(model, loader, optimizer, device):
            for step, (image, mask) in enumerate(loader):
                loss = torch.nn.functional.cross_entropy(model(image.to(device)), mask.to(device))
                loss.backward()
                optimizer.step()
                if step % 100 == 0:
                    evaluate(model, loader, device)

        if __name__ == "__main__":
            parser = argparse.ArgumentParser()
            parser.add_argument("--classes", type=int, default={default})
            args = parser.parse_args()
            model = UNet(n_channels=3, n_classes={passed})
            model = model.to(memory_format=torch.channels_last)
            model.to("cuda")
            train_model(model, [], torch.optim.SGD(model.parameters()), "cuda")
        """,
}


def _lines(tmp_path: Path, default: str, passed: str = "args.classes") -> list[int]:
    files = dict(FILES, **{"train.py": FILES["train.py"].format(default=default, passed=passed)})
    return finding_lines(write_project(tmp_path, files), "evaluate.py", "TPL104")


@pytest.mark.usefixtures("precision_off_rules_on")
@pytest.mark.parametrize(
    ("default", "passed", "lines"),
    [
        ("2", "args.classes", [12]),  # an option's default, seen through the model's attribute
        ("1", "args.classes", [10]),
        ("2", "2", [12]),  # a literal
        ("None", "args.classes", [10, 12]),  # not known: both branches may run
        ("2", "int(args.classes)", [10, 12]),
    ],
)
def test_an_attribute_of_the_model_a_caller_builds_decides_the_branch(
    tmp_path: Path, default: str, passed: str, lines: list[int]
) -> None:
    assert _lines(tmp_path, default, passed) == lines

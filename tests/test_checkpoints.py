"""Published checkpoints (issue 25, item 6): the layers of a model whose weights are downloaded or
registered as pretrained keep their layout across the project, so TPL401 stays silent there; a
model trained from scratch keeps the finding."""

from __future__ import annotations

from pathlib import Path

from .helpers import finding_lines, write_project

BACKBONE = """
    import torch.nn as nn

    class Bottleneck(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.conv = nn.Conv2d(c, c, 3, padding=1)
            self.bn = nn.BatchNorm2d(c)

        def forward(self, x):
            return self.bn(self.conv(x))

    class HourglassNet(nn.Module):
        def __init__(self, block, c):
            super().__init__()
            self.body = nn.Sequential(*[block(c) for _ in range(4)])

        def forward(self, x):
            return self.body(x)

    def hourglass(c):
        return HourglassNet(Bottleneck, c)
    """

# kornia's SOLD2: the detector in another module downloads the backbone's weights
DETECTOR = """
    import torch.nn as nn
    from torch.hub import load_state_dict_from_url

    from .backbones import hourglass

    URL = "https://example.com/sold2_wireframe.pth"

    class Detector(nn.Module):
        def __init__(self, pretrained=True):
            super().__init__()
            self.model = hourglass(64)
            if pretrained:
                self.model.load_state_dict(load_state_dict_from_url(URL))
    """

# torchmetrics' NISQA: one function downloads the file, another loads it into the model
METRIC = """
    import requests
    import torch

    from .backbones import hourglass

    def _download_weights():
        url = "https://github.com/owner/repo/raw/master/weights/nisqa.tar"
        with open("nisqa.tar", "wb") as f:
            f.write(requests.get(url).content)

    def _load_model():
        _download_weights()
        model = hourglass(32)
        model.load_state_dict(torch.load("nisqa.tar")["model_state_dict"], strict=True)
        return model
    """

# a training repository: its own checkpoints, resumed; nothing published
TRAIN = """
    import torch

    from pkg.backbones import hourglass

    model = hourglass(64).cuda()
    if args.resume:
        model.load_state_dict(torch.load(args.resume)["model"])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in train_loader:
        loss = model(x.cuda()).mean()
        loss.backward()
        optimizer.step()
    """


def _project(root: Path, files: dict[str, str]) -> Path:
    return write_project(root, {"pkg/__init__.py": "", **files})


def test_a_backbone_whose_weights_another_module_downloads_keeps_its_bias(tmp_path: Path) -> None:
    root = _project(tmp_path, {"pkg/backbones.py": BACKBONE, "pkg/detector.py": DETECTOR})
    assert finding_lines(root, "pkg/backbones.py", "TPL401") == []


def test_weights_downloaded_by_a_helper_and_loaded_by_its_caller(tmp_path: Path) -> None:
    root = _project(tmp_path, {"pkg/backbones.py": BACKBONE, "pkg/metric.py": METRIC})
    assert finding_lines(root, "pkg/backbones.py", "TPL401") == []


def test_a_model_trained_from_scratch_and_resumed_keeps_the_finding(tmp_path: Path) -> None:
    root = _project(tmp_path, {"pkg/backbones.py": BACKBONE, "train.py": TRAIN})
    assert finding_lines(root, "pkg/backbones.py", "TPL401") == [6]


def test_a_pretrained_model_elsewhere_in_the_project_leaves_other_models_alone(tmp_path: Path) -> None:
    other = BACKBONE.replace("Bottleneck", "Block").replace("hourglass", "unet")
    root = _project(
        tmp_path,
        {"pkg/backbones.py": BACKBONE, "pkg/detector.py": DETECTOR, "pkg/unet.py": other, "train.py": TRAIN},
    )
    assert finding_lines(root, "pkg/backbones.py", "TPL401") == []
    assert finding_lines(root, "pkg/unet.py", "TPL401") == [6]

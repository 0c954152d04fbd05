"""TPL701 and a model that runs reduced precision by itself (RULES.md, TPL701): a cast in the
model's own code on its default configuration silences the training file; a path that is off by
default does not."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from torchperf_lint.project.precision import reduced_precision

from .helpers import finding_lines, write_project

UNET = """
    import torch
    import torch.nn as nn

    class UNet(nn.Module):
        def __init__(self, channels=64, use_fp16=DEFAULT):
            super().__init__()
            self.body = nn.Conv2d(3, channels, 3, padding=1)
            self.out = nn.Conv2d(channels, 3, 3, padding=1)
            self.dtype = torch.float16 if use_fp16 else torch.float32

        def forward(self, x):
            return self.out(self.body(x.type(self.dtype))).float()
    """

TRAIN = """
    import torch
    from model import UNet

    model = UNet().cuda()
    optimizer = torch.optim.Adam(model.parameters())
    for x in loader:
        loss = (model(x.cuda()) - x.cuda()).pow(2).mean()
        loss.backward()
        optimizer.step()
    """


def test_a_model_that_casts_to_fp16_by_default_silences_the_training_file(tmp_path: Path) -> None:
    root = write_project(tmp_path, {"model.py": UNET.replace("DEFAULT", "True"), "train.py": TRAIN})
    assert finding_lines(root, "train.py", "TPL701") == []


def test_an_fp16_path_that_is_off_by_default_does_not(tmp_path: Path) -> None:
    root = write_project(tmp_path, {"model.py": UNET.replace("DEFAULT", "False"), "train.py": TRAIN})
    assert finding_lines(root, "train.py", "TPL701") == [8]


def _of(source: str) -> str:
    source = textwrap.dedent(source)
    cls = next(n for n in ast.parse(source).body if isinstance(n, ast.ClassDef))
    found = reduced_precision(cls)
    # the summary hands the class's text, read first: it must leave out no marker
    assert reduced_precision(cls, ast.get_source_segment(source, cls)) == found
    return found


@pytest.mark.parametrize(
    "source, expected",
    [
        (UNET.replace("DEFAULT", "True"), "casts to float16 in UNet.__init__"),
        (UNET.replace("DEFAULT", "False"), ""),
        (UNET.replace("DEFAULT", "None"), ""),
        (
            """
            class Synthesis(nn.Module):
                def __init__(self, num_fp16_res=4):
                    super().__init__()
                    self.num_fp16_res = num_fp16_res

                def forward(self, x, force_fp32=False):
                    if self.num_fp16_res and not force_fp32 and x.device.type == "cuda":
                        x = x.half()
                    return self.net(x)
            """,
            "casts to float16 in Synthesis.forward",
        ),
        (
            """
            class Model(nn.Module):
                def __init__(self, use_fp16=False):
                    super().__init__()
                    if use_fp16:
                        self.convert_to_fp16()

                def convert_to_fp16(self):
                    self.blocks.half()
            """,
            "",
        ),
        (
            """
            class Model(nn.Module):
                def __init__(self, use_fp16=True):
                    super().__init__()
                    if use_fp16:
                        self.convert_to_fp16()

                def convert_to_fp16(self):
                    self.blocks.half()
            """,
            "casts to float16 in Model.__init__",
        ),
        (
            """
            class Loss(nn.Module):
                def forward(self, x):
                    with torch.autocast("cuda", enabled=False):
                        return self.net(x.float())
            """,
            "",
        ),
        (
            """
            class Split(nn.Module):
                def __init__(self, dim=64):
                    super().__init__()
                    self.half = dim // 2

                def forward(self, x):
                    return x[:, : self.half] * np.float16(2)
            """,
            "",
        ),
        (
            """
            class Checks(nn.Module):
                def forward(self, x):
                    if x.dtype == torch.float16:
                        x = x.float()
                    return self.net(x)
            """,
            "",
        ),
    ],
)
def test_what_counts_as_reduced_precision_by_default(source: str, expected: str) -> None:
    assert _of(source) == expected

"""TPL401-TPL403 beyond their examples: real example files, spellings, fixes and traps."""

from __future__ import annotations

import textwrap
from pathlib import Path

import libcst as cst
import pytest

from torchperf_lint.api import fix_source, lint_source

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _lint(source: str, code: str, path: str = "model.py") -> list[int]:
    findings = lint_source(textwrap.dedent(source).lstrip("\n"), path=path, select=[code])
    assert all(f.code == code for f in findings), findings
    return [f.line for f in findings]


def _fix(source: str, code: str) -> str:
    return fix_source(textwrap.dedent(source).lstrip("\n"), path="model.py", unsafe=True, select=[code])


# -- TPL401 --------------------------------------------------------------------------------------


def test_slow_training_example_reports_both_convs() -> None:
    source = (EXAMPLES / "slow_training.py").read_text()
    findings = lint_source(source, path="examples/slow_training.py", select=["TPL401"])
    lines = source.splitlines()
    assert [lines[f.line - 1].strip() for f in findings] == [
        "self.conv1 = nn.Conv2d(3, 16, 3, padding=1)",  # meets bn1 nested: self.bn1(self.conv1(x))
        "self.conv2 = nn.Conv2d(16, 32, 3, padding=1)",  # meets bn2 in the next statement
    ]


@pytest.mark.usefixtures("precision_off_rules_on")
def test_modules_and_data_example_reports_each_shape() -> None:
    source = (EXAMPLES / "modules_and_data.py").read_text()
    findings = lint_source(source, path="examples/modules_and_data.py", select=["TPL4", "TPL5", "TPL502"])
    lines = source.splitlines()
    found = [(f.code, lines[f.line - 1].strip()) for f in findings]
    assert found == [
        ("TPL401", "nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1),"),
        ("TPL401", "self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)"),
        ("TPL401", "layers.append(nn.Conv2d(c_in, c_out, 3, stride=2, padding=1))"),
        # make_backbone's body builds the convolutions, in a loop: a convnet moved in NCHW
        ("TPL404", "model = Classifier().to(device)"),
        ("TPL402", "model = nn.DataParallel(model)"),
        ("TPL502", "train_loader = DataLoader("),
        ("TPL503", "train_loader = DataLoader("),
        ("TPL501", "val_loader = DataLoader(RandomImages(10_000), batch_size=512)"),
        ("TPL502", "val_loader = DataLoader(RandomImages(10_000), batch_size=512)"),
    ]


def test_conv_met_in_sequential_and_forward_is_reported_once() -> None:
    source = """
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(3, 8, 3)
                self.bn = nn.BatchNorm2d(8)
                self.body = nn.Sequential(self.conv, self.bn)

            def forward(self, x):
                return self.bn(self.conv(x))
        """
    assert _lint(source, "TPL401") == [6]


def test_chained_cuda_on_the_constructor_is_fixed_inside() -> None:
    source = """
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(3, 8, 3).cuda()
                self.bn = nn.BatchNorm2d(8).cuda()

            def forward(self, x):
                return self.bn(self.conv(x))
        """
    assert "self.conv = nn.Conv2d(3, 8, 3, bias=False).cuda()" in _fix(source, "TPL401")


def test_positional_bias_true_is_replaced() -> None:
    source = """
        import torch.nn as nn
        block = nn.Sequential(nn.Conv2d(3, 8, 3, 1, 1, 1, 1, True), nn.BatchNorm2d(8))
        """
    assert "nn.Conv2d(3, 8, 3, 1, 1, 1, 1, False)" in _fix(source, "TPL401")


def test_known_star_kwargs_do_not_hide_the_finding_and_the_fix_parses() -> None:
    source = """
        import torch.nn as nn

        def stem(c, device=None, dtype=None, **kwargs):
            dd = {"device": device, "dtype": dtype}
            first = nn.Sequential(nn.Conv2d(3, c, 3, **dd), nn.BatchNorm2d(c, **dd))
            second = nn.Sequential(nn.Conv2d(c, c, 3, **kwargs), nn.BatchNorm2d(c))
            return first, second
        """
    assert _lint(source, "TPL401") == [5]
    fixed = _fix(source, "TPL401")
    cst.parse_module(fixed)
    assert "nn.Conv2d(3, c, 3, **dd, bias=False)" in fixed


@pytest.mark.parametrize(
    "conv, norm",
    [
        ("torch.nn.ConvTranspose1d(4, 4, 2)", "torch.nn.LazyBatchNorm1d()"),
        ("torch.nn.modules.conv.Conv3d(4, 4, 3)", "torch.nn.modules.batchnorm.BatchNorm3d(4)"),
        ("torch.nn.Conv1d(4, 4, 3)", "torch.nn.InstanceNorm1d(4)"),
    ],
)
def test_every_mean_subtracting_norm_and_spelling(conv: str, norm: str) -> None:
    source = f"""
        import torch
        block = torch.nn.Sequential({conv}, {norm})
        """
    assert _lint(source, "TPL401") == [2]


@pytest.mark.parametrize(
    "norm",
    ["nn.GroupNorm(2, 8)", "nn.LayerNorm(8)", "nn.Identity()", "nn.Dropout()", "nn.quantized.BatchNorm2d(8)"],
)
def test_other_followers_stay_silent(norm: str) -> None:
    source = f"""
        import torch.nn as nn
        block = nn.Sequential(nn.Conv2d(3, 8, 3), {norm})
        """
    assert _lint(source, "TPL401") == []


def test_conv_attribute_with_two_constructors_reports_the_one_with_a_bias() -> None:
    source = """
        import torch.nn as nn

        class Block(nn.Module):
            def __init__(self, depthwise):
                super().__init__()
                if depthwise:
                    self.conv = nn.Conv2d(8, 8, 3, groups=8, bias=False)
                else:
                    self.conv = nn.Conv2d(8, 8, 3)
                self.bn = nn.BatchNorm2d(8)

            def forward(self, x):
                x = self.conv(x)
                x = self.bn(x)
                return x
        """
    assert _lint(source, "TPL401") == [9]


def test_norm_replaced_elsewhere_in_the_class_stays_silent() -> None:
    source = """
        import torch.nn as nn

        class Fusable(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(8, 8, 3)
                self.bn = nn.BatchNorm2d(8)

            def fuse(self):
                self.bn = nn.Identity()

            def forward(self, x):
                return self.bn(self.conv(x))
        """
    assert _lint(source, "TPL401") == []


def test_sequential_subclass_super_init() -> None:
    source = """
        from torch import nn

        class ConvBNReLU(nn.Sequential):
            def __init__(self, c_in, c_out):
                super().__init__(nn.Conv2d(c_in, c_out, 3), nn.BatchNorm2d(c_out), nn.ReLU())
        """
    assert _lint(source, "TPL401") == [5]


# -- TPL402 --------------------------------------------------------------------------------------


def test_data_parallel_through_the_defining_module() -> None:
    source = """
        from torch.nn.parallel.data_parallel import DataParallel
        model = DataParallel(net)
        """
    assert _lint(source, "TPL402") == [2]


_ONE_GPU_SCRIPT = """
    import argparse
    import os
    import torch.nn as nn

    parser = argparse.ArgumentParser()
    parser.add_argument("--gpu_id", type=str, default={default})
    opts = parser.parse_args()
    {setting}
    model = nn.DataParallel(nn.Linear(8, 8){ids})
    """


@pytest.mark.parametrize(
    ("default", "setting", "ids"),
    [
        # deeplabv3plus: one visible GPU by default, DataParallel calls the module directly
        ("'0'", "os.environ['CUDA_VISIBLE_DEVICES'] = opts.gpu_id", ""),
        ("'0,1'", "os.environ['CUDA_VISIBLE_DEVICES'] = '1'", ""),  # a literal of one device
        ("'0,1'", "pass", ", device_ids=[0]"),
        # pytorch-deeplab-xception: the option split into a list of one
        ("'0'", "opts.gpu_id = [int(s) for s in opts.gpu_id.split(',')]", ", device_ids=opts.gpu_id"),
        ("'0'", "pass", ", [opts.gpu_id]"),  # device_ids given by position
    ],
)
def test_data_parallel_over_one_device_by_default_is_silent(default: str, setting: str, ids: str) -> None:
    source = _ONE_GPU_SCRIPT.format(default=default, setting=setting, ids=ids)
    assert _lint(source, "TPL402", path="main.py") == []


@pytest.mark.parametrize(
    ("default", "setting", "ids"),
    [
        ("'0,1'", "os.environ['CUDA_VISIBLE_DEVICES'] = opts.gpu_id", ""),
        ("'0'", "os.environ['CUDA_VISIBLE_DEVICES'] = os.environ['GPUS']", ""),
        (
            "'0'",
            "os.environ['CUDA_VISIBLE_DEVICES'] = '0,1'\n    os.environ['CUDA_VISIBLE_DEVICES'] = opts.gpu_id",
            "",
        ),
        ("'0'", "pass", ""),  # neither device_ids nor the variable: every visible GPU
        ("'0'", "pass", ", device_ids=[0, 1]"),
        # stored back as something other than a split of itself
        ("'2'", "opts.gpu_id = list(range(int(opts.gpu_id)))", ", device_ids=opts.gpu_id"),
        ("'0'", "pass", ", device_ids=list(range(n))"),
    ],
)
def test_data_parallel_over_several_or_unknown_devices_is_reported(
    default: str, setting: str, ids: str
) -> None:
    source = _ONE_GPU_SCRIPT.format(default=default, setting=setting, ids=ids)
    assert _lint(source, "TPL402", path="main.py") == [9 + setting.count("\n")]


def test_data_parallel_over_a_parameter_defaulting_to_one_device() -> None:
    """stylegan2-pytorch's LPIPS: `initialize(..., gpu_ids=[0])` wraps `device_ids=gpu_ids`; a
    parameter without such a default, or rebound in the function, keeps the finding."""
    source = """
        import torch

        def initialize(net, gpu_ids=[0]):
            return torch.nn.DataParallel(net, device_ids=gpu_ids)

        def spread(net, gpu_ids=[0, 1]):
            return torch.nn.DataParallel(net, device_ids=gpu_ids)

        def given(net, gpu_ids):
            return torch.nn.DataParallel(net, device_ids=gpu_ids)

        def rebound(net, gpu_ids=[0]):
            gpu_ids = list(range(torch.cuda.device_count()))
            return torch.nn.DataParallel(net, device_ids=gpu_ids)
        """
    assert _lint(source, "TPL402") == [7, 10, 14]


# -- TPL403 --------------------------------------------------------------------------------------

TRAINING = """
    from __future__ import annotations

    import torch
    from torch import nn

    net = nn.Sequential(nn.Conv2d(3, 8, 3), nn.Conv2d(8, 8, 3)).cuda()
    for x in torch.randn(4, 2, 3, 8, 8).cuda():
        net(x).sum().backward()
    """


def test_cudnn_benchmark_is_off_by_default() -> None:
    source = textwrap.dedent(TRAINING).lstrip("\n")
    assert [f.code for f in lint_source(source, path="train.py") if f.code == "TPL403"] == []


def test_cudnn_benchmark_reported_once_at_the_first_conv() -> None:
    assert _lint(TRAINING, "TPL403") == [6]


def test_cudnn_benchmark_fix_goes_after_the_last_import() -> None:
    fixed = _fix(TRAINING, "TPL403")
    assert "from torch import nn\ntorch.backends.cudnn.benchmark = True\n\nnet = " in fixed
    assert _lint(fixed, "TPL403") == []


@pytest.mark.parametrize(
    "decision",
    [
        "import torch.backends.cudnn as cudnn\ncudnn.benchmark = args.benchmark",
        "torch.use_deterministic_algorithms(True)",
        "torch.backends.cudnn.deterministic = True",
    ],
)
def test_cudnn_decisions_stay_silent(decision: str) -> None:
    source = textwrap.dedent(TRAINING).lstrip("\n") + decision + "\n"
    assert _lint(source, "TPL403") == []


def test_cudnn_benchmark_silent_in_test_files() -> None:
    assert _lint(TRAINING, "TPL403", path="tests/test_train.py") == []

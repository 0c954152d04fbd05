"""Branches taken only under a command-line option that is off by default (RULES.md, "Values
that travel"): the default run never takes them, so what they hold is cold for every rule
(timm's `if not args.prefetcher:` where `--no-prefetcher` is opt-in, `if args.metrics_avg:`
defaulting to None). The defaults come from the project's parsers (analysis/options.py), the
names holding the options from the project pass (project/options.py); the file's walk and the
project pass read the test through analysis/arguments.py. Look-alikes stay hot: an option on by
default, one a shipped config sets, one whose default is not known."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import finding_lines, write_project
from torchperf_lint.cli import main as cli

pytestmark = pytest.mark.usefixtures("precision_off_rules_on")  # TPL107 is off by default

_MAIN = """
    import argparse

    import torch
    from train import train_one_epoch

    parser = argparse.ArgumentParser()
    parser.add_argument("--no-prefetcher", action="store_true", default=False)
    parser.add_argument("--metrics-avg", type=str, default=None)
    parser.add_argument("--num-gpu", type=int, default=1)
    {extra}


    def parse():
        args = parser.parse_args()
        args.prefetcher = not args.no_prefetcher
        return args, "text"


    def main():
        args, _ = parse()
        model = torch.nn.Linear(3, 3).cuda()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1, fused=True)
        if args.num_gpu > 1:
            model = torch.nn.DataParallel(model)  # line 24: TPL402
        for epoch in range(10):
            train_one_epoch(model, loader, optimizer, args)
"""

_TRAIN = """
    def train_one_epoch(model, loader, optimizer, args):
        for input, target in loader:
            if not args.prefetcher:
                input, target = input.cuda(), target.cuda()  # line 4: TPL106 twice
            loss = model(input, target)
            if args.metrics_avg:
                print(loss.item())  # line 7: TPL107
            loss.backward()
            optimizer.step()
"""

_CODES = ("TPL106", "TPL107", "TPL402")


def _lines(root: Path) -> list[tuple[str, int, str]]:
    return sorted(
        (target, line, code)
        for target in ("main.py", "train.py")
        for code in _CODES
        for line in finding_lines(root, target, code)
    )


def _project(tmp_path: Path, extra: str = "", main: str = _MAIN, **files: str) -> Path:
    return write_project(tmp_path, {"main.py": main.replace("{extra}", extra), "train.py": _TRAIN, **files})


HOT = [
    ("main.py", 24, "TPL402"),
    ("train.py", 4, "TPL106"),
    ("train.py", 4, "TPL106"),
    ("train.py", 7, "TPL107"),
]


def test_branches_under_options_off_by_default_are_cold(tmp_path: Path) -> None:
    assert _lines(_project(tmp_path)) == []


def test_an_option_on_by_default_keeps_its_branch_hot(tmp_path: Path) -> None:
    on = _MAIN.replace('action="store_true", default=False', 'action="store_false", default=True')
    assert _lines(_project(tmp_path, main=on)) == HOT[1:3]


@pytest.mark.parametrize(
    "config",
    [
        {"configs/imagenet.yaml": "metrics_avg: macro\nnum-gpu: 8\nno_prefetcher: true\n"},
        {"scripts/train.sh": "python train.py --metrics-avg macro --num-gpu 8 --no-prefetcher\n"},
    ],
)
def test_an_option_a_shipped_config_sets_keeps_its_branch_hot(tmp_path: Path, config: dict[str, str]) -> None:
    assert _lines(_project(tmp_path, **config)) == HOT


@pytest.mark.parametrize(
    "extra",
    [
        'parser.set_defaults(metrics_avg=os.environ.get("AVG"))',  # not a literal
        'parser.add_argument("--metrics-avg", default="macro")',  # a second parser disagrees
        'cli = parser.parse_args(); cli.metrics_avg = os.environ.get("AVG")',  # a store not decided
    ],
)
def test_an_option_whose_default_is_not_known_keeps_its_branch_hot(tmp_path: Path, extra: str) -> None:
    assert ("train.py", 7, "TPL107") in _lines(_project(tmp_path, extra))


def test_a_store_by_a_computed_name_leaves_every_option_open(tmp_path: Path) -> None:
    computed = _MAIN.replace("optimizer, args)\n", "optimizer, args)\n        vars(args).update(cfg)\n")
    assert _lines(_project(tmp_path, main=computed)) == HOT


def test_a_parameter_some_caller_passes_something_else_stays_open(tmp_path: Path) -> None:
    other = _MAIN + "\n\n    def other(model, config):\n        train_one_epoch(model, None, None, config)\n"
    assert _lines(_project(tmp_path, main=other)) == HOT[1:]


_SCRIPT = """
    import argparse
    import torch

    parser = argparse.ArgumentParser()
    parser.add_argument("--sync-each-step", action="store_true")
    args = parser.parse_args()
    model = torch.nn.Linear(3, 3).cuda()
    for x, y in loader:
        loss = model(x.cuda(non_blocking=True), y)
        if args.sync_each_step:
            print(loss.item())  # line 11
        loss.backward()
"""


def test_a_script_module_level_options_decide_its_own_loop(tmp_path: Path) -> None:
    root = write_project(tmp_path, {"train.py": _SCRIPT})
    assert finding_lines(root, "train.py", "TPL107") == []
    on = _SCRIPT.replace('store_true"', 'store_true", default=True')
    flipped = write_project(tmp_path / "on", {"train.py": on})
    assert finding_lines(flipped, "train.py", "TPL107") == [11]


def test_every_route_agrees_on_an_opt_in_branch(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _project(tmp_path)
    assert cli(["--no-cache", "--select", ",".join(_CODES), str(root)]) == 0
    for each in ("main.py", "train.py"):
        assert cli(["--no-cache", "--select", ",".join(_CODES), str(root / each)]) == 0
    capsys.readouterr()
    result = subprocess.run(
        [sys.executable, "-m", "flake8", "--isolated", "--select", ",".join(_CODES), "main.py", "train.py"],
        capture_output=True,
        text=True,
        cwd=root,
    )
    assert (result.returncode, result.stdout) == (0, ""), result.stderr


def test_another_script_parser_does_not_decide_this_one(tmp_path: Path) -> None:
    other = 'import argparse\np = argparse.ArgumentParser()\np.add_argument("--metrics-avg", default="mac")\n'
    assert _lines(_project(tmp_path, **{"tools/other_script.py": other})) == []
    imported = _MAIN.replace("from train import", "from tools import other_script\n    from train import")
    scripts = {"tools/__init__.py": "", "tools/other_script.py": other}
    root = _project(tmp_path / "imported", main=imported, **scripts)
    assert _lines(root) == [("train.py", 7, "TPL107")]


_GPU_SWITCH = """
    import argparse
    import torch

    parser = argparse.ArgumentParser()
    parser.add_argument("-gpu", action="store_true", default=False)
    parser.add_argument("--sync-each-step", action="store_true")
    args = parser.parse_args()
    model = torch.nn.Linear(3, 3)
    if args.gpu:
        model = model.cuda()
    for images, labels in loader:
        if args.gpu:
            images = images.cuda()  # line 13: TPL106, the run the device rules judge
        loss = model(images, labels)
        if args.sync_each_step:
            print(loss.item())  # line 16: an opt-in branch, cold
        loss.backward()
"""


def test_an_option_that_selects_cuda_is_the_run_the_device_rules_judge(tmp_path: Path) -> None:
    """pytorch-cifar100's `-gpu`: off by default, but without it nothing runs on the GPU, so the
    device rules read the branch it opens as taken; another opt-in option beside it stays cold."""
    root = write_project(tmp_path, {"train.py": _GPU_SWITCH})
    assert finding_lines(root, "train.py", "TPL106") == [13]
    assert finding_lines(root, "train.py", "TPL107") == []


_GLOBAL_OPTIONS = """
    import argparse
    import torch

    parser = argparse.ArgumentParser()
    parser.add_argument("--sync-each-step", action="store_true")


    def main():
        global args
        args = parser.parse_args()
        for epoch in range(10):
            train(loader, model)


    def train(loader, model):
        for x, y in loader:
            loss = model(x.cuda(non_blocking=True), y)
            if args.sync_each_step:
                print(loss.item())  # line 19
            loss.backward()
"""


@pytest.mark.parametrize(
    "rebound, expected",
    [
        ("", []),  # main binds the module's `args`: train reads the opt-in option's default
        ("\n    args = object()\n", [19]),  # another binding of the module's name: unknown
        ("\n    def other():\n        global args\n        args = load()\n", [19]),
    ],
)
def test_options_a_function_binds_to_a_global_name_reach_every_function(
    tmp_path: Path, rebound: str, expected: list[int]
) -> None:
    """pytorch_resnet_cifar10's `global args, best_prec1; args = parser.parse_args()` in `main`:
    `train` reads the module's `args`, so `if args.half:` there is decided by `--half`'s default."""
    root = write_project(tmp_path, {"train.py": _GLOBAL_OPTIONS + rebound})
    assert finding_lines(root, "train.py", "TPL107") == expected

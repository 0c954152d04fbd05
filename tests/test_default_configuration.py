"""Branches only an opt-in setting takes, reached through values that travel (RULES.md, "Values
that travel" and "Defaults follow evidence"): the default run never takes them, so what they hold
is cold for every rule. Each fact has a look-alike that stays hot: an option on by default, a
value the project passes, a value set again elsewhere, a default that is not a literal."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.helpers import finding_lines, write_project

pytestmark = pytest.mark.usefixtures("precision_off_rules_on")  # TPL107 is off by default


# -- a name bound to an if-expression on an option, passed to the evaluation ------------------
# (DeepLabV3Plus: `vis_sample_id = randint(...) if opts.enable_vis else None`, then
# `validate(..., ret_samples_ids=vis_sample_id)` tests `if ret_samples_ids is not None and ...`)

_CHOSEN = """
    import argparse

    import numpy as np
    import torch


    def validate(model, loader, ret_samples_ids=None):
        samples = []
        with torch.no_grad():
            for i, (images, labels) in enumerate(loader):
                outputs = model(images.cuda())
                if ret_samples_ids is not None and i in ret_samples_ids:
                    samples.append(outputs[0].detach().cpu().numpy())  # line 13: TPL107
        return samples


    def main():
        parser = argparse.ArgumentParser()
        parser.add_argument("--enable_vis", action="store_true", default=False)
        opts = parser.parse_args()
        model = torch.nn.Linear(3, 3).cuda()
        loader = torch.utils.data.DataLoader(range(8))
        ids = np.random.randint(0, 8, 2) if opts.enable_vis else None
        validate(model, loader, ret_samples_ids=ids)
"""


def _chosen(tmp_path: Path, text: str = _CHOSEN) -> list[int]:
    return finding_lines(write_project(tmp_path, {"main.py": text}), "main.py", "TPL107")


def test_a_name_an_option_off_by_default_leaves_none_is_none(tmp_path: Path) -> None:
    assert _chosen(tmp_path) == []


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ('action="store_true", default=False', 'action="store_false", default=True'),  # on by default
        ("if opts.enable_vis else None", "if opts.enable_vis else [0]"),  # both sides given
        ("        validate(model", "        ids = [1]\n        validate(model"),  # bound again
        ("default=False)", "default=bool(np.random.randint(2)))"),  # a default not a literal
    ],
)
def test_a_name_the_default_run_may_give_a_value_keeps_its_branch_hot(
    tmp_path: Path, old: str, new: str
) -> None:
    assert old in _CHOSEN
    assert _chosen(tmp_path, _CHOSEN.replace(old, new)) == [13]


# -- options handed on whole: `main(parse_opt())`, `run(**vars(opt))`, `opt.save_txt |= ...` -----
# (yolov5's val.py: `save_one_txt` runs only under `--save-txt`, off by default)

_SPREAD = """
    import argparse

    import torch


    def save_one(pred):
        return pred.tolist()  # a copy to the host, reported where it is called


    def run(weights="w.pt", save_txt=False, save_conf=False):
        model = torch.nn.Linear(3, 3).cuda()
        loader = torch.utils.data.DataLoader(range(8))
        with torch.no_grad():
            for images in loader:
                pred = model(images.cuda())
                if save_txt:
                    save_one(pred)  # line 17: TPL107


    def parse_opt():
        parser = argparse.ArgumentParser()
        parser.add_argument("--weights", default="w.pt")
        parser.add_argument("--save-txt", action="store_true")
        parser.add_argument("--save-hybrid", action="store_true")
        opt = parser.parse_args()
        opt.save_txt |= opt.save_hybrid
        return opt


    def main(opt):
        run(**vars(opt))


    if __name__ == "__main__":
        main(parse_opt())
"""

# a logger reading `wandb.run`, an attribute of a library: it hands on no function of the project
_LOGGER = """
    import wandb


    def log(value):
        if wandb.run is not None:
            wandb.log({"value": value})
"""


def _spread(tmp_path: Path, text: str = _SPREAD, **files: str) -> list[int]:
    root = write_project(tmp_path, {"val.py": text, "logger.py": _LOGGER, **files})
    return finding_lines(root, "val.py", "TPL107")


def test_options_spread_into_a_call_decide_its_branches(tmp_path: Path) -> None:
    assert _spread(tmp_path) == []


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ('"--save-txt", action="store_true"', '"--save-txt", action="store_false"'),  # on by default
        ('"--save-hybrid", action="store_true"', '"--save-hybrid", action="store_false"'),  # |= True
        ("opt.save_txt |= opt.save_hybrid", "opt.save_txt += opt.save_hybrid"),  # not a flag join
        ("run(**vars(opt))", "run(**vars(opt))\n    run(save_txt=True)"),  # a caller passes True
        ("run(**vars(opt))", "run(**vars(opt), **extra)"),  # another unpacking: not known
    ],
)
def test_options_the_default_run_may_turn_on_keep_the_branch_hot(tmp_path: Path, old: str, new: str) -> None:
    assert old in _SPREAD
    assert _spread(tmp_path, _SPREAD.replace(old, new)) == [17]


def test_a_project_module_handing_the_function_on_keeps_its_callers_open(tmp_path: Path) -> None:
    cli = "import fire\nimport val\n\nfire.Fire({'val': val.run})\n"
    assert _spread(tmp_path, **{"cli.py": cli}) == [17]


# -- a setting a script fixes at its top level ---------------------------------------------------
# (nanoGPT's bench.py: `profile = False`, then `exec(open('configurator.py').read())`, which may
# override it from the command line, and `if profile:` around the profiler's step loop)

_SCRIPT = """
    import os

    import torch

    batch_size = 12
    profile = False  # use the profiler?
    exec(open("configurator.py").read())  # overrides from the command line or a config file

    model = torch.nn.Linear(3, 3).cuda()
    optimizer = torch.optim.AdamW(model.parameters())
    if profile:
        for k in range(10):
            loss = model(torch.randn(3, 3, device="cuda")).sum()
            loss.backward()
            optimizer.step()
            lossf = loss.item()  # TPL107
"""

_CONFIGURATOR = "import sys\n\nfor arg in sys.argv[1:]:\n    print(arg)\n"


def _script(tmp_path: Path, text: str = _SCRIPT, **files: str) -> list[int]:
    root = write_project(tmp_path, {"bench.py": text, "configurator.py": _CONFIGURATOR, **files})
    return finding_lines(root, "bench.py", "TPL107")


def _sync_line(text: str) -> list[int]:
    """The line of the step's `.item()` in the script as written."""
    lines = textwrap.dedent(text).lstrip("\n").splitlines()
    return [number for number, line in enumerate(lines, 1) if "loss.item()" in line]


def test_a_setting_the_script_fixes_off_keeps_its_branch_cold(tmp_path: Path) -> None:
    assert _script(tmp_path) == []


def test_a_config_file_setting_another_name_leaves_the_setting_fixed(tmp_path: Path) -> None:
    assert _script(tmp_path, **{"config/train.py": "batch_size = 64\n"}) == []


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("profile = False", "profile = True"),  # on by default
        ("profile = False", 'profile = os.environ.get("PROFILE") == "1"'),  # not a literal
        ("model = torch", "def on():\n        global profile\n        profile = True\n\n\n    model = torch"),
        ("model = torch", "globals().update(dict(os.environ))\n    model = torch"),  # written by name
        ("model = torch", "for profile in (False, True):\n        pass\n    model = torch"),  # bound again
    ],
)
def test_a_setting_the_default_run_may_turn_on_keeps_its_branch_hot(
    tmp_path: Path, old: str, new: str
) -> None:
    assert old in _SCRIPT
    assert _script(tmp_path, _SCRIPT.replace(old, new)) == _sync_line(_SCRIPT.replace(old, new))


@pytest.mark.parametrize(
    "config",
    [
        {"config/profile.py": "profile = True\n"},  # a config file the configurator may run
        {"scripts/bench.sh": "python bench.py --profile=True\n"},  # a shipped launch script
    ],
)
def test_a_setting_a_shipped_config_sets_keeps_its_branch_hot(tmp_path: Path, config: dict[str, str]) -> None:
    assert _script(tmp_path, **config) == _sync_line(_SCRIPT)


def test_without_exec_a_config_file_does_not_reach_the_script(tmp_path: Path) -> None:
    fixed = _SCRIPT.replace('exec(open("configurator.py").read())', "print(batch_size)")
    assert _script(tmp_path, fixed, **{"config/profile.py": "profile = True\n"}) == []


# -- a setting read in a function, and one the main block binds again from an option -----------
# (llm.c's train_gpt2.py: `FLASH = 0` at the top, `if FLASH:` in the attention's forward, and
# `FLASH = args.flash` under `if __name__ == "__main__":` with `--flash` 0 by default)

_FORWARD = """
    import argparse

    import torch
    from torch import nn

    NORMALIZE = False


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 3)

        def forward(self, x):
            y = self.fc(x)
            if NORMALIZE:
                y = y / y.abs().max().item()  # TPL105
            return y


    if __name__ == "__main__":
        parser = argparse.ArgumentParser()
        parser.add_argument("--normalize", type=int, default=0)
        args = parser.parse_args()
        model = Net().cuda()
        print(model(torch.randn(2, 3, device="cuda")))
"""


def _forward(tmp_path: Path, text: str) -> list[int]:
    root = write_project(tmp_path, {"net.py": text})
    return finding_lines(root, "net.py", "TPL105")


def _item_line(text: str) -> list[int]:
    lines = textwrap.dedent(text).lstrip("\n").splitlines()
    return [number for number, line in enumerate(lines, 1) if ".item()" in line]


@pytest.mark.parametrize(
    "rebound",
    [
        "",  # bound once, to False
        "        NORMALIZE = args.normalize\n",  # again, from an option off by default
        "        NORMALIZE = False\n",  # again, to the same literal
    ],
)
def test_a_setting_off_by_default_keeps_its_branch_in_a_function_cold(tmp_path: Path, rebound: str) -> None:
    assert _forward(tmp_path, _FORWARD + rebound) == []


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("NORMALIZE = False", "NORMALIZE = True"),  # on by default
        (  # an option on by default
            "default=0)\n        args = parser.parse_args()\n",
            "default=1)\n        args = parser.parse_args()\n        NORMALIZE = args.normalize\n",
        ),
        (  # computed
            "args = parser.parse_args()\n",
            "args = parser.parse_args()\n        NORMALIZE = args.normalize or NORMALIZE\n",
        ),
        (
            "            y = self.fc(x)\n",
            "            NORMALIZE = x.is_cuda\n            y = self.fc(x)\n",
        ),  # its own name
        ("        def forward(self, x):\n", "        def forward(self, x, NORMALIZE=True):\n"),  # a parameter
    ],
)
def test_a_setting_the_function_may_see_on_keeps_its_branch_hot(tmp_path: Path, old: str, new: str) -> None:
    text = _FORWARD.replace(old, new)
    assert text != _FORWARD
    assert _forward(tmp_path, text) == _item_line(text)

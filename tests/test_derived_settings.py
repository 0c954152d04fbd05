"""Settings carried through a function's string arithmetic (RULES.md, "Values that travel":
configuration defaults, with the arithmetic code does on them). ConvNeXt's `create_optimizer`
branches on `opt_lower`, computed from `--opt` by `.lower()`, `.split('_')` and `[-1]`: with
`--opt adamw` by default, only the AdamW branch runs, so only its optimizer is reported (TPL702);
the SGD and Adam branches are opt-in. Its `**opt_args` gains keys by stores and `setdefault` with
literal keys, none of them `fused`. Look-alikes: a local bound on two paths, and a key that is not a
literal, leave the branches open and the mapping unknown."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import finding_lines, write_project

_FACTORY = """
    import argparse

    import torch
    from torch import optim

    parser = argparse.ArgumentParser()
    parser.add_argument("--opt", default="AdamW", type=str)
    parser.add_argument("--lr", default=4e-3, type=float)


    def create_optimizer(args, model):
        opt_lower = args.opt.lower()
        opt_args = dict(lr=args.lr, weight_decay=0.05)
        opt_args["eps"] = 1e-8
        opt_split = opt_lower.split("_")
        opt_lower = opt_split[-1]
        if opt_lower == "sgd":
            opt_args.pop("eps", None)
            optimizer = optim.SGD(model.parameters(), momentum=0.9, **opt_args)  # line 19: opt-in
        elif opt_lower == "adam":
            optimizer = optim.Adam(model.parameters(), **opt_args)  # line 21: opt-in
        elif opt_lower == "adamw":
            opt_args.setdefault("betas", (0.9, 0.999))
            optimizer = optim.AdamW(model.parameters(), **opt_args)  # line 24: the default run's
        else:
            raise ValueError(opt_lower)
        return optimizer


    def main():
        args = parser.parse_args()
        model = torch.nn.Linear(3, 3).cuda()
        optimizer = create_optimizer(args, model)
        for x in loader:
            model(x.cuda(non_blocking=True)).sum().backward()
            optimizer.step()
"""


def _lines(root: Path, text: str) -> list[int]:
    return finding_lines(write_project(root, {"train.py": text}), "train.py", "TPL702")


def test_only_the_optimizer_of_the_default_branch_is_reported(tmp_path: Path) -> None:
    assert _lines(tmp_path, _FACTORY) == [24]


@pytest.mark.parametrize(
    "old, new, expected",
    [
        # bound on two paths (a line added: 20, 22, 25): which reaches the test is not known
        (
            "        opt_lower = opt_split[-1]\n",
            "        if args.lr:\n            opt_lower = opt_split[-1]\n",
            [20, 22, 25],
        ),
        # a key worked out at run time may be `fused`: the mapping is not known
        ('opt_args.setdefault("betas", (0.9, 0.999))', "opt_args.setdefault(args.opt, True)", []),
    ],
    ids=["bound-on-two-paths", "setdefault-of-a-computed-key"],
)
def test_what_the_analysis_cannot_decide_stays_open(
    tmp_path: Path, old: str, new: str, expected: list[int]
) -> None:
    assert old in _FACTORY
    assert _lines(tmp_path, _FACTORY.replace(old, new)) == expected

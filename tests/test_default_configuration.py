"""Branches only an opt-in setting takes, reached through values that travel (RULES.md, "Values
that travel" and "Defaults follow evidence"): the default run never takes them, so what they hold
is cold for every rule. Each fact has a look-alike that stays hot: an option on by default, a
value the project passes, a value set again elsewhere, a default that is not a literal."""

from __future__ import annotations

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
        ('default=False)', "default=bool(np.random.randint(2)))"),  # a default not a literal
    ],
)
def test_a_name_the_default_run_may_give_a_value_keeps_its_branch_hot(
    tmp_path: Path, old: str, new: str
) -> None:
    assert old in _CHOSEN
    assert _chosen(tmp_path, _CHOSEN.replace(old, new)) == [13]

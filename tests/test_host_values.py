"""A name rebound to a host value on every path is no tensor where it is read (analysis/names.py
`reaching` through `if`/`else`, analysis/tensors.py). From real code: pytorch-metric-learning's
`map_labels`, whose `labels` parameter becomes `np.stack(...)` or `to_numpy(labels)` before a loop
over its hierarchy levels."""

from __future__ import annotations

import textwrap

from torchperf_lint.api import lint_source

ROW_LOOP = "TPL201"

SOURCE = """
import numpy as np
import torch

def to_numpy(v):
    try:
        return v.cpu().numpy()
    except AttributeError:
        return v

def map_labels(label_map, labels):
    if isinstance(labels, (list, tuple)):
        labels = np.stack([to_numpy(sub) for sub in labels], axis=1)
    else:
        labels = {other}
    out = np.zeros(labels.shape, dtype=int)
    for h in range(labels.shape[1]):
        out[:, h] = label_map(labels[:, h], h)
    return out

class Net(torch.nn.Module):
    def forward(self, labels):
        return map_labels(self.label_map, labels)
"""


def lint(other: str, without_else: bool = False) -> list[int]:
    source = textwrap.dedent(SOURCE.format(other=other))
    if without_else:
        source = source.replace(f"    else:\n        labels = {other}\n", "")
    return [f.line for f in lint_source(source, path="m.py", select=[ROW_LOOP])]


def test_a_parameter_rebound_to_numpy_on_every_branch_is_no_tensor() -> None:
    assert lint("to_numpy(labels)") == []
    assert lint("labels.detach().cpu().numpy()") == []
    assert lint("np.asarray(labels)") == []


def test_a_branch_that_keeps_the_tensor_keeps_the_finding() -> None:
    assert lint("labels.float()") == [17]
    assert lint("torch.as_tensor(labels)") == [17]


def test_an_if_without_else_may_leave_the_tensor_in_place() -> None:
    assert lint("to_numpy(labels)", without_else=True) == [15]

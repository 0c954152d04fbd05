"""Entries of a returned mapping that the project only ever reads on the host (project/graph.py,
host_read_keys): a factory without `device=` filling such an entry builds its tensor where it is
used (kornia's colour jitter draws `"order": torch.randperm(4)` for `params["order"].tolist()`),
so TPL101 stays silent there. An entry some module reads on the device keeps the finding."""

from __future__ import annotations

from pathlib import Path

import pytest

from .helpers import finding_lines, write_project

pytestmark = pytest.mark.usefixtures("precision_off_rules_on")  # TPL101 is off by default

_GENERATOR = """
    import torch

    DEVICE = "cuda"

    class OrderGenerator(torch.nn.Module):
        def forward(self, batch_shape):
            return {
                "factor": torch.rand(batch_shape[0]),
                "order": torch.randperm(4),
            }
    """

_JITTER = """
    import torch
    from generator import OrderGenerator

    class Jitter(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.generator = OrderGenerator()

        def forward(self, x):
            params = self.generator(x.shape)
            for index in params["order"].tolist():
                x = x * params["factor"][index]
            return x
    """


def test_an_entry_every_module_reads_on_the_host_is_built_there(tmp_path: Path) -> None:
    root = write_project(tmp_path, {"generator.py": _GENERATOR, "jitter.py": _JITTER})
    assert finding_lines(root, "generator.py", "TPL101") == [8]  # "factor" meets the batch


def test_iterating_an_entry_reads_it_on_the_host(tmp_path: Path) -> None:
    jitter = _JITTER.replace('params["order"].tolist()', 'params["order"]')
    root = write_project(tmp_path, {"generator.py": _GENERATOR, "jitter.py": jitter})
    assert finding_lines(root, "generator.py", "TPL101") == [8]


def test_an_entry_another_module_reads_on_the_device_keeps_the_finding(tmp_path: Path) -> None:
    shuffle = """
        def shuffle(x, params):
            return x[:, params["order"]]
        """
    files = {"generator.py": _GENERATOR, "jitter.py": _JITTER, "shuffle.py": shuffle}
    root = write_project(tmp_path, files)
    assert finding_lines(root, "generator.py", "TPL101") == [8, 9]


def test_an_entry_read_through_get_keeps_the_finding(tmp_path: Path) -> None:
    jitter = _JITTER.replace('params["order"].tolist()', 'params.get("order").tolist()')
    root = write_project(tmp_path, {"generator.py": _GENERATOR, "jitter.py": jitter})
    assert finding_lines(root, "generator.py", "TPL101") == [8, 9]


def test_an_entry_no_module_reads_keeps_the_finding(tmp_path: Path) -> None:
    jitter = _JITTER.replace('params["order"].tolist()', "range(4)")
    root = write_project(tmp_path, {"generator.py": _GENERATOR, "jitter.py": jitter})
    assert finding_lines(root, "generator.py", "TPL101") == [8, 9]


def test_an_entry_moved_to_the_device_before_it_is_returned_is_no_host_entry(tmp_path: Path) -> None:
    generator = _GENERATOR.replace("torch.randperm(4)", 'torch.randperm(4).to("cuda")')
    root = write_project(tmp_path, {"generator.py": generator, "jitter.py": _JITTER})
    assert finding_lines(root, "generator.py", "TPL101") == [8, 9]

"""TPL501-TPL503 beyond their examples: spellings, positional arguments, `**kwargs`, loops, fixes."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from torchperf_lint.api import fix_source, lint_source

CUDA = 'device = "cuda"\n'


def _lint(source: str, code: str) -> list[int]:
    findings = lint_source(textwrap.dedent(source).lstrip("\n"), path="train.py", select=[code])
    assert all(f.code == code for f in findings), findings
    return [f.line for f in findings]


def _fix(source: str, code: str, unsafe: bool = True) -> str:
    return fix_source(textwrap.dedent(source).lstrip("\n"), path="train.py", unsafe=unsafe, select=[code])


def _loader(arguments: str) -> str:
    return f"import torch\nfrom torch.utils.data import DataLoader\n{CUDA}loader = DataLoader({arguments})\n"


# -- TPL501 --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "arguments, expected",
    [
        ("ds, 32, True, None, None, 0", [4]),  # num_workers=0 given positionally
        ("ds, 32, True, None, None, 4", []),
        ("ds, num_workers=args.workers", []),  # an expression is a decision
        ("ds, num_workers=0", [4]),
        ("ds, **{'batch_size': 32}", [4]),  # a mapping whose keys are known cannot supply it
        ("ds, **loader_kwargs", []),
        ("*loader_args", []),
    ],
)
def test_num_workers(arguments: str, expected: list[int]) -> None:
    assert _lint(_loader(arguments), "TPL501") == expected


def test_num_workers_needs_cuda_in_the_file() -> None:
    assert _lint(_loader("ds").replace(CUDA, ""), "TPL501") == []


# -- TPL502 --------------------------------------------------------------------------------------


def test_pin_memory_fix_is_safe() -> None:
    fixed = _fix(_loader("ds, num_workers=4"), "TPL502", unsafe=False)
    assert "DataLoader(ds, num_workers=4, pin_memory=True)" in fixed


@pytest.mark.parametrize("arguments", ["ds, 32, True, None, None, 4, None, False", "ds, pin_memory=False"])
def test_pin_memory_written_out_is_a_decision(arguments: str) -> None:
    assert _lint(_loader(arguments), "TPL502") == []


def test_pin_memory_spellings_of_dataloader() -> None:
    source = """
        import torch.utils.data.dataloader as dl
        import torch
        a = dl.DataLoader(ds)
        b = torch.utils.data.DataLoader(ds)
        x = torch.zeros(1).cuda()
        """
    assert _lint(source, "TPL502") == [3, 4]


# -- TPL503 --------------------------------------------------------------------------------------

EPOCHS = """
    from torch.utils.data import DataLoader

    def train(model, ds, args):
        loader = DataLoader(ds, batch_size=32, num_workers={workers})
        for epoch in range(args.epochs):
            for x in loader:
                model(x)
    """


@pytest.mark.parametrize(
    "workers, fixed",
    [
        ("4", "persistent_workers=True"),
        ("args.workers", "persistent_workers=args.workers > 0"),
        ("args.workers or 4", "persistent_workers=(args.workers or 4) > 0"),
        ("min(8, os.cpu_count())", "persistent_workers=min(8, os.cpu_count()) > 0"),
    ],
)
def test_persistent_workers_fix_keeps_zero_workers_legal(workers: str, fixed: str) -> None:
    source = EPOCHS.format(workers=workers)
    assert _lint(source, "TPL503") == [4]
    result = _fix(source, "TPL503")
    cst.parse_module(result)
    assert fixed in result
    assert _lint(result, "TPL503") == []


def test_persistent_workers_fix_is_unsafe_only() -> None:
    source = EPOCHS.format(workers="4")
    assert _fix(source, "TPL503", unsafe=False) == textwrap.dedent(source).lstrip("\n")


def test_persistent_workers_message_names_the_loader_and_workers() -> None:
    source = textwrap.dedent(EPOCHS.format(workers="args.workers")).lstrip("\n")
    (finding,) = lint_source(source, path="train.py", select=["TPL503"])
    assert finding.message == (
        "loader starts its args.workers worker processes again on every pass of an enclosing loop; "
        "pass persistent_workers=args.workers > 0"
    )


@pytest.mark.parametrize("workers, said", [("1", "1 worker process"), ("2", "2 worker processes")])
def test_persistent_workers_message_counts_one_worker_in_the_singular(workers: str, said: str) -> None:
    source = textwrap.dedent(EPOCHS.format(workers=workers)).lstrip("\n")
    (finding,) = lint_source(source, path="train.py", select=["TPL503"])
    assert finding.message.startswith(f"loader starts its {said} again on every pass")


def test_persistent_workers_through_a_method_that_takes_the_loader() -> None:
    source = """
        import torch

        class Trainer:
            def __init__(self, ds):
                self.train_loader = torch.utils.data.DataLoader(ds, num_workers=4)

            @staticmethod
            def run_epoch(model, loader):
                for batch in loader:
                    model(batch)

            def fit(self, model, epochs):
                for _ in range(epochs):
                    self.run_epoch(model, self.train_loader)
        """
    assert _lint(source, "TPL503") == [5]


@pytest.mark.parametrize(
    "source",
    [
        """
        from torch.utils.data import DataLoader

        def evaluate(model, ds):
            loader = DataLoader(ds, num_workers=4)
            for x in loader:
                model(x)
        """,
        """
        from torch.utils.data import DataLoader

        def train(model, ds, other_loader):
            loader = DataLoader(ds, num_workers=4)
            for epoch in range(3):
                for x in other_loader:
                    model(x)
        """,
    ],
    ids=["one-pass", "another-loader-re-iterated"],
)
def test_persistent_workers_silent_without_a_repeated_pass(source: str) -> None:
    assert _lint(source, "TPL503") == []


def test_other_dataloader_classes_stay_silent_for_every_rule() -> None:
    source = """
        from torch_geometric.loader import DataLoader
        import torch

        loader = DataLoader(graphs, num_workers=4)
        for epoch in range(3):
            for batch in loader:
                batch.cuda()
        """
    for code in ("TPL501", "TPL502", "TPL503"):
        assert _lint(source, code) == [], code


def test_a_loader_beside_an_nccl_process_group_runs_on_cuda():
    """NCCL is GPU-only: a DDP script that sets it up trains on CUDA though it never says "cuda"."""
    script = """
        import os
        import torch.distributed as dist
        from torch.utils.data import DataLoader

        dist.init_process_group(backend="nccl")
        local_rank = int(os.environ["LOCAL_RANK"])
        loader = DataLoader(ds, batch_size=32)
        """
    assert _lint(script, "TPL501") == [7]
    assert _lint(script.replace('"nccl"', '"gloo"'), "TPL501") == []

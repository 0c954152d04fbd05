"""TPL104's precise form (rules/transfer/assert_cost.py): an assert whose sync the function pays
anyway, or that validates an entry's arguments with a message, is a note; the per-step checks stay."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from torchperf_lint.api import lint_source
from torchperf_lint.cli import main
from torchperf_lint.settings import Settings

from .helpers import write_project


def _lines(source: str, notes: bool = False) -> list[tuple[int, bool]]:
    settings = Settings(select=("TPL104",), notes=notes)
    found = lint_source(textwrap.dedent(source).lstrip("\n"), path="example.py", settings=settings)
    return [(f.line, f.note) for f in found]


def test_an_assert_beside_a_host_read_of_the_same_input_is_a_note() -> None:
    # torchtitan's vision encoder: grid_thw.tolist() right after; torch-geometric's WLConv: x.tolist()
    source = """
        import torch
        from torch import nn

        class Encoder(nn.Module):
            def forward(self, x, grid: torch.Tensor):
                assert bool((grid[:, 1:] % 2 == 0).all()), "grid must be even"
                n = grid[:, 1] * grid[:, 2]
                return x[: int(n.sum())]
        """
    assert _lines(source) == []
    assert _lines(source, notes=True) == [(6, True)]


def test_a_host_read_through_assignments_counts_and_a_slice_bound_is_one() -> None:
    source = """
        import torch
        from torch import nn

        DEVICE = "cuda"

        class Crop(nn.Module):
            def forward(self, x, lens: torch.Tensor):
                ends = lens + 1
                assert (lens > 0).all()
                return x[:, : ends.max()]
        """
    assert _lines(source) == []
    assert _lines(source.replace("ends.max()", "x.size(1)")) == [(9, False)]


def test_a_host_read_in_a_loop_body_or_a_branch_the_assert_does_not_share_is_no_excuse() -> None:
    source = """
        import torch
        from torch import nn

        class Head(nn.Module):
            def forward(self, x, lens: torch.Tensor, verbose: bool = False):
                assert (lens > 0).all()
                if verbose:
                    print(lens.tolist())
                for row in x:
                    n = int(lens.max())
                return x
        """
    assert _lines(source) == [(6, False)]


def test_a_host_read_after_the_assert_in_its_own_branch_counts() -> None:
    source = """
        import torch
        from torch import nn

        class Head(nn.Module):
            def forward(self, x, lens: torch.Tensor, ragged: bool = True):
                if ragged:
                    assert (lens > 0).all()
                    sizes = lens.tolist()
                    return torch.split(x, sizes)
                return x
        """
    assert _lines(source) == []


def test_the_assert_s_own_message_and_another_assert_are_not_a_host_read() -> None:
    source = """
        import torch
        from torch import nn

        class Head(nn.Module):
            def forward(self, x):
                y = x.softmax(-1)
                assert (y >= 0).all(), y.tolist()
                assert (y <= 1).all()
                return y
        """
    assert _lines(source) == [(7, False), (8, False)]


def test_validation_of_an_entry_s_arguments_with_a_message_is_a_note() -> None:
    source = """
        import torch
        from torch import nn

        class Lookup(nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = nn.Embedding(100, 8)

            def forward(self, ids: torch.Tensor):
                assert (ids >= 0).all() and (ids < self.emb.num_embeddings).all(), "ids out of range"
                return self.emb(ids)
        """
    assert _lines(source) == []
    assert _lines(source, notes=True) == [(10, True)]


def test_an_argument_check_without_a_message_or_on_a_computed_value_is_reported() -> None:
    # detr's generalized_box_iou checks its boxes without a message: a check a step pays for
    source = """
        import torch
        from torch import nn

        def box_iou(boxes1, boxes2):
            assert (boxes1[:, 2:] >= boxes1[:, :2]).all()
            return boxes1 @ boxes2.T

        class Matcher(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(4, 4)

            def forward(self, boxes: torch.Tensor, targets: torch.Tensor):
                boxes = self.proj(boxes)
                assert (boxes[:, 2:] >= boxes[:, :2]).all(), "degenerate boxes"
                return box_iou(boxes, targets)
        """
    assert _lines(source) == [(5, False), (15, False)]


def test_a_per_step_assert_in_a_training_loop_stays_reported() -> None:
    source = """
        import torch

        def train(model, loader, optimizer):
            for x, y in loader:
                loss = model(x.cuda(), y.cuda())
                assert torch.isfinite(loss).all(), "loss diverged"
                loss.backward()
                optimizer.step()
        """
    assert _lines(source) == [(6, False)]


_GENERATOR = """
    import torch
    from torch import nn


    class LM(nn.Module):
        def __init__(self, vocab, width):
            super().__init__()
            self.embed = nn.Embedding(vocab, width)
            self.blocks = nn.ModuleList([nn.Linear(width, width) for _ in range(4)])
            self.head = nn.Linear(width, vocab)
            self._fsdp = None

        def forward(self, idx):
            h = self.embed(idx)
            for block in self.blocks:
                h = block(h)
            assert h.isfinite().all()
            return self.head(h)

        def _next_token(self, seq):
            model = self if self._fsdp is None else self._fsdp
            return model(seq)[:, -1].argmax(-1, keepdim=True)

        @torch.no_grad()
        def generate(self, prompt, steps):
            seq = prompt
            for _ in range(steps):
                seq = torch.cat([seq, self._next_token(seq)], dim=1)
                assert (seq[:, -1] >= 0).all()
            assert (seq >= 0).all()
            return seq
    """
_EVALUATE = """
    import torch
    from model import LM


    def evaluate(loader):
        model = LM(64, 32).cuda()
        scores = []
        for prompt in loader:
            out = model.generate(prompt.cuda(), 128)
            scores.append(out.float().mean())
        return scores
    """


def test_an_assert_after_a_generation_s_token_loop_runs_once_per_many_model_calls(tmp_path, capsys) -> None:
    # audiocraft's LMModel.generate: the token loop calls the model through `model = self if ...`
    root = write_project(tmp_path, {"model.py": _GENERATOR, "evaluate.py": _EVALUATE})
    main(["--format", "json", "--no-cache", "--show-context", "--select", "TPL104", str(root)])
    found = [
        (Path(str(f["path"])).name, f["line"], f.get("kind", "finding"))
        for f in json.loads(capsys.readouterr().out)
    ]
    # the assert inside the token loop runs once per token: reported; the one after it is a note;
    # forward's after its loop over blocks runs once per model call: reported
    assert sorted(found) == [
        ("model.py", 17, "finding"),
        ("model.py", 29, "finding"),
        ("model.py", 30, "note"),
    ]


def test_other_entries_of_a_container_or_other_parts_of_an_unpacking_are_other_tensors() -> None:
    source = """
        import torch
        from torch import nn

        DEVICE = "cuda"

        class Head(nn.Module):
            def forward(self, batch: dict, pair: tuple):
                labels = torch.as_tensor(batch["labels"], device=DEVICE)
                assert (labels >= 0).all()
                x, lens = pair
                y = torch.relu(x)
                assert (y >= 0).all()
                n = int(torch.as_tensor(batch["lengths"], device=DEVICE).max())
                return y[:, : int(torch.as_tensor(lens).max())][:, :n]
        """
    assert _lines(source) == [(9, False), (12, False)]
    same_entry = source.replace('batch["lengths"]', 'batch["labels"]')
    assert _lines(same_entry) == [(12, False)]

"""Inference steps are hot roots (RULES.md, hot code item 4): a loop outside training whose body
runs a model once per iteration (a generation loop, a predictor's stream over sources) is a step
of its own, read the same by every route (the CLI on the project and on one file, flake8, the
library API), while training-only rules do not look there."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from torchperf_lint.api import lint_source
from torchperf_lint.cli import main

from .helpers import write_project

pytestmark = pytest.mark.usefixtures("precision_off_rules_on")

_MODEL = """
    import torch
    from torch import nn


    class GPT(nn.Module):
        def __init__(self, vocab, width):
            super().__init__()
            self.embed = nn.Embedding(vocab, width)
            self.head = nn.Linear(width, vocab)

        def forward(self, idx):
            return self.head(self.embed(idx))

        @torch.no_grad()
        def generate(self, idx, max_new_tokens, top_k):
            first = idx[:, [0]]
            for _ in range(max_new_tokens):
                logits = self(idx)[:, -1, :]
                v, _ = torch.topk(logits, top_k)
                logits = logits.masked_fill(logits < v[:, [-1]], -float("inf"))
                next_token = torch.multinomial(logits.softmax(-1), num_samples=1)
                idx = torch.cat((idx, next_token), dim=1)
            return torch.cat((first, idx), dim=1)
    """
# the sampling function runs every 100 training steps: cold for the training loop
_TRAIN = """
    import torch
    from model import GPT

    model = GPT(64, 32).cuda()
    optimizer = torch.optim.AdamW(model.parameters(), fused=True)
    for step in range(1000):
        idx = torch.randint(0, 64, (4, 16), device="cuda")
        loss = model(idx).logsumexp(-1).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if step % 100 == 0:
            print(model.generate(idx[:, [0, 1]], 8, top_k=5))
    """
# a predictor's stream: the loop runs the model through a helper; post-processing is overridden
# in another module
_PREDICTOR = """
    from torch import nn


    class Detector(nn.Module):
        def forward(self, im):
            return self.head(im)


    class BasePredictor:
        def setup_model(self):
            self.model = Detector().cuda().eval()

        def inference(self, im):
            return self.model(im)

        def postprocess(self, preds):
            return preds

        def stream(self, sources):
            for im in sources:
                preds = self.inference(im.cuda())
                yield self.postprocess(preds)
    """
_DETECT = """
    import torch
    from predictor import BasePredictor


    class DetectPredictor(BasePredictor):
        def postprocess(self, preds):
            results = []
            for box, score in zip(*preds.split((4, 1), dim=-1)):
                pred = torch.cat([box, score], dim=-1)
                pred[..., [0, 2]] *= 640
                results.append(pred)
            return results
    """
_FILES = {"model.py": _MODEL, "train.py": _TRAIN, "predictor.py": _PREDICTOR, "detect.py": _DETECT}
# the top-k mask in the per-token loop; the per-image box scaling the stream runs
_EXPECTED = {("model.py", 20, "TPL103"), ("detect.py", 10, "TPL103")}


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> list[dict[str, object]]:
    main(["--format", "json", "--no-cache", "--show-context", "--select", "TPL103", *args])
    return json.loads(capsys.readouterr().out)


def _keys(findings: list[dict[str, object]], root: Path) -> set[tuple[str, int, str]]:
    return {(Path(str(f["path"])).name, int(str(f["line"])), str(f["code"])) for f in findings}


def test_the_project_reports_the_per_token_and_per_image_indexing(tmp_path: Path, capsys) -> None:
    root = write_project(tmp_path, _FILES)
    assert _keys(_cli(capsys, str(root)), root) == _EXPECTED


def test_each_file_alone_gives_the_same_findings(tmp_path: Path, capsys) -> None:
    root = write_project(tmp_path, _FILES)
    found: set[tuple[str, int, str]] = set()
    for name in _FILES:
        found |= _keys(_cli(capsys, str(root / name)), root)
    assert found == _EXPECTED


def test_flake8_and_the_library_api_agree(tmp_path: Path) -> None:
    root = write_project(tmp_path, _FILES)
    by_flake8: set[tuple[str, int, str]] = set()
    by_api: set[tuple[str, int, str]] = set()
    for name in _FILES:
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "flake8",
                "--isolated",
                "--select",
                "TPL103",
                "--format",
                "%(row)d %(code)s",
                name,
            ],
            capture_output=True,
            text=True,
            cwd=root,
        )
        assert result.returncode in (0, 1), result.stderr
        by_flake8 |= {(name, int(row), code) for row, code in map(str.split, result.stdout.splitlines())}
        path = root / name
        by_api |= {
            (name, f.line, f.code) for f in lint_source(path.read_text(), str(path), select=["TPL103"])
        }
    assert by_flake8 == by_api == _EXPECTED


def test_the_context_names_the_inference_loop(tmp_path: Path, capsys) -> None:
    root = write_project(tmp_path, _FILES)
    contexts = {Path(str(f["path"])).name: f["context"] for f in _cli(capsys, str(root))}
    assert contexts == {
        "model.py": "in inference loop at line 17",
        "detect.py": "in DetectPredictor.postprocess (detect.py), called from inference loop (predictor.py:20)",
    }


def test_a_loop_over_a_models_generate_is_not_the_step(tmp_path: Path) -> None:
    # `generate` runs the model many times: its own per-token loop is the step, the loop over
    # prompts is not
    sample = """
        import torch
        from model import GPT

        model = GPT(64, 32).cuda()
        for prompt in torch.randint(0, 64, (8, 1, 4), device="cuda"):
            out = model.generate(prompt, 16, top_k=5)
            print(out[:, [0, 1, 2]].sum())
        """
    root = write_project(tmp_path, {"model.py": _MODEL, "sample.py": sample})
    path = root / "sample.py"
    assert lint_source(path.read_text(), str(path), select=["TPL103"]) == []


def test_a_loop_over_layers_is_not_an_inference_step(tmp_path: Path) -> None:
    probe = """
        import torch
        from torch import nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.blocks = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])

            def forward(self, x):
                return x

            def widths(self):
                x = torch.zeros(2, 4).cuda()
                found = []
                for block in self.blocks:
                    x = block(x)
                    found.append(x[:, [-1]].numel())
                return found
        """
    root = write_project(tmp_path, {"net.py": probe})
    path = root / "net.py"
    assert lint_source(path.read_text(), str(path), select=["TPL103"]) == []


def test_training_rules_do_not_look_at_an_inference_step(tmp_path: Path) -> None:
    # zeroing `.grad` inside the evaluation loop is not the per-step zeroing TPL301 is about
    evaluate = """
        import torch
        from model import GPT

        def evaluate(batches):
            model = GPT(8, 8).cuda()
            for x in batches:
                out = model(x.cuda())
                for p in model.parameters():
                    p.grad = torch.zeros_like(p)
                print(out.sum().item())
        """
    root = write_project(tmp_path, {"evaluate.py": evaluate, "model.py": _MODEL})
    path = root / "evaluate.py"
    found = [(f.line, f.code) for f in lint_source(path.read_text(), str(path), select=["TPL301", "TPL107"])]
    assert found == [(10, "TPL107")]  # the per-batch sync is reported; the zeroing is not


def test_an_epoch_loop_that_samples_once_per_epoch_is_not_an_inference_step(tmp_path: Path) -> None:
    train = """
        import torch
        from model import GPT

        model = GPT(64, 32).cuda()
        optimizer = torch.optim.AdamW(model.parameters(), fused=True)
        for epoch in range(10):
            for step in range(1000):
                idx = torch.randint(0, 64, (4, 16), device="cuda")
                model(idx).logsumexp(-1).mean().backward()
                optimizer.step()
            with torch.no_grad():
                z = torch.randint(0, 64, (4, 16)).cuda()
                print(model(z).mean().item())
        """
    root = write_project(tmp_path, {"model.py": _MODEL, "train.py": train})
    path = root / "train.py"
    assert lint_source(path.read_text(), str(path), select=["TPL101", "TPL107"]) == []


def test_a_datasets_one_off_process_is_not_an_inference_step(tmp_path: Path) -> None:
    dataset = """
        from torch_geometric.data import InMemoryDataset
        from model import GPT

        def first_columns(out):
            return out[:, [0, 1]]

        class Features(InMemoryDataset):
            def process(self):
                model = GPT(64, 32).cuda()
                for idx in self.raw_tokens:
                    self.cache.append(first_columns(model(idx.cuda())))
        """
    root = write_project(tmp_path, {"model.py": _MODEL, "features.py": dataset})
    path = root / "features.py"
    assert lint_source(path.read_text(), str(path), select=["TPL103"]) == []

"""benchmarks.confirm_training and its shims, without a GPU and without torchvision: prepare's copy,
data and findings; the dataset stand-ins; the launcher that runs a script unchanged with a stand-in;
and a confirm run through that launcher."""

from __future__ import annotations

import argparse
import json
import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from benchmarks import confirm_training, training_shims
from benchmarks.confirm_training import SCRIPTS, Script, command_of, prepare

ROOT = Path(__file__).resolve().parent.parent

# a torchvision whose dataset classes would download: the launcher must replace CIFAR10 before use
FAKE_TORCHVISION = {
    "torchvision/__init__.py": "from . import datasets\n",
    "torchvision/datasets.py": textwrap.dedent(
        """\
        class CIFAR10:
            def __init__(self, *args, **kwargs):
                raise RuntimeError("would download CIFAR-10")
        """
    ),
}


def _write(base: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (base / name).parent.mkdir(parents=True, exist_ok=True)
        (base / name).write_text(text, encoding="utf-8")


TRAIN = textwrap.dedent(
    """\
    import torch

    model = torch.nn.Linear(4, 1).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(100):
        loss = model(torch.randn(8, 4).cuda()).pow(2).mean()
        loss.backward()
        optimizer.step()
        print(loss.item())
    """
)


def test_prepare_copies_only_python_files_writes_the_data_and_keeps_the_findings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sources = tmp_path / "sources"
    _write(
        sources / "owner+repo",
        {"lm/train.py": TRAIN, "lm/README.md": "# big docs\n", "lm/weights.bin": "x", "other.py": "x = 1\n"},
    )
    monkeypatch.setattr(confirm_training, "SOURCES", (sources,))
    script = Script(
        "lm",
        "owner+repo",
        "lm",
        "train.py",
        (),
        cpu=(),
        cuda=(),
        shim="none",
        data="text",
        write_data=confirm_training._text("data", {"train.txt": 50}),
    )
    folder = tmp_path / ".confirm_training"
    assert prepare(folder, (script,)) == 0
    copied = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    assert copied == ["findings.json", "lm/data/train.txt", "lm/train.py"]
    assert len((folder / "lm/data/train.txt").read_text(encoding="utf-8").split()) == 50
    entry = json.loads((folder / "findings.json").read_text(encoding="utf-8"))["lm"]
    assert entry["files"] == 1
    assert ("train.py", 9, "TPL107") in {(f["path"], f["line"], f["code"]) for f in entry["findings"]}

    # run refuses a copy changed since its findings were made, before running anything
    (folder / "lm/train.py").write_text(TRAIN + "# changed\n", encoding="utf-8")
    monkeypatch.setattr(confirm_training, "SCRIPTS", (script,))
    args = argparse.Namespace(
        folder=str(folder), out=str(tmp_path / "out"), only=None, device="cpu", steps=2, profile=False
    )
    assert confirm_training.run(args) == 0
    summary = json.loads((tmp_path / "out/confirm_training.json").read_text(encoding="utf-8"))["summary"]
    assert summary == [
        {"script": "lm", "shim": "none", "data": "text", "skipped": "its findings are stale: run `prepare`"}
    ]


def test_the_token_bins_are_nanogpt_data(tmp_path: Path) -> None:
    import numpy as np

    training_shims.write_token_bins(tmp_path, tokens=1000, vocab_size=256)
    train = np.fromfile(tmp_path / "train.bin", dtype=np.uint16)
    assert len(train) == 1000 and train.max() < 256
    with open(tmp_path / "meta.pkl", "rb") as file:
        assert pickle.load(file) == {"vocab_size": 256}


def test_the_stand_ins_have_the_shapes_and_classes_of_the_datasets_they_replace() -> None:
    cifar = training_shims.SyntheticCIFAR100("./data", train=True, transform=lambda image: image.size)
    assert (len(cifar), len(cifar.classes), max(cifar.targets)) == (50000, 100, 99)
    assert cifar[7] == ((32, 32), 7)
    image, label = training_shims.SyntheticMNIST("./data", train=False, download=True)[3]
    assert (image.mode, image.size, label) == ("L", (28, 28), 3)
    first = training_shims.SyntheticCIFAR10(train=True)[5][0]
    assert (
        first.mode == "RGB" and first.tobytes() == training_shims.SyntheticCIFAR10(train=True)[5][0].tobytes()
    )
    # DataLoader workers receive the dataset pickled
    again = pickle.loads(pickle.dumps(training_shims.SyntheticCIFAR10(train=False)))
    assert len(again) == 10000 and type(again) is training_shims.SyntheticCIFAR10


def test_the_launcher_runs_the_script_unchanged_with_the_stand_in(tmp_path: Path) -> None:
    _write(tmp_path / "site", FAKE_TORCHVISION)
    _write(
        tmp_path / "project",
        {
            "helper.py": "NAME = 'helper'\n",
            "main.py": textwrap.dedent(
                """\
                import sys
                from torchvision import datasets
                import helper

                if __name__ == "__main__":
                    data = datasets.CIFAR10("./data", train=True, download=True)
                    print(type(data).__name__, len(data), helper.NAME, sys.argv[1:], sys.argv[0])
                """
            ),
        },
    )
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks/training_shims.py"), "cifar10", "project/main.py", "-b", "3"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(tmp_path / "site")},
        check=False,
    )
    assert result.returncode == 0, result.stderr
    script = os.path.realpath(tmp_path / "project/main.py")
    assert result.stdout.split() == ["SyntheticCIFAR10", "50000", "helper", "['-b',", "'3']", script]


def test_each_script_runs_on_the_devices_it_can() -> None:
    by_name = {script.name: script for script in SCRIPTS}
    work = Path("/w")
    assert command_of(by_name["resnet_cifar10"], "cpu", work) is None  # model.cuda() unconditionally
    cuda = command_of(by_name["pytorch_cifar100"], "cuda", work)
    assert cuda is not None and cuda[1:4] == [str(training_shims.__file__), "cifar100", "/w/train.py"]
    assert cuda[-1] == "-gpu"
    nanogpt = command_of(by_name["nanogpt"], "cpu", work)
    assert nanogpt is not None and nanogpt[1] == "/w/train.py" and "--device=cpu" in nanogpt
    assert len(SCRIPTS) >= 5 and len({script.name for script in SCRIPTS}) == len(SCRIPTS)


def test_confirm_sees_the_script_run_through_the_launcher(tmp_path: Path) -> None:
    """The probe attributes what the user's script does to the script's lines, not to the launcher."""
    _write(tmp_path / "site", FAKE_TORCHVISION)
    _write(
        tmp_path / "project",
        {
            "train.py": textwrap.dedent(
                """\
                import torch
                from torchvision import datasets

                data = datasets.CIFAR10("./data", train=True, download=True)
                model = torch.nn.Linear(3, 1)
                optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
                for index in range(20):
                    image, label = data[index]
                    x = torch.tensor(list(image.tobytes()[:8]), dtype=torch.float32) / 255
                    loss = model(x.view(8, 1).expand(8, 3)).mean()
                    loss.backward()
                    optimizer.step()
                    print(loss.item())
                """
            )
        },
    )
    (tmp_path / "findings.json").write_text("[]", encoding="utf-8")
    command = [
        *(sys.executable, "-m", "torchperf_lint", "confirm", "--steps", "3", "--format", "json"),
        *("--findings", "findings.json", "--project", "project", "--"),
        *(sys.executable, str(ROOT / "benchmarks/training_shims.py"), "cifar10", "project/train.py"),
    ]
    result = subprocess.run(
        command,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), str(ROOT)])},
        check=False,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["steps"] == 3
    assert [(e["path"], e["line"], e["kind"], e["status"]) for e in report["unreported"]] == [
        ("project/train.py", 13, "item", "every-step")
    ]


def test_the_summary_counts_each_status_and_lists_what_was_seen_missed_and_refuted() -> None:
    by_name = {script.name: script for script in SCRIPTS}
    finding = {"path": "train.py", "code": "TPL107", "per_step": 1.0}
    report = {
        "steps": 3,
        "steps_run": 4,
        "step_kind": "optimizer.step()",
        "ended": "stopped",
        "cuda": True,
        "findings": [
            {**finding, "line": 5, "status": "every-step", "seconds_per_step": 0.002},
            {**finding, "line": 9, "status": "not-seen", "per_step": 0.0, "line_ran_steps": 3},
            {**finding, "path": "bench.py", "line": 2, "status": "not-seen", "per_step": 0.0},
            {**finding, "line": 1, "code": "TPL702", "status": "not-checked", "per_step": 0.0},
        ],
        "unreported": [
            {
                "path": "model.py",
                "line": 7,
                "kind": "sync",
                "status": "some-steps",
                "per_step": 0.5,
                "details": [],
            }
        ],
    }
    summary = confirm_training._summary(by_name["nanogpt"], {"report": report})
    assert (summary["every-step"], summary["not-seen"], summary["not-checked"]) == (1, 2, 1)
    assert summary["seen"] == ["TPL107 train.py:5 every-step x1/step, 2 ms/step"]
    assert summary["unreported"] == ["sync model.py:7 some-steps x0.5/step ()"]
    assert summary["not_seen"] == ["TPL107 train.py:9 (the line ran at 3 steps)"]  # not bench.py's
    failed = confirm_training._summary(by_name["simclr"], {"error": "exit 2: boom"})
    args = argparse.Namespace(device="cuda", steps=3, profile=True)
    text = confirm_training._markdown([summary, failed], args)
    assert "| nanogpt |" in text and "| 3 of 4 (optimizer.step()) | stopped | 1 | 0 | 2 | 1 | 1 |" in text
    row = next(line for line in text.splitlines() if line.startswith("| simclr"))
    assert "exit 2: boom" in row and row.count("|") == 10  # the table's 9 columns

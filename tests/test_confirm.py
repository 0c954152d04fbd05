"""`torchperf-lint confirm`: the user's script runs a few steps under the probe, and each finding is
reported as seen at every step, at some, or not at all; what the run saw at lines no finding names is
listed apart. The runs use this machine's torch on the CPU (in a child process: the linter itself
never imports torch)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from torchperf_lint.confirm.command import script_of
from torchperf_lint.confirm.launcher import main_report
from torchperf_lint.confirm.outcome import confirm_findings, measured_windows

REPO = Path(__file__).resolve().parents[1]

# A CPU factory in forward, a per-step .item(), a range index behind a branch no batch takes, and an
# .item() reached through getattr (no finding can name it). The device is picked as scripts pick it,
# so the file shows CUDA use and the CUDA rules speak.
TRAIN = """\
import argparse

import torch
from torch import nn

device = "cuda" if torch.cuda.is_available() else "cpu"


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 2)

    def forward(self, x):
        noise = torch.randn(x.shape[0], 8)  # FACTORY
        return self.fc(x + noise.to(x.device))


def train(steps):
    model = Net().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(steps):
        x = torch.randn(4, 8, device=device)
        y = torch.randint(0, 2, (4,), device=device)
        out = model(x)
        if x.shape[0] > 1000:
            out = out[range(4), y]  # RANGE
        loss = nn.functional.cross_entropy(out, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        print("loss", loss.item())  # ITEM
        value = getattr(loss, "item")()  # GETATTR
    print("final", loss.item())  # AFTER


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=100)
    train(parser.parse_args().steps)
"""


def line_of(source: str, marker: str) -> int:
    return next(number for number, line in enumerate(source.splitlines(), 1) if f"# {marker}" in line)


def confirm(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "TORCHPERF_LINT_NO_CACHE": "1"}
    return subprocess.run(
        [sys.executable, "-m", "torchperf_lint", "confirm", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


def by_code(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {finding["code"]: finding for finding in report["findings"]}


def test_acceptance_every_step_not_seen_and_unreported(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(TRAIN, encoding="utf-8")
    result = confirm(
        tmp_path, "--steps", "5", "--format", "json", "--", sys.executable, "train.py", "--steps", "50"
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["steps"] == 5 and report["ended"] == "stopped"
    found = by_code(report)
    assert (found["TPL101"]["line"], found["TPL101"]["status"]) == (line_of(TRAIN, "FACTORY"), "every-step")
    assert (found["TPL107"]["line"], found["TPL107"]["status"]) == (line_of(TRAIN, "ITEM"), "every-step")
    assert (found["TPL103"]["line"], found["TPL103"]["status"]) == (line_of(TRAIN, "RANGE"), "not-seen")
    assert found["TPL101"]["per_step"] == 1.0
    unreported = {(event["path"], event["line"], event["kind"]) for event in report["unreported"]}
    assert ("train.py", line_of(TRAIN, "GETATTR"), "item") in unreported
    # the .item() a finding names is not listed again; the program printed its own output on stderr
    assert ("train.py", line_of(TRAIN, "ITEM"), "item") not in unreported
    # the script's own prints (`loss 0.25`) go to stderr; findings' messages may name a `loss` too
    assert "\nloss 0." in "\n" + result.stderr and "\nloss 0." not in "\n" + result.stdout


def test_text_report_says_seen_and_not_seen(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(TRAIN, encoding="utf-8")
    result = confirm(tmp_path, "--steps", "3", "--select", "TPL101,TPL103", "--", sys.executable, "train.py")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    factory = f"train.py:{line_of(TRAIN, 'FACTORY')}:"
    assert any(line.startswith(factory) and "TPL101 [seen every step, 1/step]" in line for line in lines)
    assert any("TPL103 [not seen]" in line for line in lines)
    assert lines[-1].startswith("Ran ") and "3 steps measured" in lines[-1]


def test_a_program_that_ends_before_its_steps_counts_the_steps_it_made(tmp_path: Path) -> None:
    """Three steps of the twenty asked for: the warm-up and two measured; the .item() after the loop
    runs once, after the last step, and is no per-step event."""
    (tmp_path / "train.py").write_text(TRAIN, encoding="utf-8")
    result = confirm(
        tmp_path, "--format", "json", "--select", "TPL101", "--", sys.executable, "train.py", "--steps", "3"
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert (report["steps"], report["steps_run"], report["ended"]) == (2, 3, "by itself")
    assert by_code(report)["TPL101"]["status"] == "every-step"
    lines = {event["line"] for event in report["unreported"]}
    assert line_of(TRAIN, "GETATTR") in lines and line_of(TRAIN, "AFTER") not in lines


def test_a_program_that_never_steps_says_so(tmp_path: Path) -> None:
    (tmp_path / "infer.py").write_text(
        "import torch\n\nmodel = torch.nn.Linear(4, 2)\nprint(model(torch.ones(1, 4)).sum().item())\n",
        encoding="utf-8",
    )
    result = confirm(tmp_path, "--", sys.executable, "infer.py")
    assert result.returncode == 0, result.stderr
    assert "ended without a step" in result.stdout


def test_a_program_that_raises_before_its_first_step_exits_2_with_its_last_lines(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(
        "import torch\n\nraise FileNotFoundError('data/train.csv')\n", encoding="utf-8"
    )
    result = confirm(tmp_path, "--", sys.executable, "train.py")
    assert result.returncode == 2 and result.stdout == ""
    assert "failed before its first step" in result.stderr
    assert "FileNotFoundError: data/train.csv" in result.stderr.splitlines()[-1]


def test_a_program_that_fails_after_its_first_step_reports_what_it_saw_and_exits_1(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(
        textwrap.dedent(
            """\
            import torch

            layer = torch.nn.Linear(4, 1)
            optimizer = torch.optim.SGD(layer.parameters(), lr=0.1)
            for step in range(10):
                layer(torch.ones(2, 4)).sum().backward()
                optimizer.step()
                if step == 3:
                    raise RuntimeError("out of data")
            """
        ),
        encoding="utf-8",
    )
    result = confirm(tmp_path, "--format", "json", "--select", "TPL101", "--", sys.executable, "train.py")
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert (report["ended"], report["steps_run"], report["steps"]) == ("failed", 4, 3)
    assert result.stderr.splitlines()[-1] == (
        "torchperf-lint: the command failed after step 4 (exit status 1): RuntimeError: out of data"
    )


def test_dataloader_workers_make_no_steps_and_the_main_process_reports(tmp_path: Path) -> None:
    """A factory in the dataset runs in the workers: the main process reports, and never saw it."""
    (tmp_path / "train.py").write_text(
        textwrap.dedent(
            """\
            import torch
            from torch.utils.data import DataLoader, Dataset


            class Data(Dataset):
                def __len__(self):
                    return 64

                def __getitem__(self, index):
                    return torch.ones(4) * index  # WORKER


            if __name__ == "__main__":
                layer = torch.nn.Linear(4, 1)
                optimizer = torch.optim.SGD(layer.parameters(), lr=0.1)
                for x in DataLoader(Data(), batch_size=4, num_workers=1):
                    layer(x).sum().backward()
                    optimizer.step()
            """
        ),
        encoding="utf-8",
    )
    line = next(
        n for n, text in enumerate((tmp_path / "train.py").read_text().splitlines(), 1) if "# WORKER" in text
    )
    finding = {"path": "train.py", "line": line, "col": 16, "code": "TPL101", "message": "m"}
    (tmp_path / "findings.json").write_text(json.dumps([finding]), encoding="utf-8")
    result = confirm(
        tmp_path,
        "--steps",
        "3",
        "--findings",
        "findings.json",
        "--format",
        "json",
        "--",
        sys.executable,
        "train.py",
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["steps"] == 3 and report["ended"] == "stopped"
    assert [f["status"] for f in report["findings"]] == ["not-seen"]


def test_bad_input_gets_one_line_each(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text("import torch\ndef f(:\n", encoding="utf-8")
    missing = confirm(tmp_path, "--", "no-such-command-h38", "train.py")
    broken = confirm(tmp_path, "--", sys.executable, "broken.py")
    zero = confirm(tmp_path, "--steps", "0", "--", sys.executable, "broken.py")
    nothing = confirm(tmp_path)
    assert (
        missing.returncode == 2
        and missing.stderr == "torchperf-lint: error: command not found: no-such-command-h38\n"
    )
    assert broken.returncode == 2 and broken.stderr.startswith("torchperf-lint: error: broken.py:2:")
    assert len(broken.stderr.splitlines()) == 1 and "syntax error" in broken.stderr
    assert zero.returncode == 2 and "--steps: must be at least 1" in zero.stderr.splitlines()[-1]
    assert nothing.returncode == 2 and "needs a command to run after --" in nothing.stderr


def test_findings_can_come_from_a_file(tmp_path: Path) -> None:
    """For a machine without libcst: the findings of an earlier `--format json` lint."""
    (tmp_path / "train.py").write_text(TRAIN, encoding="utf-8")
    finding = {
        "path": "train.py",
        "line": line_of(TRAIN, "ITEM"),
        "col": 23,
        "code": "TPL107",
        "message": "m",
    }
    (tmp_path / "findings.json").write_text(json.dumps([finding]), encoding="utf-8")
    (tmp_path / "garbage.json").write_text('{"not": "findings"}', encoding="utf-8")
    result = confirm(
        tmp_path,
        "--steps",
        "2",
        "--findings",
        "findings.json",
        "--format",
        "json",
        "--",
        sys.executable,
        "train.py",
    )
    assert result.returncode == 0, result.stderr
    assert [f["status"] for f in json.loads(result.stdout)["findings"]] == ["every-step"]
    garbage = confirm(tmp_path, "--findings", "garbage.json", "--", sys.executable, "train.py")
    assert garbage.returncode == 2
    assert (
        garbage.stderr
        == "torchperf-lint: error: garbage.json does not hold torchperf-lint --format json findings\n"
    )


def test_confirm_loads_without_torch_or_libcst() -> None:
    """The command's side of confirm (and the probe until the program imports torch) is torch-free,
    and with --findings it needs no libcst either (a GPU machine with torch alone)."""
    code = (
        "import sys; sys.modules['torch'] = None; sys.modules['libcst'] = None\n"
        "from torchperf_lint.confirm import command, launcher, outcome, probe, render\n"
        "from torchperf_lint.cli import main\n"
        "sys.exit(main(['confirm', '--help']))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: torchperf-lint confirm [OPTIONS] -- COMMAND...")


def test_the_script_of_a_command() -> None:
    here = (
        str(Path(__file__).relative_to(Path.cwd())) if Path(__file__).is_relative_to(Path.cwd()) else __file__
    )
    assert script_of(["python", "-W", "ignore", here, "--lr", "0.1"]) == (here, False)
    assert script_of(["torchrun", "--nproc_per_node", "2", here]) == (here, False)
    assert script_of(["python", "-m", "pkg.train"]) == (None, True)
    assert script_of(["python", "-c", "print(1)"]) == (None, False)


def test_steps_are_the_windows_after_the_warm_up() -> None:
    assert list(measured_windows(6)) == [2, 3, 4, 5, 6]
    assert list(measured_windows(1)) == [1]
    assert list(measured_windows(0)) == []


def test_rank_zero_reports_and_the_launcher_does_not() -> None:
    launcher = {"pid": 10, "rank": None, "steps": 0}
    ranks = [{"pid": 11, "rank": "0", "steps": 6}, {"pid": 12, "rank": "1", "steps": 6}]
    assert main_report([launcher, *ranks]) == ranks[0]


def _event(line: int, kind: str, windows: dict[int, int], details: tuple[str, ...] = ()) -> dict[str, Any]:
    return {
        "path": "/p/t.py",
        "line": line,
        "kind": kind,
        "by_step": {str(k): v for k, v in windows.items()},
        "details": list(details),
        "seconds": {},
    }


def test_a_finding_matches_only_the_events_its_rule_names() -> None:
    """An .item() on the line of a range index does not confirm the index; a host factory is named
    only in a program that uses CUDA; what ran once before the steps is no per-step event."""
    report = {
        "steps": 4,
        "stopped": True,
        "cuda": False,
        "events": [
            _event(3, "item", {2: 1, 3: 1, 4: 1}),
            _event(5, "factory", {2: 1, 3: 1, 4: 1}, ("randn on cpu",)),
            _event(7, "sync", {1: 1}),
            _event(9, "item", {2: 1, 4: 2}),
        ],
    }
    findings = [{"path": "t.py", "line": 3, "col": 1, "code": "TPL103", "name": "n", "message": "m"}]
    confirmed, unreported = confirm_findings(findings, report, "/p")
    assert confirmed[0]["status"] == "not-seen" and confirmed[0]["line_ran_steps"] == 3
    assert [(e["line"], e["kind"], e["status"], e["per_step"]) for e in unreported] == [
        (3, "item", "every-step", 1.0),
        (9, "item", "some-steps", 1.0),
    ]


def test_the_corpus_findings_are_current(tmp_path: Path) -> None:
    """benchmarks/confirm_findings.json is generated (the GPU machine cannot lint): regenerate it with
    `python -m benchmarks.confirm_corpus prepare` after a change to a case or to what a rule finds."""
    from benchmarks.confirm_corpus import FINDINGS, prepare

    fresh = tmp_path / "findings.json"
    assert prepare(fresh) == 0
    assert json.loads(fresh.read_text(encoding="utf-8")) == json.loads(FINDINGS.read_text(encoding="utf-8"))


def test_on_cuda_only_reads_of_device_tensors_and_host_factories_are_unreported() -> None:
    """A program that uses CUDA: .item() of a host tensor waits for nothing; of a CUDA tensor it syncs.
    A host factory there is a copy in waiting; on a CPU run it is not named."""
    events = [
        _event(3, "item", {2: 1, 3: 1}, ("on cpu",)),
        _event(4, "item", {2: 1, 3: 1}, ("on cuda",)),
        _event(5, "factory", {2: 1, 3: 1}, ("zeros on cpu",)),
        _event(6, "factory", {2: 1, 3: 1}, ("zeros on cuda",)),
    ]
    for cuda, lines in ((True, [4, 5]), (False, [3, 4])):
        report = {"steps": 3, "stopped": True, "cuda": cuda, "events": events}
        assert [e["line"] for e in confirm_findings([], report, "/p")[1]] == lines


def test_one_item_that_is_also_a_sync_counts_once_per_step() -> None:
    report = {
        "steps": 3,
        "stopped": True,
        "cuda": True,
        "events": [_event(3, "item", {2: 1, 3: 1}, ("on cuda",)), _event(3, "sync", {2: 1, 3: 1})],
    }
    findings = [{"path": "t.py", "line": 3, "col": 1, "code": "TPL107", "name": "n", "message": "m"}]
    confirmed, unreported = confirm_findings(findings, report, "/p")
    assert (confirmed[0]["status"], confirmed[0]["per_step"], unreported) == ("every-step", 1.0, [])

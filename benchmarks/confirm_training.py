"""`torchperf-lint confirm` on training scripts of the training corpus, with synthetic data: does each
finding happen at every step when the user's own script trains, and what did the run see that no
finding names?

    python -m benchmarks.confirm_training prepare     # here: copy, write the data, lint (needs libcst)
    python -m benchmarks.confirm_training run --out DIR [--device cuda] [--steps N] [--profile] [--only ...]

`prepare` copies the Python files of each chosen script's project (the folder the script lives in,
or its repository) from the training sources into .confirm_training/NAME/ (gitignored: it goes to a
GPU machine as carried files), writes the synthetic data files the script reads, lints the copy
(every rule on, JSON) and keeps the findings with the hash of the sources in
.confirm_training/findings.json. `run` needs neither libcst nor the training sources: it copies
each project to DIR/work/NAME, runs `torchperf-lint confirm --findings ... --project . -- python
SCRIPT ARGS` there (small model and batch arguments; a torchvision dataset replaced by an in-memory
stand-in through benchmarks/training_shims.py where the script needs one), and writes each JSON
report to DIR/confirm/NAME.json and the summary to DIR/confirm_training.md and .json: per script the
findings seen at every step, at some, not seen, and the events no finding names."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import training_shims
from .confirm_corpus import ROOT, Target, _confirm, _kept, _lint_json, _project_digest, _rows

FOLDER = ROOT / ".confirm_training"
FINDINGS = FOLDER / "findings.json"
# where the pinned training sources live on the machine that prepares (not needed by `run`)
SOURCES = (
    Path("/work/shared/training-corpus"),
    Path("/work/main/.ecosystem_cache/training-sources"),
)
LAUNCHER = ROOT / "benchmarks" / "training_shims.py"
STATUSES = ("every-step", "some-steps", "not-seen", "not-checked")


def _text(folder: str, names: dict[str, int]) -> Callable[[Path], None]:
    return lambda copy: training_shims.write_text_corpus(copy / folder, names)


def _tokens(copy: Path) -> None:
    training_shims.write_token_bins(copy / "data" / "synthetic", tokens=65536, vocab_size=256)


@dataclasses.dataclass(frozen=True)
class Script:
    """A training script to confirm: where it is, how it runs small, and what stands in for its data."""

    name: str
    repository: str  # owner+name, a folder of the training sources
    project: str  # the folder copied and linted, relative to the repository ("" the whole of it)
    script: str  # relative to the project
    args: tuple[str, ...]
    cpu: tuple[str, ...] | None  # the arguments for a CPU run; None: the script needs CUDA
    cuda: tuple[str, ...]
    shim: str  # a training_shims dataset stand-in, or "none"
    data: str  # what it reads, in words
    write_data: Callable[[Path], None] | None = None


NANOGPT_ARGS = (
    "--dataset=synthetic",
    "--compile=False",
    "--batch_size=8",
    "--block_size=64",
    "--n_layer=2",
    "--n_head=2",
    "--n_embd=64",
    "--gradient_accumulation_steps=1",
    "--eval_interval=100000",
    "--eval_iters=2",
    "--max_iters=1000",
    "--always_save_checkpoint=False",
)

# Each runs as its README runs it, made small (model, batch, workers); logging intervals are the
# script's defaults, so that confirm sees what a user's run does. Those that use CUDA come first (a
# run cut short by --budget loses the CPU-only ones).
SCRIPTS = (
    Script(
        "nanogpt",
        "karpathy+nanoGPT",
        "",
        "train.py",
        NANOGPT_ARGS,
        cpu=("--device=cpu", "--dtype=float32"),
        cuda=("--device=cuda", "--dtype=bfloat16"),
        shim="none",
        data="random uint16 tokens in data/synthetic/{train,val}.bin, meta.pkl vocab_size 256",
        write_data=_tokens,
    ),
    Script(
        "examples_imagenet",
        "pytorch+examples",
        "imagenet",
        "main.py",
        ("--dummy", "-a", "resnet18", "-b", "32", "-j", "4", "--epochs", "1"),
        cpu=("--no-accel",),
        cuda=(),
        shim="none",
        data="the script's own --dummy (torchvision FakeData, 224x224, 1000 classes)",
    ),
    Script(
        "pytorch_cifar100",
        "weiaicunzai+pytorch-cifar100",
        "",
        "train.py",
        ("-net", "resnet18", "-b", "64"),
        cpu=(),
        cuda=("-gpu",),
        shim="cifar100",
        data="SyntheticCIFAR100 for torchvision.datasets.CIFAR100",
    ),
    Script(
        "resnet_cifar10",
        "akamaster+pytorch_resnet_cifar10",
        "",
        "trainer.py",
        ("-a", "resnet20", "-b", "128", "-j", "2", "--epochs", "1", "--save-dir", "save_temp"),
        cpu=None,
        cuda=(),
        shim="cifar10",
        data="SyntheticCIFAR10 for torchvision.datasets.CIFAR10",
    ),
    Script(
        "simclr",
        "sthalles+SimCLR",
        "",
        "run.py",
        ("-dataset-name", "cifar10", "-a", "resnet18", "-b", "64", "-j", "2", "--epochs", "1"),
        cpu=("--disable-cuda",),
        cuda=(),
        shim="cifar10",
        data="SyntheticCIFAR10 for torchvision.datasets.CIFAR10",
    ),
    Script(
        "examples_mnist",
        "pytorch+examples",
        "mnist",
        "main.py",
        ("--epochs", "1"),
        cpu=("--no-accel",),
        cuda=(),
        shim="mnist",
        data="SyntheticMNIST for torchvision.datasets.MNIST",
    ),
    Script(
        "tutorial_cnn",
        "yunjey+pytorch-tutorial",
        "tutorials/02-intermediate/convolutional_neural_network",
        "main.py",
        (),
        cpu=(),
        cuda=(),
        shim="mnist",
        data="SyntheticMNIST for torchvision.datasets.MNIST",
    ),
    Script(
        "examples_word_language_model",
        "pytorch+examples",
        "word_language_model",
        "main.py",
        ("--data", "data/synthetic", "--epochs", "1"),
        cpu=(),
        cuda=("--accel",),
        shim="none",
        data="random text (1000-word vocabulary) in data/synthetic/{train,valid,test}.txt",
        write_data=_text("data/synthetic", {"train.txt": 40000, "valid.txt": 4000, "test.txt": 4000}),
    ),
    Script(
        "tutorial_language_model",
        "yunjey+pytorch-tutorial",
        "tutorials/02-intermediate/language_model",
        "main.py",
        (),
        cpu=(),
        cuda=(),
        shim="none",
        data="random text (1000-word vocabulary) in data/train.txt",
        write_data=_text("data", {"train.txt": 40000}),
    ),
    Script(
        "examples_regression",
        "pytorch+examples",
        "regression",
        "main.py",
        (),
        cpu=(),
        cuda=(),
        shim="none",
        data="none (the script draws its own batches; it computes on the CPU whatever the device)",
    ),
)


def _source(repository: str) -> Path:
    for base in SOURCES:
        if (base / repository).is_dir():
            return base / repository
    raise SystemExit(
        f"confirm_training: no training source {repository} under {', '.join(map(str, SOURCES))}"
    )


def _copy_project(script: Script, target: Path) -> int:
    """The project's Python files (and nothing else: the copy travels to the GPU machine); how many."""
    origin = _source(script.repository) / script.project
    if target.exists():
        shutil.rmtree(target)
    count = 0
    for file in sorted(origin.rglob("*.py")):
        destination = target / file.relative_to(origin)
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(file, destination)
        count += 1
    return count


def prepare(folder: Path = FOLDER, scripts: tuple[Script, ...] = SCRIPTS) -> int:
    """Copy each script's project, write its synthetic data, lint it; keep the findings and hashes."""
    folder.mkdir(parents=True, exist_ok=True)
    entries = {}
    for script in scripts:
        copy = folder / script.name
        files = _copy_project(script, copy)
        if script.write_data is not None:
            script.write_data(copy)
        found = _lint_json(".", copy)
        if found.returncode not in (0, 1):
            raise SystemExit(f"confirm_training: the lint of {copy} failed: {found.stderr.strip()[-300:]}")
        kept = _kept(found.stdout)
        entries[script.name] = {
            "source": _project_digest(script.name, folder),
            "files": files,
            "findings": kept,
        }
        print(f"{script.name}: {files} files, {len(kept)} findings")
    (folder / "findings.json").write_text(json.dumps(entries, indent=1) + "\n", encoding="utf-8")
    return 0


def command_of(script: Script, device: str, work: Path) -> list[str] | None:
    """The program confirm runs for this script on this device (None: the script needs CUDA)."""
    extra = script.cpu if device == "cpu" else script.cuda
    if extra is None:
        return None
    path = str(work / script.script)
    launcher = [] if script.shim == "none" else [str(LAUNCHER), script.shim]
    return [sys.executable, *launcher, path, *script.args, *extra]


def _summary(script: Script, outcome: dict[str, Any]) -> dict[str, Any]:
    entry: dict[str, Any] = {"script": script.name, "shim": script.shim, "data": script.data}
    if "error" in outcome:
        return {**entry, "error": outcome["error"]}
    report = outcome["report"]
    counts = Counter(finding["status"] for finding in report["findings"])
    seen = [f for f in report["findings"] if f["status"] in ("every-step", "some-steps")]
    ran = {_normalised(script.script)} | {
        _normalised(item["path"])
        for item in [*seen, *report["unreported"]] + [f for f in report["findings"] if "line_ran_steps" in f]
    }
    return {
        **entry,
        "steps": report["steps"],
        "steps_run": report["steps_run"],
        "step_kind": report["step_kind"],
        "ended": report["ended"],
        "cuda": report["cuda"],
        **{status: counts.get(status, 0) for status in STATUSES},
        "seen": [f"{f['code']} {f['path']}:{f['line']} {_how_often(f)}" for f in seen],
        "unreported": [
            f"{e['kind']} {e['path']}:{e['line']} {_how_often(e)} ({', '.join(e['details'])})"
            for e in report["unreported"]
        ],
        # the refutations worth reading: not seen in a file the run is known to have run (the script,
        # or a file where something was seen); those in the project's other files may never have run
        "not_seen": [
            f"{f['code']} {f['path']}:{f['line']}"
            + (f" (the line ran at {f['line_ran_steps']} steps)" if "line_ran_steps" in f else "")
            for f in report["findings"]
            if f["status"] == "not-seen" and _normalised(f["path"]) in ran
        ],
    }


def _normalised(path: str) -> str:
    return os.path.normpath(path)


def _how_often(entry: dict[str, Any]) -> str:
    """every-step x2/step, and with --profile the host time it took per step."""
    cost = f", {entry['seconds_per_step'] * 1e3:.3g} ms/step" if "seconds_per_step" in entry else ""
    return f"{entry['status']} x{entry['per_step']:g}/step{cost}"


def _markdown(summaries: list[dict[str, Any]], args: argparse.Namespace) -> str:
    lines = [
        f"# confirm on training scripts of the corpus ({args.device}, {args.steps} steps"
        f"{', --profile' if args.profile else ''})",
        "",
        "| script | data | steps | ended | every-step | some-steps | not-seen | not-checked | unreported |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for s in summaries:
        if "error" in s or "skipped" in s:
            lines.append(f"| {s['script']} | {s['data']} | {s.get('error') or s['skipped']} |{' |' * 6}")
            continue
        lines.append(
            f"| {s['script']} | {s['data']} | {s['steps']} of {s['steps_run']} ({s['step_kind']}) | "
            f"{s['ended']} | {s['every-step']} | {s['some-steps']} | {s['not-seen']} | {s['not-checked']} | "
            f"{len(s['unreported'])} |"
        )
    for s in summaries:
        if s.get("seen") or s.get("unreported") or s.get("not_seen"):
            lines += ["", f"## {s['script']}", ""]
            lines += [f"- seen: {line}" for line in s["seen"]]
            lines += [f"- unreported: {line}" for line in s["unreported"]]
            lines += [f"- not seen: {line}" for line in s["not_seen"]]
    return "\n".join(lines) + "\n"


def _write_summary(out: Path, summaries: list[dict[str, Any]], rows: list[dict[str, Any]], args: Any) -> str:
    text = _markdown(summaries, args)
    (out / "confirm_training.json").write_text(
        json.dumps({"summary": summaries, "rows": rows}, indent=1) + "\n", encoding="utf-8"
    )
    (out / "confirm_training.md").write_text(text, encoding="utf-8")
    return text


def run(args: argparse.Namespace) -> int:
    try:
        data = json.loads((Path(args.folder) / "findings.json").read_text(encoding="utf-8"))
    except OSError:
        raise SystemExit(
            "confirm_training: no .confirm_training/findings.json: run `prepare` first"
        ) from None
    wanted = {name.strip() for name in (args.only or "").split(",") if name.strip()}
    out = Path(args.out).resolve()
    reports = out / "confirm"
    reports.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + getattr(args, "budget", 1e9)
    summaries: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    for script in SCRIPTS:
        if wanted and script.name not in wanted:
            continue
        entry = {"script": script.name, "shim": script.shim, "data": script.data}
        copy = Path(args.folder) / script.name
        work = out / "work" / script.name
        program = command_of(script, args.device, work)
        left = int(deadline - time.monotonic())
        if script.name not in data or not copy.is_dir():
            summaries.append({**entry, "skipped": "not prepared: run `prepare`"})
        elif data[script.name]["source"] != _project_digest(script.name, Path(args.folder)):
            summaries.append({**entry, "skipped": "its findings are stale: run `prepare`"})
        elif program is None:
            summaries.append({**entry, "skipped": f"needs CUDA (run with --device {args.device})"})
        elif left < 10:
            summaries.append({**entry, "skipped": "the --budget was spent"})
        else:
            if work.exists():
                shutil.rmtree(work)
            shutil.copytree(copy, work)
            findings = out / "work" / f"{script.name}.findings.json"
            findings.write_text(json.dumps(data[script.name]["findings"]), encoding="utf-8")
            print(f"confirm_training: {script.name}: {' '.join(program[1:])}", file=sys.stderr, flush=True)
            target = Target(script.name, work, str(findings), ".", program, timeout=min(args.timeout, left))
            outcome = _confirm(target, reports, args)
            summaries.append(_summary(script, outcome))
            rows.extend(_rows(target, outcome, False))
            if not args.keep_work:
                shutil.rmtree(work, ignore_errors=True)  # checkpoints and logs the script wrote
        # after each script: a run cut short still leaves what it saw
        _write_summary(out, summaries, rows, args)
    print(_write_summary(out, summaries, rows, args))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.confirm_training", description=__doc__.split("\n\n")[0]
    )
    commands = parser.add_subparsers(dest="command", required=True)
    ready = commands.add_parser(
        "prepare", help="copy, write the synthetic data, lint into .confirm_training/"
    )
    ready.add_argument("--folder", default=str(FOLDER), help=argparse.SUPPRESS)
    running = commands.add_parser("run", help="confirm each script's findings by running it a few steps")
    running.add_argument("--out", required=True, help="where the reports and the summary go")
    running.add_argument("--device", choices=("cuda", "cpu"), default="cuda" if _cuda() else "cpu")
    running.add_argument("--steps", type=int, default=10)
    running.add_argument("--profile", action="store_true", help="host time per line (confirm --profile)")
    running.add_argument("--timeout", type=int, default=120, help="seconds per script")
    running.add_argument(
        "--budget", type=int, default=480, help="seconds for all the scripts: those left after it are skipped"
    )
    running.add_argument("--only", help="script names, comma separated")
    running.add_argument(
        "--keep-work", action="store_true", help="keep DIR/work/NAME (what the script wrote)"
    )
    running.add_argument("--folder", default=str(FOLDER), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.command == "prepare":
        return prepare(Path(args.folder))
    return run(args)


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


if __name__ == "__main__":
    sys.exit(main())

"""What the project pass handed each module, kept under the cache directory (project/store.py,
KnownFacts): a run over an unchanged project builds no pass and hands out the same facts; an
edit to any module, a module added or removed, or a module that changes during the run, never
hands out facts of another state of the project. The editor (the library API) reads the summaries
the command line kept, and writes none."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from torchperf_lint import api
from torchperf_lint.analysis.entry import EntryFacts, ExternalReason
from torchperf_lint.api import lint_source
from torchperf_lint.cli import main
from torchperf_lint.project import store, summary
from torchperf_lint.project.store import Projects, Summaries
from torchperf_lint.settings import Settings

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "project"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns(".torchperf_lint_cache", "__pycache__"))
    return root


def _facts(projects: Projects, root: Path) -> dict[str, EntryFacts]:
    """Every module's facts, as a run over the whole project asks for them."""
    return {
        path.relative_to(root).as_posix(): projects.facts_for(str(path))
        for path in sorted(root.rglob("*.py"))
    }


def _saved_run(root: Path, cache: Path) -> dict[str, EntryFacts]:
    projects = Projects(Settings(), str(cache))
    facts = _facts(projects, root)
    projects.save()
    return facts


def _no_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*args: object) -> None:
        raise AssertionError("the project pass ran")

    monkeypatch.setattr(Projects, "_build", fail)


def _kept_files(cache: Path) -> list[Path]:
    return sorted(cache.rglob("projects/*/*.json"))


def test_an_unchanged_project_hands_out_the_kept_facts_without_a_pass(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    first = _saved_run(project, cache)
    assert first["detector/kernels.py"].hot_functions  # hot only through other modules
    assert len(_kept_files(cache)) == 1
    _no_pass(monkeypatch)
    again = _facts(Projects(Settings(), str(cache)), project)
    assert again == first
    assert {name: facts.digest() for name, facts in again.items()} == {
        name: facts.digest() for name, facts in first.items()
    }


def test_another_build_of_the_tool_runs_the_pass_again(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A developer's edit to the analysis changes the tool's identity: nothing it kept is used."""
    cache = tmp_path / "cache"
    _saved_run(project, cache)
    monkeypatch.setattr(store, "tool_identity", lambda: "0.1.0+edited")
    ran = []
    build = Projects._build
    monkeypatch.setattr(Projects, "_build", lambda self, *args: ran.append(1) or build(self, *args))
    _facts(Projects(Settings(), str(cache)), project)
    assert ran


def _stop_calling_shuffle(root: Path) -> None:
    net = root / "detector" / "models" / "net.py"
    net.write_text(
        net.read_text().replace(
            "x = shuffle_channels(self.drop(self.body(x)))", "x = self.drop(self.body(x))"
        )
    )


def _remove_the_caller(root: Path) -> None:
    (root / "detector" / "models" / "net.py").unlink()


def _add_a_caller(root: Path) -> None:
    (root / "detector" / "heads.py").write_text(
        "from torch import nn\n\nfrom .utils import record\n\n\n"
        "class Head(nn.Module):\n    def forward(self, x):\n        return record(x, ['a'])\n"
    )


@pytest.mark.parametrize("change", [_stop_calling_shuffle, _remove_the_caller, _add_a_caller])
def test_a_changed_project_runs_the_pass_again(project: Path, tmp_path: Path, change) -> None:
    cache = tmp_path / "cache"
    before = _saved_run(project, cache)
    change(project)
    truth = _facts(Projects(Settings()), project)  # no cache: the pass over the project as it is now
    assert _saved_run(project, cache) == truth
    assert {k: v for k, v in before.items() if k in truth} != {k: v for k, v in truth.items() if k in before}
    assert _facts(Projects(Settings(), str(cache)), project) == truth  # and what it kept is the new state


def test_a_module_edited_during_the_run_leaves_its_project_unsaved(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The key hashes the bytes read before the pass; the pass reads them again: an editor saving
    in between would otherwise keep facts of the new bytes under the old bytes' key."""
    cache = tmp_path / "cache"
    read = Summaries.of_file

    def edited_first(self: Summaries, path: Path):  # type: ignore[no-untyped-def]
        if path.name == "net.py" and "shuffle_channels(self.drop" in path.read_text():
            _stop_calling_shuffle(project)
        return read(self, path)

    monkeypatch.setattr(Summaries, "of_file", edited_first)
    _saved_run(project, cache)
    assert _kept_files(cache) == []
    monkeypatch.undo()
    assert _saved_run(project, cache) == _facts(Projects(Settings()), project)


@pytest.mark.parametrize(
    "spoil",
    [
        lambda kept: "not json",
        lambda kept: json.dumps({**kept, "modules": []}),
        lambda kept: json.dumps(
            {
                **kept,
                "modules": {
                    name: {**facts, "module_classes": [True]} for name, facts in kept["modules"].items()
                },
            }
        ),
        lambda kept: json.dumps({**kept, "modules": {name: {} for name in kept["modules"]}}),
    ],
    ids=["not-json", "modules-not-a-table", "an-index-not-an-int", "fields-missing"],
)
def test_a_spoiled_facts_file_is_a_miss(project: Path, tmp_path: Path, spoil) -> None:
    cache = tmp_path / "cache"
    truth = _saved_run(project, cache)
    [kept] = _kept_files(cache)
    kept.write_text(spoil(json.loads(kept.read_text())))
    assert _facts(Projects(Settings(), str(cache)), project) == truth


_ints = st.integers(min_value=0, max_value=10_000)
_names = st.text(min_size=1, max_size=12)
_facts_strategy = st.builds(
    EntryFacts,
    module_classes=st.frozensets(_ints),
    hot_functions=st.lists(st.tuples(_ints, st.builds(ExternalReason, _names, st.text()))).map(tuple),
    entry_points=st.lists(_ints).map(tuple),
    step_loops=st.frozensets(_ints),
    no_grad_callables=st.frozensets(_names),
    grad_free_functions=st.frozensets(_ints),
    host_parameters=st.lists(st.tuples(_ints, st.frozensets(_names))).map(tuple),
    device_parameters=st.lists(st.tuples(_ints, st.frozensets(_names))).map(tuple),
    host_tensor_parameters=st.lists(st.tuples(_ints, st.frozensets(_names))).map(tuple),
    moved_results=st.frozensets(_ints),
    runs_on_cuda=st.none() | st.text(),
    cuda_helper=st.none() | st.text(),
    cuda_default=st.none() | st.text(),
    display_name=st.text(),
    counts=st.tuples(_ints, _ints, _ints),
    host_data_builders=st.frozensets(_names),
    registry_convnets=st.frozensets(_names),
    project_classes=st.frozensets(_names),
    keyword_items=st.lists(st.tuples(_ints, st.lists(st.tuples(_names, _names)).map(tuple))).map(tuple),
    encoder_wrappers=st.lists(st.tuples(_names, _names, st.integers(min_value=-1, max_value=10))).map(tuple),
    optimizer_names=st.lists(st.tuples(st.integers(min_value=-1, max_value=10), st.frozensets(_names))).map(
        tuple
    ),
    item_generators=st.lists(st.tuples(_ints, _names)).map(tuple),
    precision_callers=st.lists(st.tuples(_ints, _names)).map(tuple),
)


@given(_facts_strategy)
def test_facts_read_back_from_json_are_the_facts_with_their_digest(facts: EntryFacts) -> None:
    data = json.loads(json.dumps(facts.to_json()))
    read = EntryFacts.from_json(data)
    assert read == facts
    assert read.digest() == facts.digest() == dataclasses.replace(facts).digest()  # read, kept, afresh


_SUMMARISED = """
import argparse
import numpy as np
import torch
import resnet
from torch.utils.data import DataLoader

parser = argparse.ArgumentParser()
parser.add_argument("--arch", default="resnet32")

def load(path, batch_size):
    ids = torch.LongTensor(len(open(path).read()))
    return ids.view(batch_size, -1)

def loaders(data):
    train_loader = DataLoader(data, num_workers=2)
    return train_loader, data

def log_every(iterable, header):
    for obj in iterable:
        yield obj

def main(data):
    args = parser.parse_args()
    torch.set_float32_matmul_precision("high")
    model = resnet.__dict__[args.arch]().cuda()
    train_loader, _ = loaders(data)
    for epoch in range(3):
        for x in log_every(train_loader, "epoch"):
            model(x.cuda()).sum().backward()
"""


def test_a_summary_read_back_from_json_is_the_summary() -> None:
    """What the on-disk cache keeps of a module is what the pass read (every field, new ones too)."""
    read = summary.summarize(_SUMMARISED)
    assert read is not None and read.registries == ["resnet"]
    assert [f.returns_loader_items for f in read.functions if f.name == "loaders"] == [[16, 0]]
    # this session's fields: a precision decision named, a generator of its argument's items
    assert read.mentions_precision and [f.yields_items_of for f in read.functions] == ["", "", "iterable", ""]
    assert [lp.through for lp in read.loops if lp.through] == [
        ["global", "log_every", {"0": ["train_loader", "local"]}]
    ]
    assert summary.Summary.from_json(json.loads(json.dumps(read.to_json()))) == read


# -- the editor (the library API the language server lints through) ----------------------------
def _counting_summaries(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Fresh per-process state for the API, and the sources `summarize` is asked to read."""
    monkeypatch.setattr(api, "_projects", {})
    monkeypatch.setattr(api, "_summaries", {})
    read: list[str] = []
    original = summary.summarize

    def counting(source: str):  # type: ignore[no-untyped-def]
        read.append(source)
        return original(source)

    monkeypatch.setattr(summary, "summarize", counting)
    return read


def _files_under(directory: Path) -> set[Path]:
    return set(directory.rglob("*")) if directory.exists() else set()


def test_the_editor_reads_the_summaries_the_command_line_kept_and_writes_none(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("TORCHPERF_LINT_NO_CACHE")
    main(["--exit-zero", str(project)])  # keeps the summaries at the project root
    capsys.readouterr()
    kept = _files_under(project / ".torchperf_lint_cache")
    read = _counting_summaries(monkeypatch)
    kernels = project / "detector" / "kernels.py"
    found = lint_source(kernels.read_text(), str(kernels), select=["TPL105"])
    assert [f.line for f in found] == [3]  # hot through three other modules
    assert read == []  # every module's summary came from the kept cache
    assert _files_under(project / ".torchperf_lint_cache") == kept


def test_without_a_kept_cache_the_editor_reads_every_module_once_and_writes_nothing(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TORCHPERF_LINT_NO_CACHE")
    read = _counting_summaries(monkeypatch)
    kernels = project / "detector" / "kernels.py"
    lint_source(kernels.read_text(), str(kernels), select=["TPL105"])
    modules = len(list(project.rglob("*.py")))
    assert len(read) == modules
    api.forget_project_files()  # an edited config: the passes go, the summaries stay
    lint_source(kernels.read_text() + "\n", str(kernels), select=["TPL105"])
    assert len(read) == modules + 1  # only the edited buffer is read again
    assert not (project / ".torchperf_lint_cache").exists()


def test_under_no_cache_the_editor_reads_no_kept_summaries(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("TORCHPERF_LINT_NO_CACHE")
    main(["--exit-zero", str(project)])
    capsys.readouterr()
    monkeypatch.setenv("TORCHPERF_LINT_NO_CACHE", "1")
    read = _counting_summaries(monkeypatch)
    kernels = project / "detector" / "kernels.py"
    lint_source(kernels.read_text(), str(kernels), select=["TPL105"])
    assert len(read) == len(list(project.rglob("*.py")))


@pytest.mark.parametrize("turned_off", [False, True], ids=["cache", "TORCHPERF_LINT_NO_CACHE"])
def test_flake8_keeps_summaries_where_the_command_line_does_unless_told_not_to(
    project: Path, monkeypatch: pytest.MonkeyPatch, turned_off: bool
) -> None:
    if not turned_off:
        monkeypatch.delenv("TORCHPERF_LINT_NO_CACHE")
    kernels = project / "detector" / "kernels.py"
    done = subprocess.run(
        [sys.executable, "-m", "flake8", "--isolated", "--select", "TPL", str(kernels)],
        capture_output=True,
        text=True,
        cwd=project,
        check=False,
    )
    assert done.returncode == 1 and "TPL105" in done.stdout, done.stderr
    kept = list((project / ".torchperf_lint_cache").rglob("summaries/*/*.json"))
    assert bool(kept) is not turned_off

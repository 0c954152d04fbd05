"""--jobs and the result cache, through the command line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from torchperf_lint.cli import main

pytestmark = pytest.mark.usefixtures("precision_off_rules_on")  # conftest.PRECISION_OFF

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _run(capsys, *args: str) -> tuple[int, str]:
    code = main(list(args))
    return code, capsys.readouterr().out


@pytest.fixture
def project(tmp_path: Path) -> Path:
    for example in sorted(EXAMPLES.glob("*.py")):
        shutil.copy(example, tmp_path / example.name)
    return tmp_path


def test_parallel_output_equals_single_process_output(project: Path, capsys) -> None:
    one = _run(capsys, "--jobs", "1", "--format", "json", "--show-context", str(project))
    two = _run(capsys, "--jobs", "2", "--format", "json", "--show-context", str(project))
    assert one == two
    assert one[0] == 1 and len(json.loads(one[1])) > 10


def test_warm_run_reports_what_the_cold_run_did(project: Path, capsys, monkeypatch, tmp_path_factory) -> None:
    monkeypatch.delenv("TORCHPERF_LINT_NO_CACHE")
    cache = tmp_path_factory.mktemp("cache")
    cold = _run(capsys, "--cache-dir", str(cache), "--jobs", "1", str(project))
    entries = sorted(p.name for p in cache.rglob("*.json"))
    summaries = [p for p in cache.rglob("*.json") if "summaries" in p.parts]
    projects = [p for p in cache.rglob("*.json") if "projects" in p.parts]
    # one findings entry and one project summary per module, and the project's facts
    assert len(summaries) == len(list(project.glob("*.py")))
    assert len(projects) == 1
    assert len(entries) == 2 * len(list(project.glob("*.py"))) + 1
    warm = _run(capsys, "--cache-dir", str(cache), "--jobs", "1", str(project))
    assert warm == cold
    assert "[*]" in warm[1]  # fixability survives the cache
    assert sorted(p.name for p in cache.rglob("*.json")) == entries  # all hits, nothing new


def test_changed_file_misses_the_cache(project: Path, capsys, monkeypatch, tmp_path_factory) -> None:
    monkeypatch.delenv("TORCHPERF_LINT_NO_CACHE")
    cache = tmp_path_factory.mktemp("cache")
    target = project / "slow_training.py"
    first = _run(capsys, "--cache-dir", str(cache), str(target))
    target.write_text(target.read_text() + "\nEXTRA = torch.zeros(3)\n")
    second = _run(capsys, "--cache-dir", str(cache), str(target))
    assert first == second  # the new line is cold, so the findings are the same...
    findings = [p for p in cache.rglob("*.json") if not {"summaries", "projects"} & set(p.parts)]
    assert len(findings) == 2  # ...but they were computed again


def test_declared_torch_version_is_part_of_the_cache_key(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.delenv("TORCHPERF_LINT_NO_CACHE")
    source = "import torch\n\ndef train(model, opt, loader):\n    for x in loader:\n        opt.zero_grad()\n"
    (tmp_path / "train.py").write_text(source)
    (tmp_path / "requirements.txt").write_text("torch>=2.1\n")
    cache = str(tmp_path / "cache")
    assert _run(capsys, "--cache-dir", cache, str(tmp_path / "train.py"))[0] == 0
    (tmp_path / "requirements.txt").write_text("torch>=1.12,<2\n")
    code, out = _run(capsys, "--cache-dir", cache, str(tmp_path / "train.py"))
    assert code == 1 and "TPL301" in out


def test_no_cache_writes_nothing(project: Path, capsys, monkeypatch, tmp_path_factory) -> None:
    monkeypatch.delenv("TORCHPERF_LINT_NO_CACHE")
    cache = tmp_path_factory.mktemp("cache")
    _run(capsys, "--no-cache", "--cache-dir", str(cache), str(project))
    assert list(cache.iterdir()) == []


def test_jobs_must_be_positive(capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--jobs", "0", "."])
    assert exit_info.value.code == 2

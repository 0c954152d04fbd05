"""The target torch version: given on the command line or config, else read from the linted
project's own torch requirement, else the newest."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchperf_lint.analysis.torch_version import (
    declared_version,
    lowest_admitted,
    target_version,
    torch_requirement,
)
from torchperf_lint.api import lint_source
from torchperf_lint.config import Settings

NEWEST = "no torch version given or declared: assuming the newest"


@pytest.mark.parametrize(
    "specifier, lowest",
    [
        (">=1.13,<2.1", (1, 13)),
        ("==1.12.1", (1, 12)),
        ("~=2.0", (2, 0)),
        ("==2.*", (2, 0)),
        (">1.12", (1, 12)),
        ("(>=1.8)", (1, 8)),
        ("==1.13.1+cu117", (1, 13)),
        ("^1.13", (1, 13)),  # poetry caret
        ("~1.13", (1, 13)),  # poetry tilde
        ("1.13.1", (1, 13)),  # poetry exact
        ("<2", (1, 0)),  # an upper bound alone admits every 1.x release
        ("<=2.1", (1, 0)),
        ("", None),  # unpinned: the newest is installed
        ("*", None),
        ("!=2.0.1", None),
    ],
)
def test_lowest_admitted_version_of_common_specifiers(specifier: str, lowest: object) -> None:
    assert lowest_admitted(specifier) == (lowest, True)


def test_unreadable_specifier_is_reported_as_unreadable() -> None:
    assert lowest_admitted(">=1.13 || ^2.0")[1] is False


@pytest.mark.parametrize(
    "line, specifier",
    [
        ("torch>=1.13", ">=1.13"),
        ("Torch >= 1.9", ">= 1.9"),
        ("torch[opt-einsum]>=2.1; python_version > '3.8'", ">=2.1"),
        ("torch==1.13.1 --hash=sha256:0123abcd", "==1.13.1"),
        ("torch==1.13.1 \\", "==1.13.1"),
        ("torch  # latest", ""),
        ("torch @ https://download.pytorch.org/whl/torch-2.1.0.whl", ""),
    ],
)
def test_torch_requirement_lines_give_their_specifier(line: str, specifier: str) -> None:
    assert torch_requirement(line) == specifier


@pytest.mark.parametrize(
    "line", ["torchvision>=0.15", "torch-tb-profiler", "# torch>=1.0", "pytorch-lightning"]
)
def test_other_packages_and_comments_are_not_torch(line: str) -> None:
    assert torch_requirement(line) is None


def _file_in(project: Path, relative: str = "src/pkg/train.py") -> str:
    path = project / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("import torch\n")
    return str(path)


def test_given_version_wins_over_the_project(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text("torch==1.12\n")
    found = target_version(_file_in(tmp_path), (2, 1), "--torch-version 2.1")
    assert (found.version, found.source) == ((2, 1), "--torch-version 2.1")


def test_requirements_txt_of_the_project_root(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text("numpy\ntorch>=1.13,<2.1  # pinned for CUDA 11\n")
    found = target_version(_file_in(tmp_path), None, NEWEST)
    assert found.version == (1, 13)
    assert found.source == "requirements.txt (`torch>=1.13,<2.1`)"


def test_pyproject_project_dependencies_come_before_requirements(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\ndependencies = ["torch~=1.11"]\n')
    (tmp_path / "requirements-dev.txt").write_text("torch==2.1\n")
    found = target_version(_file_in(tmp_path), None, NEWEST)
    assert found.version == (1, 11)
    assert found.source.startswith("pyproject.toml")


def test_simple_poetry_dependency(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.poetry.dependencies]\npython = "^3.9"\ntorch = {version = "^1.10", source = "pytorch"}\n'
    )
    assert target_version(_file_in(tmp_path), None, NEWEST).version == (1, 10)


def test_setup_cfg_install_requires(tmp_path: Path) -> None:
    (tmp_path / "setup.cfg").write_text("[options]\ninstall_requires =\n    numpy\n    torch<2\n")
    assert target_version(_file_in(tmp_path), None, NEWEST).version == (1, 0)


def test_unpinned_torch_targets_the_newest_and_says_why(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text("torch\n")
    found = target_version(_file_in(tmp_path), None, NEWEST)
    assert found.version is None
    assert "sets no lower bound" in found.source


def test_nearest_project_root_decides_even_without_torch(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text("torch==1.12\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "pyproject.toml").write_text('[project]\nname = "sub"\ndependencies = ["numpy"]\n')
    assert target_version(_file_in(tmp_path / "sub"), None, NEWEST).version is None


def test_extras_do_not_count_as_the_requirement(tmp_path: Path) -> None:
    (tmp_path / "setup.cfg").write_text("[options.extras_require]\ntest =\n    torch==1.12\n")
    assert target_version(_file_in(tmp_path), None, NEWEST).version is None


def test_source_text_that_is_not_a_file_has_no_project() -> None:
    found = target_version("<string>", None, NEWEST)
    assert (found.version, found.source) == (None, NEWEST)


def test_files_of_one_directory_share_the_cached_answer(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text("torch==1.12\n")
    first = _file_in(tmp_path, "a.py")
    second = _file_in(tmp_path, "b.py")
    target_version(first, None, NEWEST)
    hits = declared_version.cache_info().hits
    assert target_version(second, None, NEWEST).version == (1, 12)
    assert declared_version.cache_info().hits == hits + 1


PLAIN_ZERO_GRAD = """\
import torch

def train(model, loader, optimizer):
    for x, y in loader:
        optimizer.zero_grad()
        model(x, y).backward()
        optimizer.step()
"""


def test_plain_zero_grad_is_flagged_for_a_project_on_torch_1(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text("torch==1.12.1\n")
    path = _file_in(tmp_path)
    findings = lint_source(PLAIN_ZERO_GRAD, path=path, select=["TPL301"])
    assert [(f.line, f.code) for f in findings] == [(5, "TPL301")]
    assert "on torch 1.12" in findings[0].message
    assert findings[0].context == (
        "in loop over loader at line 4; torch 1.12 from requirements.txt (`torch==1.12.1`)"
    )


def test_plain_zero_grad_is_silent_for_a_project_on_torch_2(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text("torch>=2.0\n")
    assert lint_source(PLAIN_ZERO_GRAD, path=_file_in(tmp_path), select=["TPL301"]) == []


def test_given_version_reaches_the_rule_and_its_context() -> None:
    settings = Settings(torch_version=(1, 13), torch_version_source="--torch-version 1.13")
    findings = lint_source(PLAIN_ZERO_GRAD, path="train.py", settings=settings, select=["TPL301"])
    assert [f.context for f in findings] == [
        "in loop over loader at line 4; torch 1.13 from --torch-version 1.13"
    ]

"""The target torch version: given on the command line or config, else read from the linted
project's own torch requirement, else the newest."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from torchperf_lint.analysis.torch_version import (
    admitted_range,
    conda_torch_specifier,
    declared_version,
    lowest_admitted,
    target_version,
    torch_requirement,
)
from torchperf_lint.api import fix_source, lint_source
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


# -- the oldest supported torch and the runtime's upper bound --------------------------------


@pytest.mark.parametrize(
    "specifier, oldest, below",
    [
        (">=1.8", (1, 8), None),  # a lower bound: the runtime is the newest
        (">=1.13,<2.1", (1, 13), (2, 1)),
        ("==1.12.1", (1, 12), (1, 13)),
        ("==2.*", (2, 0), (3, 0)),
        ("~=1.13", (1, 13), (2, 0)),
        ("~=1.13.1", (1, 13), (1, 14)),
        ("^1.10", (1, 10), (2, 0)),  # poetry caret
        ("~1.13", (1, 13), (1, 14)),  # poetry tilde
        ("<2", (1, 0), (2, 0)),
        ("<=1.13", (1, 0), (1, 14)),
        ("<1.13.1", (1, 0), (1, 14)),  # 1.13.0 is admitted
        (">=1.10.1, < 1.13.0", (1, 10), (1, 13)),
        ("!=2.0.1", None, None),
    ],
)
def test_oldest_supported_and_runtime_bound_of_a_specifier(
    specifier: str, oldest: object, below: object
) -> None:
    assert admitted_range(specifier) == (oldest, below, True)


def test_given_version_is_the_oldest_and_the_runtime() -> None:
    found = target_version("<string>", (1, 13), "--torch-version 1.13")
    assert (found.version, found.below) == ((1, 13), (1, 14))


def test_a_lower_bound_alone_does_not_make_zero_grad_old(tmp_path: Path) -> None:
    """`torch>=1.8` is the oldest torch supported; the runtime is the newest, where
    set_to_none=True is already the default."""
    (tmp_path / "requirements.txt").write_text("torch>=1.8\n")
    assert lint_source(PLAIN_ZERO_GRAD, path=_file_in(tmp_path), select=["TPL301"]) == []


def test_zero_grad_on_a_range_below_2_gets_no_fix_when_the_oldest_lacks_set_to_none(
    tmp_path: Path,
) -> None:
    (tmp_path / "requirements.txt").write_text("torch>=1.4,<2\n")
    findings = lint_source(PLAIN_ZERO_GRAD, path=_file_in(tmp_path), select=["TPL301"])
    assert [f.code for f in findings] == ["TPL301"]
    assert findings[0].fix is None
    assert "on torch older than 2.0" in findings[0].message
    assert "needs torch 1.7; the project supports torch 1.4" in findings[0].message


def test_zero_grad_is_silent_where_set_to_none_does_not_exist(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text("torch==1.4.0\n")
    assert lint_source(PLAIN_ZERO_GRAD, path=_file_in(tmp_path), select=["TPL301"]) == []


def test_given_version_with_set_to_none_gets_the_fix() -> None:
    settings = Settings(torch_version=(1, 13), torch_version_source="--torch-version 1.13")
    findings = lint_source(PLAIN_ZERO_GRAD, path="train.py", settings=settings, select=["TPL301"])
    assert [f.fix is not None for f in findings] == [True]


OPTIMIZERS = """\
import torch

def build(model):
    model.cuda()
    adam = torch.optim.Adam(model.parameters())
    adamw = torch.optim.AdamW(model.parameters())
    sgd = torch.optim.SGD(model.parameters(), lr=0.1)
    return adam, adamw, sgd
"""


@pytest.mark.parametrize(
    "requirement, fixed, needs",
    [
        ("torch>=1.8", [], {"Adam": "1.13", "AdamW": "2.0", "SGD": "2.3"}),
        ("torch>=1.13", ["Adam"], {"AdamW": "2.0", "SGD": "2.3"}),
        ("torch>=2.3", ["Adam", "AdamW", "SGD"], {}),
    ],
)
def test_fused_is_written_only_for_optimizers_whose_oldest_supported_torch_has_it(
    tmp_path: Path, requirement: str, fixed: list[str], needs: dict[str, str]
) -> None:
    (tmp_path / "requirements.txt").write_text(requirement + "\n")
    findings = lint_source(OPTIMIZERS, path=_file_in(tmp_path), select=["TPL702"])
    names = {f.message.split("torch.optim.")[1].split(" ")[0]: f for f in findings}
    assert sorted(names) == ["Adam", "AdamW", "SGD"]
    assert sorted(name for name, f in names.items() if f.fix is not None) == fixed
    for name, version in needs.items():
        assert f"needs torch {version}" in names[name].message


def test_fused_is_not_advised_where_the_runtime_cannot_have_it(tmp_path: Path) -> None:
    """torch 1.12 has no fused kernel for them, and its default is the for-loop: foreach=True."""
    (tmp_path / "requirements.txt").write_text("torch==1.12.1\n")
    findings = lint_source(OPTIMIZERS, path=_file_in(tmp_path), select=["TPL702"])
    assert [f.message.split(" ")[0] for f in findings] == [
        "torch.optim.Adam",
        "torch.optim.AdamW",
        "torch.optim.SGD",
    ]
    assert all("fused" not in f.message for f in findings)
    assert all(
        f.message.endswith(
            "updates one parameter at a time (the default before torch 2.0); pass foreach=True to run it as "
            "multi-tensor kernels (results can differ in the last bits)"
        )
        for f in findings
    )
    fixed = fix_source(OPTIMIZERS, path=_file_in(tmp_path), unsafe=True, select=["TPL702"])
    assert fixed.count("foreach=True") == 3


@pytest.mark.parametrize(
    "requirement, expected",
    [
        # runtime 1.12, oldest 1.10: the flag exists where it runs, but a fix may not write it
        ("torch>=1.10.1, <1.13.0", "pass foreach=True (needs torch 1.12; the project supports torch 1.10)"),
        # torch 1.13 has Adam's fused kernel; its default is still the for-loop
        ("torch==1.13.1", "pass fused=True"),
    ],
)
def test_a_default_optimizer_before_torch_2_updates_one_parameter_at_a_time(
    tmp_path: Path, requirement: str, expected: str
) -> None:
    (tmp_path / "requirements.txt").write_text(requirement + "\n")
    (adam, *_) = lint_source(OPTIMIZERS, path=_file_in(tmp_path), select=["TPL702"])
    assert adam.message.startswith(
        "torch.optim.Adam updates one parameter at a time (the default before torch 2.0)"
    )
    assert expected in adam.message


@pytest.mark.parametrize("requirement", ["torch==1.11.0", "torch==2.0.1", "torch>=2.0,<2.3"])
def test_no_foreach_advice_without_the_flag_or_after_it_became_the_default(
    tmp_path: Path, requirement: str
) -> None:
    """1.11 has no foreach= flag; from 2.0 the default is multi-tensor, so SGD before 2.3 (no fused
    kernel) is left alone."""
    (tmp_path / "requirements.txt").write_text(requirement + "\n")
    findings = lint_source(OPTIMIZERS, path=_file_in(tmp_path), select=["TPL702"])
    assert all("foreach" not in f.message for f in findings)
    assert "torch.optim.SGD" not in " ".join(f.message for f in findings)


FP32_TRAINING = """\
import torch

def train(model, loader, optimizer):
    model.cuda()
    for x, y in loader:
        loss = model(x.cuda(), y.cuda())
        loss.backward()
        optimizer.step()
"""


def test_matmul_precision_fix_needs_torch_1_12(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text("torch>=1.8\n")
    findings = lint_source(FP32_TRAINING, path=_file_in(tmp_path), select=["TPL701"])
    assert [(f.code, f.fix) for f in findings] == [("TPL701", None)]
    assert "needs torch 1.12; the project supports torch 1.8" in findings[0].message


def test_fp32_training_is_silent_where_tf32_matmuls_were_the_default(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text("torch==1.11\n")
    assert lint_source(FP32_TRAINING, path=_file_in(tmp_path), select=["TPL701"]) == []


ATTENTION = """\
import torch
from torch import nn

class Attention(nn.Module):
    def forward(self, q, k, v):
        att = (q @ k.transpose(-2, -1)).softmax(dim=-1)
        return att @ v
"""


def test_attention_on_an_old_oldest_torch_names_the_version_and_writes_no_fix(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text("torch>=1.8\n")
    findings = lint_source(ATTENTION, path=_file_in(tmp_path), select=["TPL306"])
    assert [(f.code, f.fix) for f in findings] == [("TPL306", None)]
    assert "needs torch 2.0; the project supports torch 1.8" in findings[0].message


RELOADED_LOADER = """\
import torch
from torch.utils.data import DataLoader

def train(model, dataset, optimizer, epochs):
    loader = DataLoader(dataset, batch_size=64, num_workers=8, pin_memory=True)
    for epoch in range(epochs):
        for x, y in loader:
            model(x.cuda(), y.cuda()).backward()
            optimizer.step()
"""


def test_persistent_workers_fix_needs_torch_1_7(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text("torch>=1.4\n")
    findings = lint_source(RELOADED_LOADER, path=_file_in(tmp_path), select=["TPL503"])
    assert [(f.code, f.fix) for f in findings] == [("TPL503", None)]
    assert "needs torch 1.7" in findings[0].message


def test_a_torch_1_8_project_gets_no_newer_api_from_any_fix(tmp_path: Path) -> None:
    """The acceptance check of issue 25: `--fix --unsafe-fixes` with every rule on writes no
    API that torch 1.8 lacks."""
    (tmp_path / "requirements.txt").write_text("torch>=1.8\n")
    sources = {
        "optim.py": OPTIMIZERS,
        "train.py": FP32_TRAINING,
        "attention.py": ATTENTION,
        "data.py": RELOADED_LOADER,
        "loop.py": PLAIN_ZERO_GRAD,
    }
    for name, source in sources.items():
        (tmp_path / name).write_text(source)
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "torchperf_lint",
            "--no-cache",
            "--extend-select",
            "ALL",
            "--fix",
            "--unsafe-fixes",
            "--exit-zero",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "TPL70" in run.stdout  # the findings are still reported
    fixed = "".join((tmp_path / name).read_text() for name in sources)
    # persistent_workers (1.7) and set_to_none (1.7) exist in 1.8: only newer APIs are barred
    for newer in ("fused=", "set_float32_matmul_precision", "scaled_dot_product_attention", "_foreach_lerp_"):
        assert newer not in fixed, newer


_LEGACY_SCRIPT = """\
import torch
{extra}

model = torch.nn.LSTM(300, 300).cuda()
optimizer = torch.optim.Adam(model.parameters())
for batch in loader:
    loss = model(batch.cuda())[0].sum()
    loss.backward()
    optimizer.step()
"""


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ("", ["TPL701", "TPL702"]),
        # torchtext 0.12, released with torch 1.11, removed torchtext.legacy: the script runs on
        # torch 1.10 or older, where matmuls use TF32 by default and Adam has no fused kernel
        ("from torchtext.legacy import data", []),
        ("import torchtext.legacy.datasets as datasets", []),
    ],
)
def test_an_import_of_a_removed_module_bounds_the_runtime(tmp_path: Path, extra: str, expected: list) -> None:
    (tmp_path / "requirements.txt").write_text("torch\ntorchtext\n")
    script = tmp_path / "train.py"
    script.write_text(_LEGACY_SCRIPT.format(extra=extra))
    found = lint_source(script.read_text(), str(script), select=["TPL701", "TPL702"])
    assert sorted(f.code for f in found) == expected


@pytest.mark.parametrize("requirement", ["torch<2.6", "torch>=1.8,<2.6", "torch>=1.13,<2.1"])
def test_an_upper_bound_above_2_0_does_not_make_zero_grad_old(tmp_path: Path, requirement: str) -> None:
    """The runtime is the newest release the requirement admits (2.5, 2.0): set_to_none=True is
    already the default there."""
    (tmp_path / "requirements.txt").write_text(requirement + "\n")
    assert lint_source(PLAIN_ZERO_GRAD, path=_file_in(tmp_path), select=["TPL301"]) == []


def test_an_upper_bound_at_2_0_makes_zero_grad_old(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text("torch<2\n")
    findings = lint_source(PLAIN_ZERO_GRAD, path=_file_in(tmp_path), select=["TPL301"])
    assert [f.code for f in findings] == ["TPL301"]
    assert "on torch older than 2.0" in findings[0].message


def test_a_bound_read_from_the_imports_alone_does_not_make_zero_grad_old(tmp_path: Path) -> None:
    """`import torchtext.legacy` bounds the runtime below 1.11 without naming an oldest release
    (pytorch/examples' legacy/snli): no finding, and no crash rendering one."""
    source = "import torch\nfrom torchtext.legacy import data\n\n" + PLAIN_ZERO_GRAD.split("\n", 1)[1]
    findings = lint_source(source, path=_file_in(tmp_path), select=["TPL301"])
    assert [f.code for f in findings] == []


CONDA_ENVIRONMENT = """\
name: ldm
channels:
  - pytorch
  - defaults
dependencies:
  - python=3.8.5
  - cudatoolkit=11.0
  - {torch}
  - torchvision=0.8.1
  - pip:
    - pytorch-lightning==1.4.2
"""


@pytest.mark.parametrize(
    "line, specifier",
    [
        ("  - pytorch=1.7.0", "==1.7.0"),
        ("  - pytorch==1.7.0", "==1.7.0"),
        ("  - pytorch=1.7.0=py3.8_cuda11.0_0", "==1.7.0"),
        ("  - pytorch 1.7.0 py3.8_cuda11.0_0", "==1.7.0"),
        ("  - pytorch::pytorch>=1.8,<2", ">=1.8,<2"),
        ("    - torch==1.13.1", "==1.13.1"),
        ("  - pytorch", ""),
    ],
)
def test_conda_dependency_lines_give_their_specifier(line: str, specifier: str) -> None:
    assert conda_torch_specifier(line) == specifier


@pytest.mark.parametrize(
    "line", ["  - pytorch-lightning==1.4.2", "  - torchvision=0.8.1", "  - pytorch-cuda=11.8", "name: torch"]
)
def test_other_conda_packages_are_not_torch(line: str) -> None:
    assert conda_torch_specifier(line) is None


@pytest.mark.parametrize("name", ["environment.yaml", "environment.yml", "environment-gpu.yml", "conda.yaml"])
def test_a_conda_pin_bounds_the_runtime_like_a_requirement(tmp_path: Path, name: str) -> None:
    (tmp_path / name).write_text(CONDA_ENVIRONMENT.format(torch="pytorch=1.7.0"))
    found = target_version(_file_in(tmp_path), None, NEWEST)
    assert (found.version, found.below) == ((1, 7), (1, 8))
    assert found.source == f"{name} (`pytorch=1.7.0`)"


def test_a_conda_file_naming_pytorch_without_a_version_changes_nothing(tmp_path: Path) -> None:
    (tmp_path / "environment.yaml").write_text(CONDA_ENVIRONMENT.format(torch="pytorch"))
    found = target_version(_file_in(tmp_path), None, NEWEST)
    assert (found.version, found.below) == (None, None)
    assert lint_source(ATTENTION, path=_file_in(tmp_path), select=["TPL306"])[0].fix is not None


def test_attention_is_not_advised_under_a_conda_pinned_torch_without_sdpa(tmp_path: Path) -> None:
    (tmp_path / "environment.yaml").write_text(CONDA_ENVIRONMENT.format(torch="pytorch=1.7.0"))
    assert lint_source(ATTENTION, path=_file_in(tmp_path), select=["TPL306"]) == []


def test_a_conda_pin_is_read_beside_a_pyproject_without_torch(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\ndependencies = ["numpy"]\n')
    (tmp_path / "environment.yaml").write_text(CONDA_ENVIRONMENT.format(torch="pytorch==1.7.0"))
    assert target_version(_file_in(tmp_path), None, NEWEST).version == (1, 7)

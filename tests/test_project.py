"""The project pass: facts that cross module boundaries, and every route (the CLI on the whole
project, on one file, on a subset; flake8 file by file; the library API) giving the same
findings."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Optional

import pytest

from torchperf_lint.api import lint_source
from torchperf_lint.cli import main
from torchperf_lint.project.store import Projects, find_root
from torchperf_lint.settings import Settings

pytestmark = pytest.mark.usefixtures("precision_off_rules_on")  # conftest.PRECISION_OFF

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "project"

# What the example project plants, each in a module that does not show why it is hot.
PLANTED = {
    ("detector/engine/loops.py", 16, "TPL106"),  # loop over logger.log_every(loader)
    ("detector/engine/loops.py", 17, "TPL106"),
    ("detector/engine/loops.py", 23, "TPL101"),  # a loop whose backward() is in a callee
    ("detector/kernels.py", 3, "TPL105"),  # two modules away from Net.forward
    ("detector/losses.py", 7, "TPL104"),
    ("detector/losses.py", 9, "TPL103"),
    ("detector/models/base.py", 20, "TPL105"),  # inherited method, called from a subclass
    ("detector/models/drop.py", 16, "TPL101"),  # never says cuda; train.py moves the model there
    ("detector/ops.py", 8, "TPL101"),  # a helper of forward in another module
}


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))
    return root


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> list[dict[str, object]]:
    main(["--format", "json", "--no-cache", "--show-context", *args])
    return json.loads(capsys.readouterr().out)


def _keys(findings: list[dict[str, object]], root: Path) -> set[tuple[str, int, str]]:
    return {
        (
            Path(str(f["path"])).resolve().relative_to(root.resolve()).as_posix(),
            int(f["line"]),
            str(f["code"]),
        )  # type: ignore[call-overload]
        for f in findings
    }


@pytest.fixture
def project(tmp_path: Path) -> Path:
    shutil.copytree(EXAMPLE, tmp_path / "project")
    return tmp_path / "project"


# -- every route agrees --------------------------------------------------------------------
def test_cli_on_the_project_reports_every_planted_pattern(project: Path, capsys) -> None:
    assert _keys(_cli(capsys, str(project)), project) == PLANTED


def test_cli_on_each_file_alone_gives_the_same_findings(project: Path, capsys) -> None:
    found: set[tuple[str, int, str]] = set()
    for path in sorted(project.rglob("*.py")):
        found |= _keys(_cli(capsys, str(path)), project)
    assert found == PLANTED


def test_cli_on_a_subset_as_pre_commit_passes_it(project: Path, capsys) -> None:
    subset = [project / "detector" / "ops.py", project / "detector" / "losses.py"]
    expected = {key for key in PLANTED if key[0] in ("detector/ops.py", "detector/losses.py")}
    assert _keys(_cli(capsys, *map(str, subset)), project) == expected


def test_cli_from_inside_the_project_with_a_relative_path(project: Path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(project / "detector")
    assert _keys(_cli(capsys, "kernels.py"), project) == {("detector/kernels.py", 3, "TPL105")}


def test_flake8_file_by_file_agrees_with_the_cli(project: Path) -> None:
    found: set[tuple[str, int, str]] = set()
    for path in sorted(project.rglob("*.py")):
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "flake8",
                "--isolated",
                "--select",
                "TPL",
                "--format",
                "%(row)d %(code)s",
                str(path),
            ],
            capture_output=True,
            text=True,
            cwd=project,
        )
        assert result.returncode in (0, 1), result.stderr
        for line in result.stdout.splitlines():
            row, code = line.split()
            found.add((path.relative_to(project).as_posix(), int(row), code))
    assert found == PLANTED


def test_library_api_with_a_buffer_agrees(project: Path) -> None:
    found = set()
    for path in sorted(project.rglob("*.py")):
        for finding in lint_source(path.read_text(), str(path)):
            found.add((path.relative_to(project).as_posix(), finding.line, finding.code))
    assert found == PLANTED


def test_unsaved_buffer_is_linted_as_it_is(project: Path) -> None:
    kernels = project / "detector" / "kernels.py"
    buffer = kernels.read_text().replace("    print(picked.max())\n", "")
    assert lint_source(buffer, str(kernels)) == []


# -- explained across files ----------------------------------------------------------------
def test_context_names_the_chain_with_its_modules(project: Path, capsys) -> None:
    findings = _cli(capsys, str(project / "detector" / "kernels.py"))
    assert [f["context"] for f in findings] == [
        "in pick (detector/kernels.py), called from shuffle_channels (detector/ops.py:6), "
        "called from Net.features (detector/models/net.py:14), called from BaseModel.forward "
        "(detector/models/base.py:12)"
    ]


def test_runs_on_cuda_says_where_from(project: Path) -> None:
    facts = Projects(Settings()).facts_for(str(project / "detector" / "models" / "drop.py"))
    assert facts.runs_on_cuda == "Net is moved to the device in train.py, which shows CUDA use"


# -- the reasons, one each ----------------------------------------------------------------------
def _lint_project(
    tmp_path: Path, files: dict[str, str], target: str, select: Optional[list[str]] = None
) -> list[tuple[int, str]]:
    root = _write(tmp_path, {"pyproject.toml": "[project]\nname = 'p'\n", **files})
    path = root / target
    return [(f.line, f.code) for f in lint_source(path.read_text(), str(path), select=select)]


def test_base_class_from_another_module_makes_forward_hot(tmp_path: Path) -> None:
    files = {
        "pkg/__init__.py": "",
        "pkg/base.py": "from torch import nn\n\nclass Backbone(nn.Module):\n    pass\n",
        "pkg/net.py": """
            import torch
            from pkg.base import Backbone

            class Net(Backbone):
                def forward(self, x):
                    return x[range(4)]
            """,
    }
    assert _lint_project(tmp_path, files, "pkg/net.py") == [(6, "TPL103")]


def test_torch_module_classes_and_loss_bases_are_modules(tmp_path: Path) -> None:
    files = {
        "losses.py": """
            from torch.nn.modules.loss import _Loss

            class DiceLoss(_Loss):
                def forward(self, pred, target):
                    assert target.max() < 3
                    return pred.mean()
            """,
    }
    assert _lint_project(tmp_path, files, "losses.py") == [(5, "TPL104")]


def test_relative_import_of_a_base_two_packages_up(tmp_path: Path) -> None:
    files = {
        "pkg/__init__.py": "",
        "pkg/modeling.py": "import torch.nn as nn\n\nclass ModelMixin(nn.Module):\n    pass\n",
        "pkg/models/__init__.py": "",
        "pkg/models/unet.py": """
            from ..modeling import ModelMixin

            class UNet(ModelMixin):
                def forward(self, x, t):
                    assert t.min() >= 0
                    return x
            """,
    }
    assert _lint_project(tmp_path, files, "pkg/models/unet.py") == [(5, "TPL104")]


def test_a_re_export_through_a_package_init(tmp_path: Path) -> None:
    files = {
        "lib/__init__.py": "from .core.base import Base\n",
        "lib/core/__init__.py": "",
        "lib/core/base.py": "from torch import nn\n\nclass Base(nn.Module):\n    pass\n",
        "model.py": """
            from lib import Base

            class Head(Base):
                def forward(self, x):
                    return x[[0, 2, 1]]
            """,
    }
    assert _lint_project(tmp_path, files, "model.py") == [(5, "TPL103")]


def test_a_helper_called_from_forward_in_another_module(tmp_path: Path) -> None:
    files = {
        "model.py": """
            from torch import nn
            import helpers

            class Net(nn.Module):
                def forward(self, x, t):
                    return helpers.nll(x, t)
            """,
        "helpers.py": """
            from kernels import gather_rows

            def nll(pred, target):
                return -gather_rows(pred, target).mean()
            """,
        "kernels.py": """
            import torch

            def gather_rows(pred, target):
                return pred[torch.arange(pred.shape[0]).tolist(), target]
            """,
    }
    # two modules away; `.tolist()` of a host arange is not a sync
    assert _lint_project(tmp_path, files, "kernels.py") == []
    files["kernels.py"] = "def gather_rows(pred, target):\n    return pred[range(len(target)), target]\n"
    assert _lint_project(tmp_path, files, "kernels.py") == [(2, "TPL103")]


def test_an_inherited_method_and_an_override_in_another_module(tmp_path: Path) -> None:
    files = {
        "base.py": """
            import torch
            from torch import nn

            class Base(nn.Module):
                def forward(self, x):
                    return self.encode(x)

                def encode(self, x):
                    raise NotImplementedError
            """,
        "impl.py": """
            from base import Base

            class Impl(Base):
                def encode(self, x):
                    return x[range(2)]
            """,
    }
    assert _lint_project(tmp_path, files, "impl.py") == [(5, "TPL103")]


def test_a_step_loop_whose_backward_is_in_a_callee(tmp_path: Path) -> None:
    files = {
        "engine.py": """
            def train_step(model, x, y, optimizer):
                loss = model(x, y)
                loss.backward()
                optimizer.step()
            """,
        "train.py": """
            import torch
            from engine import train_step

            def fit(model, batches, optimizer):
                for x, y in batches:
                    x = x + torch.randn(8).cuda()
                    train_step(model, x, y, optimizer)
            """,
    }
    assert _lint_project(tmp_path, files, "train.py") == [(6, "TPL101")]


def test_an_epoch_loop_around_a_callee_with_its_own_loop_is_not_hot(tmp_path: Path) -> None:
    files = {
        "engine.py": """
            def train_one_epoch(model, loader, optimizer):
                for x, y in loader:
                    model(x, y).backward()
                    optimizer.step()
            """,
        "train.py": """
            import torch
            from engine import train_one_epoch

            def fit(model, loader, optimizer, epochs):
                for epoch in range(epochs):
                    scale = torch.ones(4).cuda()
                    train_one_epoch(model, loader, optimizer)
            """,
    }
    assert _lint_project(tmp_path, files, "train.py") == []


def test_a_loader_wrapper_makes_the_loop_a_step_loop(tmp_path: Path) -> None:
    files = {
        "train.py": """
            import torch
            from utils import MetricLogger

            def fit(model, data_loader, device):
                logger = MetricLogger()
                for images, targets in logger.log_every(data_loader, 10, "train"):
                    images = images.to(device)
            """,
        "utils.py": "class MetricLogger:\n    def log_every(self, it, n, header):\n        yield from it\n",
    }
    assert _lint_project(tmp_path, files, "train.py") == [(7, "TPL106")]


def test_the_outer_loop_of_gradient_accumulation_is_hot(tmp_path: Path) -> None:
    files = {
        "train.py": """
            def fit(model, loader, optimizer, device):
                for batch in loader:
                    batch = batch.to(device)
                    for chunk in batch.chunk(4):
                        model(chunk).backward()
                    optimizer.step()
            """,
    }
    assert _lint_project(tmp_path, files, "train.py") == [(3, "TPL106")]


def test_a_project_decorator_entering_inference_mode_silences_eval(tmp_path: Path) -> None:
    evaluate = """
        import torch
        from utils import {decorator}

        @{decorator}()
        def evaluate(model, loader):
            model.eval()
            for x, _ in loader:
                model(x)
        """
    utils = """
        import torch

        def smart_inference_mode():
            def decorate(fn):
                return torch.inference_mode()(fn)
            return decorate

        def timed():
            def decorate(fn):
                return fn
            return decorate
        """
    files = {"utils.py": utils, "val.py": evaluate.format(decorator="smart_inference_mode")}
    assert _lint_project(tmp_path / "a", files, "val.py") == []
    files["val.py"] = evaluate.format(decorator="timed")
    assert _lint_project(tmp_path / "b", files, "val.py") == [(8, "TPL305")]


def test_a_project_context_manager_entering_no_grad_silences_eval(tmp_path: Path) -> None:
    files = {
        "utils.py": """
            import contextlib
            import torch

            @contextlib.contextmanager
            def eval_mode(model):
                model.eval()
                with torch.no_grad():
                    yield model
            """,
        "val.py": """
            from utils import eval_mode

            def validate(model, loader):
                model.eval()
                with eval_mode(model):
                    for x, _ in loader:
                        model(x)
            """,
    }
    assert _lint_project(tmp_path, files, "val.py") == []


def test_a_host_value_passed_through_a_call_is_not_a_device_tensor(tmp_path: Path) -> None:
    callee = """
        import torch
        from torch import nn

        class Head(nn.Module):
            def forward(self, x):
                scores = x.softmax(-1)
                self.record(scores{suffix})
                return scores

            def record(self, scores):
                self.last = scores.tolist()
        """
    on_host = _lint_project(tmp_path / "a", {"head.py": callee.format(suffix=".cpu()")}, "head.py")
    assert on_host == [(7, "TPL105")]  # the caller's copy is the one sync
    on_device = _lint_project(tmp_path / "b", {"head.py": callee.format(suffix="")}, "head.py")
    assert on_device == [(11, "TPL105")]


def test_a_host_value_passed_on_through_a_callers_own_parameter_is_host(tmp_path: Path) -> None:
    # audiocraft's sample manager: add_samples(prompt_wavs=audio.cpu()) hands each row on to
    # add_sample, which hands it to _sample_id; one call leaves prompt_wavs at its None default
    manager = """
        from typing import Optional
        import torch

        class Manager:
            def add_samples(self, wavs, prompt_wavs=None):
                for idx, wav in enumerate(wavs):
                    prompt_wav = prompt_wavs[idx] if prompt_wavs is not None else None
                    self.add_sample(wav, prompt_wav)

            def add_sample(self, wav, prompt_wav=None):
                return self._sample_id(prompt_wav)

            def _sample_id(self, prompt_wav: Optional[torch.Tensor]):
                if prompt_wav is not None:
                    return hash(prompt_wav.numpy().data)
        """
    solver = """
        from manager import Manager

        def train(model, batches, optimizer):
            manager = Manager()
            for batch in batches:
                model(batch).sum().backward()
                optimizer.step()
                manager.add_samples(model(batch).cpu())
                manager.add_samples(model(batch).cpu(), prompt_wavs=batch.float(){suffix})
        """
    on_host = _lint_project(
        tmp_path / "a",
        {"manager.py": manager, "solver.py": solver.format(suffix=".cpu()")},
        "manager.py",
        ["TPL107"],
    )
    assert on_host == []
    on_device = _lint_project(
        tmp_path / "b",
        {"manager.py": manager, "solver.py": solver.format(suffix="")},
        "manager.py",
        ["TPL107"],
    )
    assert on_device == [(15, "TPL107")]


def test_a_test_files_loop_does_not_make_project_code_hot(tmp_path: Path) -> None:
    files = {
        "helpers.py": "def pick(x):\n    return x[range(3)]\n",
        "tests/test_train.py": """
            from helpers import pick

            def test_step(model, optimizer, batches):
                for x in batches:
                    pick(model(x)).sum().backward()
                    optimizer.step()
            """,
    }
    assert _lint_project(tmp_path, files, "helpers.py") == []


# -- the project itself ---------------------------------------------------------------------
def test_root_is_the_nearest_marker_and_stops_below_site_packages(tmp_path: Path) -> None:
    _write(tmp_path, {"pyproject.toml": "", "venv/lib/site-packages/pkg/mod.py": "", "src/pkg/a.py": ""})
    assert find_root(tmp_path / "src" / "pkg" / "a.py") == tmp_path
    installed = tmp_path / "venv" / "lib" / "site-packages" / "pkg" / "mod.py"
    assert find_root(installed, exclude=("site-packages",)) is None


def test_src_layout_and_namespace_packages_resolve(tmp_path: Path) -> None:
    files = {
        "src/ns/models/base.py": "from torch import nn\n\nclass Base(nn.Module):\n    pass\n",
        "src/ns/models/net.py": """
            from ns.models.base import Base

            class Net(Base):
                def forward(self, x):
                    return x[range(2)]
            """,
    }
    assert _lint_project(tmp_path, files, "src/ns/models/net.py") == [(5, "TPL103")]


_STEP_CALLING = """
    import torch
    {imports}

    def fit(model, batches, optimizer):
        for x in batches:
            loss = model({call}(x)).sum()
            loss.backward()
            optimizer.step()
    """
_MIX = "import torch\n\ndef mix(x):\n    return x[range(2)]\n"


@pytest.mark.parametrize(
    ("imports", "call"),
    [
        ("import deeplearning.ssl_research.moco.builder", "deeplearning.ssl_research.moco.builder.mix"),
        ("from deeplearning.ssl_research.moco.builder import mix", "mix"),
        ("import deeplearning.ssl_research.moco.builder as builder", "builder.mix"),
    ],
)
def test_an_import_under_a_root_the_project_lacks_names_its_own_module(
    tmp_path: Path, imports: str, call: str
) -> None:
    """A repository exported from a larger tree (moco's `deeplearning.cross_image_ssl.moco.builder`
    for its own moco/builder.py): the helper the step calls is hot."""
    files = {
        "moco/__init__.py": "",
        "moco/builder.py": _MIX,
        "train.py": _STEP_CALLING.format(imports=imports, call=call),
    }
    assert _lint_project(tmp_path, files, "moco/builder.py") == [(4, "TPL103")]


@pytest.mark.parametrize(
    ("imports", "call"),
    [
        ("import torchvision.models.ops", "torchvision.models.ops.mix"),  # a library's own module
        ("import json.models.ops", "json.models.ops.mix"),  # the standard library's
        ("import deeplearning.ops", "deeplearning.ops.mix"),  # one part: too little to tell
    ],
)
def test_an_import_of_a_library_is_never_taken_for_a_project_module(
    tmp_path: Path, imports: str, call: str
) -> None:
    files = {
        "models/__init__.py": "",
        "models/ops.py": _MIX,
        "ops.py": _MIX,
        "train.py": _STEP_CALLING.format(imports=imports, call=call),
    }
    assert _lint_project(tmp_path, files, "models/ops.py") == []
    assert _lint_project(tmp_path, files, "ops.py") == []


def test_a_file_that_cannot_be_parsed_does_not_stop_the_project(tmp_path: Path) -> None:
    files = {
        "broken.py": "def (:\n",
        "model.py": "from torch import nn\nimport broken\n\nclass M(nn.Module):\n    def forward(self, x):\n        return x[[1, 0]]\n",
    }
    assert _lint_project(tmp_path, files, "model.py") == [(6, "TPL103")]


# -- the cache --------------------------------------------------------------------------------
def test_editing_one_module_changes_a_dependent_modules_cached_findings(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    monkeypatch.delenv("TORCHPERF_LINT_NO_CACHE", raising=False)
    root = _write(
        tmp_path / "proj",
        {
            "pyproject.toml": "",
            "ops.py": "import torch\n\ndef mix(x):\n    return x[range(2)]\n",
            "train.py": "import torch\nfrom ops import mix\n\ndef fit(batches):\n    for x in batches:\n        mix(x)\n",
        },
    )
    cache = str(tmp_path / "cache")
    main(["--format", "json", "--cache-dir", cache, str(root / "ops.py")])
    assert json.loads(capsys.readouterr().out) == []
    train = root / "train.py"
    train.write_text(train.read_text() + "        x.sum().backward()\n")
    os.utime(train, ns=(1, 1))  # a new mtime, whatever the file system's resolution
    main(["--format", "json", "--cache-dir", cache, str(root / "ops.py")])
    assert [f["code"] for f in json.loads(capsys.readouterr().out)] == ["TPL103"]


def test_the_cache_lives_at_the_project_root_whatever_the_working_directory(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    monkeypatch.delenv("TORCHPERF_LINT_NO_CACHE", raising=False)
    root = _write(tmp_path / "proj", {"pyproject.toml": "", "pkg/model.py": "import torch\n"})
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    main([str(root / "pkg" / "model.py")])
    capsys.readouterr()
    assert (root / ".torchperf_lint_cache").is_dir()
    assert not (elsewhere / ".torchperf_lint_cache").exists()


def test_cached_summaries_sit_under_a_cache_root_that_git_ignores(tmp_path: Path) -> None:
    root = _write(tmp_path / "proj", {"pyproject.toml": "", "model.py": "import torch\n"})
    cache = tmp_path / "cache"
    Projects(Settings(), str(cache)).facts_for(str(root / "model.py"))
    assert list(cache.rglob("summaries/*/*.json"))
    assert (cache / ".gitignore").read_text(encoding="utf-8").splitlines()[-1] == "*"

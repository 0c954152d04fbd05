"""TPL701/TPL702 beyond the rule examples: every reduced-precision spelling, test and CPU-only
files, where the TF32 line goes, optimizer spellings, and the shipped training scripts."""

from __future__ import annotations

import shutil
from pathlib import Path

import libcst as cst
import pytest

from torchperf_lint.api import fix_source, lint_source
from torchperf_lint.cli import main
from torchperf_lint.config import Settings

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

TRAIN = """
import torch
import torch.nn.functional as F
{setup}

def train(model, loader, optimizer):
    model.cuda()
    for x, y in loader:
        {step}
        loss = F.cross_entropy(model(x.cuda()), y.cuda())
        loss.backward()
        optimizer.step()
"""


def _train(setup: str = "", step: str = "pass") -> str:
    return TRAIN.lstrip("\n").format(setup=setup, step=step)


def _codes(source: str, path: str = "train.py", select: str = "TPL701", **settings: object) -> list:
    findings = lint_source(source, path=path, settings=Settings(**settings), select=[select])  # type: ignore[arg-type]
    return [(f.line, f.code) for f in findings]


def test_plain_cuda_training_is_reported_on_its_backward() -> None:
    assert _codes(_train()) == [(10, "TPL701")]


@pytest.mark.parametrize(
    "setup, step",
    [
        ("", "with torch.autocast(device_type='cuda', dtype=torch.bfloat16): pass"),
        ("", "with torch.cuda.amp.autocast(): pass"),
        ("", "with torch.amp.autocast('cuda'): pass"),
        ("from torch import autocast", "pass"),
        ("from torch.cuda.amp import autocast as ac", "pass"),
        ("scaler = torch.amp.GradScaler('cuda')", "pass"),
        ("scaler = torch.GradScaler()", "pass"),
        ("from torch.cuda import amp\nscaler = amp.GradScaler()", "pass"),
        ("torch.set_float32_matmul_precision('high')", "pass"),
        ("torch.set_float32_matmul_precision(precision='medium')", "pass"),
        ("torch.backends.cuda.matmul.allow_tf32 = True", "pass"),
        ("torch.backends.cuda.matmul.fp32_precision = 'tf32'", "pass"),
        ("torch.backends.fp32_precision = 'tf32'", "pass"),
        ("", "model.half()"),
        ("", "x = x.bfloat16()"),
        ("", "x = x.to(torch.bfloat16)"),
        ("", "x = x.to(dtype=torch.float16)"),
        ("", "x = x.type(torch.cuda.HalfTensor)"),
        ("DTYPES = {'fp16': torch.half}", "pass"),
        ("from torch import bfloat16", "pass"),
        ("from apex import amp", "pass"),
    ],
)
def test_any_reduced_precision_spelling_silences_the_file(setup: str, step: str) -> None:
    assert _codes(_train(setup, step)) == []


@pytest.mark.parametrize(
    "setup",
    [
        "torch.backends.cudnn.allow_tf32 = True",
        "from mylib import autocast",
        "x = torch.float32",
    ],
)
def test_settings_that_say_nothing_about_matmul_precision_do_not_silence(setup: str) -> None:
    assert _codes(_train(setup)) == [(10, "TPL701")]


@pytest.mark.parametrize(
    "setup",
    [
        "torch.set_float32_matmul_precision('highest')",
        "torch.backends.cuda.matmul.allow_tf32 = False",
        "torch.backends.cuda.matmul.fp32_precision = 'ieee'",
    ],
)
def test_full_fp32_asked_for_by_name_is_a_decision(setup: str) -> None:
    """Like `fused=False` written out for TPL702: the author chose full fp32 (NVlabs/edm turns
    TF32 off for reproducibility)."""
    assert _codes(_train(setup)) == []


def test_only_the_first_backward_of_a_file_is_reported() -> None:
    source = _train() + "\n\ndef finetune(model, x, optimizer):\n    model(x.cuda()).sum().backward()\n"
    assert _codes(source) == [(10, "TPL701")]


@pytest.mark.parametrize("path", ["tests/test_train.py", "train_test.py", "conftest.py"])
def test_test_files_are_silent(path: str) -> None:
    assert _codes(_train(), path=path) == []


def test_configured_test_file_patterns_change_the_result() -> None:
    assert _codes(_train(), path="smoke/run.py") == [(10, "TPL701")]
    assert _codes(_train(), path="smoke/run.py", test_file_patterns=("smoke/*.py",)) == []


def test_cpu_only_training_is_silent() -> None:
    cpu = _train().replace("model.cuda()", "model.cpu()").replace("x.cuda()", "x").replace("y.cuda()", "y")
    assert _codes(cpu) == []


def test_fix_inserts_tf32_after_the_last_top_level_import() -> None:
    source = _train(setup="try:\n    import apex_helpers\nexcept ImportError:\n    pass")
    fixed = fix_source(source, path="train.py", unsafe=True, select=["TPL701"])
    assert fixed.startswith(
        'import torch\nimport torch.nn.functional as F\n\ntorch.set_float32_matmul_precision("high")\ntry:\n'
    )
    assert _codes(fixed) == []


def test_fix_is_unsafe_and_needs_unsafe_fixes() -> None:
    assert fix_source(_train(), path="train.py", unsafe=False, select=["TPL701"]) == _train()
    finding = lint_source(_train(), path="train.py", select=["TPL701"])[0]
    assert finding.fix is not None and finding.fix.safety.value == "unsafe"
    assert "numerics" in finding.message


def test_file_without_imports_gets_the_message_only() -> None:
    source = (
        "def step(model, x, optimizer):\n"
        "    import torch\n"
        "    model(x.cuda()).sum().backward()\n"
        "    optimizer.step()\n"
    )
    findings = lint_source(source, path="train.py", select=["TPL701"])
    assert [(f.code, f.fix) for f in findings] == [("TPL701", None)]


@pytest.mark.parametrize(
    "code",
    [
        "opt = torch.optim.AdamW(params, lr=1e-3)",
        "opt = optim.Adam(params)",
        "opt = SGD(params, lr=0.1)",
        "opt = torch.optim.sgd.SGD(params, lr=0.1)",
        "opt = torch.optim.Adam(params, foreach=True)",
        "opt = torch.optim.Adagrad(params, foreach=False)",
    ],
)
def test_torch_optimizers_are_resolved_through_imports(code: str) -> None:
    source = f"import torch\nfrom torch import optim\nfrom torch.optim import SGD\nparams = net.cuda().parameters()\n{code}\n"
    assert _codes(source, select="TPL702") == [(5, "TPL702")]


@pytest.mark.parametrize(
    "code",
    [
        "opt = torch.optim.AdamW(params, fused=True)",
        "opt = torch.optim.Adagrad(params)",
        "opt = torch.optim.NAdam(params, foreach=True)",
        "opt = torch.optim.AdamW(params, **cfg)",
        "opt = AdamW(params)",
        "opt = torch.optim.Optimizer(params, {})",
    ],
)
def test_optimizers_without_a_fused_kernel_or_from_elsewhere_are_silent(code: str) -> None:
    source = f"import torch\nfrom timm.optim import AdamW\nparams = net.cuda().parameters()\n{code}\n"
    assert _codes(source, select="TPL702") == []


def test_optimizer_message_names_why_the_fix_is_unsafe() -> None:
    source = "import torch\nopt = torch.optim.SGD(net.cuda().parameters(), lr=0.1)\n"
    (finding,) = lint_source(source, path="train.py", select=["TPL702"])
    assert "floating-point" in finding.message
    assert fix_source(source, path="train.py", unsafe=False, select=["TPL702"]) == source


@pytest.mark.parametrize("name", ["slow_training.py", "fp32_training.py"])
def test_fp32_training_examples_report_precision_and_optimizer(name: str) -> None:
    source = (EXAMPLES / name).read_text(encoding="utf-8")
    codes = [f.code for f in lint_source(source, path=f"examples/{name}", select=["TPL701", "TPL702"])]
    assert sorted(codes) == ["TPL701", "TPL702"]


def test_unsafe_fix_of_the_fp32_example_leaves_neither_finding(tmp_path: Path, capsys) -> None:
    path = tmp_path / "fp32_training.py"
    shutil.copy(EXAMPLES / "fp32_training.py", path)
    main(["--fix", "--unsafe-fixes", "--select", "TPL701,TPL702", str(path)])
    fixed = path.read_text(encoding="utf-8")
    cst.parse_module(fixed)
    compile(fixed, str(path), "exec")
    assert 'torch.set_float32_matmul_precision("high")' in fixed
    assert "fused=True" in fixed
    assert lint_source(fixed, path=str(path), select=["TPL701", "TPL702"]) == []
    capsys.readouterr()

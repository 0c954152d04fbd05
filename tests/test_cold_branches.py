"""Branches a CUDA training step does not take (analysis/cold.py, and the project pass's copy in
project/summary.py): tests of the device a tensor is on (CPU or MPS), in an `if` or an
if-expression, and the code after a guard that leaves the block in every step. From real code:
kornia's equalization (`clip.cpu() if clip.device.type == "mps" else ...`) and blur (a guard
`if input.device.type != "cpu" or ...: return False` before a host check), torchmetrics'
`if tensor.device == torch.device("cpu"):`."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from torchperf_lint.api import lint_source

SYNC = "TPL105"  # a host read of a device value: hot code reports it, cold code does not


def lint(body: str) -> list[int]:
    """The lines of SYNC findings in `forward(self, x)` with `body`, in a module that uses CUDA."""
    source = "import torch\nfrom torch import nn\n\nclass Net(nn.Module):\n    def forward(self, x):\n"
    source += textwrap.indent(textwrap.dedent(body).strip("\n"), " " * 8) + "\n"
    return [f.line for f in lint_source(source, path="m.py", select=[SYNC])]


@pytest.mark.parametrize(
    "test",
    [
        'x.device.type == "cpu"',
        'x.device.type == "mps"',
        'x.device == "cpu"',
        'x.device == torch.device("cpu")',
        "x.device == torch.device('mps')",
    ],
)
def test_a_branch_for_cpu_or_mps_tensors_is_cold_and_its_else_is_not(test: str) -> None:
    assert lint(f"if {test}:\n    print(x.max().item())\nreturn x") == []
    negated = test.replace("==", "!=")
    assert lint(f"if {negated}:\n    return x\nelse:\n    print(x.max().item())\nreturn x") == []
    assert lint(f"if {negated}:\n    print(x.max().item())\nreturn x") == [7]


def test_a_cuda_branch_is_hot() -> None:
    assert lint('if x.device.type == "cuda":\n    print(x.max().item())\nreturn x') == [7]


def test_an_if_expression_is_cold_on_its_cold_side_only() -> None:
    assert lint('peak = x.max().item() if x.device.type == "mps" else 0.0\nreturn x * peak') == []
    assert lint('peak = 0.0 if x.device.type == "mps" else x.max().item()\nreturn x * peak') == [6]


@pytest.mark.parametrize("leave", ["return x", "raise ValueError('on the device')"])
def test_the_code_after_a_guard_that_leaves_on_the_device_is_cold(leave: str) -> None:
    body = f"""
        if x.device.type != "cpu" or torch.jit.is_scripting():
            {leave}
        peak = x.max().item()
        return x / peak
        """
    assert lint(body) == []


def test_the_code_after_a_guard_that_leaves_only_on_the_cpu_is_hot() -> None:
    body = """
        if x.device.type == "cpu":
            return x
        peak = x.max().item()
        return x / peak
        """
    assert lint(body) == [8]


def test_a_guard_that_does_not_leave_keeps_what_follows_hot() -> None:
    body = """
        if x.device.type != "cpu":
            x = x.float()
        peak = x.max().item()
        return x / peak
        """
    assert lint(body) == [8]


def test_a_loop_guard_that_continues_on_the_device_makes_the_rest_of_the_body_cold() -> None:
    body = """
        for i in range(3):
            if x.device.type != "cpu":
                continue
            print(x[i].max().item())
        return x
        """
    assert lint(body) == []
    assert lint(body.replace("continue", "pass")) == [9]


def test_the_project_pass_reads_guards_as_the_file_does(tmp_path: Path) -> None:
    """A helper in another module called only after a device guard is not hot."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (tmp_path / "helpers.py").write_text("def peak(x):\n    return x.max().item()\n")
    model = (
        "import torch\nfrom torch import nn\n\nfrom helpers import peak\n\n\n"
        "class Net(nn.Module):\n    def forward(self, x):\n{guard}        return x / peak(x)\n"
    )
    helpers = tmp_path / "helpers.py"

    def findings_in_helpers(guard: str) -> list[int]:
        (tmp_path / "model.py").write_text(model.format(guard=guard))
        return [f.line for f in lint_source(helpers.read_text(), path=str(helpers), select=[SYNC])]

    assert findings_in_helpers("") == [2]  # hot through forward in model.py
    assert findings_in_helpers('        if x.device.type != "cpu":\n            return x\n') == []
    # and in an if-expression
    (tmp_path / "model.py").write_text(
        model.format(guard="").replace(
            "return x / peak(x)", 'return x / (peak(x) if x.device.type == "cpu" else 1)'
        )
    )
    assert [f.line for f in lint_source(helpers.read_text(), path=str(helpers), select=[SYNC])] == []


@pytest.mark.parametrize(
    "test",
    [
        "torchvision._is_tracing()",
        "torch.jit.is_scripting() or torchvision._is_tracing()",
        "self.collect_stats",
        "plots",  # yolov5's val.run fills its confusion matrix only to draw it
        "self.args.plots",
        "check",  # audiocraft's generate(check=False) asserts the sequence's coherence
        # ultralytics' SAM3 tracker copies masks to the host only to log them at DEBUG level
        "LOGGER.isEnabledFor(10) and x is not None",
    ],
)
def test_tracing_and_statistics_switches_are_cold(test: str) -> None:
    assert lint(f"if {test}:\n    s = x.max().item()\nreturn x.sum().item()") == [8]


@pytest.mark.parametrize("flag", ["self.export", "self.export_nms", "self.onnx_export", "exporting"])
def test_a_branch_on_a_flag_only_an_export_path_sets_is_cold(flag: str) -> None:
    """RT-DETR's `elif self.export_nms:` is set only by its export script, before tracing."""
    body = f"if self.training:\n    return x\nelif {flag}:\n    s = x.max().item()\nreturn x.sum().item()"
    assert lint(body) == [10]


@pytest.mark.parametrize("flag", ["self.exported_layers", "self.expert"])
def test_flags_that_only_look_like_export_switches_stay_hot(flag: str) -> None:
    assert lint(f"if {flag}:\n    s = x.max().item()\nreturn x.sum().item()") == [7, 8]


def test_the_project_pass_reads_an_export_flag_as_the_file_does(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (tmp_path / "helpers.py").write_text("def peak(x):\n    return x.max().item()\n")
    (tmp_path / "model.py").write_text(
        "import torch\nfrom torch import nn\n\nfrom helpers import peak\n\n\n"
        "class Net(nn.Module):\n    def forward(self, x):\n        if self.export_nms:\n"
        "            return x / peak(x)\n        return x\n"
    )
    helpers = tmp_path / "helpers.py"
    assert [f.line for f in lint_source(helpers.read_text(), path=str(helpers), select=[SYNC])] == []


def test_the_code_after_a_try_that_returns_runs_only_after_an_error() -> None:
    body = """
        try:
            return self.attempt(x)
        except RuntimeError as error:
            if "out of memory" not in str(error):
                raise
        return x.sum().item()
    """
    assert lint(body) == []
    assert lint(body.replace("return self.attempt(x)", "y = self.attempt(x)")) == [11]


_CALLED_FROM_FORWARD = (
    "import torch\nfrom torch import nn\nfrom helpers import {helper}\n\nclass Net(nn.Module):\n"
)


@pytest.mark.parametrize(
    "helper, forward, variant",
    [
        # the code after a try that returns runs only after an error
        (
            "def fallback(x):\n    return x.sum().item()\n",
            "        try:\n            return self.attempt(x)\n        except RuntimeError:\n            pass\n"
            "        return fallback(x)\n",
            ("return self.attempt(x)", "x = self.attempt(x)"),
        ),
        # a block that ends by raising runs only on the way to the error
        (
            "def first(x):\n    return int(x[0].item())\n",
            "        if x.numel() > 4:\n            bad = first(x)\n            raise ValueError(bad)\n        return x\n",
            ("raise ValueError(bad)", "x = x * bad"),
        ),
    ],
)
def test_the_project_pass_reads_an_error_path_as_the_file_does(
    tmp_path: Path, helper: str, forward: str, variant: tuple[str, str]
) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (tmp_path / "helpers.py").write_text(helper)
    model = (
        _CALLED_FROM_FORWARD.format(helper=helper.split("(")[0][4:]) + "    def forward(self, x):\n" + forward
    )
    (tmp_path / "model.py").write_text(model)
    path = tmp_path / "helpers.py"
    assert [f.line for f in lint_source(path.read_text(), str(path), select=[SYNC])] == []
    (tmp_path / "model.py").write_text(model.replace(*variant))
    assert [f.line for f in lint_source(path.read_text(), str(path), select=[SYNC])] == [2]


@pytest.mark.parametrize(
    "guard",
    [
        "x.is_cuda",
        'x.device.type == "cuda"',
        'x.device.type == "cuda" and x.dtype in (torch.float32, torch.float64)',
        "x.is_cuda and x.dtype == torch.float32",
    ],
)
def test_the_code_after_an_early_return_on_every_cuda_step_is_the_host_path(
    guard: str, tmp_path: Path
) -> None:
    """kornia's SIFT `_refine`: CUDA input in the default dtype returns through a fused path, so
    the generic code after it runs for host tensors; the project pass reads it the same."""
    body = f"if {guard}:\n    return self.fast(x)\nif not x.any():\n    return x\nreturn x / x.max().item()"
    assert lint(body) == []
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (tmp_path / "helpers.py").write_text("def peak(x):\n    return x.max().item()\n")
    model = "import torch\nfrom torch import nn\nfrom helpers import peak\n\nclass Net(nn.Module):\n"
    model += (
        f"    def forward(self, x):\n        if {guard}:\n            return x\n        return x / peak(x)\n"
    )
    (tmp_path / "model.py").write_text(model)
    path = tmp_path / "helpers.py"
    assert [f.line for f in lint_source(path.read_text(), str(path), select=[SYNC])] == []


@pytest.mark.parametrize(
    "guard",
    [
        "not x.is_cuda",
        'x.device.type != "cuda"',
        "x.is_cuda and x.dtype == torch.float16",
        "x.is_cuda and x.dtype == float",
        "x.device == torch.device('cuda')",
        # alone, a dtype test says nothing of the device; under autocast fp16 activations fail it
        "x.dtype == torch.float32",
        "x.dtype in (torch.float32, torch.float64)",
    ],
)
def test_an_early_return_that_some_cuda_steps_skip_keeps_what_follows_hot(guard: str) -> None:
    body = f"if {guard}:\n    return self.fast(x)\nreturn x / x.max().item()"
    assert lint(body) == [8]


def test_a_periodic_branch_that_steps_the_optimizer_is_the_step_itself() -> None:
    """Gradient accumulation's guard (`if (i + 1) % accumulate == 0: optimizer.step()`) and cleanlr's
    DQN family (training every `train_frequency` environment steps): the branch that calls
    `optimizer.step()` is the training step, so an EMA it updates runs every optimizer step; a
    periodic branch beside it that does not step stays cold."""
    source = textwrap.dedent(
        """
        import torch

        def train(model, ema, loader, optimizer, accumulate):
            model.cuda()
            for i, (x, y) in enumerate(loader):
                model(x.cuda(non_blocking=True), y).backward()
                if (i + 1) % accumulate == 0:
                    optimizer.step()
                    for e, p in zip(ema.parameters(), model.parameters()):  # line 9
                        e.mul_(0.99).add_(p.detach(), alpha=0.01)
                if i % 1000 == 0:
                    for e, p in zip(ema.parameters(), model.parameters()):  # line 12: periodic
                        e.copy_(p)
        """
    ).lstrip("\n")
    findings = lint_source(source, path="train.py", select=["TPL204"])
    assert [f.line for f in findings] == [9]


def _syncs_in_evaluation(branch: str) -> list[int]:
    """TPL107 findings of a step loop over a loader whose body ends with `branch`, which saves an image."""
    source = textwrap.dedent(
        """
        import torch
        from torchvision.utils import save_image

        def evaluate(model, loader, layers):
            for i, (x, _) in enumerate(loader):
                y = model(x.cuda())
        """
    ).lstrip("\n")
    source += textwrap.indent(textwrap.dedent(branch).strip("\n"), " " * 8) + "\n"
    return [f.line for f in lint_source(source, path="train.py", select=["TPL107"])]


@pytest.mark.parametrize(
    "branch",
    [
        # the first batch of the pass (pytorch/examples' vae)
        'if i == 0:\n    save_image(y.cpu(), "out.png")',
        'if i == 3:\n    save_image(y.cpu(), "out.png")',
        # still once per pass, whatever loop is between
        'for layer in layers:\n    if i == 0:\n        save_image(y.cpu(), "out.png")',
    ],
)
def test_a_branch_on_one_value_of_the_step_loops_enumerate_counter_is_cold(branch: str) -> None:
    assert _syncs_in_evaluation(branch) == []


@pytest.mark.parametrize(
    "branch",
    [
        'if i == len(loader) - 1:\n    save_image(y.cpu(), "out.png")',  # a value the linter does not know
        'if i < 3:\n    save_image(y.cpu(), "out.png")',
        # a counter of layers or of a tensor's rows: every step
        'for i, layer in enumerate(layers):\n    if i == 0:\n        save_image(y.cpu(), "out.png")',
        'for i in range(2):\n    if i == 0:\n        save_image(y.cpu(), "out.png")',
        'i = int(y.shape[0])\nif i == 0:\n    save_image(y.cpu(), "out.png")',  # rebound in the step
    ],
)
def test_a_branch_on_another_counter_or_value_stays_hot(branch: str) -> None:
    assert _syncs_in_evaluation(branch) != []


_SHOWN_ACROSS_MODULES = """
import torch
from torch.utils.data import DataLoader
from helpers import show


def train(model, dataset, layers, optimizer):
    loader = DataLoader(dataset, batch_size=8)
    for i, (x, y) in enumerate(loader):
        loss = model(x.cuda()).sum()
        loss.backward()
        optimizer.step()
{branch}
"""


@pytest.mark.parametrize(
    ("branch", "hot"),
    [
        ("if i == 0:\n    show(loss)", False),
        ("if i < 1:\n    show(loss)", True),
        ("for i, layer in enumerate(layers):\n    if i == 0:\n        show(loss)", True),
        ("for i in range(2):\n    if i == 0:\n        show(loss)", True),
    ],
)
def test_the_project_pass_reads_a_step_loops_enumerate_counter_as_the_file_walk_does(
    branch: str, hot: bool, tmp_path: Path
) -> None:
    """A helper in another module called on one step of a loop over a DataLoader runs once per
    pass (project/summary.py); under another test or another counter it runs every step."""
    train = _SHOWN_ACROSS_MODULES.replace("{branch}", textwrap.indent(branch, " " * 8))
    files = {
        "pyproject.toml": "[project]\nname = 'p'\n",
        "helpers.py": "import torch\n\n\ndef show(loss):\n    print(loss.item())\n",
        "train.py": train,
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    path = tmp_path / "helpers.py"
    findings = lint_source(path.read_text(), str(path), select=["TPL107"])
    assert [f.line for f in findings] == ([5] if hot else [])


# edm's training loop: the maintenance after `if ... cur_nimg < tick_start_nimg + kimg_per_tick *
# 1000: continue` runs once per tick, since it moves the mark (`tick_start_nimg = cur_nimg`)
TICK_GATE = """
    tick_start = 0
    for step in range(1000):
        x = x * 2
        if (step != 0) and (step < tick_start + 100):
            continue
        print(x.max().item())
        tick_start = step
    return x
    """


@pytest.mark.parametrize(
    "gate",
    [
        "(step != 0) and (step < tick_start + 100)",
        "step < tick_start + 100",
        "tick_start + 100 > step",
        "not step >= tick_start + 100",
    ],
)
def test_the_code_after_a_gate_on_a_mark_it_moves_runs_once_per_interval(gate: str) -> None:
    assert lint(TICK_GATE.replace("(step != 0) and (step < tick_start + 100)", gate)) == []


@pytest.mark.parametrize(
    "variant",
    [
        ("        tick_start = step\n", ""),  # a warm-up gate: once passed, every step runs what follows
        ("step < tick_start + 100", "step >= tick_start + 100"),  # continues once the mark is passed
        ("continue", "pass"),  # does not leave
        ("tick_start = step", "tick_start = tick_start * 2"),  # the mark moves, but not to the counter
    ],
)
def test_a_gate_whose_mark_stays_or_that_does_not_leave_keeps_what_follows_hot(
    variant: tuple[str, str],
) -> None:
    assert lint(TICK_GATE.replace(*variant)) == [11]


def test_the_project_pass_reads_a_gate_on_a_moved_mark_as_the_file_does(tmp_path: Path) -> None:
    """A helper in another module called only after the gate is not hot."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    helpers = tmp_path / "helpers.py"
    helpers.write_text("def peak(x):\n    return x.max().item()\n")
    model = (
        "import torch\nfrom torch import nn\n\nfrom helpers import peak\n\n\n"
        "class Net(nn.Module):\n    def forward(self, x):\n        tick_start = 0\n"
        "        for step in range(1000):\n            x = x * 2\n"
        "            if step < tick_start + 100:\n                continue\n"
        "            peak(x)\n{moved}        return x\n"
    )

    def findings_in_helpers(moved: str) -> list[int]:
        (tmp_path / "model.py").write_text(model.format(moved=moved))
        return [f.line for f in lint_source(helpers.read_text(), path=str(helpers), select=[SYNC])]

    assert findings_in_helpers("") == [2]  # the mark never moves: every step past it calls peak
    assert findings_in_helpers("            tick_start = step\n") == []


def test_the_code_after_a_gate_on_a_new_best_runs_only_when_the_best_improves() -> None:
    """kornia's RANSAC: `if scores[best] <= best_minimal_score: continue`, then the record setter's
    host-side work and `best_minimal_score = scores[best]`."""
    body = """
        best_score = -1.0
        for i in range(100):
            scores = x[i].softmax(0)
            if scores.max() <= best_score:
                continue
            print(scores.argmax().item())
            best_score = scores.max()
        return x
        """
    assert lint(body) == [9]  # the gate's own test reads the device at every step; what follows does not


def test_a_counter_moved_after_its_own_limit_check_is_not_a_mark() -> None:
    """ultralytics' comet callback: `if count >= limit: return` then `count += 1` and the work:
    every step below the limit runs it."""
    body = """
        count = 0
        for i in range(100):
            if count >= 10:
                return x
            print(x[i].max().item())
            count = count + 1
        return x
        """
    assert lint(body) == [10]


def test_a_block_that_ends_by_raising_is_on_the_way_to_an_error() -> None:
    # kornia's image stitching: the bad index is read only to name it in the error
    body = """
        outside = x[x < 0]
        if outside.numel() > 0:
            bad = int(outside[0].item())
            raise RuntimeError(f"index {bad} is negative")
        return x
    """
    assert lint(body) == []
    assert lint(body.replace('raise RuntimeError(f"index {bad} is negative")', "x = x + bad")) == [8]
    assert lint(body.replace('RuntimeError(f"index {bad} is negative")', "SystemExit(bad)")) == [8]


def test_a_dispatch_that_returns_before_its_final_raise_stays_hot() -> None:
    # torch-geometric's maybe_num_nodes: each branch returns; only the fall-through raises
    body = """
        if x.dim() == 2:
            return int(x.max()) + 1
        raise ValueError("unsupported input")
    """
    assert lint(body) == [7]


# -- a block that ends by raising: one reading for both passes ------------------------------
FAILING_BLOCKS = '''
def f(a, b, y):
    if a:
        msg = """no
such mode"""
        raise ValueError(msg)  # a string whose lines start anywhere
    if b:  raise KeyError(b)
    if b:
        x = 1
        raise SystemExit(0)
    if b:
        def g():
            return 1
        raise NotImplementedError
    if a:
        for i in y:
            break
        raise RuntimeError
    if a:
        return 1
    if b:
        raise SystemExit(1)
    if b:
        raise
    if a:
        return 2; raise KeyError(a)
    if a:
        raise ValueError from KeyError(a)
'''


def test_both_passes_read_which_blocks_end_by_raising_alike() -> None:
    """The file pass parses a libcst block back (converts the raised expression, where the raise
    is all the block holds) and asks analysis/failing_blocks.py, which the project pass asks of its
    own statements: the same answer for each `if` body."""
    import ast

    import libcst as cst

    from torchperf_lint.analysis.cold import fails_at_end
    from torchperf_lint.analysis.failing_blocks import fails_at_end as fails_on_ast

    source = textwrap.dedent(FAILING_BLOCKS)
    [function] = ast.parse(source).body
    assert isinstance(function, ast.FunctionDef)
    on_ast = [fails_on_ast(branch.body) for branch in function.body if isinstance(branch, ast.If)]
    module = cst.parse_module(source)
    [definition] = module.body
    assert isinstance(definition, cst.FunctionDef)
    on_cst = [fails_at_end(branch.body) for branch in definition.body.body if isinstance(branch, cst.If)]
    assert on_ast == on_cst == [True, True, False, True, False, False, False, True, False, True]

"""Branches a training step takes once or rarely (RULES.md, "Tensor and device inference"): cache-miss
builders, work on one step of many, cached builders and sampling or visualisation helpers. The
branches are read the same by the file's walk (analysis/cold.py, analysis/hotpath.py) and by the
project pass (project/summary.py, project/graph.py): a helper in another module called only from
such a branch is not hot. The helpers are read once, by the project pass (`Function.rare`), and the
file's walk asks it."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from torchperf_lint.api import lint_source, project_facts
from torchperf_lint.settings import Settings

SYNC = "TPL105"  # `.item()` in forward code: hot code reports it, cold code does not

_HELPER = "def build(x):\n    return x * x.max().item()\n"


def _forward(body: str, helper: str = _HELPER, header: str = "") -> str:
    source = f"import torch\nfrom torch import nn\n{header}\n{helper}\n\nclass Net(nn.Module):\n    def forward(self, x, key):\n"
    return source + textwrap.indent(textwrap.dedent(body).strip("\n"), " " * 8) + "\n        return x\n"


def _in_file(source: str) -> list[int]:
    return [f.line for f in lint_source(source, path="m.py", select=[SYNC])]


def _across_modules(tmp_path: Path, source: str) -> list[int]:
    """The helper moved to helpers.py: the project pass alone says whether it is hot."""
    helpers, _, model = source.partition("\n\nclass Net")
    helpers = helpers.replace("from torch import nn\n", "")
    model = "import torch\nfrom torch import nn\nfrom helpers import *\n\nclass Net" + model
    files = {"pyproject.toml": "[project]\nname = 'p'\n", "helpers.py": helpers, "model.py": model}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    path = tmp_path / "helpers.py"
    return [f.line for f in lint_source(path.read_text(), str(path), select=[SYNC])]


COLD = {
    "grid-rebuilt-when-its-shape-changes": """
        if self.grid[0].shape[2:4] != x.shape[2:4]:
            self.grid[0] = build(x)
        """,
    "key-not-in-cache": """
        if key not in self.cache:
            self.cache[key] = build(x)
        x = x + self.cache[key]
        """,
    "none-or-stale": """
        if self.mask is None or self.mask.size(0) != len(x):
            self.mask = build(x)
        """,
    "module-moved-when-its-device-differs": """
        backbone = self.backbone[0]
        if backbone.device != x.device or backbone.weight.dtype != x.dtype:
            self.backbone[0] = build(x)
        """,
    "looked-up-then-built-on-a-miss": """
        freqs = self.cache.get(key)
        if freqs is None:
            freqs = build(x)
        self.cache[key] = freqs
        """,
    "not-step-modulo": """
        if not self.step % 100:
            build(x)
        """,
    "every-n-steps-or-the-last": """
        if step % 100 == 0 or last_step:
            build(x)
        """,
    "first-batch": """
        if self.global_step == 0:
            build(x)
        """,
}
HOT = {
    "a-default-filled-in-a-local": """
        mask = None
        if mask is None:
            mask = build(x)
        """,
    "looked-up-but-never-stored": """
        mask = self.masks.get(key)
        if mask is None:
            mask = build(x)
        """,
    "other-than-the-stored-value": """
        if self.grid.shape != x.shape:
            self.other = build(x)
        """,
    "moved-from-a-parameter-every-step": """
        if key.device != x.device:
            self.other = build(x)
        """,
    "local-rebound-before-the-check": """
        backbone = self.backbone[0]
        backbone = key
        if backbone.device != x.device:
            self.backbone[0] = build(x)
        """,
    "i-is-not-a-step-counter": """
        for i in range(2):
            if i == 0:
                build(x)
        """,
}


@pytest.mark.parametrize("body", COLD.values(), ids=COLD.keys())
def test_a_branch_taken_once_or_rarely_is_cold(body: str, tmp_path: Path) -> None:
    assert _in_file(_forward(body)) == []
    assert _across_modules(tmp_path, _forward(body)) == []


@pytest.mark.parametrize("body", HOT.values(), ids=HOT.keys())
def test_a_branch_taken_every_step_stays_hot(body: str, tmp_path: Path) -> None:
    assert _in_file(_forward(body)) == [5]
    assert _across_modules(tmp_path, _forward(body)) == [4]


RARE_HELPERS = {
    "lru-cache-builder": ("import functools\n", "@functools.lru_cache(maxsize=None)\n" + _HELPER),
    "cache-builder": ("from functools import cache\n", "@cache\n" + _HELPER),
    "calls-save-image": (
        "from torchvision.utils import save_image\n",
        "def build(x):\n    save_image(x, 'a.png')\n    return x * x.max().item()\n",
    ),
    "plots": (
        "import matplotlib.pyplot as plt\n",
        "def build(x):\n    plt.plot(x.cpu())\n    return x * x.max().item()\n",
    ),
    "named-like-visualisation": (
        "",
        "def visualize_depth(x):\n    return x * x.max().item()\n\nbuild = visualize_depth\n",
    ),
    # the import inside the helper (ultralytics' `import matplotlib.pyplot as plt  # scope for
    # faster 'import ultralytics'`): the project pass used to read only the module's imports
    "imports-matplotlib-itself": (
        "",
        "def build(x):\n    import matplotlib.pyplot as plt\n    plt.plot(x.cpu())\n    return x * x.max().item()\n",
    ),
    # an optional logger (`wandb = None` where it is missing): the file's walk used to find two
    # bindings of `wandb` and know neither
    "logs-images-to-an-optional-wandb": (
        "try:\n    import wandb\nexcept ImportError:\n    wandb = None\n",
        "def build(x):\n    wandb.log({'x': wandb.Image(x.cpu())})\n    return x * x.max().item()\n",
    ),
}


@pytest.mark.parametrize(("header", "helper"), RARE_HELPERS.values(), ids=RARE_HELPERS.keys())
def test_a_cached_builder_or_a_visualisation_helper_is_cold_whoever_calls_it(
    header: str, helper: str, tmp_path: Path
) -> None:
    body = "x = visualize_depth(x)" if "visualize_depth" in helper else "x = build(x)"
    assert _in_file(_forward(body, helper, header)) == []
    assert _across_modules(tmp_path, _forward(body, helper, header)) == []


def test_a_helper_importing_something_else_itself_stays_hot(tmp_path: Path) -> None:
    """The look-alike: an import inside the helper that draws nothing."""
    helper = "def build(x):\n    import math\n    return x * math.sqrt(x.max().item())\n"
    source = _forward("x = build(x)", helper)
    assert _in_file(source) == [6]
    assert _across_modules(tmp_path, source) == [5]


def test_a_helper_drawing_only_on_a_branch_the_step_skips_stays_hot(tmp_path: Path) -> None:
    """yolov5's `on_train_batch_end` logs `wandb.Image` only under `if self.plots:`: the rest of
    it runs every step, so the drawing call does not make the whole function rare."""
    header = "from torchvision.utils import save_image\n"
    helper = (
        "def build(x, step):\n    if step == 0:\n        save_image(x, 'a.png')\n"
        "    return x * x.max().item()\n"
    )
    source = _forward("x = build(x, key)", helper, header)
    assert _in_file(source) == [8]
    assert _across_modules(tmp_path, source) == [7]


def test_the_file_pass_asks_the_project_which_functions_run_rarely() -> None:
    """One answer for both passes: the hot paths read the project summary's `rare` by position
    (EntryFacts.rare_functions), with no reading of their own."""
    header, helper = RARE_HELPERS["imports-matplotlib-itself"]
    facts = project_facts(_forward("x = build(x)", helper, header), "<string>", Settings())
    assert facts.rare_functions == frozenset({0})  # build, not Net.forward

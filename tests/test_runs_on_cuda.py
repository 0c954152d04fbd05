"""Where code runs on the GPU (RULES.md, "Tensor and device inference"): a module runs on CUDA when
it shows CUDA use (read through import aliases, or through a project helper that returns a CUDA
device) or when hot code of a module that does reaches it; being imported is not enough. A default
device set to CUDA makes factories device-side. Both readers of a module (the project pass's ast
summary and the file's libcst context) say the same."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from torchperf_lint.engine.context import Context
from torchperf_lint.project.store import Projects
from torchperf_lint.project.summary import summarize
from torchperf_lint.settings import Settings
from torchperf_lint.syntax.walker import walk

from .helpers import finding_lines, write_project

pytestmark = pytest.mark.usefixtures("precision_off_rules_on")  # TPL101 is off by default


def _facts(root: Path, target: str):  # type: ignore[no-untyped-def]
    return Projects(Settings()).facts_for(str(root / target))


# -- showing CUDA use, read the same by both readers ---------------------------------------------
@pytest.mark.parametrize(
    ("source", "shows"),
    [
        ("import torch\nx = torch.zeros(1).cuda()\n", True),
        ("import torch as th\nok = th.cuda.is_available()\n", True),
        ("import torch as th\ndef f():\n    return th.cuda.device_count()\n", True),
        ("from torch import cuda\nok = cuda.is_available()\n", True),
        ("import torch.cuda as tc\nok = tc.is_available()\n", True),
        ('import torch\ndevice = torch.device("cuda:0")\n', True),
        ("import torch\ndevice = torch.accelerator.current_accelerator()\n", True),
        ("import torch as th\nok = th.accelerator.is_available()\n", True),
        ("from torch import accelerator\nok = accelerator.is_available()\n", True),
        ("import torch as th\nx = th.zeros(1)\n", False),
        ("import numpy as np\nok = np.cuda.is_available()\n", False),  # np is not torch
        ("import torch\nnote = 'on the GPU'\n", False),
        # NCCL runs only between GPUs: a process group over it is CUDA use.
        ('import torch.distributed as dist\ndist.init_process_group("nccl")\n', True),
        ("import torch.distributed as dist\ndist.init_process_group(backend='nccl', rank=0)\n", True),
        ('import torch.distributed as dist\ndist.init_process_group(backend="gloo")\n', False),
        # A device nobody names and a local rank say nothing about which accelerator runs.
        ('import os, torch\nrank = int(os.environ["LOCAL_RANK"])\nmodel.to(device)\n', False),
    ],
)
def test_both_readers_see_cuda_use_through_import_aliases(source: str, shows: bool) -> None:
    summary = summarize(source)
    assert summary is not None and summary.shows_cuda is shows
    module = cst.parse_module(source)
    context = Context("m.py", source, walk(module, frozenset()), Settings())
    assert context.shows_cuda_use is shows


# -- reached from hot code, not from imports -------------------------------------------------------
_TRAIN = """
    import torch
    from models.net import Net
    from data import Jitter, make_loader

    def main():
        device = torch.device("cuda")
        model = Net().to(device)
        loader = make_loader(Jitter())
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for x, y in loader:
            loss = model(x.to(device)).sum()
            loss.backward()
            optimizer.step()
    """
_NET = """
    import torch
    from torch import nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 8)

        def forward(self, x):
            keep = torch.rand(x.shape[0], 8) > 0.5
            return self.fc(x) * keep
    """
_DATA = """
    import torch
    from torch import nn

    class Jitter(nn.Module):
        def forward(self, image):
            shift = torch.randn(3) > 0
            return image * shift

    def make_loader(transform):
        return torch.utils.data.DataLoader(list(range(8)), collate_fn=transform)
    """


def test_a_device_agnostic_model_trained_by_a_cuda_script_runs_on_cuda(tmp_path: Path) -> None:
    root = write_project(tmp_path, {"train.py": _TRAIN, "models/net.py": _NET, "data.py": _DATA})
    assert (
        _facts(root, "models/net.py").runs_on_cuda
        == "Net is moved to the device in train.py, which shows CUDA use"
    )
    assert finding_lines(root, "models/net.py", "TPL101") == [10]


def test_a_transform_the_cuda_script_only_imports_does_not_run_on_cuda(tmp_path: Path) -> None:
    root = write_project(tmp_path, {"train.py": _TRAIN, "models/net.py": _NET, "data.py": _DATA})
    assert _facts(root, "data.py").runs_on_cuda is None
    assert finding_lines(root, "data.py", "TPL101") == []


_BUILD = """
    import torch
    from torch import nn

    class Criterion(nn.Module):
        def forward(self, pred, target):
            keep = torch.rand(pred.shape[0]) > 0.5
            return ((pred - target) ** 2)[keep].mean()

    def build(device):
        criterion = Criterion()
        criterion.to(device)
        return criterion
    """
_UNUSED = """
    import torch
    from torch import nn

    class Unused(nn.Module):
        def forward(self, pred):
            return pred * (torch.rand(pred.shape[0]) > 0.5)

    def build_unused(device):
        return Unused().to(device)
    """
_BUILDING_TRAIN = """
    import torch
    from models import builders, unused

    def make(device):
        return builders.build(device)

    def main(model, loader, optimizer):
        device = torch.device("cuda")
        criterion = make(device)
        for x, y in loader:
            loss = criterion(model(x.to(device)), y.to(device))
            loss.backward()
            optimizer.step()
    """


def test_a_model_moved_by_a_builder_a_cuda_script_calls_runs_on_cuda(tmp_path: Path) -> None:
    # DETR's main.py calls build_model(args), whose build() moves the criterion it makes to
    # torch.device(args.device): the criterion's forward runs in the CUDA process
    files = {"train.py": _BUILDING_TRAIN, "models/__init__.py": "", "models/builders.py": _BUILD}
    root = write_project(tmp_path, {**files, "models/unused.py": _UNUSED})
    assert _facts(root, "models/builders.py").runs_on_cuda == (
        "Criterion is moved to the device in build (models/builders.py), called from train.py, which shows CUDA use"
    )
    assert finding_lines(root, "models/builders.py", "TPL101") == [6]
    # a builder the script imports and never calls
    assert _facts(root, "models/unused.py").runs_on_cuda is None


def test_a_model_moved_by_a_builder_nothing_calls_is_not_on_cuda(tmp_path: Path) -> None:
    train = _BUILDING_TRAIN.replace("builders.build(device)", "None")
    files = {"train.py": train, "models/__init__.py": "", "models/builders.py": _BUILD}
    root = write_project(tmp_path, files)
    assert _facts(root, "models/builders.py").runs_on_cuda is None
    assert finding_lines(root, "models/builders.py", "TPL101") == []


_SOLVER = """
    import torch
    from torch import nn

    class Roots(nn.Module):
        def forward(self, coeffs):
            host = coeffs.detach().cpu().double()
            companion = torch.zeros(host.shape[0], 3, 3, dtype=torch.float64)
            companion[:, 1:, :2] = torch.eye(2, dtype=torch.float64)
            companion[:, :, 2] = -host
            return torch.linalg.eigvals(companion)

    class Drop(nn.Module):
        def forward(self, x, **kwargs):
            keep = torch.rand(x.shape, **kwargs) > 0.1
            return x * keep
    """


def test_a_reached_module_reports_factories_only_where_they_meet_its_tensors(tmp_path: Path) -> None:
    """A module that runs on CUDA only because CUDA hot code reaches it: a host-side solve (every
    operand on the host) and a factory whose `**kwargs` may carry the device stay silent; the mask
    drawn for the batch (models/net.py) is reported."""
    train = """
        import torch
        from models.net import Net
        from solver import Drop, Roots

        def main(loader):
            device = torch.device("cuda")
            model = Net().to(device)
            roots = Roots().to(device)
            drop = Drop().to(device)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for x, y in loader:
                out = drop(model(x.to(device)), device=device)
                loss = out.sum() + roots(out[:, :3]).real.sum().to(device)
                loss.backward()
                optimizer.step()
        """
    root = write_project(tmp_path, {"train.py": train, "models/net.py": _NET, "solver.py": _SOLVER})
    assert _facts(root, "solver.py").runs_on_cuda is not None
    assert finding_lines(root, "solver.py", "TPL101") == []
    assert finding_lines(root, "models/net.py", "TPL101") == [10]


def test_a_helper_the_cuda_step_loop_calls_runs_on_cuda(tmp_path: Path) -> None:
    files = {
        "train.py": """
            import torch
            from noise import jitter

            def main(model, loader, optimizer):
                for x, y in loader:
                    loss = model(jitter(x.cuda())).sum()
                    loss.backward()
                    optimizer.step()
            """,
        "noise.py": """
            import torch

            def jitter(x):
                scale = torch.linspace(0, 1, 8) ** 2
                return x * scale
            """,
    }
    root = write_project(tmp_path, files)
    assert _facts(root, "noise.py").runs_on_cuda == "called per step from train.py, which shows CUDA use"
    assert finding_lines(root, "noise.py", "TPL101") == [4]


# DETR's engine.py: a training function that never names the device it runs on
_ENGINE = """
    import torch

    def train_one_epoch(model, loader, optimizer, device):
        for samples, targets in loader:
            loss = model(samples.to(device)).sum()
            loss.backward()
            optimizer.step()
    """


@pytest.mark.parametrize(
    ("device", "on_cuda"),
    [
        ('"cuda"', True),
        # look-alike: a script that never names CUDA says nothing of the device its callee runs on
        ('"cpu"', False),
    ],
)
def test_a_training_function_a_cuda_script_calls_runs_on_cuda(
    tmp_path: Path, device: str, on_cuda: bool
) -> None:
    """DETR: main.py picks the device (`--device` defaults to "cuda") and calls engine.py's
    `train_one_epoch` once per epoch; engine.py never names CUDA, but its step loop runs in that
    process, on that device."""
    files = {
        "main.py": f"""
            import argparse
            import torch
            from engine import train_one_epoch

            def main(args, model, loader, optimizer):
                device = torch.device(args.device)
                model.to(device)
                for epoch in range(args.epochs):
                    train_one_epoch(model, loader, optimizer, device)

            if __name__ == "__main__":
                parser = argparse.ArgumentParser()
                parser.add_argument("--device", default={device})
                main(parser.parse_args(), None, None, None)
            """,
        "engine.py": _ENGINE,
    }
    root = write_project(tmp_path, files)
    reason = _facts(root, "engine.py").runs_on_cuda
    if on_cuda:
        assert reason == "train_one_epoch is called from main.py, which shows CUDA use"
    else:
        assert reason is None
    assert finding_lines(root, "engine.py", "TPL703") == ([6] if on_cuda else [])
    assert finding_lines(root, "engine.py", "TPL701") == ([6] if on_cuda else [])


def test_fp32_training_a_cuda_script_runs_is_its_decision_where_it_names_precision(tmp_path: Path) -> None:
    """The script that picks the device is where a project sets TF32 or autocast (the example
    project's train.py): the engine it imports trains at that precision, whatever it names."""
    files = {
        "main.py": """
            import torch
            from engine import train_one_epoch

            def main(model, loader, optimizer):
                torch.set_float32_matmul_precision("high")
                device = torch.device("cuda")
                train_one_epoch(model.to(device), loader, optimizer, device)
            """,
        "engine.py": _ENGINE,
    }
    root = write_project(tmp_path, files)
    assert _facts(root, "engine.py").precision_importer == "main.py"
    assert finding_lines(root, "engine.py", "TPL701") == []
    assert finding_lines(root, "engine.py", "TPL703") == [6]


# -- a project helper that returns a CUDA device --------------------------------------------------
_DIST_UTIL = """
    import torch as th

    def dev():
        if th.cuda.is_available():
            return th.device(f"cuda")
        return th.device("cpu")
    """


def test_calling_a_helper_that_returns_a_cuda_device_is_cuda_use(tmp_path: Path) -> None:
    files = {
        "dist_util.py": _DIST_UTIL,
        "train_util.py": """
            import torch as th
            from torch.optim import AdamW
            import dist_util

            class TrainLoop:
                def __init__(self, model, data):
                    self.model = model.to(dist_util.dev())
                    self.opt = AdamW(self.model.parameters(), lr=1e-4)
                    self.data = data

                def run_loop(self):
                    for batch in self.data:
                        self.model(batch.to(dist_util.dev())).mean().backward()
                        self.opt.step()
            """,
    }
    root = write_project(tmp_path, files)
    assert (
        _facts(root, "train_util.py").cuda_helper == "calls dev (dist_util.py:3), which returns a CUDA device"
    )
    assert finding_lines(root, "train_util.py", "TPL702") == [8]


def test_a_device_helper_that_never_picks_cuda_is_not_cuda_use(tmp_path: Path) -> None:
    files = {
        "util.py": 'import torch\n\ndef dev():\n    return torch.device("cpu")\n',
        "train.py": "import torch\nfrom util import dev\n\nopt = torch.optim.AdamW([], lr=1)\nx = dev()\n",
    }
    root = write_project(tmp_path, files)
    assert _facts(root, "train.py").cuda_helper is None
    assert finding_lines(root, "train.py", "TPL702") == []


# -- a default device set to CUDA ---------------------------------------------------------------------
@pytest.mark.parametrize(
    "setter",
    [
        "torch.set_default_tensor_type('torch.cuda.FloatTensor')",
        "torch.set_default_tensor_type(torch.cuda.FloatTensor)",
        'torch.set_default_device("cuda")',
        'torch.set_default_device(torch.device("cuda:0"))',
    ],
)
def test_a_default_device_set_to_cuda_makes_factories_device_side(tmp_path: Path, setter: str) -> None:
    files = {
        "run_nerf.py": f"""
            import torch
            from helpers import render

            if __name__ == "__main__":
                {setter}
                for rays in torch.utils.data.DataLoader([]):
                    render(rays).sum().backward()
            """,
        "helpers.py": """
            import torch

            def render(rays):
                t = torch.linspace(0.0, 1.0, 64)
                return rays.cuda()[..., None] * t
            """,
    }
    root = write_project(tmp_path, files)
    assert _facts(root, "helpers.py").cuda_default == "run_nerf.py makes CUDA the default device"
    assert finding_lines(root, "helpers.py", "TPL101") == []


@pytest.mark.parametrize(
    ("binding", "on_device"),
    [
        # cleanrl's ppo_trxl: the device the script picks, handed to the setter through a name
        ('device = torch.device("cuda" if torch.cuda.is_available() else "cpu")', True),
        ('device = "cuda:0"', True),
        ('device = torch.device("cpu")', False),
        ('device = "cpu"', False),
    ],
)
def test_a_default_device_named_by_a_variable_is_read_through_it(
    tmp_path: Path, binding: str, on_device: bool
) -> None:
    files = {
        "train.py": f"""
            import torch

            class Encoding(torch.nn.Module):
                def forward(self, n):
                    return torch.arange(n - 1, -1, -1.0)

            if __name__ == "__main__":
                if torch.cuda.device_count():
                    {binding}
                    torch.set_default_device(device)
                else:
                    device = torch.device("cpu")
                model = Encoding().cuda()
                for x in torch.utils.data.DataLoader([]):
                    (model(8) * x.cuda()).sum().backward()
            """,
    }
    root = write_project(tmp_path, files)
    assert (_facts(root, "train.py").cuda_default is not None) == on_device
    assert finding_lines(root, "train.py", "TPL101") == ([] if on_device else [5])


def test_a_default_device_holds_in_the_process_that_sets_it(tmp_path: Path) -> None:
    # cleanrl: ppo_trxl.py sets the default device; dqn.py is another script, another process
    script = """
        import torch
        {setter}

        def train(q, loader, optimizer):
            for x in loader:
                picked = q(x.cuda())[torch.arange(len(x))]
                picked.sum().backward()
                optimizer.step()
        """
    files = {
        "ppo_trxl.py": script.format(setter='torch.set_default_device("cuda")'),
        "dqn.py": script.format(setter=""),
    }
    root = write_project(tmp_path, files)
    assert _facts(root, "dqn.py").cuda_default is None
    assert finding_lines(root, "ppo_trxl.py", "TPL101") == []
    assert finding_lines(root, "dqn.py", "TPL101") == [6]


def test_a_default_device_set_for_loading_and_restored_is_not_the_default(tmp_path: Path) -> None:
    files = {
        "train.py": """
            import torch

            def load(path):
                torch.set_default_tensor_type(torch.cuda.BFloat16Tensor)
                model = torch.load(path)
                torch.set_default_tensor_type(torch.FloatTensor)
                return model

            def train(model, loader, optimizer):
                for x in loader:
                    noise = torch.randn(4, 8)
                    model(x.cuda() + noise).sum().backward()
                    optimizer.step()
            """,
    }
    root = write_project(tmp_path, files)
    assert _facts(root, "train.py").cuda_default is None
    assert finding_lines(root, "train.py", "TPL101") == [11]


def test_a_host_buffer_filled_with_a_computed_tensor_meets_it(tmp_path: Path) -> None:
    """MeshCNNConv's message: `m = torch.empty(E, C)` filled slice by slice with what the layer
    computes holds that data, so it meets the batch's device; a constant fill (`mask[i] = 1`) and a
    host buffer filled with host values stay silent."""
    files = {
        "train.py": """
            import torch
            from layers import Mix

            def main(loader):
                model = Mix().cuda()
                optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
                for x, y in loader:
                    model(x.cuda()).sum().backward()
                    optimizer.step()
            """,
        "layers.py": """
            import torch
            from torch import nn

            class Mix(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.lin = nn.Linear(8, 8)

                def forward(self, x):
                    m = torch.empty(x.shape[0], 8)
                    m[0::2] = self.lin(x[0::2])
                    mask = torch.zeros(x.shape[0])
                    mask[0] = 1
                    table = torch.zeros(4)
                    table[1] = torch.ones(1)
                    return m, mask, table
            """,
    }
    root = write_project(tmp_path, files)
    assert _facts(root, "layers.py").runs_on_cuda is not None
    assert finding_lines(root, "layers.py", "TPL101") == [10]

"""What the project already did (issue 25, item 5), read by the project pass: cuDNN's algorithm
choice made in any module, and TPL403 only in the script that runs the training."""

from __future__ import annotations

from pathlib import Path

from torchperf_lint.api import lint_source
from torchperf_lint.project.summary import summarize

CONV_TRAINING = """\
import torch
from torch import nn

net = nn.Conv2d(3, 8, 3).cuda()
optimizer = torch.optim.SGD(net.parameters(), lr=0.1)

def train(loader):
    for x, y in loader:
        net(x.cuda()).sum().backward()
        optimizer.step()
"""


def _write(root: Path, files: dict[str, str]) -> None:
    (root / "pyproject.toml").write_text('[project]\nname = "p"\n')
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def _codes(root: Path, name: str) -> list[str]:
    path = root / name
    return [f.code for f in lint_source(path.read_text(), path=str(path), select=["TPL403"])]


def test_training_script_without_a_choice_is_flagged(tmp_path: Path) -> None:
    _write(tmp_path, {"train.py": CONV_TRAINING})
    assert _codes(tmp_path, "train.py") == ["TPL403"]


def test_cudnn_choice_in_another_module_by_tuple_assignment_counts(tmp_path: Path) -> None:
    setup = (
        "import torch\n\n"
        "def init_seeds():\n"
        "    torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = True, False\n"
    )
    _write(tmp_path, {"train.py": CONV_TRAINING, "utils/general.py": setup})
    assert _codes(tmp_path, "train.py") == []


def test_a_helper_module_imported_by_the_training_script_is_not_the_script(tmp_path: Path) -> None:
    script = "from utils.torch_utils import train\n\ntrain([])\n"
    _write(tmp_path, {"utils/torch_utils.py": CONV_TRAINING, "train.py": script})
    assert _codes(tmp_path, "utils/torch_utils.py") == []


TRAIN_WITH_FALLBACK = """\
import torch
from utils import smart_ddp

def setup(model, rank):
    if rank == -1 and torch.cuda.device_count() > 1:
        model = torch.nn.DataParallel(model)
    if rank != -1:
        model = smart_ddp(model, rank)
    return model
"""


def _tpl402(root: Path, files: dict[str, str]) -> list[int]:
    _write(root, files)
    path = root / "train.py"
    return [f.line for f in lint_source(path.read_text(), str(path), select=["TPL402"])]


def test_data_parallel_beside_a_ddp_helper_of_the_project_is_the_fallback(tmp_path: Path) -> None:
    helper = (
        "from torch.nn.parallel import DistributedDataParallel as DDP\n\n"
        "def smart_ddp(model, rank):\n    return DDP(model, device_ids=[rank])\n"
    )
    assert _tpl402(tmp_path, {"train.py": TRAIN_WITH_FALLBACK, "utils.py": helper}) == []


def test_a_helper_that_returns_no_ddp_keeps_the_data_parallel_finding(tmp_path: Path) -> None:
    helper = "def smart_ddp(model, rank):\n    return model.to(rank)\n"
    assert _tpl402(tmp_path, {"train.py": TRAIN_WITH_FALLBACK, "utils.py": helper}) == [6]


STRATEGY_BASE = """\
class ParallelStrategy:
    def setup_module(self, module):
        raise NotImplementedError
"""

DATA_PARALLEL_STRATEGY = """\
from torch.nn import DataParallel
from strategies.parallel import ParallelStrategy

class DataParallelStrategy(ParallelStrategy):
    def setup_module(self, module):
        return DataParallel(module=module, device_ids=self.parallel_devices)
"""


def _strategy_findings(root: Path, ddp_body: str) -> list[int]:
    ddp = (
        "from torch.nn.parallel import DistributedDataParallel\n"
        "from strategies.parallel import ParallelStrategy\n\n"
        "class DDPStrategy(ParallelStrategy):\n"
        f"    def setup_module(self, module):\n        return {ddp_body}\n"
    )
    _write(
        root,
        {
            "strategies/__init__.py": "",
            "strategies/parallel.py": STRATEGY_BASE,
            "strategies/dp.py": DATA_PARALLEL_STRATEGY,
            "strategies/ddp.py": ddp,
        },
    )
    path = root / "strategies" / "dp.py"
    return [f.line for f in lint_source(path.read_text(), str(path), select=["TPL402"])]


def test_data_parallel_as_an_alternative_to_a_ddp_class_of_one_base_is_the_users_choice(tmp_path: Path) -> None:
    """Lightning's DataParallelStrategy beside DDPStrategy (lightning_fabric/strategies): the user
    picks the strategy, and the project already offers DDP."""
    assert _strategy_findings(tmp_path, "DistributedDataParallel(module)") == []


def test_a_sibling_class_that_builds_no_ddp_keeps_the_data_parallel_finding(tmp_path: Path) -> None:
    assert _strategy_findings(tmp_path, "module.to(self.root_device)") == [6]


PREDICTOR_BASE = """\
import torch
from torch import nn

class Model(nn.Module):
    def __init__(self, weights):
        super().__init__()
        self.net = nn.Linear(4, 2)

    def __call__(self, source, **options):
{call_body}
"""

STREAM_APP = """\
from models import Model

class Inference:
    def __init__(self, weights):
        self.model = None
        self.weights = weights

    def predict(self, images):
        self.model = Model(self.weights)
        self.model.eval()
        results = []
        for image in images:
            results.append(self.model(image, conf=0.25))
        return results
"""


def _tpl305(root: Path, call_body: str) -> list[int]:
    _write(root, {"models.py": PREDICTOR_BASE.format(call_body=call_body), "app.py": STREAM_APP})
    path = root / "app.py"
    return [f.line for f in lint_source(path.read_text(), str(path), select=["TPL305"])]


def test_an_instance_with_a_call_of_its_own_runs_no_forward(tmp_path: Path) -> None:
    """ultralytics: `YOLO(path)(image)` runs Model.__call__, which predicts under its own
    inference mode; what a `__call__` of the project does is not known here."""
    assert _tpl305(tmp_path, "        return self.predict(source, **options)") == []


def test_a_call_that_hands_on_to_the_module_call_is_a_forward(tmp_path: Path) -> None:
    assert _tpl305(tmp_path, "        return super().__call__(source)") == [13]


REDUCE_HELPER = """\
import torch
import torch.distributed as dist

def reduce_loss_dict(loss_dict):
    if not dist.is_initialized() or dist.get_world_size() < 2:
{single_gpu}
    losses = torch.stack([loss_dict[k] for k in sorted(loss_dict)])
    dist.reduce(losses, dst=0)
    return {{k: v for k, v in zip(sorted(loss_dict), losses)}}
"""

GAN_LOOP = """\
import torch
from distributed import reduce_loss_dict

def train(loader, generator, discriminator, d_optim, device):
    loss_dict = {}
    for real in loader:
        fake = generator(torch.randn(8, 512, device=device))
        d_loss = discriminator(fake).mean() - discriminator(real.to(device)).mean()
        loss_dict["d"] = d_loss
        d_optim.zero_grad()
        d_loss.backward()
        d_optim.step()
        loss_reduced = reduce_loss_dict(loss_dict)
        d_loss_val = loss_reduced["d"].mean().item()
"""


def _tpl107(root: Path, single_gpu: str) -> list[int]:
    _write(root, {"distributed.py": REDUCE_HELPER.format(single_gpu=single_gpu), "train.py": GAN_LOOP})
    path = root / "train.py"
    return [f.line for f in lint_source(path.read_text(), str(path), select=["TPL107"])]


def test_a_dict_a_helper_hands_back_holds_the_tensors_stored_in_it(tmp_path: Path) -> None:
    """stylegan2's reduce_loss_dict returns the dict it was given on one GPU: the `.item()` of
    its items syncs at every step."""
    assert _tpl107(tmp_path, "        return loss_dict") == [14]


def test_a_helper_that_always_builds_a_new_dict_keeps_its_items_unknown(tmp_path: Path) -> None:
    assert _tpl107(tmp_path, "        return {k: float(v) for k, v in loss_dict.items()}") == []


def test_only_a_parameter_returned_as_it_came_in_is_handed_back() -> None:
    """`return loss_dict` on one GPU hands the argument back; a parameter rebound first, or
    returned on a path that tested its type (`if isinstance(x, np.ndarray): return x`), does not."""
    summary = summarize(
        "import numpy as np\n"
        "def reduce(losses, world):\n    if world < 2:\n        return losses\n    return {}\n"
        "def to_numpy(x):\n    if isinstance(x, np.ndarray):\n        return x\n    return x.cpu().numpy()\n"
        "def scaled(x):\n    x = x * 2\n    return x\n"
    )
    assert summary is not None
    assert {f.name: f.returns_params for f in summary.functions} == {
        "reduce": ["losses"],
        "to_numpy": [],
        "scaled": [],
    }


GAN_MODELS = """\
from torch import nn

class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 1)

    def forward(self, x):
        return self.fc(x)
"""

GAN_TRAIN = """\
import torch
from torch import nn
from models import Discriminator

def train(loader, critic, optimizer, device):
    for real in loader:
        score = critic(real.to(device)).mean()
        optimizer.zero_grad()
        score.backward()
        optimizer.step()
        shown = critic(real.to(device)).mean().item()

if __name__ == "__main__":
    critic = Discriminator().cuda()
    if torch.cuda.device_count() > 1:
        critic = nn.parallel.DistributedDataParallel(critic)
    optimizer = torch.optim.Adam(critic.parameters())
    train([], {passed}, optimizer, "cuda")
"""


def _critic_findings(root: Path, passed: str) -> list[int]:
    _write(root, {"models.py": GAN_MODELS, "train.py": GAN_TRAIN.format(passed=passed)})
    path = root / "train.py"
    return [f.line for f in lint_source(path.read_text(), str(path), select=["TPL107"])]


def test_a_parameter_every_caller_passes_a_model_for_is_a_model(tmp_path: Path) -> None:
    """stylegan2's train(args, loader, generator, discriminator, ...): the models arrive as
    arguments whose names say nothing; every call passes an nn.Module instance (maybe in DDP)."""
    assert _critic_findings(tmp_path, "critic") == [11]


def test_a_parameter_handed_something_else_stays_unknown(tmp_path: Path) -> None:
    assert _critic_findings(tmp_path, "lambda x: x") == []

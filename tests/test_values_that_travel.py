"""Values the analysis follows to where a rule needs them (RULES.md, "Values that travel"), each
found the same on every route: the library API (the editor's), the CLI on the file and on the
project, and flake8. From the reading set (benchmarks/ecosystem/misses.csv)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from torchperf_lint.api import lint_source
from torchperf_lint.cli import main

from .helpers import write_project


def _cli(capsys: pytest.CaptureFixture[str], path: Path, target: Path, code: str) -> list[int]:
    main(["--format", "json", "--no-cache", "--select", code, str(path)])
    findings = json.loads(capsys.readouterr().out)
    return sorted(int(f["line"]) for f in findings if Path(f["path"]).resolve() == target.resolve())


def _flake8(root: Path, target: Path, code: str) -> list[int]:
    result = subprocess.run(
        [sys.executable, "-m", "flake8", "--isolated", "--select", code, "--format", "%(row)d", str(target)],
        capture_output=True,
        text=True,
        cwd=root,
    )
    assert result.returncode in (0, 1), result.stderr
    return sorted(int(row) for row in result.stdout.split())


def routes(capsys: pytest.CaptureFixture[str], root: Path, target: str, code: str) -> list[int]:
    """The lines of `code`'s findings in `target`, after checking every route gives the same."""
    path = root / target
    api = sorted(f.line for f in lint_source(path.read_text(), str(path), select=[code]))
    assert _cli(capsys, path, path, code) == api, "the CLI on the file"
    assert _cli(capsys, root, path, code) == api, "the CLI on the project"
    assert _flake8(root, path, code) == api, "flake8"
    return api


def edited_routes(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    files: dict[str, str],
    variant: tuple[str, str],
    target: str,
    code: str,
) -> list[int]:
    """`routes` on the project `files`, its last file edited by `variant` (old text, new text)."""
    *others, (last, text) = files.items()
    root = write_project(tmp_path, {**dict(others), last: text.replace(*variant)})
    return routes(capsys, root, target, code)


# -- a value the step back-propagates is a tensor ------------------------------------------
# DiT's train.py: the loss comes out of a dict a project method returns, then `.item()` per step
DIFFUSION = """
import torch

class Diffusion:
    def training_losses(self, model, x, t):
        return {"loss": (model(x, t) - x) ** 2}
"""
TRAIN = """
import torch
from diffusion import Diffusion

def train(model, loader, opt, device):
    diffusion = Diffusion()
    running_loss = 0.0
    for x, y in loader:
        x = x.to(device)
        t = torch.randint(0, 1000, (x.shape[0],), device=device)
        loss_dict = diffusion.training_losses(model, x, t)
        loss = loss_dict["loss"].mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        running_loss += loss.item()
        stats = diffusion.training_losses(model, x, t)
        running_loss += stats["loss"].mean().item()
    return running_loss

model = torch.nn.Linear(4, 4).cuda()
"""


def test_a_loss_out_of_a_returned_dict_that_the_step_back_propagates_syncs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write_project(tmp_path, {"diffusion.py": DIFFUSION, "train.py": TRAIN})
    # line 17, the same read of a loss nothing back-propagates, stays unknown and silent
    assert routes(capsys, root, "train.py", "TPL107") == [15]


@pytest.mark.parametrize(
    "backward, expected",
    [
        ("loss.backward()", [15]),
        # imagen's trainer: the loss is handed to `accelerator.backward(loss)`; the accelerator
        # itself is no tensor, so printing it reads nothing
        ("accelerator.backward(loss)\n        print(accelerator)", [16]),
        ("torch.autograd.backward(loss)", [15]),
        # k-diffusion: the mean of the losses is handed over, and their gathered mean read per step
        ("accelerator.backward(loss.mean())", [15]),
    ],
)
def test_a_value_handed_to_a_backward_call_is_a_tensor(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], backward: str, expected: list[int]
) -> None:
    train = TRAIN.replace(
        "def train(model, loader, opt, device):", "def train(model, loader, opt, device, accelerator):"
    )
    train = train.replace("        loss.backward()", "        " + backward)
    if "loss.mean()" in backward:
        train = train.replace(
            "running_loss += loss.item()", "running_loss += accelerator.gather(loss).mean().item()"
        )
    root = write_project(tmp_path, {"diffusion.py": DIFFUSION, "train.py": train})
    assert routes(capsys, root, "train.py", "TPL107") == expected


# -- a mapping built from named_parameters() is a parameter sequence -----------------------
# DiT's update_ema: `OrderedDict(model.named_parameters())`, walked with `.items()`
EMA = """
from collections import OrderedDict

import torch

@torch.no_grad()
def update_ema(ema_model, model, decay=0.9999):
    ema_params = OrderedDict(ema_model.named_parameters())
    model_params = OrderedDict(model.named_parameters())
    for name, param in model_params.items():
        ema_params[name].mul_(decay).add_(param.data, alpha=1 - decay)

@torch.no_grad()
def freeze_blocks(model, names):
    blocks = OrderedDict(model.named_children())
    for name, block in blocks.items():
        block.requires_grad_(name in names)

def train(model, ema, loader, opt):
    for x, y in loader:
        loss = model(x.cuda()).mean()
        loss.backward()
        opt.step()
        update_ema(ema, model)
        freeze_blocks(model, ["head"])
"""


def test_a_loop_over_an_ordered_dict_of_named_parameters_is_per_parameter(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write_project(tmp_path, {"train.py": EMA})
    # line 15, the same loop over an OrderedDict of named_children(), walks modules, not tensors
    assert routes(capsys, root, "train.py", "TPL204") == [9]


# -- a NumPy index array is a host index ---------------------------------------------------
# cleanrl's ppo_atari.py, at module level: CUDA rollout buffers indexed by a shuffled NumPy minibatch
PPO = """
import numpy as np
import torch

device = torch.device("cuda")
agent = torch.nn.Linear(4, 1).to(device)
optimizer = torch.optim.Adam(agent.parameters())
obs = torch.zeros((128, 4)).to(device)
returns = torch.zeros(128).to(device)
b_inds = np.arange(128)
for update in range(1000):
    np.random.shuffle(b_inds)
    for start in range(0, 128, 32):
        mb_inds = b_inds[start : start + 32]
        first = b_inds[start]
        loss = ((agent(obs[mb_inds]).squeeze(1) - returns[mb_inds]) ** 2).mean() + agent(obs[first]).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""


def test_a_cuda_tensor_indexed_by_a_slice_of_a_numpy_array_copies_the_index(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write_project(tmp_path, {"ppo.py": PPO})
    # `obs[first]`, one element of the array (an int), copies nothing
    assert routes(capsys, root, "ppo.py", "TPL103") == [15, 15]


# -- a model built by name from a registry -------------------------------------------------
# pytorch/examples' imagenet/main.py: `models.__dict__[args.arch]()` with --arch defaulting to resnet18
IMAGENET = """
import argparse

import torch
import torchvision.models as models

parser = argparse.ArgumentParser()
parser.add_argument("-a", "--arch", default="resnet18")

def train(loader, model, optimizer):
    for images, target in loader:
        loss = torch.nn.functional.cross_entropy(model(images.cuda()), target.cuda())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

def main(loader, device, name):
    args = parser.parse_args()
    model = models.__dict__[args.arch]()
    other = models.__dict__[name]()
    if device.type == "cuda":
        if args.arch.startswith("vgg"):
            model.cuda()
        else:
            model = torch.nn.DataParallel(model).cuda()
        other = other.cuda()
    else:
        model.to(device)
    optimizer = torch.optim.SGD([*model.parameters(), *other.parameters()], lr=0.1)
    for epoch in range(90):
        train(loader, model, optimizer)
        train(loader, other, optimizer)
"""


def test_a_registry_model_named_by_an_option_is_judged_by_its_default(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write_project(tmp_path, {"main.py": IMAGENET})
    # `other`, named by a parameter, is unknown; `model.to(device)` runs only off CUDA, and the
    # VGG branch never under the default
    assert routes(capsys, root, "main.py", "TPL404") == [24]
    path = root / "main.py"
    (message,) = [f.message for f in lint_source(path.read_text(), str(path), select=["TPL404"])]
    assert message.startswith("model (resnet18 assumed: the default of --arch) is a 2-D convnet")


# -- names a star import of a project module binds --------------------------------------------
# pytorch-deeplab-xception's train.py has no `import torch`: `from modeling.deeplab import *` binds
# torch, and its validation runs the model under `with torch.no_grad():`
DEEPLAB = """
import torch
import torch.nn as nn

class DeepLab(nn.Module):
    def forward(self, x):
        return x
"""
DEEPLAB_WITH_ALL = DEEPLAB + '\n__all__ = ["DeepLab"]\n'
VALIDATE = """
from modeling.deeplab import *

class Trainer:
    def validation(self, epoch):
        self.model.eval()
        for i, sample in enumerate(self.val_loader):
            image = sample["image"].cuda()
            with torch.no_grad():
                output = self.model(image)
"""


def test_torch_bound_by_a_star_import_of_a_project_module_is_torch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write_project(tmp_path, {"modeling/deeplab.py": DEEPLAB, "train.py": VALIDATE})
    assert routes(capsys, root, "train.py", "TPL305") == []


@pytest.mark.parametrize(
    "files",
    [
        pytest.param({"modeling/deeplab.py": DEEPLAB_WITH_ALL}, id="__all__-leaves-torch-out"),
        pytest.param({"modeling/deeplab.py": "import numpy as torch\n"}, id="another-module-named-torch"),
        pytest.param({}, id="module-outside-the-project"),
    ],
)
def test_a_star_import_that_binds_no_torch_leaves_the_name_unknown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], files: dict[str, str]
) -> None:
    # `torch.no_grad()` then names nothing known: the evaluation loop runs with autograd on
    root = write_project(tmp_path, {**files, "train.py": VALIDATE})
    assert routes(capsys, root, "train.py", "TPL305") == [9]


# -- a DataLoader iterated again and again by a function of another module ----------------------
# SimCLR's run.py hands its loader to SimCLR.train, whose epoch loop iterates it
SIMCLR = """
class SimCLR:
    def __init__(self, model, epochs):
        self.model, self.epochs = model, epochs

    def train(self, train_loader):
        for epoch in range(self.epochs):
            for images, _ in enumerate(train_loader):
                self.model(images).sum().backward()

    def evaluate(self, loader):
        for images in loader:
            self.model(images)
"""
RUN = """
import torch
from simclr import SimCLR

def main(args, dataset, model):
    train_loader = torch.utils.data.DataLoader(dataset, batch_size=256, num_workers=args.workers)
    simclr = SimCLR(model, args.epochs)
    simclr.train(train_loader)

def score(args, dataset, model):
    loader = torch.utils.data.DataLoader(dataset, batch_size=256, num_workers=args.workers)
    simclr = SimCLR(model, 1)
    simclr.evaluate(loader)
"""
# pytorch-cifar100: a helper builds and returns the loader; train.py binds it at the top and its
# train(epoch), called once per epoch, iterates it
UTILS = """
from torch.utils.data import DataLoader

def get_training_dataloader(dataset, num_workers=2):
    loader = DataLoader(dataset, shuffle=True, num_workers=num_workers, batch_size=128)
    return loader

def get_test_dataloader(dataset, num_workers=2):
    return DataLoader(dataset, num_workers=num_workers, batch_size=128)
"""
CIFAR_TRAIN = """
from utils import get_training_dataloader, get_test_dataloader

def train(epoch):
    for images, labels in enumerate(training_loader):
        net(images).sum().backward()

def test():
    for images, labels in test_loader:
        net(images)

if __name__ == "__main__":
    training_loader = get_training_dataloader(None)
    test_loader = get_test_dataloader(None)
    for epoch in range(1, 200):
        train(epoch)
    test()
"""


def test_a_loader_another_module_iterates_every_epoch_restarts_its_workers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write_project(tmp_path, {"simclr.py": SIMCLR, "run.py": RUN})
    # score()'s loader is iterated once by evaluate(): nothing to keep
    assert routes(capsys, root, "run.py", "TPL503") == [5]


def test_a_returned_loader_bound_to_a_name_iterated_every_epoch_restarts_its_workers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write_project(tmp_path, {"utils.py": UTILS, "train.py": CIFAR_TRAIN})
    # the test loader is iterated once, after training
    assert routes(capsys, root, "utils.py", "TPL503") == [4]


def test_a_returned_loader_of_a_builder_called_with_star_arguments_is_bound_as_well(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`**kwargs` in the call may fill any parameter, which leaves what each argument is handed
    unknown; the loader the builder returns is bound by the caller all the same."""
    main = """
    from utils import get_training_dataloader

    def main(net, epochs, **options):
        loader = get_training_dataloader(None, **options)
        for epoch in range(epochs):
            for images in loader:
                net(images).sum().backward()
    """
    root = write_project(tmp_path, {"utils.py": UTILS, "main.py": main})
    assert routes(capsys, root, "utils.py", "TPL503") == [4]


# jfzhang95/pytorch-deeplab-xception: the builder returns the loaders of the dataset asked for, each
# branch its own; a trainer unpacks them into attributes that its methods walk, once per epoch
XCEPTION_LOADERS = """
from torch.utils.data import DataLoader

def make_data_loader(args, train_set, val_set):
    if args.dataset == "pascal":
        train_loader = DataLoader(train_set, batch_size=8, shuffle=True, num_workers=4)
        val_loader = DataLoader(val_set, batch_size=8, num_workers=4)
        return train_loader, val_loader, None, 21
    elif args.dataset == "coco":
        train_loader = DataLoader(train_set, batch_size=8, shuffle=True, num_workers=4)
        val_loader = DataLoader(val_set, batch_size=8, num_workers=4)
        return train_loader, val_loader, None, 81
    raise NotImplementedError
"""
XCEPTION_TRAIN = """
from tqdm import tqdm
from dataloaders import make_data_loader

class Trainer:
    def __init__(self, args, model, train_set, val_set):
        self.model = model
        self.train_loader, self.val_loader, self.test_loader, self.nclass = make_data_loader(
            args, train_set, val_set
        )

    def training(self, epoch):
        tbar = tqdm(self.train_loader)
        for i, sample in enumerate(tbar):
            self.model(sample["image"].cuda()).sum().backward()

    def validation(self, epoch):
        for sample in self.val_loader:
            self.model(sample["image"].cuda())

def main(args, model, train_set, val_set):
    trainer = Trainer(args, model, train_set, val_set)
    for epoch in range(args.epochs):
        trainer.training(epoch)
        if epoch % 2 == 0:
            trainer.validation(epoch)
"""


def test_loaders_a_builder_returns_into_a_trainers_attributes_walked_every_epoch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write_project(tmp_path, {"dataloaders.py": XCEPTION_LOADERS, "train.py": XCEPTION_TRAIN})
    # the first branch's loaders: the tuple the project pass reads is the first one returned
    assert routes(capsys, root, "dataloaders.py", "TPL503") == [5, 6]
    once = XCEPTION_TRAIN.replace("    for epoch in range(args.epochs):\n", "    for epoch in [0]:\n")
    once = once.replace("for epoch in [0]:", "if True:\n        epoch = 0")
    root = write_project(tmp_path / "once", {"dataloaders.py": XCEPTION_LOADERS, "train.py": once})
    assert routes(capsys, root, "dataloaders.py", "TPL503") == []


# the same, with the worker count handed through the builder's `**kwargs` from a dict of the trainer
XCEPTION_KWARGS_LOADERS = XCEPTION_LOADERS.replace(
    "def make_data_loader(args, train_set, val_set):",
    ("def make_data_loader(args, train_set, val_set, **kwargs):"),
).replace(", num_workers=4)", ", **kwargs)")
XCEPTION_KWARGS_TRAIN = XCEPTION_TRAIN.replace(
    "        self.train_loader, self.val_loader, self.test_loader, self.nclass = make_data_loader(\n"
    "            args, train_set, val_set\n",
    "        kwargs = {'num_workers': args.workers, 'pin_memory': True}\n"
    "        self.train_loader, self.val_loader, self.test_loader, self.nclass = make_data_loader(\n"
    "            args, train_set, val_set, **kwargs\n",
)


def test_worker_counts_handed_through_a_builders_kwargs_are_read_from_its_callers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert "**kwargs)" in XCEPTION_KWARGS_LOADERS and "**kwargs\n" in XCEPTION_KWARGS_TRAIN
    root = write_project(
        tmp_path, {"dataloaders.py": XCEPTION_KWARGS_LOADERS, "train.py": XCEPTION_KWARGS_TRAIN}
    )
    assert routes(capsys, root, "dataloaders.py", "TPL503") == [5, 6]
    fixed = [
        line
        for line in lint_source((root / "dataloaders.py").read_text(), str(root / "dataloaders.py"))
        if line.code == "TPL503" and line.fix is not None
    ]
    assert "persistent_workers=kwargs['num_workers'] > 0" in fixed[0].message


@pytest.mark.parametrize(
    "change",
    [
        ("'pin_memory': True}", "'pin_memory': True, 'persistent_workers': False}"),  # written out
        (
            "'pin_memory': True}\n",
            "'pin_memory': True}\n        kwargs[args.key] = args.value\n",
        ),  # keys added
        ("{'num_workers': args.workers, ", "{"),  # no workers
    ],
    ids=["persistent-workers-passed", "keys-added-by-the-caller", "no-workers"],
)
def test_a_builders_kwargs_that_may_hold_persistent_workers_or_no_workers_stay_silent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], change: tuple[str, str]
) -> None:
    assert change[0] in XCEPTION_KWARGS_TRAIN
    train = XCEPTION_KWARGS_TRAIN.replace(*change)
    root = write_project(tmp_path, {"dataloaders.py": XCEPTION_KWARGS_LOADERS, "train.py": train})
    assert routes(capsys, root, "dataloaders.py", "TPL503") == []


def test_kwargs_of_a_method_a_call_of_unknown_target_may_reach_stay_unknown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """imagen-pytorch: `add_train_dataset(self, ds, *, batch_size, **dl_kwargs)` builds
    `DataLoader(ds, batch_size=batch_size, **dl_kwargs)`; its test calls it with nothing more, and
    its CLI calls it on a trainer built by a helper the project pass does not follow."""
    trainer = """
    from torch.utils.data import DataLoader

    class Trainer:
        def add_train_dataset(self, ds, *, batch_size, **dl_kwargs):
            self.dl = DataLoader(ds, batch_size=batch_size, **dl_kwargs)
    """
    cli = """
    from loading import load_trainer

    def main(ds, config):
        trainer = load_trainer(config)
        trainer.add_train_dataset(ds, batch_size=8, **config["dataset"])
    """
    test = """
    from trainer import Trainer

    def test_add(ds):
        Trainer().add_train_dataset(ds, batch_size=8)
    """
    root = write_project(tmp_path, {"trainer.py": trainer, "cli.py": cli, "tests/test_trainer.py": test})
    assert routes(capsys, root, "trainer.py", "TPL501") == []
    assert routes(capsys, root, "trainer.py", "TPL502") == []


def test_kwargs_of_a_special_method_stay_unknown(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`__init__` runs from constructions (`Holder(ds, num_workers=4)`), which the calls by name do
    not list: only the subclass's `super().__init__(ds)` would be seen, with no keys."""
    holder = """
    import torch
    from torch.utils.data import DataLoader

    class Holder:
        def __init__(self, ds, **kwargs):
            self.dl = DataLoader(ds, batch_size=8, **kwargs)

    class Small(Holder):
        def __init__(self, ds):
            super().__init__(ds)

    def train(ds, model, optimizer):
        holder = Holder(ds, num_workers=4, pin_memory=True)
        for epoch in range(10):
            for x, y in holder.dl:
                torch.nn.functional.mse_loss(model(x.cuda()), y.cuda()).backward()
                optimizer.step()
    """
    root = write_project(tmp_path, {"holder.py": holder})
    assert routes(capsys, root, "holder.py", "TPL501") == []
    assert routes(capsys, root, "holder.py", "TPL502") == []


def test_a_returned_loader_bound_in_a_function_and_iterated_in_its_epoch_loop(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main = """
    from utils import get_training_dataloader, get_test_dataloader

    def main(net, epochs):
        loader = get_training_dataloader(None)
        for epoch in range(epochs):
            for images in loader:
                net(images).sum().backward()
        for images in get_test_dataloader(None):
            net(images)
    """
    root = write_project(tmp_path, {"utils.py": UTILS, "main.py": main})
    assert routes(capsys, root, "utils.py", "TPL503") == [4]


# DETR (and DeiT, ConvNeXt after it): main.py builds the loaders and hands them, per epoch, to
# engine.py, which walks them through a project generator that yields each item of its argument
MISC = """
import time

class MetricLogger:
    def __init__(self, delimiter="  "):
        self.delimiter = delimiter

    def log_every(self, iterable, print_freq, header=None):
        start = time.time()
        for obj in iterable:
            yield obj
            print(header, time.time() - start)

    def first(self, iterable, print_freq):
        for obj in iterable:
            yield obj[0]  # not the items themselves
"""
ENGINE = """
import misc

def train_one_epoch(model, data_loader, optimizer):
    metric_logger = misc.MetricLogger(delimiter="  ")
    for samples, targets in metric_logger.log_every(data_loader, 10, "Epoch:"):
        model(samples).sum().backward()
        optimizer.step()

def evaluate(model, data_loader):
    metric_logger = misc.MetricLogger(delimiter="  ")
    for samples, targets in metric_logger.log_every(data_loader, 10, "Test:"):
        model(samples)
"""
DETR_MAIN = """
import torch
from engine import evaluate, train_one_epoch

def main(args, model, optimizer, dataset_train, dataset_val):
    data_loader_train = torch.utils.data.DataLoader(dataset_train, num_workers=args.num_workers)
    if dataset_val is not None:
        data_loader_val = torch.utils.data.DataLoader(dataset_val, num_workers=args.num_workers)
    else:
        data_loader_val = None
    for epoch in range(args.epochs):
        train_one_epoch(model, data_loader_train, optimizer)
        evaluate(model, data_loader_val)
"""


@pytest.mark.parametrize(
    "edit, expected",
    [
        (("main.py", "", ""), [5, 7]),
        # look-alikes: a generator that yields something else than the items leaves what the loop
        # walks unknown, and so does a loader name bound to another value as well
        (("engine.py", 'log_every(data_loader, 10, "Test:")', "first(data_loader, 10)"), [5]),
        (("main.py", "data_loader_val = None", "data_loader_val = []"), [5]),
    ],
)
def test_a_loader_walked_through_a_project_generator_every_epoch_restarts_its_workers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: tuple[str, str, str], expected: list[int]
) -> None:
    files = {"misc.py": MISC, "engine.py": ENGINE, "main.py": DETR_MAIN}
    name, old, new = edit
    files[name] = files[name].replace(old, new)
    root = write_project(tmp_path, files)
    assert routes(capsys, root, "main.py", "TPL503") == expected


# PyTorch-YOLOv3: a helper returns the validation loader, the training function binds it once and
# hands it to `_evaluate` in its epoch loop
YOLO_TEST = """
import torch
import tqdm

def _create_validation_data_loader(dataset, n_cpu):
    dataloader = torch.utils.data.DataLoader(dataset, batch_size=8, num_workers=n_cpu)
    return dataloader

def _evaluate(model, dataloader):
    for imgs, targets in tqdm.tqdm(dataloader, desc="Validating"):
        model(imgs)
"""
YOLO_TRAIN = """
from test import _create_validation_data_loader, _evaluate

def run(model, dataset, epochs, n_cpu):
    validation_dataloader = _create_validation_data_loader(dataset, n_cpu)
    for epoch in range(epochs):
        _evaluate(model, validation_dataloader)
"""


@pytest.mark.parametrize(
    "variant, expected",
    [
        (("", ""), [5]),
        # look-alike: handed once, after the epochs
        (("    for epoch in range(epochs):\n        _evaluate", "    _evaluate"), []),
    ],
)
def test_a_returned_loader_handed_to_a_function_that_walks_it_every_epoch_restarts_its_workers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], variant: tuple[str, str], expected: list[int]
) -> None:
    files = {"test.py": YOLO_TEST, "train.py": YOLO_TRAIN}
    assert edited_routes(capsys, tmp_path, files, variant, "test.py", "TPL503") == expected


# nanoGPT: the blocks live in an nn.ModuleDict (`self.transformer.h`, `self.transformer.ln_f`), so
# what they return is a tensor, and the list index of the inference branch is copied per call
GPT = """
import torch
from torch import nn

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        return self.fc(x)

class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(64, 8),
            h=nn.ModuleList([Block() for _ in range(4)]),
            ln_f=nn.LayerNorm(8),
        ))
        self.lm_head = nn.Linear(8, 64)

    def forward(self, idx):
        x = self.transformer.wte(idx)
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        return self.lm_head(x[:, [-1], :])
"""


@pytest.mark.parametrize(
    "variant, expected",
    [
        (("", ""), [27]),
        # look-alike: a container of the project's that is no module leaves what it holds unknown
        (("self.transformer = nn.ModuleDict(dict(", "self.transformer = Parts(dict("), []),
    ],
)
def test_what_the_modules_of_a_module_dict_return_is_a_tensor(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], variant: tuple[str, str], expected: list[int]
) -> None:
    assert edited_routes(capsys, tmp_path, {"model.py": GPT}, variant, "model.py", "TPL103") == expected


# -- an object a builder function returns, and a host schedule every caller passes ----------------
# DiT: train.py steps `diffusion.training_losses(...)` on `diffusion = create_diffusion(...)`, which
# returns a GaussianDiffusion; its helper copies the NumPy schedule it is handed to the device
DIFFUSION_SCHEDULES = """
import enum
import numpy as np
import torch as th

class VarType(enum.Enum):
    LARGE = 1
    SMALL = 2

class GaussianDiffusion:
    def __init__(self, betas, var_type):
        self.betas = betas
        self.var_type = var_type
        self.alphas_cumprod = np.cumprod(1.0 - betas, axis=0)
        self.sqrt_alphas_cumprod = np.sqrt(self.alphas_cumprod)
        self.posterior_variance = betas * (1.0 - self.alphas_cumprod)

    def q_sample(self, x_start, t, noise):
        return _extract(self.sqrt_alphas_cumprod, t, x_start.shape) * x_start + noise

    def variance(self, x, t):
        variance, log_variance = {
            VarType.LARGE: (np.append(self.posterior_variance[1], self.betas[1:]), np.log(self.betas)),
            VarType.SMALL: (self.posterior_variance, np.log(self.posterior_variance)),
        }[self.var_type]
        variance = _extract(variance, t, x.shape)
        return variance, _extract(log_variance, t, x.shape)

    def training_losses(self, model, x_start, t):
        noise = th.randn_like(x_start)
        x_t = self.q_sample(x_start, t, noise)
        self.variance(x_t, t)
        return ((model(x_t, t) - noise) ** 2).mean()

def _extract(arr, timesteps, broadcast_shape):
    res = th.from_numpy(arr).to(device=timesteps.device)[timesteps].float()
    return res + th.zeros(broadcast_shape, device=timesteps.device)

def create_diffusion(steps):
    return GaussianDiffusion(np.linspace(1e-4, 0.02, steps), VarType.SMALL)
"""
DIT_TRAIN = """
import torch
from diffusion import create_diffusion

def main(model, loader, opt):
    diffusion = create_diffusion(1000)
    for x, y in loader:
        x = x.to("cuda")
        t = torch.randint(0, 1000, (x.shape[0],), device="cuda")
        loss = diffusion.training_losses(model, x, t)
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


def test_a_host_schedule_every_caller_hands_the_extract_helper_is_copied_per_step(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write_project(tmp_path, {"diffusion.py": DIFFUSION_SCHEDULES, "train.py": DIT_TRAIN})
    assert routes(capsys, root, "diffusion.py", "TPL102") == [35]


def test_a_helper_handed_a_value_computed_per_step_copies_no_constant(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    per_step = DIFFUSION_SCHEDULES.replace(
        "        self.variance(x_t, t)\n",
        "        self.variance(x_t, t)\n        _extract(x_t.cpu().numpy()[:, 0, 0, 0], t, x_t.shape)\n",
    )
    root = write_project(tmp_path, {"diffusion.py": per_step, "train.py": DIT_TRAIN})
    assert routes(capsys, root, "diffusion.py", "TPL102") == []


# -- layers a factory builds and hands to the model it returns -----------------------------------
# pytorch-cifar100's `def vgg16_bn(): return VGG(make_layers(cfg["D"], batch_norm=True))`: VGG
# itself builds only its classifier; the convolutions come from make_layers
VGG = """
import torch.nn as nn

class VGG(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.features = features
        self.classifier = nn.Linear(512, 100)

    def forward(self, x):
        return self.classifier(self.features(x).flatten(1))

def make_layers():
    return nn.Sequential(nn.Conv2d(3, 64, 3), nn.BatchNorm2d(64), nn.Conv2d(64, 512, 3), nn.ReLU())

def vgg16_bn():
    return VGG(make_layers())

def vgg_head():
    return VGG(nn.Identity())

def vgg_named(bn=True):
    # deeplabv3plus' _segm_mobilenet: the parts are built into names first
    features = make_layers()
    if bn:
        head = nn.Identity()
    else:
        head = nn.Linear(512, 512)
    model = VGG(features)
    return model

def vgg_named_head():
    head = nn.Identity()
    return VGG(head)

def vgg_by_name(kind="vgg16_bn"):
    # deeplabv3plus' _load_model: one of several builders, by a string
    if kind == "vgg16_bn":
        model = vgg16_bn()
    elif kind == "named":
        model = vgg_named()
    else:
        raise NotImplementedError
    return model

def vgg_or_head(kind="vgg16_bn"):
    if kind == "vgg16_bn":
        model = vgg16_bn()
    else:
        model = vgg_head()
    return model

"""
VGG_TRAIN = """
import torch
from vgg import {builder}

def main(loader, opt):
    net = {builder}().cuda()
    for x, y in loader:
        loss = torch.nn.functional.cross_entropy(net(x.cuda()), y.cuda())
        opt.zero_grad()
        loss.backward()
        opt.step()
"""


@pytest.mark.parametrize(
    ("builder", "lines"),
    [
        ("vgg16_bn", [5]),
        ("vgg_head", []),
        ("vgg_named", [5]),
        ("vgg_named_head", []),
        ("vgg_by_name", [5]),
        ("vgg_or_head", []),  # one builder it may call builds no convnet
    ],
)
def test_the_layers_a_factory_hands_to_the_model_it_returns_count(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], builder: str, lines: list[int]
) -> None:
    root = write_project(tmp_path, {"vgg.py": VGG, "train.py": VGG_TRAIN.format(builder=builder)})
    assert routes(capsys, root, "train.py", "TPL404") == lines


# -- a convnet built by a factory of another module, chosen by name -------------------------------
# pytorch-cifar100's utils.py: `get_network` imports the builder named by -net and moves its result;
# VGG's convolutions come from a loop over a configuration list the builder hands in
# (`make_layers(cfg["D"])`), WideResNet's from a block class handed to it, returned through a name
VGG_BY_CONFIGURATION = """
import torch.nn as nn

cfg = {
    "A": [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
    "B": [64, 64, "M", 128, 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
}

class VGG(nn.Module):
    def __init__(self, features, num_class=100):
        super().__init__()
        self.features = features
        self.classifier = nn.Sequential(
            nn.Linear(512, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, num_class)
        )

    def forward(self, x):
        return self.classifier(self.features(x).flatten(1))

def make_layers(cfg, batch_norm=False):
    layers = []
    input_channel = 3
    for l in cfg:
        if l == "M":
            layers += [nn.MaxPool2d(kernel_size=2, stride=2)]
            continue
        layers += [nn.Conv2d(input_channel, l, kernel_size=3, padding=1)]
        if batch_norm:
            layers += [nn.BatchNorm2d(l)]
        layers += [nn.ReLU(inplace=True)]
        input_channel = l
    return nn.Sequential(*layers)

def vgg11_bn():
    return VGG(make_layers(cfg["A"], batch_norm=True))

def vgg13_bn():
    return VGG(make_layers(cfg["B"], batch_norm=True))
"""
# the same builder over a configuration of two items: one convolution beside three linear layers
SMALL = """
import torch.nn as nn
from models.vgg import VGG

layout = [64, "M"]

def make_layers(cfg):
    layers = []
    for l in cfg:
        layers += [nn.MaxPool2d(2)] if l == "M" else [nn.Conv2d(3, l, 3), nn.ReLU()]
    return nn.Sequential(*layers)

def vgg_small():
    return VGG(make_layers(layout))
"""
WIDE = """
import torch.nn as nn

class WideBasic(nn.Module):
    def __init__(self, in_channels, out_channels, stride=1):
        super().__init__()
        self.residual = nn.Sequential(
            nn.BatchNorm2d(in_channels),
            nn.Conv2d(in_channels, out_channels, 3, stride=stride, padding=1),
            nn.BatchNorm2d(out_channels),
            nn.Conv2d(out_channels, out_channels, 3, padding=1),
        )

    def forward(self, x):
        return self.residual(x) + x

class WideResNet(nn.Module):
    def __init__(self, num_classes, block, depth=50):
        super().__init__()
        self.init_conv = nn.Conv2d(3, 16, 3, 1, padding=1)
        self.blocks = nn.Sequential(*[block(16, 16) for _ in range((depth - 4) // 6)])
        self.linear = nn.Linear(16, num_classes)
        self.head = nn.Linear(num_classes, num_classes)

    def forward(self, x):
        return self.head(self.linear(self.blocks(self.init_conv(x)).mean((2, 3))))

def wideresnet(depth=40):
    net = WideResNet(100, WideBasic, depth=depth)
    return net
"""
NETWORKS = """
import sys

import torch

def get_network(args):
    if args.net == "vgg11":
        from models.vgg import vgg11_bn
        net = vgg11_bn()
    elif args.net == "wideresnet":
        from models.wideresidual import wideresnet
        net = wideresnet()
    else:
        sys.exit()
    net = net.cuda()
    return net

def get_small(args):
    from models.small import vgg_small
    net = vgg_small()
    net = net.cuda()
    return net
"""
NETWORK_TRAIN = """
import torch
from utils import get_network, get_small

def train(args, loader):
    net = get_network(args)
    small = get_small(args)
    optimizer = torch.optim.SGD([*net.parameters(), *small.parameters()], lr=0.1)
    for images, labels in loader:
        logits = net(images.cuda()) + small(images.cuda())
        loss = torch.nn.functional.cross_entropy(logits, labels.cuda())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""


def test_a_convnet_chosen_by_name_from_factories_of_other_modules_is_reported_where_it_moves(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write_project(
        tmp_path,
        {
            "models/__init__.py": "",
            "models/vgg.py": VGG_BY_CONFIGURATION,
            "models/wideresidual.py": WIDE,
            "models/small.py": SMALL,
            "utils.py": NETWORKS,
            "train.py": NETWORK_TRAIN,
        },
    )
    # thirteen configuration items (the fewest the module hands in) build VGG's convolutions, and
    # WideBasic's come in through `net = WideResNet(...)`; the small VGG's two items build one
    # convolution, outnumbered by its head
    assert routes(capsys, root, "utils.py", "TPL404") == [14]


# -- a corpus a project method returns, held whole on the host and sliced at every step -----------
# pytorch-tutorial's language model: `ids = corpus.get_data(path, batch_size)` on a module-level
# `corpus = Corpus()`; each step copies two slices of the host tensor to the device
CORPUS = """
import torch

class Corpus:
    def get_data(self, path, batch_size=20):
        with open(path) as f:
            tokens = len(f.read().split())
        ids = torch.LongTensor(tokens)
        ids = ids[: tokens // batch_size * batch_size]
        return ids.view(batch_size, -1)
"""
LANGUAGE_MODEL = """
import torch
from data_utils import Corpus

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
corpus = Corpus()
ids = corpus.get_data("train.txt", 20)
model = torch.nn.Embedding(10000, 128).to(device)
optimizer = torch.optim.Adam(model.parameters())

for i in range(0, ids.size(1) - 30, 30):
    inputs = ids[:, i : i + 30].to(device)
    targets = ids[:, i + 1 : i + 31].to(device)
    loss = (model(inputs).sum(-1) - targets).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def test_a_corpus_a_project_method_returns_on_the_host_is_copied_part_by_part_per_step(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write_project(tmp_path, {"data_utils.py": CORPUS, "main.py": LANGUAGE_MODEL})
    assert routes(capsys, root, "main.py", "TPL102") == [11, 12]


@pytest.mark.parametrize(
    "returned",
    [
        "return ids.view(batch_size, -1).cuda()",  # the corpus already lives on the device
        "return np.memmap(path, dtype=np.int64).reshape(batch_size, -1)",  # read from disk as used
        "return len(ids)",  # a number, not data
    ],
)
def test_a_corpus_returned_on_the_device_or_mapped_from_disk_is_not_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], returned: str
) -> None:
    corpus = "import numpy as np\n" + CORPUS.replace("return ids.view(batch_size, -1)", returned)
    root = write_project(tmp_path, {"data_utils.py": corpus, "main.py": LANGUAGE_MODEL})
    assert routes(capsys, root, "main.py", "TPL102") == []


# -- a model built by name from a registry of the project's own models ---------------------------
# pytorch_resnet_cifar10's trainer.py: `torch.nn.DataParallel(resnet.__dict__[args.arch]())` over its
# resnet.py, with `--arch` defaulting to resnet32
CIFAR_RESNETS = """
import torch.nn as nn

class BasicBlock(nn.Module):
    def __init__(self, planes):
        super().__init__()
        self.conv1 = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)

    def forward(self, x):
        return x + self.bn2(self.conv2(self.bn1(self.conv1(x)).relu()))

class ResNet(nn.Module):
    def __init__(self, block, num_blocks, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1, bias=False)
        self.layers = nn.Sequential(*[block(16) for _ in range(num_blocks)])
        self.linear = nn.Linear(16, num_classes)

    def forward(self, x):
        return self.linear(self.layers(self.conv1(x)).mean((2, 3)))

class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(3072, 512)
        self.fc2 = nn.Linear(512, 10)

    def forward(self, x):
        return self.fc2(self.fc1(x.flatten(1)).relu())

def resnet32():
    return ResNet(BasicBlock, 5)

def mlp():
    return MLP()
"""
CIFAR_TRAINER = """
import argparse
import torch
import resnet

parser = argparse.ArgumentParser()
parser.add_argument("--arch", "-a", default="resnet32")

def main(loader):
    args = parser.parse_args()
    model = torch.nn.DataParallel(resnet.__dict__[args.arch]())
    model.cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        loss = torch.nn.functional.cross_entropy(model(x.cuda()), y.cuda())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""


def test_a_convnet_built_by_name_from_the_projects_own_registry_is_reported_where_it_moves(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write_project(tmp_path, {"resnet.py": CIFAR_RESNETS, "trainer.py": CIFAR_TRAINER})
    assert routes(capsys, root, "trainer.py", "TPL404") == [11]
    message = next(
        f.message
        for f in lint_source((root / "trainer.py").read_text(), str(root / "trainer.py"))
        if f.code == "TPL404"
    )
    assert "resnet32 assumed: the default of --arch" in message


def test_a_registry_whose_default_member_is_not_a_convnet_stays_silent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trainer = CIFAR_TRAINER.replace('default="resnet32"', 'default="mlp"')
    root = write_project(tmp_path, {"resnet.py": CIFAR_RESNETS, "trainer.py": trainer})
    assert routes(capsys, root, "trainer.py", "TPL404") == []


# facebookresearch/simsiam: the registry class is handed uncalled to a wrapper in another module,
# whose `__init__` calls it to build the encoder; SyncBatchNorm conversion keeps the model
SIMSIAM_BUILDER = """
import torch.nn as nn

class SimSiam(nn.Module):
    def __init__(self, base_encoder, dim=2048, pred_dim=512):
        super().__init__()
        self.encoder = base_encoder(num_classes=dim, zero_init_residual=True)
        self.predictor = nn.Sequential(nn.Linear(dim, pred_dim), nn.ReLU(), nn.Linear(pred_dim, dim))

    def forward(self, x1, x2):
        return self.predictor(self.encoder(x1)), self.encoder(x2).detach()
"""
SIMSIAM_MAIN = """
import argparse
import torch
import torchvision.models as models
import simsiam.builder

parser = argparse.ArgumentParser()
parser.add_argument("-a", "--arch", default="resnet50")

def main(loader):
    args = parser.parse_args()
    model = simsiam.builder.SimSiam(models.__dict__[args.arch], 2048, pred_dim=512)
    model = torch.nn.SyncBatchNorm.convert_sync_batchnorm(model)
    model.cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for x1, x2 in loader:
        p, z = model(x1.cuda(), x2.cuda())
        loss = -torch.nn.functional.cosine_similarity(p, z).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""


def test_a_registry_class_handed_to_a_wrapper_that_builds_with_it_is_judged_by_its_default(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write_project(
        tmp_path, {"simsiam/__init__.py": "", "simsiam/builder.py": SIMSIAM_BUILDER, "main.py": SIMSIAM_MAIN}
    )
    assert routes(capsys, root, "main.py", "TPL404") == [13]
    message = next(
        f.message
        for f in lint_source((root / "main.py").read_text(), str(root / "main.py"))
        if f.code == "TPL404"
    )
    assert "resnet50 assumed: the default of --arch" in message


@pytest.mark.parametrize(
    "change",
    [
        ('default="resnet50"', 'default="vit_b_16"'),  # the default is no convnet
        ("models.__dict__[args.arch], 2048", "torch.nn.Identity, 2048"),  # handed no registry member
        ("self.encoder = base_encoder(", "self.encoder = nn.Linear(dim, dim)  # base_encoder("),
    ],
    ids=["vit-default", "not-a-registry-member", "never-called-in-init"],
)
def test_a_wrapper_handed_no_convnet_stays_silent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], change: tuple[str, str]
) -> None:
    main_py, builder = SIMSIAM_MAIN, SIMSIAM_BUILDER
    if change[0] in main_py:
        main_py = main_py.replace(*change)
    else:
        builder = builder.replace(*change)
    root = write_project(
        tmp_path, {"simsiam/__init__.py": "", "simsiam/builder.py": builder, "main.py": main_py}
    )
    assert routes(capsys, root, "main.py", "TPL404") == []


# -- DataLoaders iterated again and again through a returned tuple or a per-call helper ------------
# tacotron2's train.py: `train_loader, valset, collate_fn = prepare_dataloaders(hparams)`, then an
# epoch loop over it; Pytorch-UNet's `evaluate(model, val_loader, ...)` called from its step loop
TACOTRON_TRAIN = """
import torch
from torch.utils.data import DataLoader
from evaluation import evaluate

def prepare_dataloaders(trainset):
    train_loader = DataLoader(trainset, num_workers=1, batch_size=64)
    return train_loader, trainset, None

def train(model, optimizer, trainset, valset, epochs):
    train_loader, _, collate_fn = prepare_dataloaders(trainset)
    val_loader = DataLoader(valset, num_workers=2, batch_size=64)
    for epoch in range(epochs):
        for x, y in train_loader:
            loss = (model(x.cuda()) - y.cuda()).pow(2).mean()
            loss.backward()
            optimizer.step()
        evaluate(model, val_loader)
"""
EVALUATION = """
import torch

@torch.no_grad()
def evaluate(model, loader):
    total = 0.0
    for x, y in loader:
        total += (model(x.cuda()) - y.cuda()).abs().mean()
    return float(total)
"""


def test_loaders_returned_in_a_tuple_or_handed_to_a_helper_per_epoch_are_reiterated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write_project(tmp_path, {"train.py": TACOTRON_TRAIN, "evaluation.py": EVALUATION})
    assert routes(capsys, root, "train.py", "TPL503") == [6, 11]


def test_loaders_iterated_once_stay_silent(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    once = TACOTRON_TRAIN.replace("    for epoch in range(epochs):\n", "    if epochs:\n").replace(
        "        evaluate(model, val_loader)\n", "    evaluate(model, val_loader)\n"
    )
    root = write_project(tmp_path, {"train.py": once, "evaluation.py": EVALUATION})
    assert routes(capsys, root, "train.py", "TPL503") == []


# -- a convolution under another name, defined in another module ---------------------------------
# tacotron2: layers.py's ConvNorm wraps nn.Conv1d(..., bias=bias) with bias=True by default;
# model.py puts it before nn.BatchNorm1d in an nn.Sequential
CONV_NORM = """
import torch

class ConvNorm(torch.nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size=1, stride=1, padding=None, bias=True):
        super().__init__()
        if padding is None:
            padding = kernel_size // 2
        self.conv = torch.nn.Conv1d(in_channels, out_channels, kernel_size=kernel_size, stride=stride,
                                    padding=padding, bias=bias)

    def forward(self, signal):
        return self.conv(signal)
"""
POSTNET = """
import torch
from torch import nn
from layers import ConvNorm

class Postnet(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = nn.Sequential(ConvNorm(80, 512, kernel_size=5), nn.BatchNorm1d(512))
        self.last = nn.Sequential(ConvNorm(512, 80, 5, 1, 2, False), nn.BatchNorm1d(80))

    def forward(self, x):
        return self.last(torch.tanh(self.first(x)))

def train(loader, steps):
    model = Postnet().cuda()
    optimizer = torch.optim.Adam(model.parameters())
    for x, y in loader:
        loss = (model(x.cuda()) - y.cuda()).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""


def test_a_convolution_under_another_name_before_a_batchnorm_keeps_a_bias_it_cancels(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write_project(tmp_path, {"layers.py": CONV_NORM, "model.py": POSTNET})
    assert routes(capsys, root, "model.py", "TPL401") == [8]  # the last one passes bias=False by position


def test_a_wrapper_that_does_more_than_its_convolution_is_not_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    layers = CONV_NORM.replace("return self.conv(signal)", "return torch.relu(self.conv(signal))")
    root = write_project(tmp_path, {"layers.py": layers, "model.py": POSTNET})
    assert routes(capsys, root, "model.py", "TPL401") == []


# -- options kept in a namespace of keywords another module returns ----------------------------
# NVIDIA/tacotron2: hparams.py's create_hparams() returns `HParams(fp16_run=False, ...)`, train.py
# binds `hparams = create_hparams(...)` and hands it to train(); `if hparams.fp16_run:` is opt-in
HPARAMS = """
import tensorflow as tf

def create_hparams(hparams_string=None):
    hparams = tf.contrib.training.HParams(epochs=500, fp16_run={fp16}, grad_clip_thresh=1.0)
    if hparams_string:
        hparams.parse(hparams_string)
    return hparams
"""
TACOTRON = """
import argparse
import math
import torch
from hparams import create_hparams

def train(model, loader, optimizer, hparams):
    for batch in loader:
        loss = model(batch[0].cuda(non_blocking=True))
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), hparams.grad_clip_thresh)
        if hparams.fp16_run:
            is_overflow = math.isnan(grad_norm)
        optimizer.step()

if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--hparams", type=str, required=False)
    args = parser.parse_args()
    hparams = create_hparams(args.hparams)
    train(model, loader, optimizer, hparams)
"""


@pytest.mark.usefixtures("precision_off_rules_on")
@pytest.mark.parametrize("fp16, lines", [("False", []), ("True", [12]), ("os.environ.get('FP16')", [12])])
def test_a_namespace_of_keywords_another_module_returns_holds_the_defaults(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, fp16: str, lines: list[int]
) -> None:
    root = write_project(tmp_path, {"hparams.py": HPARAMS.replace("{fp16}", fp16), "train.py": TACOTRON})
    assert routes(capsys, root, "train.py", "TPL107") == lines


@pytest.mark.usefixtures("precision_off_rules_on")
def test_a_namespace_bound_again_by_another_call_stays_open(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    rebound = TACOTRON.replace(
        "    hparams = create_hparams(args.hparams)\n",
        "    hparams = create_hparams(args.hparams)\n    if args.hparams:\n        hparams = tuner.suggest()\n",
    )
    root = write_project(tmp_path, {"hparams.py": HPARAMS.replace("{fp16}", "False"), "train.py": rebound})
    assert routes(capsys, root, "train.py", "TPL107") == [12]


@pytest.mark.usefixtures("precision_off_rules_on")
def test_a_namespace_some_caller_builds_otherwise_stays_open(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    other = (
        TACOTRON
        + "\n\ndef tune(model, loader, optimizer, config):\n    train(model, loader, optimizer, config)\n"
    )
    root = write_project(tmp_path, {"hparams.py": HPARAMS.replace("{fp16}", "False"), "train.py": other})
    assert routes(capsys, root, "train.py", "TPL107") == [12]


# -- a model that helpers hand back is still the model its builder made --------------------------
# NVIDIA/tacotron2: load_model() builds Tacotron2 and wraps it (apply_gradient_allreduce returns it),
# train() may rebind it through load_checkpoint(path, model, optimizer); model.parse_batch() per step
NET = """
import torch
from torch import nn

def to_gpu(x):
    return x.cuda(non_blocking=True)

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def parse_batch(self, batch):
        x, lengths = batch
        lengths = to_gpu(lengths).long()
        max_len = torch.max(lengths.data).item()
        return to_gpu(x), lengths

    def forward(self, x):
        return self.fc(x)
"""
LOADER = """
import torch
from net import Net

def wrap(model):
    return model

def load_model():
    model = Net().cuda()
    model = wrap(model)
    return model

def load_checkpoint(path, model, optimizer):
    model.load_state_dict(torch.load(path))
    return model, optimizer, 0

def train(loader, path):
    model = load_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    if path is not None:
        model, optimizer, start = load_checkpoint(path, model, optimizer)
    for batch in loader:
        x, lengths = model.parse_batch(batch)
        loss = model(x).mean()
        loss.backward()
        optimizer.step()
"""


@pytest.mark.usefixtures("precision_off_rules_on")
@pytest.mark.parametrize(
    "variant, lines",
    [
        (("", ""), [15]),
        # a second object the name may hold: which class's parse_batch runs is not known
        (("    model = wrap(model)\n", "    model = make_other()\n"), []),
        (
            (
                "    model = wrap(model)\n",
                "    model = wrap(model) if torch.cuda.device_count() > 1 else Other()\n",
            ),
            [],
        ),
        (
            (
                "model, optimizer, start = load_checkpoint(path, model, optimizer)",
                "model, start = torch.load(path)",
            ),
            [],
        ),
    ],
)
def test_a_model_helpers_hand_back_keeps_its_class(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, variant: tuple[str, str], lines: list[int]
) -> None:
    files = {"net.py": NET, "train.py": LOADER}
    assert edited_routes(capsys, tmp_path, files, variant, "net.py", "TPL107") == lines


# -- a bound method a builder hands back, kept on an attribute and called per step --------------
# pytorch-deeplab-xception: `self.criterion = SegmentationLosses(...).build_loss(mode=args.loss_type)`
# returns `self.CrossEntropyLoss`, which builds `nn.CrossEntropyLoss` at every call
LOSSES = """
import torch.nn as nn


class Losses:
    def __init__(self, weight=None):
        self.weight = weight

    def build(self, mode="ce"):
        if mode == "ce":
            return self.ce
        elif mode == "focal":
            return self.focal
        raise NotImplementedError

    def ce(self, logit, target):
        criterion = nn.CrossEntropyLoss(weight=self.weight)
        return criterion(logit, target)

    def focal(self, logit, target):
        criterion = nn.CrossEntropyLoss(weight=self.weight)
        return criterion(logit, target) ** 2
"""
TRAINER = """
import argparse

import torch
from losses import Losses


class Trainer:
    def __init__(self, args, model, loader):
        self.model, self.loader = model.cuda(), loader
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        self.criterion = Losses(weight=None).build(mode=args.loss_type)

    def training(self):
        for x, y in self.loader:
            loss = self.criterion(self.model(x.cuda()), y.cuda())
            loss.backward()
            self.optimizer.step()


def main(model, loader):
    parser = argparse.ArgumentParser()
    parser.add_argument("--loss-type", default="ce", choices=["ce", "focal"])
    args = parser.parse_args()
    Trainer(args, model, loader).training()
"""


@pytest.mark.usefixtures("precision_off_rules_on")
@pytest.mark.parametrize(
    "variant, lines",
    [
        (("", ""), [16]),  # the default, "ce"
        (('default="ce"', 'default="focal"'), [20]),
        (("mode=args.loss_type", "mode=pick()"), [16, 20]),  # not known: either may run
        (("self.criterion(", "self.loss_of("), []),  # the step calls something else
    ],
)
def test_a_bound_method_a_builder_hands_back_runs_where_its_attribute_is_called(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, variant: tuple[str, str], lines: list[int]
) -> None:
    files = {"losses.py": LOSSES, "train.py": TRAINER}
    assert edited_routes(capsys, tmp_path, files, variant, "losses.py", "TPL302") == lines


# -- a value handed to NumPy is on the host ----------------------------------------------------
# SwinIR's test loop: the image is read with OpenCV in another module, its channels reordered
# inside `np.transpose(...)`, and only then is the name rebound to a CUDA tensor
IMAGES = """
import cv2
import numpy as np


def read_pair(path):
    img = cv2.imread(path).astype(np.float32) / 255.0
    return path, img, None
"""
NET_MODULE = """
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 3, 3)

    def forward(self, x):
        return self.conv(x)
"""
TEST_LOOP = """
import numpy as np
import torch
from images import read_pair
from net import Net


def run(paths, device):
    model = Net().to(device).eval()
    for path in paths:
        name, img, gt = read_pair(path)
        img = np.transpose(img if img.shape[2] == 1 else img[:, :, [2, 1, 0]], (2, 0, 1))
        img = torch.from_numpy(img).float().unsqueeze(0).to(device)
        with torch.no_grad():
            out = model(img)
"""


@pytest.mark.parametrize(
    "variant, lines",
    [
        (("", ""), []),
        # the same index where the tensor may be on the device
        (("np.transpose(img if", "torch.permute(img if"), [11]),
        (
            ("img[:, :, [2, 1, 0]], (2, 0, 1))", "img.cuda()[:, :, [2, 1, 0]], (2, 0, 1))"),
            [11],
        ),  # a call between
    ],
)
def test_a_value_handed_to_numpy_is_on_the_host(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, variant: tuple[str, str], lines: list[int]
) -> None:
    files = {"images.py": IMAGES, "net.py": NET_MODULE, "test.py": TEST_LOOP}
    assert edited_routes(capsys, tmp_path, files, variant, "test.py", "TPL103") == lines


@pytest.mark.parametrize("spelling", ["nn.ModuleDict", "torch.nn.modules.container.ModuleDict"])
def test_a_loop_over_a_module_dict_walks_its_keys_whatever_its_spelling(spelling: str) -> None:
    """A ModuleDict yields its keys, not its modules, however the class is imported: what a key
    "returns" is nothing known, so the list index after it stays silent."""
    source = textwrap.dedent(
        f"""
        import torch
        from torch import nn

        class GPT(nn.Module):
            def __init__(self):
                super().__init__()
                self.h = {spelling}({{"a": nn.Linear(8, 8)}})
                self.lm_head = nn.Linear(8, 64)

            def forward(self, idx):
                for block in self.h:
                    x = block(idx)
                return self.lm_head(x[:, [-1], :])
        """
    )
    assert lint_source(source, path="model.py", select=["TPL103"]) == []


# -- an attribute every store of its class sets to a tensor is one ---------------------------
# nerf_pl's Embedding: `self.freq_bands` is a torch factory's result on either side of a flag,
# and forward walks it element by element, running sin and cos of `freq * x` for each
EMBEDDING = """
import torch
from torch import nn


class Embedding(nn.Module):
    def __init__(self, n_freqs, logscale=True):
        super().__init__()
        self.funcs = [torch.sin, torch.cos]
        if logscale:
            self.freq_bands = 2 ** torch.linspace(0, n_freqs - 1, n_freqs)
        else:
            self.freq_bands = torch.linspace(1, 2 ** (n_freqs - 1), n_freqs)

    def forward(self, x):
        out = [x]
        for freq in self.freq_bands:
            for func in self.funcs:
                out += [func(freq * x)]
        return torch.cat(out, -1)


class NeRF(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = Embedding(10)
        self.head = nn.Linear(63, 4)

    def forward(self, x):
        return self.head(self.embed(x))


def train(loader, optimizer):
    model = NeRF().cuda()
    for rays, rgbs in loader:
        loss = ((model(rays.cuda()) - rgbs.cuda()) ** 2).mean()
        loss.backward()
        optimizer.step()
"""


@pytest.mark.parametrize(
    ("variant", "reported"),
    [
        (("", ""), True),
        # a list of floats on one side: not every store is a tensor
        (
            (
                "self.freq_bands = torch.linspace(1, 2 ** (n_freqs - 1), n_freqs)",
                "self.freq_bands = [1.0, 2.0]",
            ),
            False,
        ),
        # a value the class does not know on one side (a parameter)
        (
            (
                "self.freq_bands = torch.linspace(1, 2 ** (n_freqs - 1), n_freqs)",
                "self.freq_bands = logscale",
            ),
            False,
        ),
    ],
)
def test_a_loop_over_an_attribute_every_store_sets_to_a_tensor_walks_its_elements(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], variant: tuple[str, str], reported: bool
) -> None:
    root = write_project(tmp_path, {"nerf.py": EMBEDDING.replace(*variant)})
    assert routes(capsys, root, "nerf.py", "TPL201") == ([16] if reported else [])


# -- a sum of a loss dict's values is a tensor -------------------------------------------------
# DETR's engine.py: the criterion returns a dict of losses, a helper of another module hands it
# back on one GPU, a comprehension scales it, and the step reads the sum with `.item()`
REDUCE = """
import torch
import torch.distributed as dist


def reduce_dict(input_dict):
    if not dist.is_initialized() or dist.get_world_size() < 2:
        return input_dict
    names = sorted(input_dict.keys())
    values = torch.stack([input_dict[k] for k in names])
    dist.all_reduce(values)
    return {k: v for k, v in zip(names, values)}
"""
LOSS_DICT_STEP = """
import torch
import utils


def train_one_epoch(model, criterion, data_loader, optimizer, device):
    for samples, targets in data_loader:
        outputs = model(samples.to(device))
        loss_dict = criterion(outputs, targets)
        weight_dict = criterion.weight_dict
        losses = sum(loss_dict[k] * weight_dict[k] for k in loss_dict.keys() if k in weight_dict)
        reduced = utils.reduce_dict(loss_dict)
        scaled = {k: v * weight_dict[k] for k, v in reduced.items() if k in weight_dict}
        loss_value = sum(scaled.values()).item()
        optimizer.zero_grad()
        losses.backward()
        optimizer.step()
"""


@pytest.mark.parametrize(
    ("variant", "reported"),
    [
        (("", ""), True),
        (("sum(scaled.values()).item()", "sum(reduced.values()).item()"), True),  # handed back as is
        (("sum(scaled.values()).item()", "sum(v * 2 for v in loss_dict.values()).item()"), True),
        # the values copied to the host first: the copy is the sync, the sum reads host tensors
        (("v * weight_dict[k] for k, v in reduced.items()", "v.cpu() for k, v in reduced.items()"), False),
        # a dict of host tensors the step builds
        (("scaled = {k: v", "scaled = {k: torch.tensor(1.0)"), False),
        # a sum of the keys' lengths is a number
        (("sum(scaled.values()).item()", "torch.tensor(sum(len(k) for k in scaled)).item()"), False),
    ],
)
def test_a_sum_of_a_loss_dicts_values_is_a_tensor(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], variant: tuple[str, str], reported: bool
) -> None:
    root = write_project(tmp_path, {"utils.py": REDUCE, "engine.py": LOSS_DICT_STEP.replace(*variant)})
    lines = [line for line in routes(capsys, root, "engine.py", "TPL107") if line == 13]
    assert lines == ([13] if reported else [])


SAMPLING = """
import torch


def get_sigmas(n, sigma_max, device="cpu"):
    sigmas = torch.linspace(sigma_max, 0.01, n)
    return torch.cat([sigmas, sigmas.new_zeros([1])]).to(device)


@torch.no_grad()
def sample(model, x, sigmas, eta=1.0):
    for i in range(len(sigmas) - 1):
        denoised = model(x, sigmas[i])
        if sigmas[i + 1] == 0:
            x = denoised
        else:
            x = x + (sigmas[i + 1] - sigmas[i]) * eta * denoised
    return x
"""
SAMPLE_SCRIPT = """
import torch
import sampling


def evaluate(model, device, n):
    sigmas = sampling.get_sigmas(50, 80.0, device=device)

    def sample_fn(batch):
        x = torch.randn([batch, 3, 32, 32], device=device) * 80.0
        return sampling.sample(model, x, sigmas)

    return [sample_fn(16) for _ in range(n)]
"""


@pytest.mark.parametrize(
    ("variant", "reported"),
    [
        (("", ""), True),
        # the schedule moved by the caller itself
        (("sampling.sample(model, x, sigmas)", "sampling.sample(model, x, sigmas.cpu().cuda())"), True),
        (("sampling.sample(model, x, sigmas)", "sampling.sample(model, x, sigmas.to(device))"), True),
        # left on the host: the CPU written out, the default kept, a cast that moves nothing
        (("device=device)\n", "device='cpu')\n"), False),
        (("80.0, device=device)", "80.0)"), False),
        (("sampling.sample(model, x, sigmas)", "sampling.sample(model, x, sigmas.to(torch.half))"), False),
        # another caller hands it a host schedule: not every call passes a device tensor
        (
            (
                "    return [sample_fn",
                "    sampling.sample(model, x=None, sigmas=torch.ones(3))\n    return [sample_fn",
            ),
            False,
        ),
    ],
)
def test_a_parameter_every_call_hands_a_device_tensor_is_on_the_device(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], variant: tuple[str, str], reported: bool
) -> None:
    """k-diffusion's sampler tests `if sigmas[i + 1] == 0:` in its step loop, on the schedule the
    training script builds with `get_sigmas_karras(..., device=device)` in the function that
    nests the sampling closure: a sync every denoising step."""
    root = write_project(tmp_path, {"sampling.py": SAMPLING, "evaluate.py": SAMPLE_SCRIPT.replace(*variant)})
    assert routes(capsys, root, "sampling.py", "TPL107") == ([13] if reported else [])


GRID = """
import torch


def unproject(fov, xi, height, device="cpu"):
    return grid(fov, xi=xi if torch.is_tensor(xi) else torch.tensor([xi], device=device), device=device)


def grid(fov, xi, device):
    return torch.ones(8, device=device) * fov * xi


def forward_step(model, batch):
    xi = torch.zeros(4, device=batch.device)
    return model(batch) * unproject(batch.mean(), xi, 8, device=batch.device)


def train(model, loader, optimizer):
    for batch in loader:
        loss = forward_step(model, batch.cuda()).sum()
        loss.backward()
        optimizer.step()
"""


@pytest.mark.parametrize(
    ("variant", "lines"),
    [
        (("", ""), []),
        (("if torch.is_tensor(xi) else", "if isinstance(xi, torch.Tensor) else"), []),
        # no test: a list of the device tensor every caller passes
        (("xi if torch.is_tensor(xi) else torch.tensor([xi]", "torch.tensor([xi]"), [5]),
    ],
)
def test_the_other_side_of_a_tensor_test_holds_no_tensor(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], variant: tuple[str, str], lines: list[int]
) -> None:
    """diffusers' `xi if torch.is_tensor(xi) else torch.tensor([xi], ...)`, where every caller
    hands `xi` a device tensor: the list is built only from a number."""
    root = write_project(tmp_path, {"grid.py": GRID.replace(*variant)})
    assert routes(capsys, root, "grid.py", "TPL203") == lines


WINDOW_BLOCK = """
import torch
from torch import nn


def window_partition(x, window_size):
    b, h, w, c = x.shape
    x = x.view(b, h // window_size, window_size, w // window_size, window_size, c)
    return x.permute(0, 1, 3, 2, 4, 5).reshape(-1, window_size, window_size, c)


class Block(nn.Module):
    def __init__(self, size, window_size=8):
        super().__init__()
        self.size, self.window_size = size, window_size
        self.proj = nn.Linear(64, 64)
        self.register_buffer("attn_mask", self.calculate_mask(size))

    def calculate_mask(self, x_size):
        h, w = x_size
        img_mask = torch.zeros((1, h, w, 1))
        img_mask[:, h // 2 :, w // 2 :, :] = 1
        windows = window_partition(img_mask, self.window_size).view(-1, self.window_size**2)
        attn_mask = windows.unsqueeze(1) - windows.unsqueeze(2)
        return attn_mask.masked_fill(attn_mask != 0, -100.0)

    def forward(self, x, x_size):
        if x_size == self.size:
            mask = self.attn_mask
        else:
            mask = self.calculate_mask(x_size).to(x.device)
        return self.proj(x) + mask.sum()
"""
WINDOW_TRAINING = """
from block import Block


def train(loader, optimizer):
    model = Block((64, 64)).cuda()
    for x, size in loader:
        loss = model(x.cuda(), size)
        loss.backward()
        optimizer.step()
"""


@pytest.mark.parametrize(
    ("variant", "lines"),
    [
        (("", ""), [20]),
        # what the step computes with stays on the host, or its move is a cast
        ((".calculate_mask(x_size).to(x.device)", ".calculate_mask(x_size)"), []),
        ((".calculate_mask(x_size).to(x.device)", ".calculate_mask(x_size).to(torch.half)"), []),
        # the factory's value is not what the helper returns: only a count read off it is
        (
            (
                "        return attn_mask.masked_fill(attn_mask != 0, -100.0)",
                "        return self.base.repeat(int(attn_mask.sum()))",
            ),
            [],
        ),
        (
            (
                "window_partition(img_mask, self.window_size)",
                "window_partition(self.base.expand(len(img_mask.tolist()), -1), 8)",
            ),
            [],
        ),
        # built on one side of a test the helper's callers decide, or kept as a cache refreshed rarely
        (
            (
                "        img_mask = torch.zeros((1, h, w, 1))",
                "        if self.window_size == 8:\n            img_mask = torch.zeros((1, h, w, 1))\n"
                "        else:\n            img_mask = self.attn_mask.new_zeros((1, h, w, 1))",
            ),
            [],
        ),
        (
            (
                "            mask = self.calculate_mask(x_size).to(x.device)",
                "            self.attn_mask = self.calculate_mask(x_size).to(x.device)\n            mask = self.attn_mask",
            ),
            [],
        ),
        # a second hot call that keeps the result on the host
        (
            (
                "        return self.proj(x) + mask.sum()",
                "        self.calculate_mask(x_size)\n        return self.proj(x) + mask.sum()",
            ),
            [],
        ),
    ],
)
def test_a_host_tensor_a_helper_returns_to_a_move_is_built_per_step(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], variant: tuple[str, str], lines: list[int]
) -> None:
    """swinir's `calculate_mask` builds the shifted-window mask with `torch.zeros(...)` on the host,
    and the block's `forward` moves what it returns with `.to(x.device)` for every image whose size
    is not the training size: built on the CPU and copied per block, per image."""
    root = write_project(tmp_path, {"train.py": WINDOW_TRAINING, "block.py": WINDOW_BLOCK.replace(*variant)})
    assert routes(capsys, root, "block.py", "TPL101") == lines


# -- a call through a dict of bound methods runs each of them ----------------------------------
# DETR's SetCriterion: `get_loss` picks the loss by name from `loss_map = {"labels":
# self.loss_labels, ...}` and calls it with the matcher's indices, from the criterion's forward
CRITERION = """
import torch
from torch import nn


class SetCriterion(nn.Module):
    def loss_labels(self, outputs, targets):
        return {"error": outputs.sum().item()}

    def loss_boxes(self, outputs, targets):
        return {"boxes": (outputs - targets).abs().mean()}

    def get_loss(self, loss, outputs, targets):
        loss_map = {"labels": self.loss_labels, "boxes": self.loss_boxes}
        return loss_map[loss](outputs, targets)

    def forward(self, outputs, targets):
        losses = {}
        for loss in ("labels", "boxes"):
            losses.update(self.get_loss(loss, outputs, targets))
        return losses
"""
CRITERION_TRAIN = """
from criterion import SetCriterion


def train(model, loader, optimizer):
    criterion = SetCriterion()
    for x, y in loader:
        losses = criterion(model(x), y)
        sum(losses.values()).backward()
        optimizer.step()
"""


@pytest.mark.parametrize(
    "variant, lines",
    [
        (("", ""), [7]),
        # the literal key picks the one callable the call runs
        (("loss_map[loss](outputs", 'loss_map["boxes"](outputs'), []),
        (("loss_map[loss](outputs", 'loss_map["labels"](outputs'), [7]),
        # the loop walks the keys it names: "labels" is not among them
        (('for loss in ("labels", "boxes"):', 'for loss in ("boxes",):'), []),
        (('for loss in ("labels", "boxes"):', "for loss in self.names():"), [7]),
        # a table bound twice, or holding a value that is not a name: not followed
        (("        return loss_map[loss]", "        loss_map = {}\n        return loss_map[loss]"), []),
        (('"boxes": self.loss_boxes}', '"boxes": self.loss_boxes, "none": lambda o, t: {}}'), []),
    ],
)
def test_a_call_through_a_dict_of_bound_methods_runs_each_of_them(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, variant: tuple[str, str], lines: list[int]
) -> None:
    files = {"train.py": CRITERION_TRAIN, "criterion.py": CRITERION}
    assert edited_routes(capsys, tmp_path, files, variant, "criterion.py", "TPL105") == lines


# -- an instance a constructor's argument hands an object is what its attribute holds -----------
# A trainer class keeps the EMA helper its caller builds (`self.ema = ema`) and updates it after
# every optimizer step; the helper's per-parameter loop lives in another module
EMA_HELPER = """
import torch


class Ema:
    def __init__(self, model, decay=0.999):
        self.shadow = [p.detach().clone() for p in model.parameters()]
        self.decay = decay

    def update(self, model):
        with torch.no_grad():
            for s, p in zip(self.shadow, model.parameters()):
                s.mul_(self.decay).add_(p, alpha=1 - self.decay)
"""
EMA_TRAINER = """
import torch
from ema import Ema


class Trainer:
    def __init__(self, model, ema, loader, optimizer):
        self.model = model
        self.ema = ema
        self.loader = loader
        self.optimizer = optimizer

    def run(self):
        for x, y in self.loader:
            loss = self.model(x.cuda()).sum()
            loss.backward()
            self.optimizer.step()
            self.ema.update(self.model)


def main(model, loader):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    ema = Ema(model)
    Trainer(model, ema, loader, optimizer).run()
"""


@pytest.mark.parametrize(
    "variant, lines",
    [
        (("", ""), [11]),
        # built in place
        (("    ema = Ema(model)\n    Trainer(model, ema,", "    Trainer(model, Ema(model).cuda(),"), [11]),
        # passed by keyword
        (
            (
                "Trainer(model, ema, loader, optimizer)",
                "Trainer(model, loader=loader, optimizer=optimizer, ema=ema)",
            ),
            [11],
        ),
        # another store of the attribute, in any method: what it holds is not known
        (("    def run(self):", "    def reset(self):\n        self.ema = None\n\n    def run(self):"), []),
        # a store from outside the class
        (
            (
                "    Trainer(model, ema, loader, optimizer).run()",
                "    trainer = Trainer(model, ema, loader, optimizer)\n    trainer.ema = None\n    trainer.run()",
            ),
            [],
        ),
        # another construction hands something else
        (
            (
                "    Trainer(model, ema, loader, optimizer).run()",
                "    Trainer(model, ema, loader, optimizer).run()\n    Trainer(model, model, loader, optimizer)",
            ),
            [],
        ),
        # the name is bound to something else too
        (("    ema = Ema(model)", "    ema = Ema(model) if loader else load_ema()"), []),
    ],
)
def test_an_instance_a_construction_hands_the_init_is_what_its_attribute_holds(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, variant: tuple[str, str], lines: list[int]
) -> None:
    files = {"ema.py": EMA_HELPER, "train.py": EMA_TRAINER}
    assert edited_routes(capsys, tmp_path, files, variant, "ema.py", "TPL204") == lines


EMA_RUNNER = """
import torch
import ema as averaging
import train


def main(model, loader):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    ema = averaging.Ema(model)
    train.Trainer(model, ema, loader, optimizer).run()
"""


@pytest.mark.parametrize(
    "variant, lines",
    [
        (("", ""), [11]),
        # a positional argument of a construction written `module.Class(...)` fills the
        # parameter after `self`: here the model, which is no EMA helper
        (
            ("train.Trainer(model, ema, loader, optimizer)", "train.Trainer(ema, model, loader, optimizer)"),
            [],
        ),
    ],
)
def test_a_construction_through_a_module_hands_its_arguments_after_self(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, variant: tuple[str, str], lines: list[int]
) -> None:
    trainer = EMA_TRAINER.split("\ndef main")[0]
    files = {"ema.py": EMA_HELPER, "train.py": trainer, "run.py": EMA_RUNNER}
    assert edited_routes(capsys, tmp_path, files, variant, "ema.py", "TPL204") == lines


TRAIN_UTILS = """
import torch


def train(model, loader, optimizer):
    for x, y in loader:
        x, y = x.cuda(), y.cuda()
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
"""

FSDP_SCRIPT = """
import torch
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, MixedPrecision
from utils.train_utils import train


def main(model, loader):
    model = FSDP(model.cuda(), mixed_precision=MixedPrecision(param_dtype=torch.bfloat16))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
    train(model, loader, optimizer)
"""


@pytest.mark.parametrize(
    "variant, lines",
    [
        (("", ""), []),
        # the script that calls the step names no precision: the step trains in fp32
        ((", mixed_precision=MixedPrecision(param_dtype=torch.bfloat16)", ""), [9]),
    ],
)
def test_a_step_run_for_a_script_that_names_its_precision_trains_at_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, variant: tuple[str, str], lines: list[int]
) -> None:
    """pytorch/examples' FSDP T5_training.py wraps the model under a bfloat16 MixedPrecision policy
    and calls utils/train_utils.py's train(), which names no precision itself."""
    files = {"utils/train_utils.py": TRAIN_UTILS, "t5_training.py": FSDP_SCRIPT}
    assert edited_routes(capsys, tmp_path, files, variant, "utils/train_utils.py", "TPL701") == lines


def test_a_step_another_module_also_calls_without_naming_precision_is_reported(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    debug = "from utils.train_utils import train\n\n\ndef debug(model, loader, optimizer):\n    train(model, loader, optimizer)\n"
    files = {"utils/train_utils.py": TRAIN_UTILS, "t5_training.py": FSDP_SCRIPT, "debug_run.py": debug}
    root = write_project(tmp_path, files)
    assert routes(capsys, root, "utils/train_utils.py", "TPL701") == [9]


def test_a_step_run_for_a_script_whose_precision_is_an_opt_in_option_is_reported(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """ConvNeXt's main.py names autocast behind `--use_amp`, off by default: its engine's step
    trains in fp32 on the default run."""
    script = (
        "import argparse\nimport torch\nfrom utils.train_utils import train\n\n"
        "parser = argparse.ArgumentParser()\n"
        "parser.add_argument('--use_amp', action='store_true')\n\n\n"
        "def main(model, loader):\n"
        "    args = parser.parse_args()\n"
        "    optimizer = torch.optim.AdamW(model.cuda().parameters(), fused=True)\n"
        "    with torch.autocast('cuda', enabled=args.use_amp):\n"
        "        train(model, loader, optimizer)\n"
    )
    root = write_project(tmp_path, {"utils/train_utils.py": TRAIN_UTILS, "main.py": script})
    assert routes(capsys, root, "utils/train_utils.py", "TPL701") == [9]


DISPATCH_CRITERION = """
import torch


class SetCriterion(torch.nn.Module):
    def __init__(self, losses):
        super().__init__()
        self.losses = losses

    def loss_labels(self, outputs, targets, **kwargs):
        return {"ce": torch.nn.functional.cross_entropy(outputs, targets)}

    def loss_masks(self, outputs, targets, **kwargs):
        return {"count": outputs.sum().item()}

    def get_loss(self, loss, outputs, targets, **kwargs):
        loss_map = {"labels": self.loss_labels, "masks": self.loss_masks}
        return loss_map[loss](outputs, targets, **kwargs)

    def forward(self, outputs, targets):
        losses = {}
        for loss in self.losses:
            losses.update(self.get_loss(loss, outputs, targets))
        for loss in self.losses:
            kwargs = {"log": False}
            losses.update(self.get_loss(loss, outputs, targets, **kwargs))
        return losses
"""

DISPATCH_BUILDER = """
import torch
from criterion import SetCriterion


def build(args):
    losses = ["labels"]
    if args.masks:
        losses += ["masks"]
    return SetCriterion(losses=losses)


def main(args, model, loader, optimizer):
    criterion = build(args)
    for x, y in loader:
        loss = sum(criterion(model(x.cuda()), y.cuda()).values())
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--masks", action="store_true")
    main(parser.parse_args(), None, [], None)
"""


@pytest.mark.parametrize(
    "variant, lines",
    [
        (("", ""), []),  # the default run computes the "labels" loss alone
        (('action="store_true"', 'action="store_false"'), [13]),  # --masks on by default
        (('losses = ["labels"]', 'losses = ["labels", "masks"]'), [13]),
        # what the list holds is not known: every entry of the table may run
        (('losses = ["labels"]', "losses = args.losses"), [13]),
    ],
)
def test_a_dispatch_table_runs_the_entries_its_keys_pick(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, variant: tuple[str, str], lines: list[int]
) -> None:
    """DETR's SetCriterion: `for loss in self.losses: self.get_loss(loss, ...)`, which calls
    `loss_map[loss](...)`; `losses` is built in `build(args)`, with "masks" only under `--masks`."""
    files = {"criterion.py": DISPATCH_CRITERION, "train.py": DISPATCH_BUILDER}
    assert edited_routes(capsys, tmp_path, files, variant, "criterion.py", "TPL105") == lines


MAIN_SCRIPT = """
import argparse


def get_args_parser():
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--log_loss", action="store_true")
    return parser


def main(args, model, loader, optimizer):
    for x, y in loader:
        loss = model(x.cuda(), y.cuda())
        loss.backward()
        optimizer.step()
        if args.log_loss:
            print(loss.item())


if __name__ == "__main__":
    parser = argparse.ArgumentParser(parents=[get_args_parser()])
    main(parser.parse_args(), None, [], None)
"""

LAUNCHER = """
import argparse
import main as detection


class Trainer:
    def __init__(self, args):
        self.args = args

    def __call__(self):
        import main as detection

        detection.main(self.args, None, [], None)


def run():
    parser = argparse.ArgumentParser(parents=[detection.get_args_parser()])
    parser.add_argument("--nodes", type=int, default=2)
    Trainer(parser.parse_args())()


def main():
    run()


def launch(function):
    function()


if __name__ == "__main__":
    launch(main)
"""


@pytest.mark.parametrize(
    "variant, lines",
    [
        (("", ""), []),
        # the launcher's own option of that name is on by default: the two disagree
        (('parser.add_argument("--nodes", type=int, default=2)', "parser.set_defaults(log_loss=True)"), [16]),
        # what the launcher hands main is no options
        (("detection.main(self.args, None, [], None)", "detection.main(self, None, [], None)"), [16]),
    ],
)
def test_options_a_launcher_keeps_on_its_instance_are_the_options(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, variant: tuple[str, str], lines: list[int]
) -> None:
    """DETR's run_with_submitit.py parses the options with main.py's parser as a parent, keeps
    them on a Trainer and calls `main(self.args)`; it also hands its own `main` to a launcher,
    which is not main.py's."""
    files = {"main.py": MAIN_SCRIPT, "run_with_submitit.py": LAUNCHER}
    assert edited_routes(capsys, tmp_path, files, variant, "main.py", "TPL107") == lines


# a script's step loop, whose one caller passes `track=False`; another module hands on a function
# of the same name to a launcher
TRACKED_TRAINING = """
import torch


def train(model, loader, opt, track):
    total = 0.0
    for x, y in loader:
        loss = (model(x.cuda()) - y.cuda()).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if track:
            total = total + loss.item()


def main():
    model = torch.nn.Linear(2, 2).cuda()
    data = torch.utils.data.TensorDataset(torch.zeros(8, 2), torch.zeros(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    train(model, torch.utils.data.DataLoader(data), opt, track=False)


if __name__ == "__main__":
    main()
"""

OWN_LAUNCHER = """
def train():
    print("launched")


def launch(function):
    function()


if __name__ == "__main__":
    launch(train)
"""


@pytest.mark.parametrize(
    "variant, lines",
    [
        (("", ""), []),
        # the launcher hands on the script's own `train`: its callers are not all seen
        (('def train():\n    print("launched")', "from main import train"), [12]),
    ],
)
def test_a_function_of_the_same_name_handed_on_elsewhere_keeps_its_callers(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, variant: tuple[str, str], lines: list[int]
) -> None:
    """Every project fact about a module-level function's callers (here the values they pass)
    asks one question, whether it may be handed on: a name read without a call in a module
    where that name is another function says nothing about it."""
    files = {"main.py": TRACKED_TRAINING, "launcher.py": OWN_LAUNCHER}
    assert edited_routes(capsys, tmp_path, files, variant, "main.py", "TPL107") == lines

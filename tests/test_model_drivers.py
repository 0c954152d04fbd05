"""A function that drives a model it is handed in a loop of its own (a sampler's denoising loop)
runs once per many model calls, whoever calls it: that loop is the step, an inference step, and
the function's other statements run once per sampling, like an epoch loop's (RULES.md, hot code
item 4). Its set-up is cold even when a validation loop calls it per batch; the loop stays hot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from torchperf_lint.analysis.vocabulary import is_model_name
from torchperf_lint.cli import main

from .helpers import finding_lines, write_project

pytestmark = pytest.mark.usefixtures("precision_off_rules_on")

_MODEL = """
    from torch import nn


    class Denoiser(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Linear(16, 16)

        def forward(self, x, t):
            return self.net(x) * t[:, None]
    """
# the validation loop samples one image per batch: set-up once per sampling, the model per step
_SAMPLING = """
    import torch


    def make_noise(n):
        return torch.randn(n, 16).cuda()


    def sample(model, cond, steps):
        x = make_noise(cond.shape[0])
        ids = torch.zeros(cond.shape[0], 3).cuda()
        for t in range(steps):
            t_vec = torch.full((cond.shape[0],), t / steps).cuda()
            x = x - model(x + ids.sum(), t_vec)
        return x


    def denoise_once(model, x):
        noise = torch.randn(x.shape[0], 16).cuda()
        return model(x + noise, torch.ones(x.shape[0], device=x.device))


    def ensemble(models, x):
        noise = torch.randn(x.shape[0], 16).cuda()
        return [model(x + noise, noise[:, 0]) for model in models]


    def vote(models, x):
        noise = torch.randn(x.shape[0], 16).cuda()
        out = []
        for model in models:
            out.append(model(x + noise, noise[:, 0]))
        return out
    """
_VALIDATE = """
    import torch
    from model import Denoiser
    from sampling import denoise_once, ensemble, sample, vote


    def validate(val_loader):
        model = Denoiser().cuda()
        for x, cond in val_loader:
            image = sample(model, cond.cuda(), 50)
            once = denoise_once(model, x.cuda())
            many = ensemble([model, model], x.cuda())
            votes = vote([model, model], x.cuda())
            print(image.mean().item(), once.mean().item(), len(many), len(votes))
    """
_FILES = {"model.py": _MODEL, "sampling.py": _SAMPLING, "validate.py": _VALIDATE}


def test_a_samplers_set_up_is_cold_and_its_denoising_loop_hot(tmp_path: Path) -> None:
    root = write_project(tmp_path, _FILES)
    # make_noise (called before the loop) and the ids line are cold; the per-step t_vec is hot;
    # one model call per validation batch keeps its noise hot, and so do loops over models
    assert finding_lines(root, "sampling.py", "TPL101") == [12, 18, 23, 28]


def test_the_denoising_loop_is_named_an_inference_loop(tmp_path: Path, capsys) -> None:
    root = write_project(tmp_path, _FILES)
    main(["--format", "json", "--no-cache", "--show-context", "--select", "TPL101", str(root)])
    contexts = {int(f["line"]): f["context"] for f in json.loads(capsys.readouterr().out)}
    assert contexts[12] == "in inference loop at line 11"
    assert contexts[18].startswith("in denoise_once (sampling.py), called from loop over val_loader")


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        # edm's generate.py: the script's main calls the sampler once per batch of seeds, in a
        # loop that runs no model itself, or picks it as a value (`sampler_fn = sample`)
        ("for seeds in range(4):\n            x = sample(model, cond, 18)", [12]),
        ("sampler_fn = sample\n        x = sampler_fn(model, cond, 18)", [12]),
        # look-alike: nothing calls the sampler
        ("x = cond", []),
    ],
)
def test_a_sampler_a_script_calls_steps_the_model_in_its_own_loop(
    tmp_path: Path, script: str, expected: list[int]
) -> None:
    generate = f"""
    import torch
    from model import Denoiser
    from sampling import sample


    def main():
        model = Denoiser().cuda()
        cond = torch.zeros(8, 16).cuda()
        {script}


    if __name__ == "__main__":
        main()
    """
    root = write_project(tmp_path, {"model.py": _MODEL, "sampling.py": _SAMPLING, "generate.py": generate})
    assert finding_lines(root, "sampling.py", "TPL101") == expected


def test_a_sampler_called_by_a_training_step_keeps_its_loop_hot(tmp_path: Path) -> None:
    train = """
        import torch
        from model import Denoiser
        from sampling import sample


        def train(loader, optimizer):
            model = Denoiser().cuda()
            for x, cond in loader:
                model(x.cuda(), cond.cuda()).mean().backward()
                optimizer.step()
                sample(model, cond.cuda(), 4)
        """
    root = write_project(tmp_path, {"model.py": _MODEL, "sampling.py": _SAMPLING, "train.py": train})
    assert finding_lines(root, "sampling.py", "TPL101") == [12]


def test_model_names() -> None:
    assert all(map(is_model_name, ["model", "ema_model", "net", "unet", "generator", "g_net", "Model"]))
    assert not any(map(is_model_name, ["fn", "loss_fn", "models", "transform", "criterion", "netloc"]))


def test_a_part_of_the_model_run_chunk_by_chunk_inside_forward_stays_hot(tmp_path: Path) -> None:
    # inside a model's forward the forward is the step: the chunked helper's set-up runs per step
    nerf = """
        import torch
        from torch import nn


        def render(model, points, chunk=1024):
            offsets = torch.zeros(points.shape[0], 3).cuda()
            out = []
            for i in range(0, points.shape[0], chunk):
                out.append(model(points[i : i + chunk] + offsets[i : i + chunk]))
            return torch.cat(out)


        class System(nn.Module):
            def __init__(self, nerf):
                super().__init__()
                self.nerf = nerf

            def forward(self, points):
                return render(self.nerf, points)
        """
    root = write_project(tmp_path, {"nerf.py": nerf})
    assert finding_lines(root, "nerf.py", "TPL101") == [6]

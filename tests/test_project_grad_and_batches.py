"""Two facts the project pass carries across modules (project/grad_free.py, project/summary.py):
a function every caller in the project runs without grad is post-processing, wherever it is
defined, and a loader's batch handed on unmoved is a host value in the function that gets it.
Each with the look-alike that stays reported."""

from __future__ import annotations

from pathlib import Path

import pytest

from .helpers import finding_lines, write_project

pytestmark = pytest.mark.usefixtures("precision_off_rules_on")

# a per-image loop of mask selections, the shape of an NMS helper
_POSTPROCESS = """
    import torch


    def non_max_suppression(prediction, conf_thres):
        output = [torch.zeros((0, 6), device="cpu")] * prediction.shape[0]
        for xi, x in enumerate(prediction):
            x = x[x[..., 4] > conf_thres]
            if not x.shape[0]:
                continue
            conf, j = x[:, 5:].max(1, keepdim=True)
            x = torch.cat((x[:, :4], conf, j.float()), 1)[conf.view(-1) > conf_thres]
            output[xi] = x.cpu()
        return output
    """


def _caller(body: str, header: str = "") -> str:
    return f"""
    import torch
    from torch import nn
    {header}
    from utils import non_max_suppression


    def evaluate(model, loader):
        model.eval()
        for images, _ in loader:
            images = images.cuda()
{body}
    """


_UNDER_NO_GRAD = """
            with torch.no_grad():
                preds = model(images)
                kept = non_max_suppression(preds, 0.25)
"""
_DECORATED_HELPER = """
            kept = run(model, images)


    @smart_inference_mode()
    def run(model, images):
        return non_max_suppression(model(images), 0.25)
"""
_SMART = """
from contextlib import contextmanager


def smart_inference_mode():
    def decorate(fn):
        return torch.inference_mode()(fn)
    return decorate
"""
_WITH_GRAD = """
            preds = model(images)
            kept = non_max_suppression(preds, 0.25)
"""
_SWITCHED = """
            with torch.set_grad_enabled(model.training):
                kept = non_max_suppression(model(images), 0.25)
"""


def _lines(tmp_path: Path, caller: str) -> list[int]:
    write_project(tmp_path, {"utils.py": _POSTPROCESS, "evaluate.py": caller})
    return finding_lines(tmp_path, "utils.py", "TPL201")


def test_a_helper_every_caller_runs_under_no_grad_is_post_processing(tmp_path: Path) -> None:
    assert _lines(tmp_path, _caller(_UNDER_NO_GRAD)) == []


def test_a_project_decorator_entering_inference_mode_counts(tmp_path: Path) -> None:
    assert _lines(tmp_path, _caller(_DECORATED_HELPER, header=_SMART)) == []


def test_a_caller_with_grad_keeps_the_finding(tmp_path: Path) -> None:
    assert _lines(tmp_path, _caller(_WITH_GRAD)) == [6]


def test_a_grad_switch_whose_value_is_not_known_keeps_the_finding(tmp_path: Path) -> None:
    assert _lines(tmp_path, _caller(_SWITCHED)) == [6]


def test_one_caller_with_grad_among_several_keeps_the_finding(tmp_path: Path) -> None:
    both = _caller(_UNDER_NO_GRAD) + """

    def train_step(model, images):
        return non_max_suppression(model(images), 0.25)
    """
    assert _lines(tmp_path, both) == [6]


# per-image statistics over the loader's targets, called from the validation loop
_STATISTICS = """
    import torch


    def batch_statistics(outputs, targets):
        metrics = []
        for sample_i in range(len(outputs)):
            annotations = targets[targets[:, 0] == sample_i][:, 1:]
            metrics.append(annotations.sum())
        return metrics
    """


def _validation(loop: str, move: str = "") -> str:
    return f"""
    import torch
    from utils import batch_statistics


    def validate(model, dataloader):
        sample_metrics = []
        for {"batch_i, (imgs, targets)" if loop.startswith("enumerate") else "imgs, targets"} in {loop}:
            {move or "pass"}
            outputs = model(imgs.cuda())
            sample_metrics += batch_statistics(list(outputs), targets)
        return sample_metrics
    """


# the validation loop's callers: a loader built by DataLoader(...) or returned by a project helper
_PLAIN_CALLER = """
    from torch.utils.data import DataLoader
    from validate import validate


    def make_loader(dataset):
        return DataLoader(dataset, batch_size=8)


    def main(model, dataset):
        test_loader = DataLoader(dataset, batch_size=8)
        validate(model, test_loader)
        val_loader = make_loader(dataset)
        validate(model, val_loader)
    """
# a loader prepared by accelerate yields batches already on the device
_PREPARED_CALLER = """
    from torch.utils.data import DataLoader
    from validate import validate


    def main(model, dataset, accelerator):
        val_loader = accelerator.prepare(DataLoader(dataset, batch_size=8))
        validate(model, val_loader)
    """


@pytest.mark.parametrize(
    ("loop", "move", "caller", "reported"),
    [
        ("dataloader", "", _PLAIN_CALLER, []),
        ("enumerate(dataloader)", "", _PLAIN_CALLER, []),
        ("dataloader", "targets = targets.cuda()", _PLAIN_CALLER, [6]),
        ("DataPrefetcher(dataloader)", "", _PLAIN_CALLER, [6]),
        ("dataloader", "", _PREPARED_CALLER, [6]),
        ("dataloader", "", "", [6]),
    ],
    ids=[
        "batch-of-a-plain-loader-handed-on-unmoved",
        "enumerated-batch-not-its-counter",
        "batch-moved-first",
        "prefetched-batches",
        "loader-prepared-by-a-caller",
        "loader-no-project-call-hands-in",
    ],
)
def test_a_loader_batch_handed_on_unmoved_is_a_host_value(
    tmp_path: Path, loop: str, move: str, caller: str, reported: list[int]
) -> None:
    files = {"utils.py": _STATISTICS, "validate.py": _validation(loop, move)}
    if caller:
        files["main.py"] = caller
    write_project(tmp_path, files)
    assert finding_lines(tmp_path, "utils.py", "TPL201") == reported

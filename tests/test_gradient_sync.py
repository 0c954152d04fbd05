"""TPL406 beyond the rule examples: a model wrapped in another module and handed to the training
loop (ConvNeXt's `main.py` wraps, `engine.py` accumulates), and the fix's shape and idempotence."""

from __future__ import annotations

import textwrap
from pathlib import Path

from torchperf_lint.api import fix_source, lint_source

from .helpers import finding_lines, write_project

_ENGINE = """
    import torch

    def train_one_epoch(model, criterion, data_loader, optimizer, device, update_freq):
        for data_iter_step, (samples, targets) in enumerate(data_loader):
            samples = samples.to(device, non_blocking=True)
            output = model(samples)
            loss = criterion(output, targets.to(device)) / update_freq
            loss.backward()
            if (data_iter_step + 1) % update_freq == 0:
                optimizer.step()
                optimizer.zero_grad()
    """


def _main(wrap: str) -> str:
    return f"""
    import torch
    from engine import train_one_epoch

    def main(args, model, criterion, loader, optimizer):
        model.cuda()
        {wrap}
        for epoch in range(args.epochs):
            train_one_epoch(model, criterion, loader, optimizer, "cuda", args.update_freq)
    """


def test_model_wrapped_in_another_module_is_followed_into_the_loop(tmp_path: Path) -> None:
    wrap = "if args.distributed:\n            model = torch.nn.parallel.DistributedDataParallel(model)"
    root = write_project(tmp_path, {"engine.py": _ENGINE, "main.py": _main(wrap)})
    assert finding_lines(root, "engine.py", "TPL406") == [8]
    (finding,) = lint_source((root / "engine.py").read_text(), str(root / "engine.py"), select=["TPL406"])
    assert "wrapped by a caller of train_one_epoch()" in finding.message


def test_model_never_wrapped_in_the_project_is_silent(tmp_path: Path) -> None:
    root = write_project(tmp_path, {"engine.py": _ENGINE, "main.py": _main("pass")})
    assert finding_lines(root, "engine.py", "TPL406") == []


def test_data_parallel_is_not_distributed(tmp_path: Path) -> None:
    """nn.DataParallel reduces once per forward: accumulation does not multiply its traffic."""
    root = write_project(
        tmp_path, {"engine.py": _ENGINE, "main.py": _main("model = torch.nn.DataParallel(model)")}
    )
    assert finding_lines(root, "engine.py", "TPL406") == []


_SCRIPT = textwrap.dedent(
    """
    import contextlib
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    def train(net, loader, optimizer, accum):
        model = DDP(net.cuda())
        for i, (x, y) in enumerate(loader):
            # forward and backward of one micro-step
            loss = model(x.cuda(), y.cuda()) / accum
            loss.backward()
            if (i + 1) % accum == 0 or i + 1 == len(loader):
                optimizer.step()
                optimizer.zero_grad()
    """
).lstrip("\n")


def test_fix_uses_the_files_contextlib_and_negates_a_compound_test() -> None:
    fixed = fix_source(_SCRIPT, path="train.py", unsafe=True, select=["TPL406"])
    assert "import contextlib\nimport torch\n" in fixed  # no second import
    assert (
        "        # forward and backward of one micro-step\n"
        "        with model.no_sync() if not ((i + 1) % accum == 0 or i + 1 == len(loader)) "
        "else contextlib.nullcontext():\n"
        "            loss = model(x.cuda(), y.cuda()) / accum\n"
        "            loss.backward()\n"
    ) in fixed
    compile(fixed, "train.py", "exec")
    assert fix_source(fixed, path="train.py", unsafe=True, select=["TPL406"]) == fixed
    assert lint_source(fixed, path="train.py", select=["TPL406"]) == []


def test_fix_is_unsafe_only() -> None:
    assert fix_source(_SCRIPT, path="train.py", unsafe=False, select=["TPL406"]) == _SCRIPT


def test_no_fix_where_the_stepping_test_reads_what_the_micro_step_computes() -> None:
    source = _SCRIPT.replace(
        "if (i + 1) % accum == 0 or i + 1 == len(loader):", "if (i + 1) % accum == 0 or loss > 9:"
    )
    (finding,) = lint_source(source, path="train.py", select=["TPL406"])
    assert finding.fix is None


def test_no_fix_where_backward_is_inside_a_branch() -> None:
    source = _SCRIPT.replace(
        "        loss.backward()\n", "        if loss.requires_grad:\n            loss.backward()\n"
    )
    (finding,) = lint_source(source, path="train.py", select=["TPL406"])
    assert finding.fix is None


def test_step_under_a_logging_guard_alone_is_not_accumulation() -> None:
    source = _SCRIPT.replace("(i + 1) % accum == 0 or i + 1 == len(loader)", "loss.item() < 10")
    assert lint_source(source, path="train.py", select=["TPL406"]) == []


def test_need_update_name_bound_to_a_modulo_is_accumulation() -> None:
    source = _SCRIPT.replace(
        "        if (i + 1) % accum == 0 or i + 1 == len(loader):",
        "        need_update = (i + 1) % accum == 0\n        if need_update:",
    )
    assert [f.line for f in lint_source(source, path="train.py", select=["TPL406"])] == [10]


def test_test_files_are_silent() -> None:
    assert lint_source(_SCRIPT, path="tests/test_train.py", select=["TPL406"]) == []


def test_fabric_backward_is_silent() -> None:
    source = _SCRIPT.replace("loss.backward()", "fabric.backward(loss)")
    assert lint_source(source, path="train.py", select=["TPL406"]) == []


def test_helper_context_handed_the_model_decides_sync() -> None:
    """NVlabs/edm: `with misc.ddp_sync(ddp, last_round):` around each accumulation round."""
    source = textwrap.dedent(
        """
        import torch
        from torch_utils import misc

        def train(net, loader, optimizer, num_accumulation_rounds, rank):
            ddp = torch.nn.parallel.DistributedDataParallel(net, device_ids=[rank])
            for x, y in loader:
                for round_idx in range(num_accumulation_rounds):
                    with misc.ddp_sync(ddp, round_idx == num_accumulation_rounds - 1):
                        ddp(x.cuda(), y.cuda()).backward()
                optimizer.step()
        """
    ).lstrip("\n")
    assert lint_source(source, path="train.py", select=["TPL406"]) == []
    unguarded = source.replace(
        "with misc.ddp_sync(ddp, round_idx == num_accumulation_rounds - 1):", "if True:"
    )
    assert [f.line for f in lint_source(unguarded, path="train.py", select=["TPL406"])] == [9]


def test_helper_of_another_module_that_returns_ddp(tmp_path: Path) -> None:
    """yolov5: `model = smart_DDP(model)`, with smart_DDP in utils/torch_utils.py."""
    helper = """
        from torch.nn.parallel import DistributedDataParallel as DDP

        def smart_DDP(model):
            return DDP(model, device_ids=[0])
        """
    train = """
        import torch
        from utils import smart_DDP

        def train(model, loader, optimizer, accumulate, distributed):
            if distributed:
                model = smart_DDP(model)
            last_opt_step = -1
            for ni, (imgs, targets) in enumerate(loader):
                loss = model(imgs.cuda(), targets.cuda())
                loss.backward()
                if ni - last_opt_step >= accumulate:
                    optimizer.step()
                    optimizer.zero_grad()
                    last_opt_step = ni
        """
    root = write_project(tmp_path, {"utils.py": helper, "train.py": train})
    assert finding_lines(root, "train.py", "TPL406") == [10]
    plain = helper.replace("return DDP(model, device_ids=[0])", "return model")
    root = write_project(tmp_path / "plain", {"utils.py": plain, "train.py": train})
    assert finding_lines(root, "train.py", "TPL406") == []

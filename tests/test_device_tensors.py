"""Where the project pass reads that an expression puts a tensor (project/device_tensors.py)."""

from __future__ import annotations

import ast

import pytest

from torchperf_lint.project.device_tensors import ON_DEVICE, device_source, passes_device

BOUND = {"moved": ["x.cuda()"], "twice": ["x.cuda()", "x.cpu()"], "chain": ["moved"]}


def _source(code: str) -> str:
    def bindings(name: str) -> list[ast.AST]:
        return [ast.parse(v, mode="eval").body for v in BOUND.get(name, ())]

    def qualify(name: str) -> str:
        return name.replace("th.", "torch.", 1) if name.startswith("th.") else name

    return device_source(ast.parse(code, mode="eval").body, bindings, frozenset({"device", "x"}), qualify)


@pytest.mark.parametrize(
    ("code", "source"),
    [
        ("x.cuda()", ON_DEVICE),
        ("x.to('cuda:1')", ON_DEVICE),
        ("x.to(0)", ON_DEVICE),
        ("x.to(self.device)", ON_DEVICE),
        ("x.to(device=dev)", ON_DEVICE),
        ("torch.zeros(3, device=local_device)", ON_DEVICE),
        ("th.arange(3, device='cuda')", ON_DEVICE),  # the module under another name
        ("x.to(device)", "@device"),  # where the caller's argument puts it
        ("torch.tensor([1.0], device=device)", "@device"),
        ("moved", ON_DEVICE),
        ("chain", ON_DEVICE),
        # not known to be on the device
        ("x.to('cpu')", ""),
        ("x.to(torch.float16)", ""),
        ("x.to(dtype)", ""),
        ("x.to(other)", ""),  # another tensor's place and type: not read
        ("x.to(True)", ""),
        ("torch.zeros(3)", ""),
        ("torch.from_numpy(a)", ""),
        ("numpy.zeros(3, device='cuda')", ""),
        ("twice", ""),  # bound to the device and the host
        ("x", ""),  # a parameter: its callers decide (graph.py)
        ("unbound", ""),
    ],
)
def test_the_place_an_expression_puts_a_tensor(code: str, source: str) -> None:
    assert _source(code) == source


@pytest.mark.parametrize(
    ("token", "on_device"),
    [("?", True), ("'cuda'", True), ("@args.device", True), ("'cpu'", False), ("None", False), (None, False)],
)
def test_a_tensor_moved_to_a_parameter_is_on_the_device_where_the_call_passes_one(
    token: str | None, on_device: bool
) -> None:
    assert passes_device("@device", {"device": token}.get) is on_device
    assert passes_device(ON_DEVICE, {}.get) and not passes_device("", {}.get)

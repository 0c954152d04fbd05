"""Models that stay on the host (analysis/placement.py): built without a device, never moved,
passed on or returned. Only then do TPL204 and TPL702 treat their parameters as CPU tensors; a
model that a caller in another module may move keeps the findings."""

from __future__ import annotations

from pathlib import Path

import pytest

from .helpers import finding_lines, write_project

pytestmark = pytest.mark.usefixtures("precision_off_rules_on")  # TPL204 and TPL702 are off by default

_SCRIPT = """
    import torch

    fc = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(fc.parameters(), lr=0.1)
    for step in range(100):
        loss = fc(torch.randn(8, 4)).sum()
        loss.backward()
        for param in fc.parameters():
            param.data.add_(-0.1 * param.grad)
    ok = torch.cuda.is_available()
    """


def test_a_script_whose_model_is_never_moved_trains_on_the_host(tmp_path: Path) -> None:
    root = write_project(tmp_path, {"script.py": _SCRIPT})
    assert finding_lines(root, "script.py", "TPL204") == []
    assert finding_lines(root, "script.py", "TPL702") == []


def test_a_model_of_a_module_another_module_imports_may_be_moved_there(tmp_path: Path) -> None:
    train = """
        import script
        script.fc.cuda()
        """
    root = write_project(tmp_path, {"script.py": _SCRIPT, "train.py": train})
    assert finding_lines(root, "script.py", "TPL702") == [4]


def test_a_model_handed_to_a_wrapper_may_be_moved_by_it(tmp_path: Path) -> None:
    wrapped = """
        import torch
        from torch.nn.parallel import DistributedDataParallel as DDP

        def main(rank):
            model = torch.nn.Linear(4, 1)
            ddp = DDP(model, device_ids=[rank])
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            torch.cuda.set_device(rank)
        """
    root = write_project(tmp_path, {"wrapped.py": wrapped})
    assert finding_lines(root, "wrapped.py", "TPL702") == [7]


_RPC_PARAMETER_SERVER = """
    import torch
    import torch.distributed.rpc as rpc
    import torchvision

    class ParameterServer(object):
        def __init__(self):
            self.model = torchvision.models.resnet50()
            self.future_model = torch.futures.Future()
            self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.001)

        def get_model(self):
            return self.model

        @staticmethod
        @rpc.functions.async_execution
        def update_and_fetch_model(ps_rref, grads):
            self = ps_rref.local_value()
            fut = self.future_model
            self.optimizer.step()
            fut.set_result(self.model)
            return fut

    class Trainer(object):
        def __init__(self, ps_rref):
            self.ps_rref = ps_rref

        def train(self, batches):
            m = self.ps_rref.rpc_sync().get_model().cuda()
            for inputs in batches:
                m(inputs.cuda()).sum().backward()
                m = rpc.rpc_sync(
                    self.ps_rref.owner(),
                    ParameterServer.update_and_fetch_model,
                    args=(self.ps_rref, [p.grad for p in m.cpu().parameters()]),
                ).cuda()
    """


def test_a_model_only_handed_out_over_rpc_stays_with_its_owner_on_the_host(tmp_path: Path) -> None:
    # the trainers move the copies they receive; the parameter server's model stays on the CPU
    root = write_project(tmp_path, {"ps.py": _RPC_PARAMETER_SERVER})
    assert finding_lines(root, "ps.py", "TPL702") == []


def test_a_model_returned_to_local_callers_too_may_be_moved(tmp_path: Path) -> None:
    local = _RPC_PARAMETER_SERVER + "\n    def local(ps):\n        return ps.get_model().cuda()\n"
    root = write_project(tmp_path, {"ps.py": local})
    assert finding_lines(root, "ps.py", "TPL702") == [9]


def test_a_model_handed_out_over_rpc_with_a_device_map_keeps_the_finding(tmp_path: Path) -> None:
    launch = """
        import torch.distributed.rpc as rpc

        def options():
            opts = rpc.TensorPipeRpcBackendOptions()
            opts.set_device_map("trainer", {0: 0})
            return opts
        """
    root = write_project(tmp_path, {"ps.py": _RPC_PARAMETER_SERVER, "launch.py": launch})
    assert finding_lines(root, "ps.py", "TPL702") == [9]

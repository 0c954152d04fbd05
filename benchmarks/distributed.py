"""Runs one variant as a process group, one process per GPU, as `torchrun` would: the variants of a case
listed in `Case.distributed` (DistributedDataParallel for TPL402).

Every process executes the variant's source and builds its step with `Case.make` (which reads its rank from
`torch.distributed`), makes the checked call, then the same timed calls as the single-process harness: the
first process takes the decisions (warm-up calls, samples, calls per sample) and shares them, so that every
process makes the same calls and no collective waits for a partner that stopped. The first process times
with CUDA events on its GPU and returns its result and samples through a file. On a smoke run the group is
two CPU processes on the gloo backend: the same code path, checked for equivalence, timed for nothing.
"""

from __future__ import annotations

import datetime
import multiprocessing
import os
import socket
import tempfile
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from .harness import Case, Make, Timing, checked_call, load_module, measure, release, seed_everything

SMOKE_PROCESSES = 2
# The processes are forked by a server that imported these once (torch._dynamo too: DDP's constructor imports
# it). The server never initialises CUDA, so its children may; a group starts in about a second instead of
# each process importing torch anew.
PRELOAD = ["torch", "torch._dynamo", __name__]
TIMEOUT = datetime.timedelta(minutes=5)  # a rank that died must not leave the others waiting for 30 minutes


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def shared_from_first(values: list[int], device: torch.device) -> list[int]:
    """Every process gets the first process's values."""
    tensor = torch.tensor(values, dtype=torch.int64, device=device)
    dist.broadcast(tensor, src=0)
    return [int(v) for v in tensor.tolist()]


def _process(
    rank: int,
    world: int,
    port: int,
    make: Make,
    source: str,
    filename: str,
    module_name: str,
    size: dict,
    smoke: bool,
    budget_s: float,
    warmup: bool,
    out: str,
) -> None:
    if smoke:
        device = torch.device("cpu")
        torch.set_num_threads(1)
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # loopback only; finding an interface is slow
        backend = "gloo"
    else:
        device = torch.device("cuda", rank)
        torch.cuda.set_device(device)
        os.environ["NCCL_NVLS_ENABLE"] = "0"  # never NVLink multicast on the lent machines
        # a size may name a transport regime (TPL406's NCCL over sockets): set before the group starts
        os.environ.update(size.get("env", {}))
        backend = "nccl"
    dist.init_process_group(
        backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world, timeout=TIMEOUT
    )
    try:
        module = load_module(source, filename, module_name)
        seed_everything(0)
        step = make(module, size, device)
        result, seconds, memory = checked_call(step, device)
        timing = measure(
            step, device, budget_s, smoke, seconds, warmup, share=lambda v: shared_from_first(v, device)
        )
        if rank == 0:
            payload: dict[str, Any] = {
                "result": [leaf.cpu() if isinstance(leaf, torch.Tensor) else leaf for leaf in result],
                "samples_ms": timing.samples_ms,
                "inner": timing.inner,
                "memory": memory,
                "first_call_ms": seconds * 1e3,
            }
            torch.save(payload, out)
        step = module = None
        release(device)
    finally:
        dist.destroy_process_group()


def run_variant(
    case: Case,
    name: str,
    source: str,
    filename: str,
    size: dict,
    device: torch.device,
    smoke: bool,
    share: float,
) -> tuple[list[Any], Timing]:
    """The distributed counterpart of harness.run_variant: the same result and timing, from process 0."""
    world = SMOKE_PROCESSES if smoke else case.gpus
    multiprocessing.set_forkserver_preload(PRELOAD)
    with tempfile.TemporaryDirectory() as directory:
        out = Path(directory) / "first-process.pt"
        mp.start_processes(
            _process,
            args=(
                world,
                free_port(),
                case.make,
                source,
                filename,
                f"{case.name}_{name}",
                size,
                smoke,
                share,
                case.warmup,
                str(out),
            ),
            nprocs=world,
            join=True,
            start_method="forkserver",  # fork is unsafe once CUDA or the DataLoader's threads have started
        )
        payload = torch.load(out)
    timing = Timing(payload["samples_ms"], payload["inner"], *payload["memory"], payload["first_call_ms"])
    return payload["result"], timing

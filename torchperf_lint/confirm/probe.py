"""The instrumentation `torchperf-lint confirm` installs in the user's program (copied beside a
`sitecustomize` on a temporary PYTHONPATH entry, so nothing is written into the user's files).

It imports nothing but the standard library until the program itself imports torch; then it
installs a TorchFunctionMode and an optimizer step hook, records what each line of the user's
project does at every step (tensor factories and where their result lives, host reads, host to
device copies, indices built on the host, module construction, CUDA syncs), stops the program
after the steps asked for, and writes what it saw as JSON for the parent to read. Every hook calls
the original and returns its result untouched: the program computes what it computed before.

Self-contained on purpose: the user's interpreter may not be able to import torchperf_lint."""

from __future__ import annotations

import atexit
import importlib.abc
import json
import os
import sys
import time
from typing import Any

OUT_VARIABLE = "TORCHPERF_LINT_CONFIRM_OUT"
STEPS_VARIABLE = "TORCHPERF_LINT_CONFIRM_STEPS"
ROOTS_VARIABLE = "TORCHPERF_LINT_CONFIRM_ROOTS"
PROFILE_VARIABLE = "TORCHPERF_LINT_CONFIRM_PROFILE"

HOST_READS = {
    "item": "item",
    "tolist": "tolist",
    "cpu": "cpu",
    "numpy": "numpy",
    "__bool__": "bool",
    "__float__": "float",
    "__int__": "int",
    "__repr__": "print",
    "__format__": "print",
}
FACTORIES = (
    "zeros ones empty full rand randn randint randperm arange linspace logspace eye tensor as_tensor "
    "zeros_like ones_like empty_like full_like rand_like randn_like randint_like"
).split()


class Recorder:
    """What was seen, by (path, line, kind): how often in each window (window k runs from the end of
    step k-1 to the end of step k), its details and, with --profile, the host time spent in the
    call (on CUDA that includes the wait)."""

    def __init__(self, steps: int, roots: list[str], out: str, profile: bool) -> None:
        self.limit = steps + 1  # the first step, with the setup before it, is a warm-up
        self.roots = tuple(os.path.join(root, "") if os.path.isdir(root) else root for root in roots)
        self.out = out
        self.profile = profile
        self.done = 0  # steps completed
        self.counts: dict[tuple[str, int, str], dict[int, int]] = {}
        self.details: dict[tuple[str, int, str], set[str]] = {}
        self.seconds: dict[tuple[str, int, str], dict[int, float]] = {}
        self.user_files: dict[str, str | None] = {}
        self.optimizers = False  # an optimizer was built: steps are its step() calls, else backward()
        self.stepper: int | None = None  # the first optimizer that stepped: a GAN's second is not a step
        self.cuda_seen = False
        self.written = False
        self.stopped = False

    def forget(self) -> None:
        """A forked child (a DataLoader worker, a rank started by fork) starts with nothing seen;
        one that never steps leaves through os._exit and reports nothing."""
        self.done = 0
        self.counts, self.details, self.seconds = {}, {}, {}
        self.stepper = None
        self.written = self.stopped = False

    def user_line(self, depth: int) -> tuple[str, int] | None:
        """The innermost frame in the user's project: a library's work is charged to the user's line
        that called it."""
        return self.line_of(sys._getframe(depth + 1))  # 0: the caller

    def line_of(self, frame: Any) -> tuple[str, int] | None:
        while frame is not None:
            name = frame.f_code.co_filename
            path = self.user_files.get(name, "")
            if path == "":
                path = self.user_files[name] = self._in_project(name)
            if path is not None:
                return path, frame.f_lineno
            frame = frame.f_back
        return None

    def _in_project(self, name: str) -> str | None:
        if name.startswith("<"):
            return None
        path = os.path.realpath(name)
        return path if any(path == root or path.startswith(root) for root in self.roots) else None

    def record(self, where: tuple[str, int], kind: str, detail: str = "", seconds: float = 0.0) -> None:
        key = (where[0], where[1], kind)
        window = self.done + 1
        by_step = self.counts.setdefault(key, {})
        by_step[window] = by_step.get(window, 0) + 1
        if detail:
            self.details.setdefault(key, set()).add(detail)
        if seconds:
            by_window = self.seconds.setdefault(key, {})
            by_window[window] = by_window.get(window, 0.0) + seconds

    def step(self) -> None:
        self.done += 1
        if self.done >= self.limit and not self.stopped:
            self.stopped = True
            self.write()
            raise SystemExit(0)

    def write(self) -> None:
        if self.written:
            return
        self.written = True
        events = [
            {
                "path": path,
                "line": line,
                "kind": kind,
                "by_step": {str(k): v for k, v in sorted(by_step.items())},
                "details": sorted(self.details.get((path, line, kind), ())),
                "seconds": {str(k): v for k, v in sorted(self.seconds.get((path, line, kind), {}).items())},
            }
            for (path, line, kind), by_step in sorted(self.counts.items())
        ]
        report = {
            "pid": os.getpid(),
            "rank": os.environ.get("RANK"),
            "steps": self.done,
            "stopped": self.stopped,
            "step_kind": "optimizer.step()" if self.optimizers else "backward()",
            "cuda": self.cuda_seen,
            "profile": self.profile,
            "events": events,
        }
        target = os.path.join(self.out, f"report-{os.getpid()}.json")
        with open(target + ".tmp", "w", encoding="utf-8") as stream:
            json.dump(report, stream)
        os.replace(target + ".tmp", target)


def _device_of(value: Any) -> str:
    device = getattr(value, "device", None)
    return getattr(device, "type", "") or ""


def _is_host_index(index: Any) -> bool:
    """A Python range or list (of ints, or holding one) used as an index: built on the host and
    copied to the tensor's device at every call."""
    parts = index if isinstance(index, tuple) else (index,)
    return any(isinstance(part, (range, list)) for part in parts)


def _install(torch: Any, recorder: Recorder) -> None:
    from torch.optim.optimizer import register_optimizer_step_post_hook
    from torch.overrides import TorchFunctionMode

    tensor = torch.Tensor
    reads = {getattr(tensor, name): kind for name, kind in HOST_READS.items()}
    factories = {getattr(torch, name): name for name in FACTORIES if hasattr(torch, name)}
    copies = {tensor.to, tensor.cuda}
    indexing = {tensor.__getitem__, tensor.__setitem__}
    backwards = {tensor.backward, torch.autograd.backward}
    compiling = getattr(getattr(torch, "compiler", None), "is_compiling", lambda: False)
    sync_debug = {"on": False}

    def watch_syncs() -> None:
        """CUDA's sync debug mode, once CUDA is up (turning it on earlier would start CUDA before
        the program has chosen its devices)."""
        if sync_debug["on"] or not torch.cuda.is_initialized():
            return
        sync_debug["on"] = True
        recorder.cuda_seen = True
        try:
            torch.cuda.set_sync_debug_mode("warn")
        except (RuntimeError, AttributeError):
            pass

    def observe(func: Any, args: Any, kwargs: Any, result: Any, seconds: float) -> None:
        where = recorder.user_line(1)
        if where is None:
            return
        seconds = seconds if recorder.profile else 0.0
        if func in reads:
            recorder.record(where, reads[func], f"on {_device_of(args[0])}", seconds)
        elif func in factories:
            recorder.record(where, "factory", f"{factories[func]} on {_device_of(result)}", seconds)
            if _device_of(result) == "cuda":
                watch_syncs()
        elif func in copies and _device_of(args[0]) == "cpu" and _device_of(result) not in ("cpu", ""):
            pinned = "pinned" if args[0].is_pinned() else "pageable"
            blocking = "non_blocking" if kwargs.get("non_blocking") else "blocking"
            recorder.record(where, "copy", f"to {_device_of(result)}, {pinned}, {blocking}", seconds)
            watch_syncs()
        elif func in indexing and _is_host_index(args[1]):
            recorder.record(
                where, "host-index", f"{type(args[1]).__name__} on {_device_of(args[0])}", seconds
            )
        else:
            recorder.record(where, "backward" if func in backwards else "torch-call", "", seconds)

    class Probe(TorchFunctionMode):
        def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            if compiling():
                return func(*args, **kwargs)
            started = time.perf_counter()
            result = func(*args, **kwargs)
            try:
                observe(func, args, kwargs, result, time.perf_counter() - started)
            except Exception:  # noqa: BLE001  # a probe's mistake must never become the program's
                pass
            if func in backwards and not recorder.optimizers:
                recorder.step()  # SystemExit after the last step: meant to end the program
            return result

    def after_step(optimizer: Any, args: Any, kwargs: Any) -> None:
        if recorder.stepper is None:
            recorder.stepper = id(optimizer)
        if id(optimizer) == recorder.stepper:
            watch_syncs()
            recorder.step()

    optimizer_init = torch.optim.Optimizer.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        recorder.optimizers = True
        optimizer_init(self, *args, **kwargs)

    torch.optim.Optimizer.__init__ = init
    register_optimizer_step_post_hook(after_step)
    _wrap_module_init(torch, recorder)
    _wrap_cuda_waits(torch, recorder)
    _catch_sync_warnings(recorder)
    Probe().__enter__()  # for the rest of the main thread's life


def _wrap_module_init(torch: Any, recorder: Recorder) -> None:
    """Module construction, charged to the line that builds the module, not to the super().__init__
    lines of its classes."""
    module_init = torch.nn.Module.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        module_init(self, *args, **kwargs)
        try:
            frame: Any = sys._getframe(1)
            while (
                frame is not None
                and frame.f_code.co_name == "__init__"
                and frame.f_locals.get("self") is self
            ):
                frame = frame.f_back
            where = recorder.line_of(frame)
            if where is not None:
                recorder.record(where, "module", type(self).__name__)
        except Exception:  # noqa: BLE001  # a probe's mistake must never become the program's
            pass

    torch.nn.Module.__init__ = init


def _wrap_cuda_waits(torch: Any, recorder: Recorder) -> None:
    """torch.cuda.synchronize and empty_cache are no torch functions: the mode never sees them."""
    for name in ("synchronize", "empty_cache"):
        original = getattr(torch.cuda, name, None)
        if original is None:
            continue

        def wait(*args: Any, _original: Any = original, _name: str = name, **kwargs: Any) -> Any:
            started = time.perf_counter()
            result = _original(*args, **kwargs)
            try:
                where = recorder.user_line(1)
                if where is not None:
                    seconds = time.perf_counter() - started if recorder.profile else 0.0
                    recorder.record(where, _name.replace("_", "-"), "", seconds)
            except Exception:  # noqa: BLE001  # a probe's mistake must never become the program's
                pass
            return result

        setattr(torch.cuda, name, wait)


def _catch_sync_warnings(recorder: Recorder) -> None:
    """CUDA's sync debug mode warns at every synchronising call; each warning is recorded at the
    user's line and not shown."""
    import warnings

    warnings.filterwarnings("always", message=".*called a synchronizing CUDA operation")
    shown = warnings.showwarning

    def showwarning(
        message: Any, category: Any, filename: str, lineno: int, *args: Any, **kwargs: Any
    ) -> None:
        if "synchronizing CUDA operation" not in str(message):
            shown(message, category, filename, lineno, *args, **kwargs)
            return
        where = recorder.user_line(1)
        if where is not None:
            recorder.record(where, "sync")

    warnings.showwarning = showwarning


class _AfterTorchImport(importlib.abc.MetaPathFinder):
    """Runs `_install` once the program's own `import torch` has finished, so that a program that
    never imports torch (a launcher, a tool it runs) pays nothing and torch loads when it would."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        for finder in sys.meta_path:
            spec = finder.find_spec(name, path, target) if hasattr(finder, "find_spec") else None
            if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
                loader = spec.loader
                execute = loader.exec_module

                def exec_module(module: Any, execute: Any = execute) -> None:
                    execute(module)
                    _install(module, self.recorder)

                loader.exec_module = exec_module  # type: ignore[method-assign]  # this one import only
                return spec
        return None


def start() -> None:
    """Every Python process the command starts is watched (a spawned DDP rank is a trainer, a
    DataLoader worker is not, and neither can be told apart here); each writes what it saw, and the
    parent reads the report of the process that made the most steps, rank 0 under torchrun."""
    out = os.environ.get(OUT_VARIABLE)
    if not out:
        return
    roots = json.loads(os.environ.get(ROOTS_VARIABLE, "[]"))
    recorder = Recorder(
        int(os.environ.get(STEPS_VARIABLE, "20")), roots, out, os.environ.get(PROFILE_VARIABLE) == "1"
    )
    os.register_at_fork(after_in_child=recorder.forget)
    atexit.register(recorder.write)
    if "torch" in sys.modules:
        _install(sys.modules["torch"], recorder)
    else:
        sys.meta_path.insert(0, _AfterTorchImport(recorder))

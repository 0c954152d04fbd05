"""The suite's machinery: what a case is, how its variants are loaded, checked against each other and timed.

A case holds the bad variant as module source text. Its good variant is either the fixer's output, committed
as benchmarks/generated/<case>_good.py by `python -m benchmarks.generate`, or hand-written (rules without a
fix). Every variant is executed as a fresh module; `Case.make(module, size, device)` builds the inputs from a
fixed seed and returns the zero-argument step that is checked and timed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import importlib.util
import linecache
import math
import random
import sys
import time
import traceback
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

GENERATED = Path(__file__).resolve().parent / "generated"

Step = Callable[[], Any]
Make = Callable[[types.ModuleType, dict, torch.device], Step]


@dataclasses.dataclass(frozen=True)
class Tolerance:
    """`torch.allclose(good, bad, rtol, atol)` on what the step returns; `what` says what that is when it is
    not simply the computation's output (a permutation-invariant summary, say)."""

    rtol: float = 1e-5
    atol: float = 1e-6
    what: str = ""

    def as_json(self) -> dict:
        return dataclasses.asdict(self)


EXACT = Tolerance(0.0, 0.0)


@dataclasses.dataclass
class Case:
    """One bad/good pair (plus optional hand-written alternatives) measured at several sizes.

    `fixes`: the rule codes whose fixes produce the good variant (empty: `good` is hand-written);
    `select`: the rules the generator lets the fixer apply (None: the default rule set, as `--fix` does);
    `manual`: (old, new) text edits applied after the fixer, the changes the messages ask for by hand.

    Every size names its `regime` (launch-bound, GPU-bound, a JPEG epoch with so many workers): the results
    say where a rule matters and where it does not. `variant_regime` adds what a variant changes to it
    (TPL501's worker count). `first_call`: the first call is a metric of its own (torch.compile's compilation).
    `warmup=False`: the checked call is the warm-up (a call is a whole epoch with fresh worker processes).
    `gpus`: GPUs the case needs; `distributed`: variants that run as one process per GPU (DistributedDataParallel).
    `requires`: modules a variant imports beyond torch (pillow's `PIL`): without them the case is skipped.
    `sampling_s`: seconds of timed calls each variant asks for (more where the gain is small beside the noise of
    a launch-bound step), granted while the run's budget allows. `rounds=2` runs the variants in order, then in
    reverse order (bad, good, good, bad), their samples pooled: a host whose speed drifts during the case (seen
    on an H200 host: the variant timed second ~10% slower, whichever it was) favours neither.
    `reported=False`: the bad variant is a form the rule leaves alone on purpose (one mask selection per step
    beside TPL201's per-item loops); the case measures what that costs, and the tests hold the rule silent on it.
    """

    name: str
    code: str
    title: str
    bad: str
    make: Make
    sizes: list[dict]
    smoke_sizes: list[dict]
    good: str | None = None
    fixes: tuple[str, ...] = ()
    select: tuple[str, ...] | None = ()
    manual: tuple[tuple[str, str], ...] = ()
    alternatives: dict[str, str] = dataclasses.field(default_factory=dict)
    comparisons: tuple[tuple[str, str], ...] = (("bad", "good"),)
    tolerance: Tolerance | dict[str, Tolerance] = Tolerance()
    compare: Callable[[Any, Any, Tolerance], str | None] | None = None
    memory: bool = False
    note: str = ""
    publish: tuple[str, ...] = ()
    variant_regime: dict[str, str] = dataclasses.field(default_factory=dict)
    first_call: bool = False
    warmup: bool = True
    gpus: int = 1
    distributed: tuple[str, ...] = ()
    requires: tuple[str, ...] = ()
    sampling_s: float = 1.0
    rounds: int = 1
    reported: bool = True

    def __post_init__(self) -> None:
        self.bad = self.bad.lstrip("\n")
        self.good = self.good.lstrip("\n") if self.good is not None else None
        self.alternatives = {name: source.lstrip("\n") for name, source in self.alternatives.items()}
        if self.select == ():
            self.select = self.fixes
        if not self.publish:
            self.publish = (self.code,)
        if (self.good is None) == (not self.fixes):
            raise ValueError(
                f"{self.name}: give either a hand-written good variant or the fixes that make it"
            )
        unlabelled = [size["label"] for size in self.sizes if not size.get("regime")]
        if unlabelled:
            raise ValueError(f"{self.name}: sizes without a regime: {unlabelled}")

    def regime(self, size: dict, variant: str | None = None) -> str:
        """'JPEG epoch, 2048 images, 8 workers': the size's regime and what the variant adds to it."""
        base = size.get("regime") or size["label"]
        extra = self.variant_regime.get(variant or "")
        return f"{base}, {extra}" if extra else base

    def missing_modules(self) -> list[str]:
        return [name for name in self.requires if importlib.util.find_spec(name) is None]

    @property
    def generated_path(self) -> Path:
        return GENERATED / f"{self.name}_good.py"

    @property
    def origin(self) -> str:
        if not self.fixes:
            return "hand-written"
        return "fixer output plus manual edits" if self.manual else "fixer output"

    def tolerance_for(self, variant: str) -> Tolerance:
        if isinstance(self.tolerance, Tolerance):
            return self.tolerance
        return self.tolerance.get(variant, self.tolerance.get("good", Tolerance()))

    def variants(self) -> dict[str, tuple[str, str]]:
        """name -> (source, file name for tracebacks); raises MissingVariant when the generated file is absent."""
        found = {"bad": (self.bad, f"<{self.name}_bad>")}
        if self.good is not None:
            found["good"] = (self.good, f"<{self.name}_good>")
        elif self.generated_path.exists():
            found["good"] = (self.generated_path.read_text(encoding="utf-8"), str(self.generated_path))
        else:
            raise MissingVariant(
                f"{self.generated_path.name} is missing: run `python -m benchmarks.generate` "
                f"(needs the {'/'.join(self.fixes)} fix)"
            )
        for name, source in self.alternatives.items():
            found[name] = (source, f"<{self.name}_{name}>")
        return found


class MissingVariant(Exception):
    pass


def load_module(source: str, filename: str, name: str) -> types.ModuleType:
    """Execute `source` as a fresh module (registered in sys.modules so pickling and dataclasses work)."""
    module = types.ModuleType(f"benchmarks.variant_{name}")
    module.__file__ = filename
    sys.modules[module.__name__] = module
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), module.__dict__)  # noqa: S102 (the variants are ours)
    return module


@contextlib.contextmanager
def isolated_global_state() -> Iterator[None]:
    """Variants may flip process-wide switches at import (TF32, cudnn.benchmark, anomaly mode): undo them."""
    saved = (
        torch.get_float32_matmul_precision(),
        torch.backends.cuda.matmul.allow_tf32,
        torch.backends.cudnn.allow_tf32,
        torch.backends.cudnn.benchmark,
        torch.is_anomaly_enabled(),
        torch.is_anomaly_check_nan_enabled(),
        torch.is_grad_enabled(),
    )
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(saved[0])
        torch.backends.cuda.matmul.allow_tf32 = saved[1]
        torch.backends.cudnn.allow_tf32 = saved[2]
        torch.backends.cudnn.benchmark = saved[3]
        torch.autograd.set_detect_anomaly(saved[4], check_nan=saved[5])
        torch.set_grad_enabled(saved[6])


@contextlib.contextmanager
def cpu_stand_ins(device: torch.device) -> Iterator[None]:
    """On a CPU-only smoke run, let `.cuda()` and `torch.cuda.synchronize()` in a variant's source be no-ops,
    so that sources can keep the seeds' spelling. Never active on a GPU."""
    if device.type != "cpu" or torch.cuda.is_available():
        yield
        return
    saved = (torch.Tensor.cuda, torch.nn.Module.cuda, torch.cuda.synchronize)
    torch.Tensor.cuda = lambda self, *args, **kwargs: self  # type: ignore[method-assign]
    torch.nn.Module.cuda = lambda self, *args, **kwargs: self  # type: ignore[method-assign]
    torch.cuda.synchronize = lambda *args, **kwargs: None
    try:
        yield
    finally:
        torch.Tensor.cuda, torch.nn.Module.cuda, torch.cuda.synchronize = saved  # type: ignore[method-assign]


# -- equivalence ------------------------------------------------------------------------------------------


def leaves(value: Any) -> list[Any]:
    """Tensors and numbers of a (nested) step result, in order."""
    if isinstance(value, (list, tuple)):
        return [leaf for item in value for leaf in leaves(item)]
    if isinstance(value, dict):
        return [leaf for key in sorted(value) for leaf in leaves(value[key])]
    return [value]


def snapshot(value: Any) -> list[Any]:
    """A copy of a step result that later steps cannot change."""
    return [leaf.detach().clone() if isinstance(leaf, torch.Tensor) else leaf for leaf in leaves(value)]


def allclose(reference: list[Any], other: list[Any], tol: Tolerance) -> str | None:
    """None when every leaf matches, else what differs."""
    if len(reference) != len(other):
        return f"{len(other)} results where the bad variant gave {len(reference)}"
    for index, (a, b) in enumerate(zip(reference, other, strict=False)):
        a = torch.as_tensor(a).detach().cpu()
        b = torch.as_tensor(b).detach().cpu()
        if a.shape != b.shape:
            return f"result {index}: shape {tuple(b.shape)} instead of {tuple(a.shape)}"
        if not (a.is_floating_point() or a.is_complex()):
            if not torch.equal(a, b.to(a.dtype)):
                return f"result {index}: {int((a != b.to(a.dtype)).sum())} elements differ"
            continue
        a64, b64 = a.double(), b.double()
        if not torch.allclose(b64, a64, rtol=tol.rtol, atol=tol.atol):
            diff = (b64 - a64).abs()
            return (
                f"result {index}: max |diff| {diff.nan_to_num(math.inf).max().item():.3g} "
                f"exceeds rtol={tol.rtol:g}, atol={tol.atol:g}"
            )
    return None


def max_abs_diff(reference: list[Any], other: list[Any]) -> float:
    worst = 0.0
    for a, b in zip(reference, other, strict=False):
        a64 = torch.as_tensor(a).detach().cpu().double()
        b64 = torch.as_tensor(b).detach().cpu().double()
        if a64.numel():
            worst = max(worst, (a64 - b64).abs().max().item())
    return worst


# -- timing -----------------------------------------------------------------------------------------------

MIN_SAMPLE_S = 0.002  # a sample groups enough calls to last this long (events resolve ~0.5 us)
MAX_INNER = 100
MIN_SAMPLES = 5
MAX_SAMPLES = 100
WARMUP_S = 0.2
SLOW_CALL_S = 1.0  # calls this long (an epoch, a 1e8-element randperm on the host) get fewer samples
MIN_SLOW_SAMPLES = 3

Share = Callable[[list[int]], list[int]]


def same_everywhere(values: list[int]) -> list[int]:
    """A single process decides alone (see distributed.py for a process group)."""
    return values


@dataclasses.dataclass
class Timing:
    samples_ms: list[float]  # milliseconds per call, one value per sample
    inner: int  # calls per sample
    peak_bytes: int | None = None
    base_bytes: int | None = None
    first_call_ms: float | None = None  # the checked call, compilation and lazy set-up included

    @property
    def median(self) -> float:
        return median(self.samples_ms)

    def as_json(self) -> dict:
        data: dict[str, Any] = {
            "median_ms": round_sig(self.median),
            "min_ms": round_sig(min(self.samples_ms)),
            "max_ms": round_sig(max(self.samples_ms)),
            "samples": len(self.samples_ms),
            "calls_per_sample": self.inner,
            "samples_ms": [round_sig(s) for s in self.samples_ms],
        }
        if self.peak_bytes is not None:
            data["peak_memory_bytes"] = self.peak_bytes
            data["memory_before_bytes"] = self.base_bytes
        if self.first_call_ms is not None:
            data["first_call_ms"] = round_sig(self.first_call_ms)
        return data


def round_sig(value: float, digits: int = 5) -> float:
    return float(f"{value:.{digits}g}")


def median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure(
    step: Step,
    device: torch.device,
    budget_s: float,
    smoke: bool,
    first_call_s: float = 0.0,
    warmup: bool = True,
    share: Share = same_everywhere,
) -> Timing:
    """Warm up, then time groups of calls: CUDA events on a GPU (the device is drained before each group,
    so a sample is the time from launching the first call to the end of the last call's work).

    `warmup=False`: the checked call (`first_call_s`) was the warm-up. `share` makes every process of a
    group take the first one's decisions (how many warm-up calls, samples and calls per sample), so that
    all of them make the same calls."""
    if smoke:  # the harness only: one sample, no claims (a second call, unless the first was the warm-up)
        if not warmup:
            return Timing([first_call_s * 1e3], 1)
        start = time.perf_counter()
        step()
        return Timing([(time.perf_counter() - start) * 1e3], 1)
    calls, started = 0, time.perf_counter()
    while warmup and share([int(calls < 1 or (time.perf_counter() - started < WARMUP_S and calls < 20))])[0]:
        step()
        synchronize(device)
        calls += 1
    per_call = (time.perf_counter() - started) / calls if calls else first_call_s
    inner = max(1, min(MAX_INNER, math.ceil(MIN_SAMPLE_S / max(per_call, 1e-7))))
    least = MIN_SLOW_SAMPLES if per_call >= SLOW_CALL_S else MIN_SAMPLES
    count = int(min(MAX_SAMPLES, max(least, budget_s / (per_call * inner))))
    inner, count = share([inner, count])
    samples = []
    for _ in range(count):
        synchronize(device)
        if device.type == "cuda":
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            for _ in range(inner):
                step()
            end.record()
            end.synchronize()
            samples.append(begin.elapsed_time(end) / inner)
        else:
            start = time.perf_counter()
            for _ in range(inner):
                step()
            samples.append((time.perf_counter() - start) * 1e3 / inner)
    return Timing(samples, inner)


@contextlib.contextmanager
def peak_memory(device: torch.device) -> Iterator[list[int | None]]:
    """Yields [peak bytes allocated inside the block, bytes allocated before it], filled on exit
    ([None, None] off the GPU)."""
    found: list[int | None] = [None, None]
    if device.type != "cuda":
        yield found
        return
    synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    before = torch.cuda.memory_allocated(device)
    yield found
    synchronize(device)
    found[:] = [torch.cuda.max_memory_allocated(device), before]


def bootstrap_ci(
    bad: list[float], good: list[float], rounds: int = 1000, seed: int = 0
) -> tuple[float, float]:
    """95% interval of median(bad) / median(good) over resamples of both sample sets."""
    rng = random.Random(seed)
    ratios = sorted(
        median(rng.choices(bad, k=len(bad))) / median(rng.choices(good, k=len(good))) for _ in range(rounds)
    )
    return ratios[int(0.025 * rounds)], ratios[math.ceil(0.975 * rounds) - 1]


# -- running a case ---------------------------------------------------------------------------------------


def seed_everything(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)


def release(device: torch.device) -> None:
    """Free the finished variant's tensors (reference cycles included) before the next one is built."""
    if "torch._dynamo" in sys.modules:  # a torch.compile'd variant: drop its graphs and guards
        torch._dynamo.reset()
    gc.collect()
    gc.freeze()  # what survived is long-lived (torch internals, results): later collections skip it
    if device.type == "cuda":
        torch.cuda.empty_cache()


@dataclasses.dataclass
class Budget:
    """Seconds of sampling per variant, shrunk when the run falls behind its deadline."""

    total_s: float
    variants_left: int
    per_variant_s: float = 1.0
    started: float = dataclasses.field(default_factory=time.perf_counter)

    def next_variant(self, wanted_s: float | None = None) -> float:
        left = self.total_s - (time.perf_counter() - self.started)
        share = left / max(self.variants_left, 1)
        self.skip(1)
        return max(0.0, min(wanted_s or self.per_variant_s, share))

    def skip(self, variants: int) -> None:
        self.variants_left = max(self.variants_left - variants, 0)


class Mismatch(Exception):
    pass


def checked_call(step: Step, device: torch.device) -> tuple[list[Any], float, list[int | None]]:
    """The checked call, from a fixed seed: its result, its duration in seconds (compilation and lazy
    set-up included) and its peak memory."""
    seed_everything(1)
    with peak_memory(device) as memory:
        start = time.perf_counter()
        output = step()
        synchronize(device)
        seconds = time.perf_counter() - start
    return snapshot(output), seconds, memory


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
    """Load one variant, call its step once from a fixed seed (the result to check, and its peak memory),
    then time it."""
    module_name = f"{case.name}_{name}"
    try:
        with isolated_global_state(), cpu_stand_ins(device):
            module = load_module(source, filename, module_name)
            seed_everything(0)
            step = case.make(module, size, device)
            result, seconds, memory = checked_call(step, device)
            timing = measure(step, device, share, smoke, seconds, case.warmup)
            timing.peak_bytes, timing.base_bytes = memory
            timing.first_call_ms = seconds * 1e3
            return result, timing
    finally:
        sys.modules.pop(f"benchmarks.variant_{module_name}", None)
        step = module = None  # drop the variant's tensors before the next one is built
        release(device)


def unavailable(case: Case, device: torch.device, smoke: bool) -> str | None:
    """Why `case` cannot run here, or None."""
    missing = case.missing_modules()
    if missing:
        return (
            f"needs the module(s) {', '.join(missing)}, not installed here (setup.cfg's bench extra has them)"
        )
    if not smoke and case.gpus > 1 and torch.cuda.device_count() < case.gpus:
        return (
            f"needs {case.gpus} GPUs, this machine has {torch.cuda.device_count()}: run "
            f"`python -m benchmarks --only {case.code}` on a machine with {case.gpus}"
        )
    return None


def run_size(case: Case, size: dict, device: torch.device, smoke: bool, budget: Budget) -> dict:
    """Check and time every variant of `case` at one size: the result row of the JSON file.
    Variants run one after the other, each compared with the bad one before its timing counts."""
    row: dict[str, Any] = {
        "case": case.name,
        "code": case.code,
        "title": case.title,
        "size": size["label"],
        "regime": case.regime(size),
        "origin": case.origin,
        "memory": case.memory,
        "first_call": case.first_call,
        "note": case.note,
        "publish": list(case.publish),
        "status": "ok",
        "variants": {},
        "comparisons": [],
        "tolerance": {},
    }
    try:
        variants = case.variants()
    except MissingVariant as missing:
        budget.skip(2 + len(case.alternatives))
        row.update(status="skipped", detail=str(missing))
        return row
    reason = unavailable(case, device, smoke)
    if reason is not None:
        budget.skip(len(variants))
        row.update(status="skipped", detail=reason)
        return row
    reference: list[Any] | None = None
    timings: dict[str, Timing] = {}
    order = list(variants.items())
    if case.rounds == 2 and not smoke:
        order += order[::-1]
    for done, (name, (source, filename)) in enumerate(order):
        try:
            runner = run_variant
            if name in case.distributed:
                from .distributed import run_variant as runner  # imports torch.distributed only here
            result, timing = runner(
                case,
                name,
                source,
                filename,
                size,
                device,
                smoke,
                budget.next_variant(case.sampling_s / len(order) * len(variants)),
            )
            if reference is None:
                reference = result
            elif name != order[0][0]:  # the bad variant's second round is the reference run again
                tol = size.get("tolerance") or case.tolerance_for(name)
                row["tolerance"][name] = tol.as_json()
                problem = (case.compare or allclose)(reference, result, tol)
                if problem is not None:
                    raise Mismatch(f"{name} differs from bad: {problem}")
                if case.compare is None:
                    row.setdefault("max_abs_diff", {})[name] = round_sig(max_abs_diff(reference, result), 3)
        except Mismatch as mismatch:
            row.update(status="mismatch", detail=str(mismatch))
        except Exception:  # noqa: BLE001 (one broken case must not cost the rest of the run)
            row.update(status="error", detail=f"{name}: {traceback.format_exc(limit=-8)}")
        if row["status"] != "ok":
            budget.skip(len(order) - done - 1)
            return row
        if name in timings:  # the second round: pool its samples with the first's
            timing = dataclasses.replace(
                timings[name], samples_ms=timings[name].samples_ms + timing.samples_ms
            )
        timings[name] = timing
        row["variants"][name] = timing.as_json()
    for baseline, improved in case.comparisons:
        bad, good = timings[baseline], timings[improved]
        comparison = {
            "baseline": baseline,
            "variant": improved,
            "regime": case.regime(size, improved),
            "speedup": round_sig(bad.median / good.median, 4),
            "ci": [round_sig(v, 4) for v in bootstrap_ci(bad.samples_ms, good.samples_ms)],
        }
        if bad.peak_bytes is not None and good.peak_bytes:
            comparison["memory_ratio"] = round_sig(bad.peak_bytes / good.peak_bytes, 4)
        row["comparisons"].append(comparison)
    return row

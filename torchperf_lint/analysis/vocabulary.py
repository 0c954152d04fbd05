"""Names that decide what is hot, shared by the per-file analysis (libcst) and the project pass
(CPython's ast), so both read code by the same words. Nothing here imports libcst."""

from __future__ import annotations

import ast
import functools
import re
from typing import Iterable, Optional

# A file shows CUDA use: `.cuda(`, `torch.cuda.`, a string literal starting with "cuda", or
# `torch.accelerator.` (the device-generic API of torch 2.6+, which picks CUDA on an NVIDIA machine:
# pytorch/examples choose their device with `torch.accelerator.current_accelerator()`).
# The NCCL backend runs only between GPUs: a process group over it (`init_process_group("nccl")`,
# `backend="nccl"`) says the file trains on CUDA as plainly as the word "cuda" does.
CUDA_USE = re.compile(r"""\.cuda\(|torch\.cuda\.|["']cuda|["']nccl["']|torch\.accelerator\.""")


def cuda_prefixes(imports: Iterable[tuple[str, str]]) -> tuple[str, ...]:
    """What `torch.cuda.` is spelled as under the module's imports, from (bound name, qualified
    name) pairs: `th.cuda.` after `import torch as th`, `cuda.` after `from torch import cuda`."""
    prefixes: set[str] = set()
    for bound, qualified in imports:
        if qualified == "torch" and bound != "torch":
            prefixes.update((f"{bound}.cuda.", f"{bound}.accelerator."))
        elif qualified in ("torch.cuda", "torch.accelerator") and "." not in bound:
            prefixes.add(f"{bound}.")
    return tuple(sorted(prefixes))


def shows_cuda_use(source: str, prefixes: tuple[str, ...] = ()) -> bool:
    """`.cuda(`, `torch.cuda.` (or its spelling under an import alias, `prefixes`), a string
    literal starting with "cuda" or the string "nccl" in `source`. The plain substring test first:
    most files never say cuda, and it costs a fraction of the pattern's scan."""
    if "cuda" not in source and "accelerator" not in source and "nccl" not in source:
        return False
    if CUDA_USE.search(source) is not None:
        return True
    return bool(prefixes) and _alias_pattern(prefixes).search(source) is not None


@functools.lru_cache(maxsize=64)
def _alias_pattern(prefixes: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile(r"(?<![\w.])(?:" + "|".join(re.escape(p) for p in prefixes) + ")")


# `torch.set_default_device("cuda")`, `torch.set_default_tensor_type(torch.cuda.FloatTensor)`:
# factories called without `device=` create their tensors on the GPU from then on.
DEFAULT_DEVICE_SETTERS = frozenset({"torch.set_default_device", "torch.set_default_tensor_type"})


def sets_cuda_default(setter: Optional[str], argument: Optional[str]) -> bool:
    """`setter` (qualified) makes CUDA the default device with `argument`: the string it is
    given (`"cuda:0"`, `"torch.cuda.FloatTensor"`) or the qualified name it is given
    (`torch.cuda.FloatTensor`)."""
    return (
        setter in DEFAULT_DEVICE_SETTERS
        and argument is not None
        and argument.startswith(("cuda", "torch.cuda."))
    )


# Classes whose subclasses are models: `forward`/`__call__` run once per step.
MODULE_BASES = frozenset(
    {
        "torch.nn.Module",
        "torch.jit.ScriptModule",
        "torch.fx.GraphModule",
        "lightning.LightningModule",
        "pytorch_lightning.LightningModule",
        "lightning.pytorch.LightningModule",
        "lightning.pytorch.core.module.LightningModule",
        "pytorch_lightning.core.module.LightningModule",
        "pytorch_lightning.core.LightningModule",
        # well-known model bases of the ecosystem
        "transformers.PreTrainedModel",
        "transformers.modeling_utils.PreTrainedModel",
        "diffusers.ModelMixin",
        "diffusers.models.ModelMixin",
        "diffusers.models.modeling_utils.ModelMixin",
        "torch_geometric.nn.MessagePassing",
        "torch_geometric.nn.conv.MessagePassing",
        "torch_geometric.nn.conv.message_passing.MessagePassing",
        "segmentation_models_pytorch.base.SegmentationModel",
    }
)
# Packages whose CapWords classes are modules when a project subclasses them (timm's and
# torchvision's models and layers, MONAI's networks, torch's own module classes).
MODULE_PACKAGES = (
    "torch.nn.",
    "torch.ao.nn.",
    "timm.models.",
    "timm.layers.",
    "torchvision.models.",
    "torchvision.ops.",
    "monai.networks.",
)
# Under those packages, names that are not modules.
_NOT_MODULES = frozenset(
    {"Parameter", "UninitializedParameter", "UninitializedBuffer", "Buffer", "PackedSequence", "SDPBackend"}
)
_NOT_MODULE_PARTS = frozenset({"functional", "init", "utils", "attention", "grad", "parameter"})

# Methods that run once per step besides forward/__call__, by the base that calls them.
EXTRA_ENTRY_POINTS = {
    "torch_geometric": ("message", "aggregate", "update", "message_and_aggregate", "edge_update"),
}
MODULE_ENTRY_POINTS = ("forward", "__call__")
STEP_HOOKS = frozenset({"training_step", "validation_step", "test_step", "predict_step"})

# Methods that return the module they are called on.
MODULE_CHAIN_METHODS = frozenset(
    {"cuda", "to", "train", "eval", "half", "float", "double", "bfloat16", "cpu", "requires_grad_"}
)

# DistributedDataParallel, as imported or spelled through torch.nn.
DISTRIBUTED_DATA_PARALLEL = frozenset(
    {
        "torch.nn.parallel.DistributedDataParallel",
        "torch.nn.parallel.distributed.DistributedDataParallel",
        "torch.nn.DistributedDataParallel",
    }
)

# Wrappers that all-reduce (or reduce-scatter) gradients during every backward() unless told not
# to: `no_sync()` on DDP and FSDP1; FSDP2's `fully_shard` takes `set_requires_gradient_sync(False)`.
FULLY_SHARDED_DATA_PARALLEL = frozenset(
    {
        "torch.distributed.fsdp.FullyShardedDataParallel",
        "torch.distributed.fsdp.fully_sharded_data_parallel.FullyShardedDataParallel",
    }
)
FULLY_SHARD = frozenset(
    {
        "torch.distributed.fsdp.fully_shard",
        "torch.distributed.fsdp._fully_shard.fully_shard",
        "torch.distributed.fsdp._fully_shard._fully_shard.fully_shard",
        "torch.distributed._composable.fsdp.fully_shard",
        "torch.distributed._composable.fsdp.fully_shard.fully_shard",
    }
)
GRADIENT_SYNC_WRAPPERS = DISTRIBUTED_DATA_PARALLEL | FULLY_SHARDED_DATA_PARALLEL | FULLY_SHARD

NO_GRAD_CONTEXTS = frozenset(
    {
        "torch.no_grad",
        "torch.inference_mode",
        "torch.autograd.no_grad",
        "torch.autograd.inference_mode",
        "torch.autograd.grad_mode.no_grad",
        "torch.autograd.grad_mode.inference_mode",
    }
)


def is_module_base(qualified: Optional[str], extra: Iterable[str] = ()) -> bool:
    """`qualified` names a class whose subclasses are models. `extra` holds the config's
    `module-bases`: exact names, or package prefixes ending in a dot."""
    if not qualified:
        return False
    if qualified in MODULE_BASES:
        return True
    for base in extra:
        if qualified == base or (base.endswith(".") and qualified.startswith(base)):
            return True
    if not qualified.startswith(MODULE_PACKAGES):
        return False
    parts = qualified.split(".")
    last = parts[-1].lstrip("_")
    if not last[:1].isupper() or parts[-1] in _NOT_MODULES:
        return False
    return not _NOT_MODULE_PARTS.intersection(parts[1:-1])


def extra_entry_points(qualified: Optional[str]) -> tuple[str, ...]:
    if not qualified:
        return ()
    return EXTRA_ENTRY_POINTS.get(qualified.split(".")[0], ())


def is_loader_name(dotted: str) -> bool:
    """`train_loader`, `self.val_dataloader`, `loaders.train_loader`: named like a loader."""
    return "loader" in dotted.split(".")[-1].lower()


_HELD_OUT_WORDS = frozenset(
    {"val", "valid", "validation", "test", "testing", "eval", "evaluation", "holdout", "dev"}
)
# What a word of a data name may end with: `valloader`, `testset`, `valdata` are `val`/`test` data.
_DATA_SUFFIXES = ("dataloader", "loader", "dataset", "data", "set", "ds")


def names_held_out_data(dotted: str) -> bool:
    """`val_loader`, `self.testloader`, `holdout_set`, `eval_dataset`: named for data kept out of
    training (validation, test, holdout, dev), by one of its words. `models_to_test` holds models,
    not data: the word must be the name's first, carry a data suffix, or sit beside a data word
    (`data_loader_val`)."""
    words = [word for word in re.split(r"[_\d]+", dotted.split(".")[-1].lower()) if word]
    beside_data = any(word in _DATA_SUFFIXES for word in words)
    for position, word in enumerate(words):
        stem = next((word[: -len(s)] for s in _DATA_SUFFIXES if word.endswith(s) and word != s), word)
        if stem in _HELD_OUT_WORDS and (position == 0 or stem != word or beside_data):
            return True
    return False


def is_optimizer_class(qualified: str) -> bool:
    """`torch.optim.AdamW`, not a learning-rate scheduler (whose `step()` runs once per epoch)."""
    return qualified.startswith("torch.optim.") and not qualified.startswith("torch.optim.lr_scheduler.")


def is_optimizer_name(dotted: str) -> bool:
    """A receiver of `.step()` named like an optimizer (or an AMP grad scaler)."""
    last = dotted.split(".")[-1].lower()
    return "optim" in last or last in ("opt", "scaler")


def scaler_stepped(call: ast.Call) -> Optional[str]:
    """The optimizer `scaler.step(optimizer)` steps: a GradScaler steps the optimizer it is given,
    so the call runs that optimizer's `step`; None for any other call. Both passes read it here,
    the file pass through syntax/ast_view.py."""
    func = call.func
    if not (isinstance(func, ast.Attribute) and func.attr == "step") or len(call.args) != 1 or call.keywords:
        return None
    optimizer = call.args[0]
    if not isinstance(optimizer, ast.Name) or "scaler" not in _last_name(func.value).lower():
        return None
    return optimizer.id


def _last_name(expr: ast.expr) -> str:
    """The last name of a dotted name (`self.scaler` -> "scaler"); "" for anything else."""
    base = expr
    while isinstance(base, ast.Attribute):
        base = base.value
    if not isinstance(base, ast.Name):
        return ""
    return expr.attr if isinstance(expr, ast.Attribute) else base.id


# What a function calls when it drives a model it is handed: `model(x)`, `ema_model(x)`, `net(x)`,
# `unet(x, t)`, `generator(z)` (a torch.Generator or a Python generator is never called).
_MODEL_WORDS = ("model", "net", "network", "unet", "generator", "denoiser")


def is_model_name(name: str) -> bool:
    """A parameter named like a model: one of the words, alone or as the last part of a snake_case name."""
    last = name.lower().rsplit("_", 1)[-1]
    return last in _MODEL_WORDS


# Branches that do not run in a normal eager training step (RULES.md, "code that cannot run
# under the analysed conditions"): the body of `if <mode>():` runs only while scripting, tracing
# or exporting; the body of `if not is_compiling():` keeps a sync out of compiled graphs on purpose.
# torchvision's own `_is_tracing()` (its ONNX export paths) is one of them.
SPECIAL_MODES = frozenset({"is_scripting", "is_tracing", "_is_tracing", "is_in_onnx_export", "is_exporting"})
COMPILING = frozenset({"is_compiling", "is_dynamo_compiling"})
# Switches of debug output and checks, of statistics kept for inspection only
# (pytorch-metric-learning's `collect_stats`) and of what is collected only to draw plots (`if plots:`
# feeds a confusion-matrix figure): the branches they open are cold, like a sampling helper.
DEBUG_FLAGS = frozenset(
    {"debug", "verbose", "debugging", "DEBUG", "VERBOSE", "_debug", "_verbose", "collect_stats"}
    | {"plot", "plots"}
    | {"check", "sanity_check"}  # audiocraft's `generate(check=False)`: extra consistency asserts
)
# `if logger.isEnabledFor(logging.DEBUG):`: a branch that only feeds log output, as a debug switch
LOG_LEVEL_CHECKS = frozenset({"isEnabledFor"})


# Switches that only an export path turns on (`m.export = True`, `self.export_nms` set by an export
# script before tracing): the branches they open run while exporting, never in a training step.
def is_export_flag(name: str) -> bool:
    """`export`, `export_nms`, `onnx_export`, `exporting`: a flag named for exporting."""
    return name in ("export", "exporting") or name.startswith("export_") or name.endswith("_export")


# Device types a CUDA training step never runs on: a branch taken only there is cold
# (`if x.device.type == "mps":`, `if t.device == torch.device("cpu"):`).
NON_CUDA_DEVICE_TYPES = frozenset({"cpu", "mps"})
# The dtype a training step's tensors have unless the code casts them (`torch.float32`): a test that
# accepts it (`x.dtype in (torch.float32, torch.float64)`) holds in the steps the analysis reads, so
# the statements after `if x.is_cuda and x.dtype in (...): return fast(x)` are the CPU path.
DEFAULT_DTYPES = frozenset({"float32", "float"})


def is_cudnn_decision(dotted: str) -> bool:
    """`torch.backends.cudnn.benchmark`, `cudnn.deterministic` (any import alias of the module):
    assigning either shows cuDNN's algorithm choice was thought about (TPL403)."""
    return dotted.rsplit(".", 2)[-2:] in (["cudnn", "benchmark"], ["cudnn", "deterministic"])


def is_cudnn_decision_call(dotted: str) -> bool:
    """`torch.use_deterministic_algorithms(...)`, `torch.backends.cudnn.flags(...)`."""
    return dotted.endswith("use_deterministic_algorithms") or dotted.rsplit(".", 2)[-2:] == ["cudnn", "flags"]


# `if step == 0:`, `if batch_idx == 0:`: a branch taken on one step of many (the first batch of an
# epoch in a validation step). Bare `i` is not among them: `if i == 0:` over layers runs every step;
# `i` counts steps only as the `enumerate` counter of a step loop (hotpath.py `_on_one_step`).
# Calls that hand their argument's items to a `for` loop unchanged (`enumerate(loader)`,
# `tqdm(loader)`): what such a loop iterates is their argument (analysis/iteration.py, project/summary.py).
ITERATION_WRAPPERS = frozenset({"enumerate", "zip", "iter", "tqdm", "track", "trange"})
STEP_COUNTERS = frozenset(
    {
        "step",
        "global_step",
        "epoch",
        "iteration",
        "n_iter",
        "current_step",
        "batch_idx",
        "batch_nb",
        "batch_i",
        "batch_num",
        "batch_index",
    }
)
# Flags set on one step of a run: `if step % N == 0 or last_step:` runs rarely.
ONCE_FLAGS = frozenset(
    {"last_step", "is_last_step", "first_step", "is_first_step", "last_epoch", "is_last_epoch"}
)
# Reads of a cached value's layout: `if self.grid[i].shape[2:4] != x.shape[2:4]:` tests the cache.
LAYOUT_READS = frozenset({"shape", "size", "device", "dtype"})

# Functions that run once, or once per distinct arguments, whoever calls them: builders whose
# result is cached, and sampling or visualisation helpers (images for a logger, plots).
CACHED_BUILDERS = frozenset({"functools.lru_cache", "functools.cache"})
VISUAL_CALLS = frozenset(
    {"torchvision.utils.save_image", "torchvision.utils.make_grid", "wandb.Image", "cv2.applyColorMap"}
)
_VISUAL_NAME = re.compile(
    r"_?(visuali[sz]e|plot|(sample|save|log|show)_(images?|samples?|grid))", re.IGNORECASE
)


# Methods a dataset runs once, when it is first built: torch_geometric's `process()` and
# `download()` (the processed result is saved and loaded on later runs), Lightning's
# `prepare_data()`. A loader or a loop there is one-off preprocessing, not the training step.
DATASET_PREPARATION = frozenset({"process", "download", "prepare_data"})


def prepares_dataset(method: str, bases: Iterable[Optional[str]]) -> bool:
    """A method named `method` of a class with these (dotted) bases prepares a dataset once."""
    return method in DATASET_PREPARATION and any(
        base is not None and base.rsplit(".", 1)[-1].endswith(("Dataset", "DataModule")) for base in bases
    )


def runs_rarely(name: str, decorators: Iterable[Optional[str]], calls: Iterable[Optional[str]]) -> bool:
    """A function named `name`, with these (qualified) decorators, that makes these (qualified)
    calls runs once or rarely: a cached builder, a sampling or visualisation helper."""
    if _VISUAL_NAME.match(name) or any(d in CACHED_BUILDERS for d in decorators):
        return True
    return any(c is not None and (c in VISUAL_CALLS or c.startswith("matplotlib.")) for c in calls)


def normalised_code(text: str) -> str:
    """Source text of an expression, the same from libcst's code and from `ast.unparse`."""
    return "".join(text.split()).replace('"', "'")


# torch's dataset classes: what a DataLoader draws its items from, never an item it yields
# (torch_geometric's `InMemoryDataset.to(device)` moves a whole dataset, not a batch)
DATASET_BASES = frozenset(
    {
        "torch.utils.data.Dataset",
        "torch.utils.data.IterableDataset",
        "torch.utils.data.dataset.Dataset",
        "torch.utils.data.dataset.IterableDataset",
    }
)


# torch's dataset of tensors it is handed: held in memory by construction
TENSOR_DATASETS = frozenset({"torch.utils.data.TensorDataset", "torch.utils.data.dataset.TensorDataset"})


# What configures TensorPipe RPC to carry CUDA tensors; without it, RPC results arrive on the CPU.
_RPC_DEVICE_MAP = re.compile(r"\b(?:device_maps|set_device_map|set_devices)\b")


def names_rpc_device_map(source: str) -> bool:
    """The source configures an RPC device map (`TensorPipeRpcBackendOptions(device_maps=...)`,
    `options.set_device_map(...)`, `set_devices`): a tensor returned over RPC may be on a GPU.
    The substring check first, as in `shows_cuda_use`."""
    if "device_map" not in source and "set_devices" not in source:
        return False
    return _RPC_DEVICE_MAP.search(source) is not None


# -- host data (RULES.md, TPL102's host arrays), read by both passes ----------------------------------
# Factories that generate data; without device= they fill a CPU tensor.
GENERATING_FACTORIES = frozenset(
    "randperm zeros ones empty full arange rand randn randint normal eye linspace logspace".split()
)
# torch builders of a tensor from the data they are handed (`torch.tensor(values)`).
FROM_HOST_DATA = frozenset({"tensor", "as_tensor", "asarray", "from_numpy"})
# Tensor methods that copy values to the host and wait for the device (`loss.item()`).
SYNC_METHODS = frozenset({"item", "tolist", "cpu", "numpy"})
# `torch.<X>Tensor(...)` legacy constructors: CPU types (`torch.cuda.FloatTensor` is the device one).
LEGACY_CPU_TYPES = frozenset(
    """Tensor FloatTensor DoubleTensor HalfTensor BFloat16Tensor ByteTensor CharTensor ShortTensor
    IntTensor LongTensor BoolTensor""".split()
)
# Methods whose result is no longer an array of host data: those that take it off the host, and
# those that reduce it to one number.
_NOT_HOST_ARRAY_METHODS = frozenset(
    {"to", "cuda", "type_as", "new_tensor", "pin_memory"}
    | {"item", "size", "dim", "numel", "sum", "mean", "max", "min"}
)


def keeps_host_array(method: str) -> bool:
    """A method of a host array whose result is still one (`a.astype(np.float32)`,
    `t.view(n, -1)`), not a copy off the host (`.cuda()`) or one number (`.item()`, `.sum()`)."""
    return method not in _NOT_HOST_ARRAY_METHODS


def builds_host_array(qualified: str, names_device: bool) -> bool:
    """A call of `qualified` builds an array of host data: any NumPy or SciPy call (SciPy hands
    back NumPy arrays: `linear_sum_assignment(cost)`), `list(...)`, a torch builder from data or a
    generating factory without `device=` (`names_device`)."""
    if qualified.startswith(("numpy.", "scipy.")) or qualified == "builtins.list":
        return True
    builder = qualified[len("torch.") :] if qualified.startswith("torch.") else ""
    host_builder = builder in GENERATING_FACTORIES or builder in FROM_HOST_DATA or builder in LEGACY_CPU_TYPES
    return host_builder and not names_device


def maps_a_file(qualified: str, keywords: Iterable[str]) -> bool:
    """`np.memmap(path)` or `np.load(path, mmap_mode=...)`: an array read from disk as it is used,
    which may not fit in memory, let alone on a device (nanoGPT's token files)."""
    return qualified == "numpy.memmap" or (qualified == "numpy.load" and "mmap_mode" in keywords)


# -- torch.nn classes, read by both passes ------------------------------------------------------------
NN_CONVS = frozenset(f"Conv{n}d" for n in (1, 2, 3)) | frozenset(f"ConvTranspose{n}d" for n in (1, 2, 3))
_NN_MODULES = (
    "torch.nn",
    "torch.nn.modules",
    "torch.nn.modules.conv",
    "torch.nn.modules.batchnorm",
    "torch.nn.modules.instancenorm",
)


def nn_class_name(qualified: str, names: frozenset[str]) -> Optional[str]:
    """The `torch.nn` class among `names` that `qualified` names (`torch.nn.modules.conv.Conv2d`:
    `Conv2d`), or None."""
    module, _, cls = qualified.rpartition(".")
    return cls if module in _NN_MODULES and cls in names else None


# Words of a precision decision (TF32, autocast, a gradient scaler, a half-precision cast or dtype,
# a mixed-precision switch): a module whose text names one may set the precision of the process
# that imports the modules it runs. A mention counts, decided or not: silence is the safe side.
_PRECISION_WORDS = re.compile(
    r"set_float32_matmul_precision|allow_tf32|fp32_precision|autocast|GradScaler|float16|"
    r"bfloat16|\.half\(|mixed_precision|use_amp|scale_loss|amp\.initialize"
)


def mentions_reduced_precision(source: str) -> bool:
    return _PRECISION_WORDS.search(source) is not None

"""Datasets held in memory: a project dataset whose `__getitem__` only indexes what its
`__init__` stored (pytorch/examples' `MyTrainDataset`, a list of ready tensors), or torch's
`TensorDataset`. Loader workers have nothing to load or decode for them, only processes to
spawn and batches to pass back (TPL501).

The summary reads each class's `__getitem__` (`items_in_memory`) and records, per call, what
each argument is as a dataset token: `Callee` (built by `Callee(...)`, directly or through a name
bound to it) or `f#i` (element `i` of the tuple `f()` returns, unpacked into a name). The project
pass resolves the tokens and hands each module those that hold an in-memory dataset, and the
parameters every project caller passes one for (analysis/datasets.py reads them back).
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Iterator, Optional

from ..analysis.vocabulary import TENSOR_DATASETS

if TYPE_CHECKING:
    from .graph import ClassRef, FunctionRef, Module, Project
    from .summary import Call, Function

_DATASET_BASES = frozenset({"torch.utils.data.Dataset", "torch.utils.data.dataset.Dataset"})
_MAX_DEPTH = 8  # tuples returned from tuples returned...
# what `__getitem__` may do besides indexing: bind locals, build tuples, lists and dicts, compute
# positions (`self.data[i * n : (i + 1) * n]`)
_PLAIN = (
    ast.Return,
    ast.Assign,
    ast.Subscript,
    ast.Slice,
    ast.Tuple,
    ast.List,
    ast.Dict,
    ast.Name,
    ast.Constant,
    ast.BinOp,
    ast.UnaryOp,
    ast.expr_context,
    ast.operator,
    ast.unaryop,
)


def items_in_memory(node: ast.ClassDef) -> Optional[bool]:
    """Whether the class's own `__getitem__` only indexes attributes its `__init__` stores;
    None when it defines no `__getitem__`."""
    methods = {s.name: s for s in node.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))}
    getitem = methods.get("__getitem__")
    if getitem is None:
        return None
    init = methods.get("__init__")
    stored = set(_self_stores(init)) - set(_disk_backed(init)) if init is not None else set()
    body = getitem.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    if not body or not isinstance(body[-1], ast.Return) or body[-1].value is None:
        return False
    for statement in body:
        for part in ast.walk(statement):
            if isinstance(part, ast.Attribute):
                if not (isinstance(part.value, ast.Name) and part.value.id == "self" and part.attr in stored):
                    return False
            elif isinstance(part, ast.Name) and part.id == "self":
                if not any(isinstance(a, ast.Attribute) and a.value is part for a in ast.walk(statement)):
                    return False
            elif not isinstance(part, _PLAIN):
                return False  # a call (a file read, a decode, a transform), a branch, a loop
    return True


# openers whose result reads the disk on every index: an HDF5 file, a memory map, a key-value store
_DISK_OPENERS = frozenset({"File", "memmap", "open", "open_memmap", "load_from_disk", "Environment"})
_MAPPING_KEYWORDS = frozenset(
    {"mmap_mode", "mmap"}
)  # np.load(..., mmap_mode="r"), torch.load(..., mmap=True)


def _disk_backed(init: ast.AST) -> Iterator[str]:
    """The `self.` attributes `__init__` binds to a view of a file on disk (`h5py.File(path)[key]`,
    `np.load(path, mmap_mode="r")`, `np.memmap`, `zarr.open`, `lmdb.open`): indexing them reads
    the disk, which is what loader workers are for."""
    for part in ast.walk(init):
        if not isinstance(part, ast.Assign):
            continue
        opens_disk = any(
            isinstance(call, ast.Call)
            and (
                _callee_name(call.func) in _DISK_OPENERS
                or any(keyword.arg in _MAPPING_KEYWORDS for keyword in call.keywords)
            )
            for call in ast.walk(part.value)
        )
        if opens_disk:
            yield from _self_targets(part.targets)


def _callee_name(func: ast.expr) -> str:
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def _self_stores(init: ast.AST) -> Iterator[str]:
    for part in ast.walk(init):
        if isinstance(part, ast.Assign):
            yield from _self_targets(part.targets)
        elif isinstance(part, (ast.AnnAssign, ast.AugAssign)):
            yield from _self_targets([part.target])


def _self_targets(targets: list[ast.expr]) -> Iterator[str]:
    """The `self.` attributes among assignment targets, tuple targets unpacked."""
    pending = list(targets)
    while pending:
        target = pending.pop()
        if isinstance(target, (ast.Tuple, ast.List)):
            pending.extend(target.elts)
        elif (
            isinstance(target, ast.Attribute)
            and isinstance(target.value, ast.Name)
            and target.value.id == "self"
        ):
            yield target.attr


class InMemoryDatasets:
    """The project's in-memory datasets, resolved from the summaries' tokens."""

    def __init__(self, project: Project) -> None:
        self.project = project
        self._classes: dict[tuple[int, int], bool] = {}
        self._parameters: Optional[dict[tuple[int, int], frozenset[str]]] = None

    def is_class(self, cls: ClassRef) -> bool:
        """A dataset (torch's `Dataset` among its bases, or a `__len__`) whose nearest
        `__getitem__` in its lineage reads only memory."""
        key = cls.key()
        if key not in self._classes:
            project = self.project
            verdict = next(
                (c.info.items_in_memory for c in project.lineage(cls) if c.info.items_in_memory is not None),
                False,
            )
            is_dataset = project.find_method(cls, "__len__") is not None or any(
                q in _DATASET_BASES for q in project.external_bases(cls)
            )
            self._classes[key] = bool(verdict) and is_dataset
        return self._classes[key]

    def holds(self, module: Module, token: str, depth: int = 0) -> bool:
        """The dataset `token` names, as `module` writes it, is held in memory."""
        from .graph import ClassRef, External, FunctionRef

        if depth > _MAX_DEPTH:
            return False
        name, _, item = token.partition("#")
        found = self.project.resolve_dotted(module, name)
        if not item:
            if isinstance(found, External):
                return found.qualified in TENSOR_DATASETS
            return isinstance(found, ClassRef) and self.is_class(found)
        if not isinstance(found, FunctionRef) or not found.info.returns_items:
            return False
        position = int(item)
        return all(
            position < len(returned)
            and bool(returned[position])
            and self.holds(found.module, returned[position], depth + 1)
            for returned in found.info.returns_items
        )

    def names(self, module: Module) -> frozenset[str]:
        """The tokens, as `module` writes them, that hold an in-memory dataset."""
        tokens: set[str] = set()
        for info in (module.summary.toplevel, *module.summary.functions):
            for call in (*info.calls, *info.cold_calls):
                tokens.update(call.datasets.values())
                if call.kind in ("global", "dotted"):
                    tokens.add(call.target)
        return frozenset(t for t in tokens if self.holds(module, t))

    def parameters(self) -> dict[tuple[int, int], frozenset[str]]:
        """Parameters for which every call in the project passes an in-memory dataset; none for
        a function whose name is read without being called (its callers are not all seen)."""
        if self._parameters is not None:
            return self._parameters
        from .graph import FunctionRef

        project = self.project
        handed = project.handed_names()
        seen: dict[tuple[int, int], tuple[FunctionRef, set[str]]] = {}
        for module in project.modules.values():
            for offset, info in enumerate((module.summary.toplevel, *module.summary.functions)):
                caller = FunctionRef(module, offset - 1)
                for call in (*info.calls, *info.cold_calls):
                    for callee in project.resolve_call(caller, call):
                        names = self._passed(module, call, callee.info)
                        key = callee.key()
                        seen[key] = (callee, names if key not in seen else seen[key][1] & names)
        self._parameters = {
            key: frozenset(names)
            for key, (function, names) in seen.items()
            if names and function.info.name not in handed
        }
        return self._parameters

    def _passed(self, module: Module, call: Call, callee: Function) -> set[str]:
        from .arguments import bound_self  # arguments.py reads the summary, which reads this module

        if call.star:
            return set()
        params, bound = callee.params, bound_self(call, callee)
        names = set()
        for slot, token in call.datasets.items():
            param = params[int(slot) + bound] if slot.isdigit() and int(slot) + bound < len(params) else slot
            if param in params and self.holds(module, token):
                names.add(param)
        return names

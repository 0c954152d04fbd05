"""Which dataset classes hold their items in memory, read from a class's own code by the
summary (project/summary.py): a `__getitem__` that only indexes what `__init__` stored. The
project pass (project/datasets.py) resolves what the summary records."""

from __future__ import annotations

import ast
from typing import Iterator, Optional

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

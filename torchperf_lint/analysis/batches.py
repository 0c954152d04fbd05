"""Which values are DataLoader batches: the target of a loop over a loader, a value drawn with
`next(...)` from an iterator over one inside a step loop, and the elements reached from either by
unpacking, indexing, attribute access and iteration (RULES.md, TPL106).

`for i, (x, y) in enumerate(loader)` makes `x` and `y` batches, never the index `i`; so do
`x, y = batch`, `x = batch[0]`, `batch["image"]`, `batch.x` and the values of
`{k: v for k, v in batch.items()}`. Step loops that draw their batches write
`x, y = next(data_iter)` (`data_iter = iter(DataLoader(...))`), `next(iter(loader))` or
`next(self.dl)` (`self.dl = cycle(loader)`, a generator that yields the loader's items). A loader
handed to `accelerator.prepare(...)` yields batches already on the device: not host batches.
Host-side conversions (`x.float()`, `x.permute(...)`) keep a
batch a batch; `.to(...)`/`.cuda()` results and shape attributes are not batches.
"""

from __future__ import annotations

from typing import Callable, Optional, Union

import libcst as cst

from ..syntax.ast_view import as_ast
from ..syntax.walker import (
    Binding,
    ClassInfo,
    FileFacts,
    all_params,
    bound_value,
    dotted_name,
    returned_values,
)
from .casts import casts_only
from .hotpath import HotPaths
from .loop_targets import PASS_THROUGH, batch_names
from .names import Names, statement_of
from .tensors import NON_TENSOR_ATTRIBUTES
from .vocabulary import DATASET_BASES

# Methods that return the same data, still on the host, in another layout or dtype.
HOST_CONVERSIONS = frozenset(
    """float half double bfloat16 long int bool byte contiguous view reshape permute transpose
    squeeze unsqueeze flatten pin_memory type""".split()
)
# Iterators over the items of their first argument, for `next(...)`.
_ITERATORS = frozenset({"builtins.iter", "itertools.cycle"})


def _names_in(target: cst.BaseExpression) -> set[str]:
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Tuple, cst.List)):
        found: set[str] = set()
        for element in target.elements:
            found |= _names_in(element.value)
        return found
    if isinstance(target, cst.StarredElement):
        return _names_in(target.value)
    return set()


def item_target(target: cst.BaseExpression, iterable: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """The part of a loader loop's target that receives a whole item, through `enumerate`,
    `tqdm` and `iter`; None under `zip` or when the target does not match."""
    while isinstance(iterable, cst.Call):
        callee = (dotted_name(iterable.func) or "").rsplit(".", 1)[-1]
        positional = [arg.value for arg in iterable.args if arg.keyword is None and arg.star == ""]
        if callee == "enumerate" and positional:
            if not (isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) == 2):
                return None
            target, iterable = target.elements[1].value, positional[0]
        elif callee in PASS_THROUGH and positional:
            iterable = positional[0]
        elif callee == "zip":
            return None
        else:
            break
    return target


_HOST, _DEVICE = "host", "device"
# Where a batch is drawn: the loop over the loader, or the `next(...)` call.
Source = Union[cst.For, cst.Call]


def _batch_names(loop: cst.For) -> set[str]:
    """loop_targets.batch_names of the loop, read through CPython's tree."""
    target, iterable = as_ast(loop.target), as_ast(loop.iter)
    return batch_names(target, iterable) if target is not None and iterable is not None else set()


def _first_positional(call: cst.Call) -> Optional[cst.BaseExpression]:
    return next((arg.value for arg in call.args if arg.keyword is None and arg.star == ""), None)


def _loader_iterated(iterable: cst.BaseExpression) -> cst.BaseExpression:
    """`enumerate(tqdm(loader))` -> `loader`."""
    while isinstance(iterable, cst.Call):
        callee = (dotted_name(iterable.func) or "").rsplit(".", 1)[-1]
        inner = _first_positional(iterable)
        if inner is None or (callee != "enumerate" and callee not in PASS_THROUGH):
            break
        iterable = inner
    return iterable


def _places_on_device(call: cst.Call) -> bool:
    """`accelerator.prepare(loader)`: Accelerate's loader moves every batch to the device."""
    func = call.func
    return (
        isinstance(func, cst.Attribute)
        and func.attr.value == "prepare"
        and "accelerator" in (dotted_name(func.value) or "").rsplit(".", 1)[-1].lower()
    )


def _is_device_move(call: cst.Call) -> bool:
    """`x.cuda()`, or `x.to(device)` with a device that is not written as the CPU or a dtype."""
    func = call.func
    if not isinstance(func, cst.Attribute) or func.attr.value not in ("to", "cuda"):
        return False
    if func.attr.value == "cuda":
        return True
    device = _first_positional(call)
    if device is None:
        device = next((a.value for a in call.args if a.keyword and a.keyword.value == "device"), None)
    if (
        device is None
        or isinstance(device, cst.Attribute)
        and (dotted_name(device) or "").startswith("torch.")
    ):
        return False  # `.to(dtype=...)`, `.to(torch.float16)`
    if isinstance(device, cst.SimpleString):
        text = device.evaluated_value
        return not (isinstance(text, str) and text.startswith(("cpu", "meta")))
    return True


def _argument_for(call: cst.Call, function: cst.FunctionDef, param: str) -> Optional[cst.BaseExpression]:
    """What `call` hands `function`'s parameter `param`: by keyword, or by position."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == param:
            return arg.value
    positional = [p.name.value for p in (*function.params.posonly_params, *function.params.params)]
    index = positional.index(param) if param in positional else -1
    given = [arg for arg in call.args if arg.keyword is None]
    if index < 0 or index >= len(given) or any(arg.star for arg in given[: index + 1]):
        return None
    return given[index].value


class Batches:
    def __init__(self, facts: FileFacts, names: Names, hot: HotPaths) -> None:
        self._facts = facts
        self._names = names
        self._hot = hot
        self._memo: dict[cst.CSTNode, Optional[Source]] = {}
        self._in_progress: set[cst.CSTNode] = set()

    def loop_of(self, expr: cst.BaseExpression) -> Optional[Source]:
        """Where the batch that `expr` is (or holds an element of) is drawn: the loop over a
        DataLoader, or the `next(...)` call of a step loop; None when `expr` is no batch."""
        if expr in self._memo:
            return self._memo[expr]
        if expr in self._in_progress:
            return None
        self._in_progress.add(expr)
        try:
            result = self._loop_of(expr)
        finally:
            self._in_progress.discard(expr)
        self._memo[expr] = result
        return result

    def is_whole_item(self, expr: cst.BaseExpression) -> bool:
        """`expr` is a loader's item itself (`for batch in loader`, `next(self.dl)`, `data =
        next(it)`), not an element unpacked or indexed from it: a custom batch class may stand there."""
        if isinstance(expr, cst.Call):
            return self._drawn(expr) is not None
        if not isinstance(expr, cst.Name):
            return False
        for binding in self._names.lookup(expr.value, expr):
            node = binding.node
            if binding.kind == "assign" and isinstance(node, cst.Call) and self._drawn(node) is not None:
                return True
            if binding.kind == "for" and isinstance(node, cst.For) and self._hot.iterates_loader(node):
                item = item_target(node.target, node.iter)
                if isinstance(item, cst.Name) and item.value == expr.value:
                    return True
        return False

    def binds_drawn_item(self, binding: Binding, name: str) -> bool:
        """`binding` gives `name` (part of) an item drawn from a host DataLoader itself: the
        target of a loop over one, or `x = next(it)` in a step loop. Not a value computed from
        one, whose own bindings a caller follows (HostTensors: a batch moved and rebound under
        the same name is no longer one)."""
        node = binding.node
        if binding.kind == "for" and isinstance(node, cst.For):
            return self._hot.iterates_loader(node) is not None and self._binding(binding, name) is not None
        if binding.kind in ("assign", "unpack") and isinstance(node, cst.Call):
            return self._drawn(node) is not None
        return False

    def _loop_of(self, expr: cst.BaseExpression) -> Optional[Source]:
        if isinstance(expr, cst.Name):
            if self._rebound_by(expr, lambda call: call.func.attr.value == "cuda"):  # type: ignore[attr-defined]
                return None
            for binding in self._names.lookup(expr.value, expr):
                loop = self._binding(binding, expr.value)
                if loop is not None:
                    return loop
            return None
        if isinstance(expr, cst.Subscript):
            return self.loop_of(expr.value)
        if isinstance(expr, cst.Attribute):
            if expr.attr.value in NON_TENSOR_ATTRIBUTES:
                return None
            return self.loop_of(expr.value)
        if isinstance(expr, cst.Call):
            if isinstance(expr.func, cst.Attribute) and (
                expr.func.attr.value in HOST_CONVERSIONS
                or (expr.func.attr.value == "to" and casts_only(expr, self._names, self._facts))
            ):
                return self.loop_of(expr.func.value)
            return self._drawn(expr)
        return None

    def moved_under_its_name(self, name: cst.Name) -> bool:
        """Every binding that reaches `name` rebinds it to a move that is not a cast, to a device
        not written as the CPU: `labels = labels.to(device, dtype=torch.long)` (DeepLabV3Plus's
        validate()). Where the device is an accelerator, reading the batch below waits for the
        device; `loop_of` still counts such a batch (the device may be the CPU), save after
        `.cuda()`."""
        return self._rebound_by(name, self._moves)

    def _rebound_by(self, name: cst.Name, moves: Callable[[cst.Call], bool]) -> bool:
        """Every binding that reaches `name` is `name = <...>.cuda(...)` or `<...>.to(...)` that
        `moves` accepts: a batch moved and rebound under its own name (MelGAN's `x_t =
        x_t.cuda()`) is on the device below, and `x_t.cuda()` there copies nothing."""
        reaching = self._names.reaching(name)
        moved = bool(reaching) and all(self._moved_by(binding, name.value, moves) for binding in reaching)
        return moved or self._moved_past_cuda_switch(name, moves)

    def _moved_by(self, binding: Binding, name: str, moves: Callable[[cst.Call], bool]) -> bool:
        """`binding` gives `name` a device move `moves` accepts (`x, y = x.cuda(), y.cuda()` too)."""
        value = bound_value(binding, name, self._facts)
        return (
            isinstance(value, cst.Call)
            and isinstance(value.func, cst.Attribute)
            and value.func.attr.value in ("cuda", "to")
            and moves(value)
        )

    def _moved_past_cuda_switch(self, name: cst.Name, moves: Callable[[cst.Call], bool]) -> bool:
        """Between the read and the last statement of its block that binds the name, only an `if`
        without `else` that tests for CUDA (`if self.args.cuda:`, `if use_gpu:`) binds it, to a
        move: a CUDA run takes that branch, so the batch read is the one it moved
        (pytorch-deeplab-xception's validation reads `target.cpu()` after `if self.args.cuda:
        image, target = image.cuda(), target.cuda()`)."""
        found = statement_of(name, self._facts.parents)
        if found is None:
            return False
        block, read = found
        statements: list[cst.CSTNode] = list(getattr(block, "body", ()))
        bindings = self._names.lookup(name.value, name)
        switched = False
        for earlier in reversed(statements[: statements.index(read)] if read in statements else []):
            inside = [
                b
                for b in bindings
                if b.node is earlier or any(a is earlier for a in self._facts.ancestors(b.node))
            ]
            if not inside:
                continue
            if (
                not isinstance(earlier, cst.If)
                or earlier.orelse is not None
                or not self._tests_cuda(earlier.test)
            ):
                return switched and isinstance(earlier, cst.SimpleStatementLine)
            if not all(self._moved_by(b, name.value, moves) for b in inside):
                return False
            switched = True
        return False

    def _tests_cuda(self, test: cst.BaseExpression) -> bool:
        code = self._facts.module.code_for_node(test).lower()
        return "cuda" in code or "gpu" in code

    def _moves(self, call: cst.Call) -> bool:
        """A device move (`_is_device_move`) that is not a cast alone (`.to(x.dtype)`)."""
        cuda = call.func.attr.value == "cuda"  # type: ignore[attr-defined]  # an attribute call
        return _is_device_move(call) and (cuda or not casts_only(call, self._names, self._facts))

    def _drawn(self, call: cst.Call) -> Optional[cst.Call]:
        """`next(it)` in a step loop, where `it` iterates a DataLoader's host batches."""
        if self._names.qualified_name(call) != "builtins.next" or self._hot.step_loop(call) is None:
            return None
        iterator = _first_positional(call)
        if iterator is None:
            return None
        return call if self._items_of(iterator, set()) == _HOST else None

    def _items_of(self, expr: cst.BaseExpression, seen: set[cst.CSTNode]) -> Optional[str]:
        """What iterating `expr` yields: _HOST (a DataLoader's batches), _DEVICE (a loader that
        places them on the device), or None (not known to be a loader). Follows names and `self.`
        attributes to their values, and `iter(...)`, `itertools.cycle(...)` and generators of the
        file that yield the items of their argument (`cycle(dl)`)."""
        if expr in seen:
            return None
        seen.add(expr)
        values: list[cst.BaseExpression] = []
        if isinstance(expr, cst.Call):
            if _places_on_device(expr):
                return _DEVICE
            if self._hot.loader_label(expr) is not None and self._moved_to_device(_first_positional(expr)):
                return _DEVICE  # `NeighborLoader(data.to(device), ...)` samples from device data
            if (dotted_name(expr.func) or "").rsplit(".", 1)[-1] == "DataLoader":
                return _HOST
            inner = self._items_handed_on(expr)
            if inner is not None:
                values.append(inner)
        elif isinstance(expr, cst.Name):
            bindings = self._names.lookup(expr.value, expr)
            if any(
                b.kind == "unpack" and isinstance(b.node, cst.Call) and _places_on_device(b.node)
                for b in bindings
            ):
                return _DEVICE  # `model, opt, loader = accelerator.prepare(model, opt, loader)`
            values = [
                b.node for b in bindings if b.kind == "assign" and isinstance(b.node, cst.BaseExpression)
            ]
        elif isinstance(expr, cst.Attribute) and dotted_name(expr.value) == "self":
            cls = self._hot.enclosing_class(expr)
            values = self._hot.attribute_values(cls, expr.attr.value) if cls is not None else []
        found = {self._items_of(value, seen) for value in values}
        if _DEVICE in found:
            return _DEVICE
        if _HOST in found or (isinstance(expr, (cst.Name, cst.Attribute)) and self._hot.loader_label(expr)):
            return _HOST
        return None

    def loaders(self, source: Source) -> Optional[list[cst.Call]]:
        """The torch `DataLoader(...)` calls of this file that the batches drawn at `source` may
        come from (the loop over the loader, or a step loop's `next(it)`), following what
        `_items_of` follows; None where any of them is not known (a loader passed in, built by a
        helper of another module, or placed on the device by Accelerate)."""
        if isinstance(source, cst.For):
            return self._loader_calls(_loader_iterated(source.iter), set())
        iterator = _first_positional(source)
        return self._loader_calls(iterator, set()) if iterator is not None else None

    def _loader_calls(self, expr: cst.BaseExpression, seen: set[cst.CSTNode]) -> Optional[list[cst.Call]]:
        if expr in seen:
            return None
        seen.add(expr)
        values: list[cst.BaseExpression] = []
        if isinstance(expr, cst.Call):
            if self._names.qualified_name(expr) == "torch.utils.data.DataLoader":
                return [expr]
            inner = self._items_handed_on(expr)
            if inner is None or _places_on_device(expr):
                return None
            values = [inner]
        elif isinstance(expr, cst.Name):
            bindings = self._names.lookup(expr.value, expr)
            values = [
                b.node for b in bindings if b.kind == "assign" and isinstance(b.node, cst.BaseExpression)
            ]
            if len(values) != len(bindings):
                return None
        elif isinstance(expr, cst.Attribute) and dotted_name(expr.value) == "self":
            cls = self._hot.enclosing_class(expr)
            values = self._hot.attribute_values(cls, expr.attr.value) if cls is not None else []
        found: list[cst.Call] = []
        for value in values:
            calls = self._loader_calls(value, seen)
            if calls is None:
                return None
            found.extend(call for call in calls if call not in found)
        return found or None

    def _moved_to_device(self, data: Optional[cst.BaseExpression]) -> bool:
        """`data` is the result of `.to(device)`/`.cuda()`, written there or bound to a name by
        every binding that reaches it (`model, data = model.to(device), data.to(device)`)."""
        if isinstance(data, cst.Call):
            return _is_device_move(data)
        if not isinstance(data, cst.Name):
            return False
        bindings = self._names.reaching(data)
        return bool(bindings) and all(self._binds_moved(b, data.value) for b in bindings)

    def _binds_moved(self, binding: Binding, name: str) -> bool:
        node = binding.node
        if binding.kind == "assign" and isinstance(node, cst.Call):
            return _is_device_move(node)
        if binding.kind == "unpack" and isinstance(node, (cst.Tuple, cst.List)):
            assign = self._facts.parents.get(node)
            if isinstance(assign, cst.Assign):
                for target in assign.targets:
                    names = target.target
                    if isinstance(names, (cst.Tuple, cst.List)) and len(names.elements) == len(node.elements):
                        for element, value in zip(names.elements, node.elements, strict=False):
                            if _names_in(element.value) == {name}:
                                return isinstance(value.value, cst.Call) and _is_device_move(value.value)
        return False

    def _items_handed_on(self, call: cst.Call) -> Optional[cst.BaseExpression]:
        """The argument whose items iterating `call`'s result walks: `iter(x)`,
        `itertools.cycle(x)`, or a generator of the file that yields the items of a parameter
        (the project pass's answer, analysis/item_generators.py) given it by position or name."""
        if self._names.qualified_name(call) in _ITERATORS:
            return _first_positional(call)
        if not isinstance(call.func, cst.Name):
            return None
        for binding in self._names.lookup(call.func.value, call):
            function = binding.node
            if binding.kind != "def" or not isinstance(function, cst.FunctionDef):
                continue
            index = self._hot.function_index(function)
            param = self._hot.entry.yielded_param_of(index) if index is not None else ""
            if param:
                return _argument_for(call, function, param)
        return None

    def _binding(self, binding: Binding, name: str) -> Optional[Source]:
        node = binding.node
        if binding.kind == "for" and isinstance(node, cst.For):
            if self._hot.iterates_loader(node) is not None:
                if self._items_of(_loader_iterated(node.iter), set()) == _DEVICE:
                    return None  # `accelerator.prepare(loader)` moved the batch already
                return node if name in _batch_names(node) else None
            return self._iterated(node.target, node.iter, name)
        if binding.kind == "compfor" and isinstance(node, cst.CompFor):
            return self._iterated(node.target, node.iter, name)
        if binding.kind == "assign" and isinstance(node, cst.BaseExpression):
            return self.loop_of(node)
        if binding.kind == "unpack" and isinstance(node, cst.BaseExpression):
            return self._unpacked(node, name)
        return None

    def _iterated(
        self, target: cst.BaseExpression, iterable: cst.BaseExpression, name: str
    ) -> Optional[Source]:
        """`name` bound by iterating `iterable`: the items of a batch, or the values of its dict."""
        if isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Attribute):
            method = iterable.func.attr.value
            if method == "items":
                if (
                    isinstance(target, (cst.Tuple, cst.List))
                    and len(target.elements) == 2
                    and name in _names_in(target.elements[1].value)
                ):
                    return self.loop_of(iterable.func.value)
                return None
            if method == "values":
                return self.loop_of(iterable.func.value)
            if method == "keys":
                return None
        return self.loop_of(iterable)

    def _unpacked(self, value: cst.BaseExpression, name: str) -> Optional[Source]:
        """`x, y = batch` -> batch; `x, y = batch[0], other` -> batch[0] for x only."""
        if isinstance(value, (cst.Tuple, cst.List)):
            assign = self._facts.parents.get(value)
            if not isinstance(assign, cst.Assign):
                return None
            for target in assign.targets:
                names = target.target
                if isinstance(names, (cst.Tuple, cst.List)) and len(names.elements) == len(value.elements):
                    for element, source in zip(names.elements, value.elements, strict=False):
                        if name in _names_in(element.value):
                            return self.loop_of(source.value)
            return None
        return self.loop_of(value)


def _is_dataset(info: ClassInfo, facts: FileFacts, names: Names, seen: frozenset[str] = frozenset()) -> bool:
    """Derives from torch's Dataset or IterableDataset, directly or through classes of this file."""
    for base in info.node.bases:
        if names.qualified_name(base.value) in DATASET_BASES:
            return True
        local = facts.classes.get(dotted_name(base.value) or "")
        if (
            local is not None
            and local.name not in seen
            and _is_dataset(local, facts, names, seen | {info.name})
        ):
            return True
    return False


def movers(facts: FileFacts, names: Names, hot: HotPaths) -> dict[str, bool]:
    """The project's classes, other than modules and datasets (a loader draws from a dataset and
    never yields one), with a `to`/`cuda` of their own (DETR's `NestedTensor.to(self, device)`),
    and whether that method takes `non_blocking` (by name or through `**kwargs`): the project
    pass's answer (EntryFacts.movers) and this file's classes, so that one file linted alone
    answers the same."""
    found = dict(hot.entry.movers)
    for info in facts.classes.values():
        if hot.is_module_class(info) or _is_dataset(info, facts, names):
            continue
        for name in ("to", "cuda"):
            method = info.methods.get(name)
            if method is not None:
                params = method.params
                takes = params.star_kwarg is not None or any(
                    p.name.value == "non_blocking" for p in all_params(params)
                )
                found[info.name] = found.get(info.name, True) and takes
    return found


def _left_unpinned(info: ClassInfo, facts: FileFacts, hot: HotPaths) -> bool:
    """This file's half of the project pass's `left_unpinned`: a class, not a module, whose bases
    are `object` or classes of this file, with a `to`/`cuda` and no `pin_memory` of its own."""
    for base in info.node.bases:
        name = dotted_name(base.value)
        if name != "object" and name not in facts.classes:
            return False
    return (
        not hot.is_module_class(info)
        and "pin_memory" not in info.methods
        and any(name in info.methods for name in ("to", "cuda"))
    )


def _returned_classes(function: cst.FunctionDef) -> list[str]:
    """The callees of `return Callee(...)` statements of `function`'s own body."""
    values, _ = returned_values(function)
    return [dotted_name(value.func) or "" for value in values if isinstance(value, cst.Call)]


def unpinned_collate(call: cst.Call, facts: FileFacts, hot: HotPaths) -> bool:
    """The DataLoader `call` collates its batches into a project class that `pin_memory=True`
    leaves in pageable memory: the project pass's answer for the `collate_fn=` written here, or a
    collate function of this file that constructs such a class of this file, or calls a function
    of this file returning one."""
    collate = next(
        (arg.value for arg in call.args if arg.keyword and arg.keyword.value == "collate_fn"), None
    )
    written = dotted_name(collate) if collate is not None else None
    if written is None:
        return False
    if written in hot.entry.unpinned_collates:
        return True
    function = facts.module_functions.get(written)
    info = facts.functions.get(function) if function is not None else None
    if info is None:
        return False
    for inner in info.calls:
        callee = dotted_name(inner.func) or ""
        built = [callee]
        helper = facts.module_functions.get(callee)
        if helper is not None:
            built = _returned_classes(helper)
        if any(name in facts.classes and _left_unpinned(facts.classes[name], facts, hot) for name in built):
            return True
    return False

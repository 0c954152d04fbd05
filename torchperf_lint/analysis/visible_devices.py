"""How many GPUs a data-parallel wrapper spreads over on the default run (RULES.md, "Values that
travel"). PyTorch's DataParallel calls the wrapped module directly when it holds one device, so
over one device it is a pass-through. One device by default:
- the file sets `os.environ["CUDA_VISIBLE_DEVICES"]` only to one device: a literal (`"0"`), or a
  command-line option whose string default names one (`--gpu_id` defaulting to `'0'`), no comma;
- `device_ids` holds one: a literal list of one element, a parameter whose default is one
  (`gpu_ids=[0]`), or an option whose string default names one device and which the code at most
  splits (`args.gpu_ids = [int(s) for s in args.gpu_ids.split(',')]`).
Anything else (`'0,1'`, `list(range(n))`, no `device_ids` and no such variable, the variable read
from the environment) leaves the count unknown.
"""

from __future__ import annotations

import functools
from typing import Optional

import libcst as cst

from ..syntax.walker import FileFacts, descendants, dotted_name
from .names import Names
from .registries import Registries

_VARIABLE = "CUDA_VISIBLE_DEVICES"


def _one_device_text(text: str) -> bool:
    return "," not in text


class VisibleDevices:
    def __init__(self, facts: FileFacts, names: Names, registries: Registries) -> None:
        self._facts = facts
        self._names = names
        self._registries = registries

    @functools.cached_property
    def _assignments(self) -> list[cst.Assign]:
        """The file's assignments (read off the walk's parent table, once a wrapper asks)."""
        return [node for node in self._facts.parents if isinstance(node, cst.Assign)]

    def _stored_attributes(self, attribute: str) -> list[cst.BaseExpression]:
        """The values the file stores on `NAME.attribute`."""
        return [
            assign.value
            for assign in self._assignments
            for target in assign.targets
            if isinstance(target.target, cst.Attribute) and target.target.attr.value == attribute
        ]

    def _option_names_one_device(self, expr: cst.BaseExpression) -> bool:
        """`args.gpu_ids` (or `self.args.gpu_ids`) for an option whose default names one device,
        stored back at most as a split of itself."""
        if not isinstance(expr, cst.Attribute):
            return False
        attribute = expr.attr.value
        default = self._registries.option_default(attribute)
        if default is None or not _one_device_text(default):
            return False
        return all(
            any(_splits(node, attribute) for node in descendants(value))
            for value in self._stored_attributes(attribute)
        )

    def _sets_variable(self, target: cst.BaseAssignTargetExpression) -> bool:
        if not (isinstance(target, cst.Subscript) and dotted_name(target.value) == "os.environ"):
            return False
        index = target.slice[0].slice if len(target.slice) == 1 else None
        return (
            isinstance(index, cst.Index)
            and isinstance(index.value, cst.SimpleString)
            and index.value.evaluated_value == _VARIABLE
        )

    @functools.cached_property
    def one_visible_by_default(self) -> bool:
        """The file sets CUDA_VISIBLE_DEVICES, and every value it sets names one device by default."""
        values = [
            assign.value
            for assign in self._assignments
            if any(self._sets_variable(target.target) for target in assign.targets)
        ]
        return bool(values) and all(
            (
                isinstance(value, cst.SimpleString)
                and isinstance(value.evaluated_value, str)
                and _one_device_text(value.evaluated_value)
            )
            or self._option_names_one_device(value)
            for value in values
        )

    def _one_element(self, expr: Optional[cst.BaseExpression]) -> bool:
        return (
            isinstance(expr, (cst.List, cst.Tuple))
            and len(expr.elements) == 1
            and not any(isinstance(e, cst.StarredElement) for e in expr.elements)
        )

    def _holds_one(self, ids: cst.BaseExpression) -> bool:
        """`device_ids` names one device by default."""
        if self._one_element(ids):
            return True
        if isinstance(ids, cst.Name):
            bindings = self._names.lookup(ids.value, ids)
            return (
                len(bindings) == 1
                and bindings[0].kind == "param"
                and isinstance(bindings[0].node, cst.Param)
                and self._one_element(bindings[0].node.default)
            )
        return self._option_names_one_device(ids)

    def one_device_by_default(self, call: cst.Call) -> bool:
        """`DataParallel(module, device_ids=...)` spreads over one device on the default run."""
        if self.one_visible_by_default:
            return True
        ids = next(
            (a.value for a in call.args if a.keyword is not None and a.keyword.value == "device_ids"), None
        )
        positional = [a for a in call.args if a.keyword is None]
        if ids is None and len(positional) > 1 and not positional[1].star:
            ids = positional[1].value
        return ids is not None and self._holds_one(ids)


def _splits(node: cst.CSTNode, attribute: str) -> bool:
    """`node` is `<x>.<attribute>.split(...)`."""
    if not (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Attribute)
        and node.func.attr.value == "split"
    ):
        return False
    receiver = node.func.value
    return isinstance(receiver, cst.Attribute) and receiver.attr.value == attribute

"""Models that stay on the host: built without a device and never moved (RULES.md, "runs on CUDA").

A *host model* is a name or `self.` attribute whose every binding constructs a module
(`torch.nn.*`, `torchvision.models.*`, a module class of this file) with no device in the
expression (no `.to(`, `.cuda(`, `device=`), that nothing in the file moves (`m.cuda()`,
`m.to(d)`, `m.sub.cuda()`) and that never leaves the code that built it: it is only called,
or its attributes and methods are used (`m.parameters()`, `m.weight`); it is never passed as an
argument, returned, stored elsewhere or read as `obj.<attr>` from outside its class. A module
another module imports is never concluded about: its models can be moved there. A CUDA-using
file can still hold one (pytorch/examples' `regression/main.py` trains `Linear(4, 1)` on the CPU).
"""

from __future__ import annotations

import libcst as cst

from ..syntax.walker import FileFacts, dotted_name
from .hotpath import HotPaths
from .names import Names

# Methods that move a module (and so its parameters) to a device.
_MOVES = frozenset({"to", "cuda", "to_empty", "xpu", "mps"})
_DEVICE_MARKERS = (".to(", ".cuda(", "device", ".to_empty(")
_MODULE_PACKAGES = ("torch.nn.", "torchvision.models.")
# What yields a module's tensors: `m.parameters()` and its kin.
_TENSOR_METHODS = frozenset({"parameters", "named_parameters", "buffers", "named_buffers", "state_dict"})


class HostModels:
    def __init__(self, facts: FileFacts, names: Names, hot: HotPaths, imported: bool) -> None:
        self._facts = facts
        self._names = names
        self._hot = hot
        self._imported = imported
        self._memo: dict[str, bool] = {}

    def of_tensors(self, expr: cst.BaseExpression) -> bool:
        """Every `<m>.parameters()`-like call in `expr` (at least one) is on a host model:
        the tensors `expr` walks are CPU tensors."""
        receivers = [
            call.func.value
            for call in _calls(expr)
            if isinstance(call.func, cst.Attribute) and call.func.attr.value in _TENSOR_METHODS
        ]
        return bool(receivers) and all(self.is_host_model(r) for r in receivers)

    def is_host_model(self, owner: cst.BaseExpression) -> bool:
        if self._imported:
            return False  # an importer may move what this module builds
        if isinstance(owner, cst.Name):
            key = f"name:{owner.value}:{id(self._scope_of(owner))}"
        elif isinstance(owner, cst.Attribute) and dotted_name(owner.value) == "self":
            cls = self._hot.enclosing_class(owner)
            key = f"attr:{owner.attr.value}:{id(cls.node) if cls else 0}"
        else:
            return False
        if key not in self._memo:
            self._memo[key] = self._decide(owner)
        return self._memo[key]

    def _decide(self, owner: cst.BaseExpression) -> bool:
        if isinstance(owner, cst.Name):
            bindings = self._names.lookup(owner.value, owner)
            if not bindings or any(b.kind != "assign" for b in bindings):
                return False
            values = [b.node for b in bindings]
            scope = self._scope_of(owner)
            occurrences: list[cst.BaseExpression] = [
                n for n in _walk(scope) if isinstance(n, cst.Name) and n.value == owner.value
            ]
        else:
            assert isinstance(owner, cst.Attribute)
            cls = self._hot.enclosing_class(owner)
            if cls is None:
                return False
            attr = owner.attr.value
            values = list(self._hot.attribute_values(cls, attr))
            occurrences = []
            for node in _walk(self._facts.module):
                if isinstance(node, cst.Attribute) and node.attr.value == attr:
                    if dotted_name(node.value) != "self" or self._hot.enclosing_class(node) is not cls:
                        return False  # read from outside the class: its holder may move it
                    occurrences.append(node)
        if not values or not all(self._builds_host_module(v) for v in values):
            return False
        return all(self._stays(node) for node in occurrences)

    def _builds_host_module(self, value: cst.CSTNode) -> bool:
        if not isinstance(value, cst.Call):
            return False
        if any(marker in self._facts.module.code_for_node(value) for marker in _DEVICE_MARKERS):
            return False
        qualified = self._names.qualified_name(value.func) or ""
        if qualified.startswith(_MODULE_PACKAGES):
            return True
        cls = self._hot.local_class(value.func)
        return cls is not None and self._hot.is_module_class(cls)

    def _stays(self, node: cst.CSTNode) -> bool:
        """The occurrence `node` of the model neither moves it nor lets it leave."""
        parent = self._facts.parents.get(node)
        if isinstance(parent, cst.AssignTarget) and parent.target is node:
            return True  # its binding: the values were checked
        if isinstance(parent, cst.Call) and parent.func is node:
            return True  # the model called on a batch
        if not (isinstance(parent, cst.Attribute) and parent.value is node):
            return False  # an argument, a return value, an alias: it may be moved elsewhere
        current: cst.CSTNode = parent
        while True:
            if isinstance(current, cst.Attribute) and current.attr.value in _MOVES:
                return False
            above = self._facts.parents.get(current)
            if isinstance(above, cst.Attribute) and above.value is current:
                current = above
            elif isinstance(above, cst.Call) and above.func is current:
                current = above
            else:
                return True

    def _scope_of(self, node: cst.CSTNode) -> cst.CSTNode:
        function = self._facts.enclosing_function(node)
        return function if function is not None else self._facts.module


def _calls(expr: cst.CSTNode) -> list[cst.Call]:
    return [node for node in _walk(expr) if isinstance(node, cst.Call)]


def _walk(root: cst.CSTNode) -> list[cst.CSTNode]:
    found: list[cst.CSTNode] = []
    todo: list[cst.CSTNode] = [root]
    while todo:
        node = todo.pop()
        found.append(node)
        todo.extend(node.children)
    return found

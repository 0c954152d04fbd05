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

from typing import Optional

import libcst as cst

from ..syntax.walker import FileFacts, descendants, dotted_name
from .hotpath import HotPaths
from .names import Names

# Methods that move a module (and so its parameters) to a device.
_MOVES = frozenset({"to", "cuda", "to_empty", "xpu", "mps"})
_DEVICE_MARKERS = (".to(", ".cuda(", "device", ".to_empty(")
_MODULE_PACKAGES = ("torch.nn.", "torchvision.models.")
# What yields a module's tensors: `m.parameters()` and its kin.
_RPC_CALLS = frozenset(f"torch.distributed.rpc.{api}" for api in ("rpc_sync", "rpc_async", "remote"))
_TENSOR_METHODS = frozenset({"parameters", "named_parameters", "buffers", "named_buffers", "state_dict"})


class HostModels:
    def __init__(
        self, facts: FileFacts, names: Names, hot: HotPaths, imported: bool, rpc_moves_cuda: bool = False
    ) -> None:
        self._facts = facts
        self._names = names
        self._hot = hot
        self._imported = imported
        self._rpc_moves_cuda = rpc_moves_cuda
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
                n for n in descendants(scope) if isinstance(n, cst.Name) and n.value == owner.value
            ]
        else:
            assert isinstance(owner, cst.Attribute)
            cls = self._hot.enclosing_class(owner)
            if cls is None:
                return False
            attr = owner.attr.value
            values = list(self._hot.attribute_values(cls, attr))
            occurrences = []
            for node in descendants(self._facts.module):
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
        if not self._rpc_moves_cuda and self._sent_back_over_rpc(node, parent):
            return True  # its RPC caller gets a copy; moving that copy leaves this one here
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

    def _sent_back_over_rpc(self, node: cst.CSTNode, parent: Optional[cst.CSTNode]) -> bool:
        """`return self.model` from a method only ever called over RPC, or
        `fut.set_result(self.model)` on the future an `@rpc.functions.async_execution` method
        returns: the caller receives a serialized copy (`rref.rpc_sync().get_model().cuda()`)."""
        function = self._facts.enclosing_function(node)
        if function is None or not self._only_called_over_rpc(function):
            return False
        if isinstance(parent, cst.Return):
            return True
        call = self._facts.parents.get(parent) if isinstance(parent, cst.Arg) else None
        if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute)):
            return False
        future = call.func.value
        async_execution = any(
            (dotted_name(d.decorator) or "").endswith("async_execution") for d in function.decorators
        )
        return (
            async_execution
            and call.func.attr.value == "set_result"
            and isinstance(future, cst.Name)
            and any(isinstance(v, cst.Name) and v.value == future.value for v in _returned(function))
        )

    def _only_called_over_rpc(self, function: cst.FunctionDef) -> bool:
        """Every reference to the method `function` runs it on its owner for a remote caller:
        `rref.rpc_sync().m(...)` (and `rpc_async()`, `remote()`), or `Cls.m` handed to
        `rpc.rpc_sync`/`rpc_async`/`remote`."""
        info = self._facts.functions.get(function)
        if info is None or info.cls is None:
            return False
        name = function.name.value
        references = [
            n
            for n in descendants(self._facts.module)
            if isinstance(n, cst.Attribute) and n.attr.value == name
        ]
        return bool(references) and all(self._rpc_reference(r) for r in references)

    def _rpc_reference(self, reference: cst.Attribute) -> bool:
        parent = self._facts.parents.get(reference)
        if isinstance(parent, cst.Call) and parent.func is reference:
            proxy = reference.value
            return (
                isinstance(proxy, cst.Call)
                and isinstance(proxy.func, cst.Attribute)
                and not proxy.args
                and proxy.func.attr.value in ("rpc_sync", "rpc_async", "remote")
            )
        call = self._facts.parents.get(parent) if isinstance(parent, cst.Arg) else None
        return isinstance(call, cst.Call) and (self._names.qualified_name(call) or "") in _RPC_CALLS

    def _scope_of(self, node: cst.CSTNode) -> cst.CSTNode:
        function = self._facts.enclosing_function(node)
        return function if function is not None else self._facts.module


def _returned(function: cst.FunctionDef) -> list[cst.BaseExpression]:
    return [n.value for n in descendants(function.body) if isinstance(n, cst.Return) and n.value is not None]


def _calls(expr: cst.CSTNode) -> list[cst.Call]:
    return [node for node in descendants(expr) if isinstance(node, cst.Call)]

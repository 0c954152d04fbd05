"""Values a process only hands to torch.distributed.rpc. Without an RPC device map TensorPipe
carries only CPU tensors (PyTorch's CUDA RPC recipe): such a value must stay on the host, and
creating it on a GPU would make the RPC fail."""

from __future__ import annotations

from typing import Callable, Optional

import libcst as cst

from ..syntax.walker import FileFacts, visit
from .devices import reads_of_bound_name
from .hotpath import HotPaths
from .names import Names

_RPC_SENDS = frozenset(f"torch.distributed.rpc.{api}" for api in ("rpc_sync", "rpc_async", "remote"))
_RREFS = frozenset({"torch.distributed.rpc.RRef", "torch.distributed.rpc.api.RRef"})
# views that split a batch into the pieces sent (`xs.split(n)`): each piece is the batch's data
_PIECES = frozenset({"split", "chunk", "unbind", "view", "reshape", "flatten", "contiguous"})
_RPC_PROXIES = frozenset({"rpc_sync", "rpc_async", "remote"})


class RpcSends:
    """Whether a value built here is only sent over RPC: an argument of `rpc.rpc_*(..., args=)`,
    of an RRef proxy's method (`rref.rpc_async().forward(x)`), wrapped in an `RRef` that is only
    sent, handed to a module of this file whose forward only sends it (a stub of a model held by
    other workers), or meeting only results that came back over RPC (CPU tensors, as it must be)."""

    def __init__(
        self,
        facts: FileFacts,
        names: Names,
        hot: HotPaths,
        received_over_rpc: Callable[[cst.BaseExpression], bool],
    ) -> None:
        self._facts = facts
        self._names = names
        self._hot = hot
        self._received = received_over_rpc

    def only_sent(self, value: cst.Call) -> bool:
        """`name = value` (through in-place fills: `torch.zeros(n).scatter_(...)`) whose every
        read is sent over RPC."""
        return self._bound_reads_sent(_through_in_place(value, self._facts), frozenset())

    def _bound_reads_sent(self, value: cst.CSTNode, seen: frozenset[cst.CSTNode]) -> bool:
        reads = reads_of_bound_name(value, self._facts)
        return bool(reads) and all(self._sent(r, seen) for r in reads)

    def _names_sent(self, reads: list[cst.Name], seen: frozenset[cst.CSTNode]) -> bool:
        return bool(reads) and all(self._sent(r, seen) for r in reads)

    def _sent(self, expr: cst.BaseExpression, seen: frozenset[cst.CSTNode]) -> bool:
        if expr in seen or len(seen) > 32:
            return False
        seen = seen | {expr}
        parent = self._facts.parents.get(expr)
        if isinstance(parent, cst.Element):  # `args=(x,)` of an RPC call
            sequence = self._facts.parents.get(parent)
            arg = self._facts.parents.get(sequence) if isinstance(sequence, (cst.Tuple, cst.List)) else None
            call = self._facts.parents.get(arg) if isinstance(arg, cst.Arg) else None
            return (
                isinstance(arg, cst.Arg)
                and arg.keyword is not None
                and arg.keyword.value == "args"
                and isinstance(call, cst.Call)
                and self._names.qualified_name(call) in _RPC_SENDS
            )
        if isinstance(parent, cst.Arg) and parent.keyword is None and not parent.star:
            call = self._facts.parents.get(parent)
            return isinstance(call, cst.Call) and self._argument_sent(call, parent, seen)
        if isinstance(parent, cst.Attribute) and parent.value is expr and parent.attr.value in _PIECES:
            call = self._facts.parents.get(parent)
            return isinstance(call, cst.Call) and call.func is parent and self._sent(call, seen)
        if isinstance(parent, cst.For) and parent.iter is expr and isinstance(parent.target, cst.Name):
            return self._names_sent(self._other_reads(parent.target), seen)
        if isinstance(parent, cst.Assign):
            return parent.value is expr and self._bound_reads_sent(expr, seen)
        if isinstance(parent, cst.BinaryOperation):
            other = parent.right if parent.left is expr else parent.left
            return self._received(other)
        return False

    def _argument_sent(self, call: cst.Call, arg: cst.Arg, seen: frozenset[cst.CSTNode]) -> bool:
        func = call.func
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Call) and _proxy(func.value):
            return True  # `rref.rpc_async().forward(x)`: the owner runs it on what it is sent
        qualified = self._names.qualified_name(call) or ""
        if qualified in _RREFS or (isinstance(func, cst.Name) and func.value == "iter"):
            return self._sent(call, seen)
        if any(a is not arg and a.keyword is None and self._received(a.value) for a in call.args):
            return True  # `loss_fn(outputs, labels)` with outputs received over RPC: the same device
        forward = self._module_forward(call)
        if forward is None:
            return False
        index = [a for a in call.args if a.keyword is None].index(arg)
        params = [*forward.params.posonly_params, *forward.params.params][1:]
        if index >= len(params):
            return False
        return self._names_sent(self._other_reads(params[index].name, forward), seen)

    def _module_forward(self, call: cst.Call) -> Optional[cst.FunctionDef]:
        """`model(x)` of a module of this file: its forward."""
        if not isinstance(call.func, cst.Name) or any(a.star for a in call.args):
            return None
        callees = self._hot.resolve_call(call)
        if len(callees) != 1 or callees[0].name.value != "forward":
            return None
        return callees[0]

    def _other_reads(self, target: cst.Name, function: Optional[cst.FunctionDef] = None) -> list[cst.Name]:
        """The other places the function around `target` (or `function`) names it."""
        function = function or self._facts.enclosing_function(target)
        if function is None:
            return []
        found: list[cst.Name] = []

        class _Reads(cst.CSTVisitor):
            def visit_Name(self, node: cst.Name) -> None:
                if node.value == target.value and node is not target:
                    found.append(node)

        visit(function.body, _Reads())
        return found


def _through_in_place(value: cst.Call, facts: FileFacts) -> cst.Call:
    """`torch.zeros(n).scatter_(1, idx, 1)`: an in-place fill returns the tensor it fills."""
    while True:
        attribute = facts.parents.get(value)
        if not (
            isinstance(attribute, cst.Attribute)
            and attribute.value is value
            and attribute.attr.value.endswith("_")
            and not attribute.attr.value.startswith("_")
        ):
            return value
        call = facts.parents.get(attribute)
        if not (isinstance(call, cst.Call) and call.func is attribute):
            return value
        value = call


def _proxy(call: cst.Call) -> bool:
    """`rref.rpc_sync()` and the like: an RRef's proxy whose method calls run on the owner."""
    func = call.func
    return isinstance(func, cst.Attribute) and not call.args and func.attr.value in _RPC_PROXIES

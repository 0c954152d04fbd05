"""Tensors that certainly live on the host: built by a torch factory or from host data without
`device=`, and never moved. Reading one (`if p < self.layerdrop:`, `t.item()`) waits for no
device, so the sync rules stay silent on them (the `dropout_probability = torch.rand([])`
layer drop of many transformer implementations).
"""

from __future__ import annotations

from typing import Callable, Optional

import libcst as cst

from ..syntax.walker import (
    Binding,
    FileFacts,
    dotted_name,
    registrations,
    returned_values,
    unpacked_element,
    unpacked_position,
    visit,
)
from .casts import casts_only
from .dict_items import summed_values
from .host_arguments import HostArguments
from .hotpath import HotPaths
from .names import Names, annotated_parameter
from .tensors import Tensorness, walked_source
from .vocabulary import FROM_HOST_DATA, GENERATING_FACTORIES, LAYOUT_READS, LEGACY_CPU_TYPES

# Where each generating factory takes its size: every positional argument (sizes may be given
# one by one), the first, or the one at an index; and the keyword that can name it instead.
_SIZE_ARGUMENTS: dict[str, tuple[slice, str]] = {
    **{name: (slice(None), "size") for name in ("zeros", "ones", "empty", "rand", "randn")},
    "full": (slice(0, 1), "size"),
    "randint": (slice(-1, None), "size"),  # randint(high, size) or randint(low, high, size)
    "randperm": (slice(0, 1), "n"),
    "eye": (slice(0, 1), "n"),
    "linspace": (slice(2, 3), "steps"),
    "logspace": (slice(2, 3), "steps"),
}
# Methods that keep the receiver's device: `.to(dtype)` is judged apart.
_MOVES = frozenset({"to", "cuda", "type_as", "new_tensor"})
# Builders that follow a default device set to CUDA (`torch.from_numpy` and typed legacy
# constructors never do).
_FOLLOW_DEFAULT_DEVICE = frozenset({"tensor", "as_tensor", "asarray", "Tensor"})
# Functions that return a dtype.
# torch namespaces whose functions compute where their tensor operands are (`F.interpolate`).
_FOLLOW_OPERANDS = ("nn.functional.", "linalg.", "fft.", "special.")
# How far `holds_tensors` follows names, containers and returns.
_HOLDS_DEPTH = 6
# Operators between masks: neither side is a plain number to leave out.
_MASK_OPERATORS = (cst.BitAnd, cst.BitOr, cst.BitXor)


class HostTensors:
    """`is_host_tensor` answers for one file. `hot` gives `self.` attributes and the parameters
    every project caller passes a host value for; `factories_on_device` is the project's default
    device set to CUDA (then no factory fills a CPU tensor)."""

    def __init__(
        self,
        facts: FileFacts,
        names: Names,
        hot: HotPaths,
        tensorness: Callable[[cst.BaseExpression], Tensorness],
        factories_on_device: bool = False,
        rpc_moves_cuda: bool = False,
        drawn_from_loader: Optional[Callable[[Binding, str], bool]] = None,
        has_dims: Optional[Callable[[cst.BaseExpression], bool]] = None,
        dict_items: Optional[Callable[[cst.Subscript], Optional[list[cst.BaseExpression]]]] = None,
    ) -> None:
        self._facts = facts
        self._dict_items = dict_items
        self._has_dims = has_dims
        self._drawn_from_loader = drawn_from_loader
        self._names = names
        self._hot = hot
        self._tensorness = tensorness
        self._factories_on_device = factories_on_device
        self._rpc_moves_cuda = rpc_moves_cuda
        self._required = HostArguments(facts, names)
        self._memo: dict[cst.CSTNode, bool] = {}
        self._in_progress: set[cst.CSTNode] = set()
        # While a project function's returns are read for one call: its parameters that call
        # passes a host tensor for, and the answers found under that assumption.
        self._assumed: dict[cst.FunctionDef, frozenset[str]] = {}
        self._memos: dict[frozenset[tuple[cst.FunctionDef, frozenset[str]]], dict[cst.CSTNode, bool]] = {}
        self._attributes_assumed: set[tuple[int, str]] = set()

    def is_host_tensor(self, expr: cst.BaseExpression) -> bool:
        cached = self._memo.get(expr)
        if cached is not None:
            return cached
        if expr in self._in_progress:
            return False
        self._in_progress.add(expr)
        try:
            result = self._host(expr)
        finally:
            self._in_progress.discard(expr)
        if not self._attributes_assumed:
            self._memo[expr] = result
        return result

    def _operands_on_host(self, operands: list[cst.BaseExpression]) -> bool:
        """The tensor operands (at least one) are all on the host; plain numbers do not count.
        The elements of a list or tuple argument are operands (`torch.cat([a, b])`), a
        comprehension's element stands for all of them, and a host
        tensor counts as one whatever its inferred tensorness (a name unpacked from a tuple)."""
        flat: list[cst.BaseExpression] = []
        for operand in operands:
            if isinstance(operand, (cst.List, cst.Tuple)):
                if any(isinstance(e, cst.StarredElement) for e in operand.elements):
                    return False
                flat.extend(e.value for e in operand.elements)
            elif isinstance(operand, (cst.ListComp, cst.GeneratorExp)):
                flat.append(operand.elt)  # `torch.cat([h + k for k in ks])`: each element is one
            else:
                flat.append(operand)
        host = [self.is_host_tensor(o) for o in flat]
        return any(host) and all(
            on_host or self._tensorness(o) == Tensorness.NO for o, on_host in zip(flat, host, strict=True)
        )

    def _pinned_to_host(self, operands: list[cst.BaseExpression]) -> bool:
        """An operand of an operator is a host tensor of one dimension or more (`finite & (e <=
        t)` with `finite = torch.isfinite(kp_host).all(1)`): only a 0-dim CPU tensor may meet a
        CUDA tensor, so the operation runs on the host, or raises, whatever the other operands are."""
        return self._has_dims is not None and any(
            self.is_host_tensor(o) and self._has_dims(o) for o in operands
        )

    def _host(self, expr: cst.BaseExpression) -> bool:
        if isinstance(expr, cst.Call):
            return self._call(expr)
        if isinstance(expr, cst.Name):
            bindings = self._names.reaching(expr)
            return bool(bindings) and (
                all(self._binding(b, expr.value) for b in bindings)
                or self._required.required_on_host(expr, bindings)
            )
        if isinstance(expr, cst.Attribute):
            if isinstance(expr.value, cst.Name) and expr.value.value == "self":
                return self._self_attribute(expr)
            # a field of a host result: `torch.cummax(h, 0).values`, `h.T`
            return self.is_host_tensor(expr.value)
        if isinstance(expr, cst.Subscript):
            stored = self._dict_items(expr) if self._dict_items is not None else None
            if stored is not None:  # `logs["lr"]` of `logs = {}`: what the scope stores there
                return all(self.is_host_tensor(v) for v in stored)
            return self.is_host_tensor(expr.value)
        if isinstance(expr, cst.UnaryOperation):
            return self.is_host_tensor(expr.expression)
        if isinstance(expr, cst.BinaryOperation):
            if self._pinned_to_host([expr.left, expr.right]):
                return True
            if isinstance(expr.operator, _MASK_OPERATORS):  # `finite & ok`: both are masks
                return self.is_host_tensor(expr.left) and self.is_host_tensor(expr.right)
            return self._operands_on_host([expr.left, expr.right])
        if isinstance(expr, cst.Comparison):
            operands = [expr.left, *(c.comparator for c in expr.comparisons)]
            return self._pinned_to_host(operands) or self._operands_on_host(operands)
        if isinstance(expr, cst.IfExp):
            return self.is_host_tensor(expr.body) and self.is_host_tensor(expr.orelse)
        return False

    def _binding(self, binding: Binding, name: str) -> bool:
        node = binding.node
        if self._drawn_from_loader is not None and self._drawn_from_loader(binding, name):
            return True  # a DataLoader collates its batches on the host
        if binding.kind == "assign" and isinstance(node, cst.BaseExpression):
            return self.is_host_tensor(node)
        if (
            binding.kind == "augassign"
            and isinstance(node, cst.AugAssign)
            and isinstance(node.target, cst.Name)
        ):
            # An in-place update leaves a tensor where it was: the other bindings decide, and
            # one already being judged (`x -= a` then `x *= b`, each reaching the other) says yes.
            if node in self._in_progress:
                return True
            self._in_progress.add(node)
            try:
                earlier = [b for b in self._names.reaching(node.target) if b.node is not node]
                return any(b.kind != "augassign" for b in earlier) and all(
                    self._binding(b, name) for b in earlier
                )
            finally:
                self._in_progress.discard(node)
        if binding.kind == "unpack" and isinstance(node, cst.Call):
            position = unpacked_position(node, name, self._facts.parents)
            return position is not None and self._returns_host(node, position)
        if binding.kind == "unpack" and isinstance(node, cst.BaseExpression):
            element = unpacked_element(node, name, self._facts)
            return element is not None and self.is_host_tensor(element)
        if binding.kind in ("for", "compfor") and isinstance(node, (cst.For, cst.CompFor)):
            # `for sigma in sigmas` over a host tensor: each element is a row of it, on the host;
            # `for t, (_, j) in zip(targets, indices)`: an item of an item of `indices`
            walked = walked_source(node.target, node.iter, name)
            return walked is not None and self.is_host_tensor(walked)
        if binding.kind == "param" and isinstance(node, cst.Param):
            function = binding.scope.node
            return isinstance(function, cst.FunctionDef) and (
                self._hot.is_host_parameter(function, name)
                or self._holds_host_tensors(function, name)
                or name in self._assumed.get(function, ())
            )
        return False

    def _holds_host_tensors(self, function: cst.FunctionDef, name: str) -> bool:
        """Every call passes CPU tensors for the parameter (project/host_tensors.py), in a module
        whose torch builders fill CPU tensors."""
        return not self._factories_on_device and self._hot.holds_host_tensors(function, name)

    def holds_tensors(self, expr: cst.BaseExpression, depth: int = 0) -> bool:
        """`expr` certainly holds tensors: one, or a tuple or list of them (`idx =
        self._get_src_permutation_idx(indices)`, which returns two), an item of such a parameter
        (project/host_tensors.py) or of a tuple or list of them."""
        if self._tensorness(expr) == Tensorness.CERTAIN:
            return True
        if depth > _HOLDS_DEPTH:
            return False
        if isinstance(expr, (cst.Tuple, cst.List)):
            return bool(expr.elements) and all(
                not isinstance(e, cst.StarredElement) and self.holds_tensors(e.value, depth + 1)
                for e in expr.elements
            )
        if isinstance(expr, cst.Subscript):
            return self.holds_tensors(expr.value, depth + 1)
        if isinstance(expr, cst.Call):
            function = self._callee(expr)
            values = _returned_values(function) if function is not None else []
            return bool(values) and all(self.holds_tensors(v, depth + 1) for v in values)
        if not isinstance(expr, cst.Name):
            return False
        bindings = self._names.reaching(expr)
        return bool(bindings) and all(self._binds_tensors(b, expr.value, depth + 1) for b in bindings)

    def _binds_tensors(self, binding: Binding, name: str, depth: int) -> bool:
        node = binding.node
        if binding.kind == "assign" and isinstance(node, cst.BaseExpression):
            return self.holds_tensors(node, depth)
        if binding.kind in ("for", "compfor") and isinstance(node, (cst.For, cst.CompFor)):
            walked = walked_source(node.target, node.iter, name)
            return walked is not None and self.holds_tensors(walked, depth)
        if binding.kind == "param" and isinstance(node, cst.Param):
            function = binding.scope.node
            return isinstance(function, cst.FunctionDef) and self._holds_host_tensors(function, name)
        return False

    def _returns_host(self, call: cst.Call, position: Optional[tuple[int, int]] = None) -> bool:
        """`call` runs a function of this file whose every `return` hands back a host tensor,
        given the host tensors this call passes (`image = _to_uint8(image.cpu())`); with
        `position` (index, length), element `index` of the tuples it returns."""
        function = self._callee(call)
        if function is None:
            return False
        values = _returned_values(function)
        if not values:
            return False
        if position is not None:
            index, length = position
            if not all(isinstance(v, cst.Tuple) and len(v.elements) == length for v in values):
                return False
            values = [v.elements[index].value for v in values]  # type: ignore[attr-defined]
        assumed = frozenset(self._host_arguments(call, function))
        saved_assumed, saved_memo = self._assumed, self._memo
        self._assumed = {**saved_assumed, function: assumed}
        self._memo = self._memos.setdefault(frozenset(self._assumed.items()), {})
        try:
            return all(self._returned_host(v) for v in values)
        finally:
            self._assumed, self._memo = saved_assumed, saved_memo

    def _returned_host(self, value: cst.BaseExpression) -> bool:
        if isinstance(value, cst.Tuple):  # `return x, y`: a host tensor read as a whole
            return bool(value.elements) and all(
                not isinstance(e, cst.StarredElement) and self._returned_host(e.value) for e in value.elements
            )
        return self.is_host_tensor(value)

    def _summed_on_host(self, call: cst.Call) -> bool:
        """`sum(host.values())` of `host = {k: v.cpu() for ...}`, `sum(t.cpu() for t in ts)`:
        a sum of host tensors is one."""
        summed = summed_values(call, self._names, self._hot.entry.handed_back)
        return summed is not None and not summed[1] and self._operands_on_host(summed[0])

    def _callee(self, call: cst.Call) -> Optional[cst.FunctionDef]:
        """The one function of this file that `call` names (`f(...)`, `self.f(...)`,
        `Cls.f(...)`): not a module instance's forward, whose weights may live on the device."""
        called = call.func.value if isinstance(call.func, cst.Name) else None
        if isinstance(call.func, cst.Attribute):
            called = call.func.attr.value
        callees = self._hot.resolve_call(call) if called else []
        if len(callees) != 1 or callees[0].name.value != called:
            return None
        return callees[0]

    def _host_arguments(self, call: cst.Call, function: cst.FunctionDef) -> set[str]:
        """The parameters of `function` that `call` passes a host tensor for."""
        params = [*function.params.posonly_params, *function.params.params]
        decorators = {dotted_name(d.decorator) for d in function.decorators}
        info = self._facts.functions.get(function)
        in_class = info is not None and info.cls is not None
        if in_class and "staticmethod" not in decorators and isinstance(call.func, cst.Attribute):
            receiver = call.func.value
            by_class = isinstance(receiver, cst.Name) and self._hot.local_class(receiver) is not None
            if not by_class or "classmethod" in decorators:
                params = params[1:]  # `self`/`cls` comes from the receiver
        names = set()
        for position, arg in enumerate(call.args):
            if arg.star:
                break
            if arg.keyword is None and position < len(params) and self.is_host_tensor(arg.value):
                names.add(params[position].name.value)
        for arg in call.args:
            if arg.keyword is not None and self.is_host_tensor(arg.value):
                names.add(arg.keyword.value)
        return names

    def _self_attribute(self, expr: cst.Attribute) -> bool:
        """`self.lam` whose every assignment in the class is a host tensor. A plain attribute,
        not a buffer: `model.cuda()` leaves it where it is. An assignment that reads the
        attribute itself (`self.betas = rescale(self.betas)`) is judged assuming the attribute
        is on the host: the other assignments decide, and no answer found under that assumption
        is remembered."""
        cls = self._hot.enclosing_class(expr)
        values = self._hot.attribute_values(cls, expr.attr.value) if cls is not None else []
        if not values or self._registered(expr.attr.value):
            return False  # a buffer moves with the module, whatever is assigned to it later
        key = (id(cls), expr.attr.value)
        if key in self._attributes_assumed:
            return True
        self._attributes_assumed.add(key)
        try:
            return all(self.is_host_tensor(v) for v in values)
        finally:
            self._attributes_assumed.discard(key)

    def _registered(self, attr: str) -> bool:
        """The file registers a buffer or parameter named `attr` (`register_buffer("w", w)`)."""
        return bool(registrations(self._facts, attr, ("register_buffer", "register_parameter")))

    def _call(self, call: cst.Call) -> bool:
        if self._copies_to_host(call):
            return True
        if self.received_over_rpc(call):
            return True
        qualified = self._names.qualified_name(call) or ""
        if qualified == "builtins.sum":
            return self._summed_on_host(call)
        name = qualified[len("torch.") :] if qualified.startswith("torch.") else ""
        if name in GENERATING_FACTORIES:
            if draws_around_tensor(call, name):
                return self._operands_on_host(
                    [
                        arg.value
                        for arg in call.args
                        if arg.keyword is None or arg.keyword.value in ("mean", "std")
                    ]
                )
            return not self._factories_on_device and not _names_device(call)
        if name == "from_numpy":
            return True
        if name in FROM_HOST_DATA or name in LEGACY_CPU_TYPES:
            if self._factories_on_device and name in _FOLLOW_DEFAULT_DEVICE:
                return False
            return not _names_device(call) and not self._copies_a_device_tensor(call)
        if name and ("." not in name or name.startswith(_FOLLOW_OPERANDS)):
            return self._operands_on_host([arg.value for arg in call.args if arg.keyword is None])
        if self._callee(call) is not None:
            return self._returns_host(call)
        if isinstance(call.func, cst.Attribute) and not qualified:
            method = call.func.attr.value
            if method == "to":
                return casts_only(call, self._names, self._facts) and self.is_host_tensor(call.func.value)
            return method not in _MOVES and self.is_host_tensor(call.func.value)
        return False

    def received_over_rpc(self, expr: cst.BaseExpression) -> bool:
        """`expr` comes back over RPC in a project without an RPC device map: a CPU tensor."""
        return not self._rpc_moves_cuda and (
            self._over_rpc(expr) or (isinstance(expr, cst.Call) and self._forward_over_rpc(expr))
        )

    def _over_rpc(self, expr: cst.BaseExpression, seen: frozenset[cst.CSTNode] = frozenset()) -> bool:
        """`expr` is a value returned over RPC: `rpc.rpc_sync(...)`, `rpc.rpc_async(...).wait()`,
        `rpc.remote(...).to_here()`, `rref.rpc_sync().method(...)`, the results of
        `torch.futures.wait_all` on RPC futures (and their `torch.cat`), a name bound only to one,
        or a call of a function of this file whose every return is one (`remote_method(...)`, a
        module's forward). Without a device map TensorPipe carries only CPU tensors, so it arrives
        on the host."""
        if expr in seen:
            return False
        seen = seen | {expr}
        if isinstance(expr, cst.Name):
            bindings = self._names.reaching(expr)
            return bool(bindings) and all(
                b.kind == "assign" and isinstance(b.node, cst.BaseExpression) and self._over_rpc(b.node, seen)
                for b in bindings
            )
        if not isinstance(expr, cst.Call):
            return False
        qualified = self._names.qualified_name(expr) or ""
        if qualified == "torch.distributed.rpc.rpc_sync":
            return True
        if qualified == "torch.futures.wait_all" and len(expr.args) == 1:
            return self._rpc_futures(expr.args[0].value)
        if qualified in ("torch.cat", "torch.stack") and expr.args and expr.args[0].keyword is None:
            return self._over_rpc(expr.args[0].value, seen)
        if self._forward_over_rpc(expr, seen):
            return True
        func = expr.func
        if isinstance(func, cst.Attribute) and not qualified:
            method, receiver = func.attr.value, func.value
            if method == "wait" and not expr.args:
                return self._rpc_started(receiver, "rpc_async", "rpc_async")
            if method == "to_here":
                return self._rpc_started(receiver, "remote", "remote")
            if isinstance(receiver, cst.Call) and _proxy(receiver) == "rpc_sync":
                return True  # `rref.rpc_sync().method(...)`
        function = self._callee(expr)
        if function is None:
            return False
        values = _returned_values(function)
        return bool(values) and all(self._over_rpc(v, seen) for v in values)

    def _rpc_started(self, expr: cst.BaseExpression, api: str, proxy: str) -> bool:
        """`expr` is `rpc.<api>(...)` or `rref.<proxy>().method(...)` (a future or an RRef whose
        value another worker computes), or a name bound only to one."""
        if isinstance(expr, cst.Name):
            bindings = self._names.reaching(expr)
            return bool(bindings) and all(
                b.kind == "assign"
                and isinstance(b.node, cst.BaseExpression)
                and self._rpc_started(b.node, api, proxy)
                for b in bindings
            )
        if not isinstance(expr, cst.Call):
            return False
        if self._names.qualified_name(expr) == f"torch.distributed.rpc.{api}":
            return True
        func = expr.func
        return (
            isinstance(func, cst.Attribute)
            and isinstance(func.value, cst.Call)
            and _proxy(func.value) == proxy
        )

    def _rpc_futures(self, expr: cst.BaseExpression) -> bool:
        """`expr` is a list of `rpc_async` futures: a list literal of them, or a name bound only
        to one whose every `append` in its function adds one (`futs = []; futs.append(fut)`)."""
        if isinstance(expr, cst.List):
            return all(
                not isinstance(e, cst.StarredElement) and self._rpc_started(e.value, "rpc_async", "rpc_async")
                for e in expr.elements
            )
        if not isinstance(expr, cst.Name):
            return False
        bindings = self._names.reaching(expr)
        if not bindings or not all(b.kind == "assign" and isinstance(b.node, cst.List) for b in bindings):
            return False
        function = self._facts.enclosing_function(expr)
        for call in self._facts.method_calls.get("append", ()):
            receiver = call.func.value if isinstance(call.func, cst.Attribute) else None
            if not (isinstance(receiver, cst.Name) and receiver.value == expr.value):
                continue
            if self._facts.enclosing_function(call) is not function:
                continue
            if len(call.args) != 1 or not self._rpc_started(call.args[0].value, "rpc_async", "rpc_async"):
                return False
        return all(self._rpc_futures(b.node) for b in bindings if isinstance(b.node, cst.List))

    def _forward_over_rpc(self, call: cst.Call, seen: frozenset[cst.CSTNode] = frozenset()) -> bool:
        """`net(data)` of a module of this file whose forward returns only values that come
        over RPC (a trainer's stub of a model held by a parameter server)."""
        if not isinstance(call.func, cst.Name):
            return False
        callees = self._hot.resolve_call(call)
        if len(callees) != 1 or callees[0].name.value != "forward":
            return False
        values = _returned_values(callees[0])
        return bool(values) and all(self._over_rpc(v, seen) for v in values)

    def _copies_a_device_tensor(self, call: cst.Call) -> bool:
        """`torch.tensor(x.sum())`: the data is certainly a tensor, not one on the host. A
        parameter or a batch may as well be a list or a host tensor (`torch.as_tensor(weights)`)."""
        data = [arg.value for arg in call.args if arg.keyword is None and not arg.star]
        return (
            bool(data)
            and (self._tensorness(data[0]) == Tensorness.CERTAIN or self._tensor_parameter(data[0]))
            and not self.is_host_tensor(data[0])
        )

    def _tensor_parameter(self, expr: cst.BaseExpression) -> bool:
        """A parameter annotated as a tensor and nothing else (`src_box: torch.Tensor`): the
        caller's tensor, wherever it lives; not `Union[Sequence[float], torch.Tensor]`."""
        if not isinstance(expr, cst.Name):
            return False
        return annotated_parameter(self._names.reaching(expr), _only_tensor)

    def _copies_to_host(self, call: cst.Call) -> bool:
        """`t.cpu()`, `t.to("cpu")`, `t.to(device=torch.device("cpu"))`, `t.to(host)` after
        `host = torch.device("cpu")`: the result lives on the host."""
        if not isinstance(call.func, cst.Attribute):
            return False
        method = call.func.attr.value
        if method == "cpu":
            return not call.args
        if method == "to" and call.args:
            first = call.args[0]
            if first.keyword is None or first.keyword.value == "device":
                return self._is_cpu(first.value)
        return False

    def _is_cpu(self, expr: cst.BaseExpression) -> bool:
        if isinstance(expr, cst.Name):
            bindings = self._names.lookup(expr.value, expr)
            return bool(bindings) and all(
                b.kind == "assign" and isinstance(b.node, cst.BaseExpression) and _is_cpu(b.node)
                for b in bindings
            )
        return _is_cpu(expr)


def _only_tensor(annotation: cst.BaseExpression) -> bool:
    """`torch.Tensor`, `Optional[Tensor]`, `Tensor | None`: no other type of data allowed."""
    if isinstance(annotation, cst.Name) and annotation.value == "None":
        return True
    if isinstance(annotation, cst.BinaryOperation) and isinstance(annotation.operator, cst.BitOr):
        return _only_tensor(annotation.left) and _only_tensor(annotation.right)
    if isinstance(annotation, cst.Subscript) and (dotted_name(annotation.value) or "").endswith("Optional"):
        elements = [e.slice for e in annotation.slice]
        return len(elements) == 1 and isinstance(elements[0], cst.Index) and _only_tensor(elements[0].value)
    return (dotted_name(annotation) or "").split(".")[-1] == "Tensor"


def _proxy(call: cst.Call) -> Optional[str]:
    """`rpc_sync`, `rpc_async` or `remote` for `rref.rpc_sync()` and the like: an RRef's proxy
    whose method calls run on the owner."""
    func = call.func
    if (
        isinstance(func, cst.Attribute)
        and not call.args
        and func.attr.value in ("rpc_sync", "rpc_async", "remote")
    ):
        return func.attr.value
    return None


def _names_device(call: cst.Call) -> bool:
    return any(arg.keyword is not None and arg.keyword.value == "device" for arg in call.args)


def _returned_values(function: cst.FunctionDef) -> list[cst.BaseExpression]:
    """Every value `function` returns; none for a generator."""
    values, yields = returned_values(function)
    return [] if yields else values


def _is_cpu(expr: cst.BaseExpression) -> bool:
    """`"cpu"` or `torch.device("cpu")`."""
    if isinstance(expr, cst.SimpleString):
        return expr.evaluated_value == "cpu"
    if isinstance(expr, cst.Call) and (dotted_name(expr.func) or "").endswith("device") and expr.args:
        return _is_cpu(expr.args[0].value)
    return False


# Reads that hand a tensor's values to the host.
_HOST_READS = frozenset({"tolist", "numpy", "item", "cpu"})


class _NameReads(cst.CSTVisitor):
    def __init__(self, name: str) -> None:
        self.name = name
        self.found: list[cst.Name] = []

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == self.name:
            self.found.append(node)


def consumed_on_host(call: cst.Call, facts: FileFacts, host_read_keys: frozenset[str] = frozenset()) -> bool:
    """`ix = torch.randint(n, (12,))` whose every read iterates it in Python (`for i in ix`, a
    comprehension) or copies it out (`ix.tolist()`): the host uses the values, so the tensor
    belongs there (nanoGPT's get_batch slices a NumPy memmap with them). Also an entry of a
    returned dict literal under a key the project only reads on the host (`host_read_keys`,
    project/graph.py): `return {"order": torch.randperm(4)}` for `params["order"].tolist()`."""
    if _returned_under(call, facts, host_read_keys):
        return True
    reads = reads_of_bound_name(call, facts)
    return bool(reads) and all(_host_read(n, facts) for n in reads)


def _returned_under(value: cst.BaseExpression, facts: FileFacts, keys: frozenset[str]) -> bool:
    """`value` is an entry of a dict literal that a `return` hands back, under one of `keys`."""
    element = facts.parents.get(value)
    if not keys or not isinstance(element, cst.DictElement) or element.value is not value:
        return False
    key = element.key
    literal = facts.parents.get(element)
    return (
        isinstance(key, cst.SimpleString)
        and key.evaluated_value in keys
        and isinstance(literal, cst.Dict)
        and isinstance(facts.parents.get(literal), cst.Return)
    )


def reads_of_bound_name(value: cst.CSTNode, facts: FileFacts) -> list[cst.Name]:
    """`name = <value>` inside a function: the other places the function names `name`; none when
    the value is not assigned to one plain name."""
    assign = facts.parents.get(value)
    if not (isinstance(assign, cst.Assign) and assign.value is value and len(assign.targets) == 1):
        return []
    target = assign.targets[0].target
    function = facts.enclosing_function(value)
    if not isinstance(target, cst.Name) or function is None:
        return []
    visitor = _NameReads(target.value)
    visit(function.body, visitor)
    return [n for n in visitor.found if n is not target]


class _SelfAttributeReads(cst.CSTVisitor):
    def __init__(self, attribute: str) -> None:
        self.attribute = attribute
        self.found: list[cst.Attribute] = []

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if (
            node.attr.value == self.attribute
            and isinstance(node.value, cst.Name)
            and node.value.value == "self"
        ):
            self.found.append(node)


# Methods that fill a tensor in place from their argument, and those that move it whole.
_FILLS = frozenset({"copy_"})
_WHOLE_MOVES = frozenset({"cuda", "to"})


def staged_on_host(call: cst.Call, facts: FileFacts, on_device: Callable[[cst.BaseExpression], bool]) -> bool:
    """A host staging buffer: the factory's value, bound to a local name or to a `self.` attribute,
    is only filled in place (`buf[i].copy_(state)`, `buf[i] = row`) with values not known to be on
    the device, and moved whole (`buf.cuda()`, `buf.to(d)`), both at least once. Made on the
    device, every fill would be a host-to-device copy of its own; the one move is the copy the
    design wants (pytorch/examples' batched RPC agent gathers the observers' states so)."""
    reads: list[cst.BaseExpression] = list(reads_of_bound_name(call, facts))
    assign = facts.parents.get(call)
    if not reads and isinstance(assign, cst.Assign) and len(assign.targets) == 1:
        target = assign.targets[0].target
        cls = next((a for a in facts.ancestors(call) if isinstance(a, cst.ClassDef)), None)
        if (
            cls is not None
            and isinstance(target, cst.Attribute)
            and isinstance(target.value, cst.Name)
            and target.value.value == "self"
        ):
            visitor = _SelfAttributeReads(target.attr.value)
            visit(cls, visitor)
            reads = [a for a in visitor.found if not _assigned_whole(a, facts)]
    kinds = [_staging_use(read, facts, on_device) for read in reads]
    return bool(kinds) and None not in kinds and "fill" in kinds and "move" in kinds


def _assigned_whole(expr: cst.CSTNode, facts: FileFacts) -> bool:
    return isinstance(facts.parents.get(expr), cst.AssignTarget)


def _staging_use(
    read: cst.BaseExpression, facts: FileFacts, on_device: Callable[[cst.BaseExpression], bool]
) -> Optional[str]:
    """ "fill", "move", "layout" (`len(buf)`, `buf.shape`: no values read), or None for any other
    use of a buffer."""
    parent = facts.parents.get(read)
    if isinstance(parent, cst.Arg):
        call = facts.parents.get(parent)
        is_len = isinstance(call, cst.Call) and isinstance(call.func, cst.Name) and call.func.value == "len"
        return "layout" if is_len else None
    if isinstance(parent, cst.Attribute) and parent.value is read and parent.attr.value in LAYOUT_READS:
        return "layout"
    if isinstance(parent, cst.Subscript) and parent.value is read:
        target = facts.parents.get(parent)
        assign = facts.parents.get(target) if isinstance(target, cst.AssignTarget) else None
        if isinstance(assign, cst.Assign):
            return None if on_device(assign.value) else "fill"
        read, parent = parent, target  # `buf[i].copy_(row)` fills a slice
    if not (isinstance(parent, cst.Attribute) and parent.value is read):
        return None
    method = facts.parents.get(parent)
    if not (isinstance(method, cst.Call) and method.func is parent):
        return None
    if parent.attr.value in _WHOLE_MOVES and isinstance(read, (cst.Name, cst.Attribute)):
        return "move" if not (method.args and _is_cpu(method.args[0].value)) else None
    if parent.attr.value in _FILLS and method.args and not on_device(method.args[0].value):
        return "fill"
    return None


def _host_read(name: cst.Name, facts: FileFacts) -> bool:
    parent = facts.parents.get(name)
    if isinstance(parent, (cst.For, cst.CompFor)):
        return parent.iter is name
    if isinstance(parent, cst.Attribute) and parent.value is name and parent.attr.value in _HOST_READS:
        return isinstance(facts.parents.get(parent), cst.Call)
    return False


def may_pass_keyword(call: cst.Call) -> bool:
    """`f(*args, **kwargs)`: a `**` argument may carry any keyword (`device=`), so the call's
    keywords cannot be read from the source (kornia's `torch.randperm(n, **kwargs)`)."""
    return any(arg.star == "**" for arg in call.args)


def flows_into_tensor(
    call: cst.Call, facts: FileFacts, is_tensor: Callable[[cst.BaseExpression], bool]
) -> bool:
    """The factory's value meets a tensor the function computes with: in arithmetic or a
    comparison with one (also after passing through other arithmetic, `torch.rand(...) >= p`), or
    as an index into one (`pair_ix[:, torch.randperm(n)[:k]]`); directly, or through the one name
    it is assigned to (`keep = torch.rand(...) >= p; return x * keep`), or as a buffer filled with
    one (`m = torch.empty(n, c); m[0::2] = self.lin(x)`). A value built and used only with other
    factories, passed to functions or filled in place with constants shows no such meeting."""
    expr: cst.CSTNode = call
    while True:
        parent = facts.parents.get(expr)
        if isinstance(parent, cst.ComparisonTarget):
            parent = facts.parents.get(parent)
        if isinstance(parent, (cst.BinaryOperation, cst.Comparison)):
            operands = (
                [parent.left, parent.right]
                if isinstance(parent, cst.BinaryOperation)
                else [parent.left, *(c.comparator for c in parent.comparisons)]
            )
            if any(o is not expr and is_tensor(o) for o in operands):
                return True
            expr = parent
            continue
        if isinstance(parent, cst.Subscript) and parent.value is expr:
            expr = parent  # a slice of the factory's value is still its value
            continue
        break
    if _indexes_tensor(expr, facts, is_tensor):
        return True
    for read in reads_of_bound_name(expr, facts):
        parent = facts.parents.get(read)
        if isinstance(parent, cst.ComparisonTarget):
            parent = facts.parents.get(parent)
        if isinstance(parent, cst.BinaryOperation):
            other = parent.right if parent.left is read else parent.left
            if is_tensor(other):
                return True
        if _indexes_tensor(read, facts, is_tensor) or _filled_with_tensor(read, facts, is_tensor):
            return True
    return False


def reaches_return(call: cst.Call, facts: FileFacts) -> bool:
    """The factory runs on every call of its function (no branch around it: which side a call
    takes is not known here), and its value is what the function returns, as built or derived
    from it: through methods called on it, calls it is handed to, arithmetic, slices of it, and
    the names it is bound to on the way (swinir's `img_mask = torch.zeros(...)`, then
    `window_partition(img_mask, ...)`, `.view(...)`, `masked_fill(...)`, `return attn_mask`)."""
    if _in_a_branch(call, facts):
        return False
    frontier: list[cst.CSTNode] = [call]
    seen: set[cst.CSTNode] = set()
    while frontier and len(seen) < _DERIVATIONS:
        expr = frontier.pop()
        if expr in seen:
            continue
        seen.add(expr)
        expr = _derived_value(expr, facts)
        if isinstance(facts.parents.get(expr), cst.Return):
            return True
        frontier.extend(reads_of_bound_name(expr, facts))
    return False


def _in_a_branch(node: cst.CSTNode, facts: FileFacts) -> bool:
    """`node` sits on one side of an `if`, an if-expression or an `except` of its function."""
    child, parent = node, facts.parents.get(node)
    while parent is not None and not isinstance(parent, (cst.FunctionDef, cst.Lambda)):
        if isinstance(parent, (cst.If, cst.IfExp)) and child is not parent.test:
            return True
        if isinstance(parent, (cst.ExceptHandler, cst.Else)):
            return True
        child, parent = parent, facts.parents.get(parent)
    return False


# how many values `reaches_return` follows before it gives up (no return found)
_DERIVATIONS = 16

# what reads numbers or sizes off a tensor, or builds a new one of a size: not the tensor's data
_HOST_NUMBER_READS = frozenset(
    {"item", "tolist", "numel", "size", "dim", "int", "float", "len", "bool", "round"}
)


def _reads_host_number(call: cst.Call) -> bool:
    """`int(t.sum())`, `len(t)`, `t.item()`, `t.size(0)`, `torch.ones(n)`: a number, a size or a
    new tensor made from one, not a value derived from the tensor's data."""
    name = dotted_name(call.func) or ""
    last = name.rsplit(".", 1)[-1]
    return last in _HOST_NUMBER_READS or (name.startswith("torch.") and last in GENERATING_FACTORIES)


def _derived_value(expr: cst.CSTNode, facts: FileFacts) -> cst.CSTNode:
    """The outermost expression around `expr` whose value is derived from it."""
    while True:
        parent = facts.parents.get(expr)
        if isinstance(parent, cst.Attribute) and parent.value is expr:
            call = facts.parents.get(parent)
            if not (isinstance(call, cst.Call) and call.func is parent) or _reads_host_number(call):
                return expr
            expr = call
        elif isinstance(parent, cst.Arg) and not parent.star:
            call = facts.parents.get(parent)
            if not isinstance(call, cst.Call) or _reads_host_number(call):
                return expr
            expr = call
        elif isinstance(parent, (cst.BinaryOperation, cst.UnaryOperation)) or (
            isinstance(parent, cst.Subscript) and parent.value is expr
        ):
            expr = parent
        else:
            return expr


def _filled_with_tensor(
    read: cst.CSTNode, facts: FileFacts, is_tensor: Callable[[cst.BaseExpression], bool]
) -> bool:
    """`m[0::4] = self.kernel(x)`: the factory's value is a buffer the function fills with a
    tensor it computes, so it holds that tensor's data (a constant fill, `mask[idx] = 1`, does not
    count)."""
    subscript = facts.parents.get(read)
    target = facts.parents.get(subscript) if isinstance(subscript, cst.Subscript) else None
    assign = facts.parents.get(target) if isinstance(target, cst.AssignTarget) else None
    return (
        isinstance(subscript, cst.Subscript)
        and subscript.value is read
        and isinstance(assign, cst.Assign)
        and is_tensor(assign.value)
    )


def _indexes_tensor(
    expr: cst.CSTNode, facts: FileFacts, is_tensor: Callable[[cst.BaseExpression], bool]
) -> bool:
    """`expr` is (part of) the index of a subscript of a tensor: `t[expr]`, `t[:, expr]`."""
    child: cst.CSTNode = expr
    for _ in range(3):  # Index -> SubscriptElement -> Subscript
        node = facts.parents.get(child)
        if node is None:
            return False
        if isinstance(node, cst.Subscript):
            return child is not node.value and is_tensor(node.value)
        child = node
    return False


def builds_no_elements(call: cst.Call, factory: str) -> bool:
    """`torch.empty(0)`, `torch.zeros(0, 4, 2)`, `torch.randperm(0)`: a size with a literal 0
    dimension. The tensor holds nothing to generate or copy (a typed placeholder, the result for
    an empty input, a way to read the default device). `torch.arange(0)` counts to nothing too."""
    if factory == "arange":
        bounds = [arg.value for arg in call.args if arg.keyword is None and not arg.star]
        return len(bounds) == 1 and isinstance(bounds[0], cst.Integer) and bounds[0].evaluated_value == 0
    where = _SIZE_ARGUMENTS.get(factory)
    if where is None:
        return False
    positions, name = where
    sizes = [arg.value for arg in call.args if arg.keyword is None and not arg.star][positions]
    sizes += [arg.value for arg in call.args if arg.keyword is not None and arg.keyword.value == name]
    dimensions: list[cst.BaseExpression] = []
    for size in sizes:
        if isinstance(size, (cst.Tuple, cst.List)):
            dimensions.extend(element.value for element in size.elements)
        else:
            dimensions.append(size)
    return any(isinstance(d, cst.Integer) and d.evaluated_value == 0 for d in dimensions)


def draws_around_tensor(call: cst.Call, factory: str) -> bool:
    """`torch.normal(mean, std)` without a size: only the form with both numbers takes a size, so
    one of them is a tensor, and the draw is made on its device (DDPG's exploration noise
    `torch.normal(0, actor.action_scale * sigma)`), as with the `*_like` factories."""
    if factory != "normal" or may_pass_keyword(call):
        return False
    positional = [arg for arg in call.args if arg.keyword is None]
    sized = any(arg.keyword is not None and arg.keyword.value == "size" for arg in call.args)
    return len(positional) < 3 and not sized and not any(arg.star for arg in positional)


def fills_device_tensor(call: cst.Call, qualified_name: Callable[[cst.BaseExpression], str | None]) -> bool:
    """The factory writes into an `out=` tensor made on the device (`torch.arange(0, n,
    out=torch.cuda.LongTensor(n))`, `out=buf.cuda()`, `out=torch.empty(n, device=d)`): it
    fills that tensor where it lives and builds nothing on the host."""
    out = next(
        (arg.value for arg in call.args if arg.keyword is not None and arg.keyword.value == "out"), None
    )
    if not isinstance(out, cst.Call):
        return False
    if isinstance(out.func, cst.Attribute) and out.func.attr.value == "cuda":
        return True
    if isinstance(out.func, cst.Attribute) and out.func.attr.value == "to":
        return bool(out.args) and not _is_cpu(out.args[0].value)
    qualified = qualified_name(out) or ""
    if qualified.startswith("torch.cuda.") and qualified.endswith("Tensor"):
        return True
    return qualified.startswith("torch.") and any(
        arg.keyword is not None and arg.keyword.value == "device" and not _is_cpu(arg.value)
        for arg in out.args
    )

"""Tensors that certainly live on the host: built by a torch factory or from host data without
`device=`, and never moved. Reading one (`if p < self.layerdrop:`, `t.item()`) waits for no
device, so the sync rules stay silent on them (the `dropout_probability = torch.rand([])`
layer drop of many transformer implementations).
"""

from __future__ import annotations

from typing import Callable

import libcst as cst

from ..syntax.walker import FileFacts, dotted_name
from .names import Names

# Factories that generate data; without device= they fill a CPU tensor.
GENERATING_FACTORIES = frozenset(
    "randperm zeros ones empty full arange rand randn randint normal eye linspace logspace".split()
)
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
# Builders of tensors from host data.
_FROM_HOST_DATA = frozenset({"tensor", "as_tensor", "asarray", "from_numpy"})
_MOVES = frozenset({"to", "cuda", "type_as", "new_tensor"})


class HostTensors:
    def __init__(self, names: Names, is_tensor: Callable[[cst.BaseExpression], bool]) -> None:
        self._names = names
        self._is_tensor = is_tensor
        self._memo: dict[cst.CSTNode, bool] = {}
        self._in_progress: set[cst.CSTNode] = set()

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
        self._memo[expr] = result
        return result

    def _operands_on_host(self, operands: list[cst.BaseExpression]) -> bool:
        """The tensor operands (at least one) are all on the host; plain numbers do not count."""
        tensors = [o for o in operands if self._is_tensor(o)]
        return bool(tensors) and all(self.is_host_tensor(o) for o in tensors)

    def _host(self, expr: cst.BaseExpression) -> bool:
        if isinstance(expr, cst.Call):
            return self._call(expr)
        if isinstance(expr, cst.Name):
            bindings = self._names.lookup(expr.value, expr)
            return bool(bindings) and all(
                b.kind == "assign" and isinstance(b.node, cst.BaseExpression) and self.is_host_tensor(b.node)
                for b in bindings
            )
        if isinstance(expr, cst.Subscript):
            return self.is_host_tensor(expr.value)
        if isinstance(expr, cst.UnaryOperation):
            return self.is_host_tensor(expr.expression)
        if isinstance(expr, cst.BinaryOperation):
            return self._operands_on_host([expr.left, expr.right])
        if isinstance(expr, cst.Comparison):
            return self._operands_on_host([expr.left, *(c.comparator for c in expr.comparisons)])
        return False

    def _call(self, call: cst.Call) -> bool:
        if _copies_to_host(call):
            return True
        qualified = self._names.qualified_name(call) or ""
        name = qualified[len("torch.") :] if qualified.startswith("torch.") else ""
        if name in GENERATING_FACTORIES or name in _FROM_HOST_DATA:
            return not any(arg.keyword is not None and arg.keyword.value == "device" for arg in call.args)
        if name and "." not in name:
            return self._operands_on_host([arg.value for arg in call.args if arg.keyword is None])
        if isinstance(call.func, cst.Attribute) and not qualified:
            return call.func.attr.value not in _MOVES and self.is_host_tensor(call.func.value)
        return False


def _is_cpu(expr: cst.BaseExpression) -> bool:
    """`"cpu"` or `torch.device("cpu")`."""
    if isinstance(expr, cst.SimpleString):
        return expr.evaluated_value == "cpu"
    if isinstance(expr, cst.Call) and (dotted_name(expr.func) or "").endswith("device") and expr.args:
        return _is_cpu(expr.args[0].value)
    return False


def _copies_to_host(call: cst.Call) -> bool:
    """`t.cpu()`, `t.to("cpu")`, `t.to(device=torch.device("cpu"))`: the result lives on the host."""
    if not isinstance(call.func, cst.Attribute):
        return False
    method = call.func.attr.value
    if method == "cpu":
        return not call.args
    if method == "to" and call.args:
        first = call.args[0]
        if first.keyword is None or first.keyword.value == "device":
            return _is_cpu(first.value)
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


def consumed_on_host(call: cst.Call, facts: FileFacts) -> bool:
    """`ix = torch.randint(n, (12,))` whose every read iterates it in Python (`for i in ix`, a
    comprehension) or copies it out (`ix.tolist()`): the host uses the values, so the tensor
    belongs there (nanoGPT's get_batch slices a NumPy memmap with them)."""
    reads = _reads_of_bound_name(call, facts)
    return bool(reads) and all(_host_read(n, facts) for n in reads)


def _reads_of_bound_name(value: cst.CSTNode, facts: FileFacts) -> list[cst.Name]:
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
    function.body.visit(visitor)
    return [n for n in visitor.found if n is not target]


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
    it is assigned to (`keep = torch.rand(...) >= p; return x * keep`). A value built and used only
    with other factories, passed to functions or filled in place shows no such meeting."""
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
    for read in _reads_of_bound_name(expr, facts):
        parent = facts.parents.get(read)
        if isinstance(parent, cst.ComparisonTarget):
            parent = facts.parents.get(parent)
        if isinstance(parent, cst.BinaryOperation):
            other = parent.right if parent.left is read else parent.left
            if is_tensor(other):
                return True
        if _indexes_tensor(read, facts, is_tensor):
            return True
    return False


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
    an empty input, a way to read the default device)."""
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

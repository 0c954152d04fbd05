"""Two shapes of tensor that sync where the code does not say so (RULES.md, "Tensor and device
inference"; issue 39): a *0-dim* tensor, which Python turns into a number through `.item()` when
it stands where a number is needed (a slice bound, `range()`, a size, a Scalar argument), and a
*boolean* tensor, whose use as an index (`t[mask]`) counts its true elements on the host.

Only derived values count, as for TPL105's `if t:`: a reduction without a dimension
(`t.sum()`, `t.max()`), a comparison of a tensor, a tensor built from a Python number
(`torch.tensor(n, device=d)`), an element of a 1-D tensor, and names bound only to those. Where
the value lives is the tensor inference's business: a CPU tensor (`torch.tensor(n)`) reads for free.
"""

from __future__ import annotations

from typing import Callable, Optional

import libcst as cst

from ..syntax.walker import Binding, FileFacts, registrations, visit
from .names import Names

# Reductions that, without a dimension, leave one value: a 0-dim tensor.
_REDUCTIONS = frozenset(
    "sum mean max min amax amin prod norm any all std var count_nonzero median nansum nanmean logsumexp".split()
)
# Methods and torch functions that keep a tensor's shape (a 0-dim stays 0-dim).
_SHAPE_KEEPING = frozenset(
    """float double half bfloat16 long int short bool to cuda detach clone contiguous abs neg exp log
    sqrt rsqrt floor ceil round trunc sigmoid clamp clamp_min clamp_max clip type_as""".split()
)
# Methods that make a boolean tensor of their receiver's shape (or of a reduced one).
_MASK_METHODS = frozenset(
    "bool isnan isinf isfinite isneginf isposinf eq ne lt le gt ge logical_and logical_or logical_not logical_xor".split()
)
_MASK_FUNCTIONS = frozenset(
    """torch.isnan torch.isinf torch.isfinite torch.isin torch.eq torch.ne torch.lt torch.le torch.gt
    torch.ge torch.logical_and torch.logical_or torch.logical_not torch.logical_xor""".split()
)
# Factories of a 1-D tensor.
_ONE_DIM_FACTORIES = frozenset(
    "torch.arange torch.linspace torch.logspace torch.randperm torch.bincount".split()
)
_SIZED_FACTORIES = frozenset("torch.zeros torch.ones torch.empty torch.rand torch.randn".split())
_VALUE_COMPARISONS = (
    cst.LessThan,
    cst.GreaterThan,
    cst.LessThanEqual,
    cst.GreaterThanEqual,
    cst.Equal,
    cst.NotEqual,
)
_MASK_OPERATORS = (cst.BitAnd, cst.BitOr, cst.BitXor)
# Sizes read off a tensor: Python ints.
_SIZE_METHODS = frozenset({"size", "dim", "numel", "nelement", "ndimension"})


class DeviceValues:
    """Answers `zero_dim(expr)`, `mask(expr)` and `host_source(expr)` for one file."""

    def __init__(
        self,
        facts: FileFacts,
        names: Names,
        is_tensor: Callable[[cst.BaseExpression], bool],
        is_derived_tensor: Callable[[cst.BaseExpression], bool],
    ) -> None:
        self._facts = facts
        self._names = names
        self._is_tensor = is_tensor
        self._derived = is_derived_tensor
        self._zero_dim = _Memo()
        self._masks = _Memo()
        self._one_dim = _Memo()
        self._dims = _Memo()

    # -- 0-dim tensors ----------------------------------------------------------------------
    def zero_dim(self, expr: cst.BaseExpression) -> bool:
        """`expr` is certainly a 0-dim tensor."""
        return self._zero_dim.ask(expr, self._zero)

    def _zero(self, expr: cst.BaseExpression) -> bool:
        if isinstance(expr, cst.Call):
            return self._zero_call(expr)
        if isinstance(expr, cst.Name):
            return self._all_bindings(expr, self._zero_binding)
        if isinstance(expr, cst.Subscript):
            return (
                self.one_dim(expr.value) and len(expr.slice) == 1 and _int_index(expr.slice[0], self._names)
            )
        if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
            return self.zero_dim(expr.expression)
        if isinstance(expr, cst.BinaryOperation) and not isinstance(expr.operator, cst.MatrixMultiply):
            sides = (expr.left, expr.right)
            return any(self.zero_dim(s) for s in sides) and all(
                self.zero_dim(s) or _python_number(s, self._names) for s in sides
            )
        return False

    def _zero_call(self, call: cst.Call) -> bool:
        func = call.func
        qualified = self._names.qualified_name(call) or ""
        if isinstance(func, cst.Attribute) and not qualified.startswith("torch."):
            method = func.attr.value
            receiver = func.value
            if method in _REDUCTIONS:
                return not _dim_given(call, positional=0) and self._is_tensor(receiver)
            if method in _SHAPE_KEEPING:
                return self.zero_dim(receiver)
            return False
        if qualified.startswith("torch.") and qualified[len("torch.") :] in _REDUCTIONS:
            return (
                len(call.args) >= 1
                and not _dim_given(call, positional=1)
                and self._is_tensor(call.args[0].value)
            )
        if qualified in ("torch.tensor", "torch.as_tensor", "torch.scalar_tensor"):
            return (
                bool(call.args)
                and call.args[0].keyword is None
                and _python_number(call.args[0].value, self._names)
            )
        return False

    def _zero_binding(self, binding: Binding) -> bool:
        if binding.kind == "assign" and isinstance(binding.node, cst.BaseExpression):
            return self.zero_dim(binding.node)
        if binding.kind == "unpack" and isinstance(binding.node, cst.BaseExpression):
            return self.one_dim(binding.node)  # `h, w = size_t`: each name is one element
        if binding.kind in ("for", "compfor") and isinstance(binding.node, (cst.For, cst.CompFor)):
            # `for v in t` / `[int(v) for v in t]` over a 1-D tensor: each `v` is one element
            return isinstance(binding.node.target, cst.Name) and self.one_dim(binding.node.iter)
        return False

    def one_dim(self, expr: cst.BaseExpression) -> bool:
        """`expr` is certainly a 1-D tensor: built from a flat list of numbers or from sizes
        (`torch.tensor(x.shape[2:], device=d)`), `torch.arange(n)`, `x.flatten()`, `x.view(-1)`."""
        return self._one_dim.ask(expr, self._one)

    def _one(self, expr: cst.BaseExpression) -> bool:
        if (
            isinstance(expr, cst.Attribute)
            and isinstance(expr.value, cst.Name)
            and expr.value.value == "self"
        ):
            # a buffer registered from a 1-D tensor (`register_buffer("strides", torch.tensor([8, 16]))`)
            # stays 1-D, and follows the module to its device
            registered = [value for _, value in registrations(self._facts, expr.attr.value)]
            return bool(registered) and all(value is not None and self.one_dim(value) for value in registered)
        if isinstance(expr, cst.Name):
            return self._all_bindings(
                expr,
                lambda b: (
                    b.kind == "assign" and isinstance(b.node, cst.BaseExpression) and self.one_dim(b.node)
                ),
            )
        if not isinstance(expr, cst.Call):
            return False
        qualified = self._names.qualified_name(expr) or ""
        if qualified in _ONE_DIM_FACTORIES:
            return True
        if qualified in _SIZED_FACTORIES:
            sizes = [a.value for a in expr.args if a.keyword is None and not a.star]
            if len(sizes) == 1 and isinstance(sizes[0], (cst.Tuple, cst.List)):
                sizes = [e.value for e in sizes[0].elements]
            # `torch.ones(7, device=d)`: one size, an int (a name may hold a tuple of sizes)
            return len(sizes) == 1 and isinstance(sizes[0], cst.Integer)
        if qualified in ("torch.tensor", "torch.as_tensor", "torch.LongTensor", "torch.FloatTensor"):
            if not expr.args or expr.args[0].keyword is not None:
                return False
            values = expr.args[0].value
            if isinstance(values, (cst.List, cst.Tuple)):
                return bool(values.elements) and all(
                    not isinstance(e, cst.StarredElement) and _python_number(e.value, self._names)
                    for e in values.elements
                )
            return _sizes(values)
        func = expr.func
        if (
            isinstance(func, cst.Attribute)
            and not qualified.startswith("torch.")
            and self._is_tensor(func.value)
        ):
            method = func.attr.value
            if method in ("flatten", "ravel") and not expr.args:
                return True
            if method in ("view", "reshape") and len(expr.args) == 1:
                arg = expr.args[0].value
                return isinstance(arg, cst.UnaryOperation) and _is_integer(arg.expression, 1)
            if method in _SHAPE_KEEPING:
                return self.one_dim(func.value)
        return False

    # -- tensors of one dimension or more ------------------------------------------------------
    def has_dims(self, expr: cst.BaseExpression) -> bool:
        """`expr` is certainly a tensor of at least one dimension, never a 0-dim one: a 1-D
        tensor, a reduction along dimension 1 or later (`t.all(1)`: the input had two), `x[None]`,
        `torch.stack`/`torch.cat`, `torch.eye`, an elementwise function or operator with such an
        operand (broadcasting keeps the most dimensions). Only a 0-dim CPU tensor may meet a CUDA
        tensor in an operator; any other CPU operand makes the operation raise."""
        return self._dims.ask(expr, self._has_dims)

    def _has_dims(self, expr: cst.BaseExpression) -> bool:
        if self.one_dim(expr):
            return True
        if isinstance(expr, cst.Name):
            return self._all_bindings(
                expr,
                lambda b: (
                    b.kind == "assign" and isinstance(b.node, cst.BaseExpression) and self.has_dims(b.node)
                ),
            )
        if isinstance(expr, cst.UnaryOperation):
            # `not t` is a Python bool
            return not isinstance(expr.operator, cst.Not) and self.has_dims(expr.expression)
        if isinstance(expr, cst.BinaryOperation) and not isinstance(expr.operator, cst.MatrixMultiply):
            return self.has_dims(expr.left) or self.has_dims(expr.right)
        if isinstance(expr, cst.Comparison):
            operands = [expr.left, *(c.comparator for c in expr.comparisons)]
            return all(isinstance(c.operator, _VALUE_COMPARISONS) for c in expr.comparisons) and any(
                self.has_dims(o) for o in operands
            )
        if isinstance(expr, cst.Subscript):
            # `x[None]`, `x[:, None]`: a new axis
            return any(
                isinstance(e.slice, cst.Index)
                and isinstance(e.slice.value, cst.Name)
                and e.slice.value.value == "None"
                for e in expr.slice
            ) and self._is_tensor(expr.value)
        if isinstance(expr, cst.Call):
            return self._has_dims_call(expr)
        return False

    def _has_dims_call(self, call: cst.Call) -> bool:
        qualified = self._names.qualified_name(call) or ""
        if qualified in ("torch.stack", "torch.cat", "torch.concat", "torch.eye"):
            return True
        if qualified in _MASK_FUNCTIONS:
            operands = [a.value for a in call.args if a.keyword is None and not a.star]
            if qualified == "torch.isin":
                operands = operands[:1]  # one flag per element of the first
            return any(self.has_dims(o) for o in operands)
        func = call.func
        if not isinstance(func, cst.Attribute) or qualified.startswith("torch."):
            return False
        method, receiver = func.attr.value, func.value
        if method in _REDUCTIONS and method != "norm":  # `t.norm(2)`: its first argument is p
            return _later_dim(call) and self._is_tensor(receiver)
        if method == "unsqueeze":
            return self._is_tensor(receiver)
        if method in _SHAPE_KEEPING or method in _MASK_METHODS or method in ("cpu", "masked_fill"):
            return self.has_dims(receiver)
        return False

    # -- boolean tensors --------------------------------------------------------------------
    def mask(self, expr: cst.BaseExpression) -> bool:
        """`expr` is certainly a boolean tensor: a comparison of a tensor, a predicate of one
        (`isnan`, `.bool()`), `&`/`|`/`~` of masks, `.any(d)`/`.all(d)` of one, a part of one."""
        return self._masks.ask(expr, self._mask)

    def _mask(self, expr: cst.BaseExpression) -> bool:
        if isinstance(expr, cst.Comparison):
            return all(isinstance(c.operator, _VALUE_COMPARISONS) for c in expr.comparisons) and (
                self._derived(expr.left) or any(self._derived(c.comparator) for c in expr.comparisons)
            )
        if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.BitInvert):
            return self.mask(expr.expression)
        if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, _MASK_OPERATORS):
            return self.mask(expr.left) and self.mask(expr.right)
        if isinstance(expr, cst.Name):
            return self._all_bindings(expr, self._mask_binding)
        if isinstance(expr, cst.Attribute) and expr.attr.value in ("T", "mT"):
            return self.mask(expr.value)
        if isinstance(expr, cst.Subscript):
            # a part of a mask (`m[i]`, `m[:, 0]`), not a selection by another tensor
            return self.mask(expr.value) and all(_int_index(e, self._names) or _slice(e) for e in expr.slice)
        if isinstance(expr, cst.Call):
            return self._mask_call(expr)
        return False

    def _mask_call(self, call: cst.Call) -> bool:
        qualified = self._names.qualified_name(call) or ""
        if qualified in _MASK_FUNCTIONS:
            return bool(call.args) and self._is_tensor(call.args[0].value)
        if qualified in ("torch.ones_like", "torch.zeros_like") and call.args:
            return self.mask(call.args[0].value) and not any(
                a.keyword and a.keyword.value == "dtype" for a in call.args
            )
        if qualified in ("torch.stack", "torch.cat") and call.args:
            parts = call.args[0].value
            return (
                isinstance(parts, (cst.List, cst.Tuple))
                and bool(parts.elements)
                and all(not isinstance(e, cst.StarredElement) and self.mask(e.value) for e in parts.elements)
            )
        func = call.func
        if not isinstance(func, cst.Attribute) or qualified.startswith("torch."):
            return False
        method = func.attr.value
        if method in _MASK_METHODS:
            return self._is_tensor(func.value)
        if method in ("any", "all") and _dim_given(call, positional=0):
            return self._is_tensor(func.value)  # `.any(1)`: one flag per row
        if method in ("repeat", "expand", "view", "reshape", "flatten", "squeeze", "unsqueeze", "clone", "t"):
            return self.mask(func.value)
        return False

    def _mask_binding(self, binding: Binding) -> bool:
        if binding.kind in ("assign", "unpack") and isinstance(binding.node, cst.BaseExpression):
            return self.mask(binding.node)  # `j, k = (a & b).T`: rows of a mask
        return False

    # -- the host value beside a device one -----------------------------------------------------
    def host_source(self, expr: cst.BaseExpression) -> Optional[cst.BaseExpression]:
        """The Python number a 0-dim tensor was built from, with the arithmetic done on it:
        `size_t - 1` of `size_t = torch.tensor(pi.shape[2], device=d)` -> `pi.shape[2] - 1`."""
        if isinstance(expr, cst.Name):
            bindings = self._names.lookup(expr.value, expr)
            if len(bindings) != 1 or bindings[0].kind != "assign":
                return None
            value = bindings[0].node
            return self.host_source(value) if isinstance(value, cst.BaseExpression) else None
        if isinstance(expr, cst.Call):
            qualified = self._names.qualified_name(expr) or ""
            if qualified in ("torch.tensor", "torch.as_tensor", "torch.scalar_tensor") and expr.args:
                value = expr.args[0].value
                return value if _python_number(value, self._names) else None
            return None
        if isinstance(expr, cst.BinaryOperation):
            left = self.host_source(expr.left) if self.zero_dim(expr.left) else expr.left
            right = self.host_source(expr.right) if self.zero_dim(expr.right) else expr.right
            if left is None or right is None:
                return None
            return expr.with_changes(left=left, right=right)
        return None

    def _all_bindings(self, name: cst.Name, test: Callable[[Binding], bool]) -> bool:
        bindings = self._names.reaching(name)
        return bool(bindings) and all(test(b) for b in bindings)


class _Memo:
    """Answers of one question per node. A name read in a loop meets its own later binding
    (`j = torch.stack((j, k))`): the question is then assumed true (the greatest fixed point: a
    mask stays a mask round the loop), and the answers that rested on the assumption are dropped
    when the question it was made for turns out false."""

    def __init__(self) -> None:
        self.answers: dict[cst.CSTNode, bool] = {}
        self._open: set[cst.CSTNode] = set()
        self._assumed: list[cst.CSTNode] = []
        self._trail: list[cst.CSTNode] = []

    def ask(self, expr: cst.BaseExpression, compute: Callable[[cst.BaseExpression], bool]) -> bool:
        known = self.answers.get(expr)
        if known is not None:
            return known
        if expr in self._open:
            self._assumed.append(expr)
            return True
        self._open.add(expr)
        mark, assumed = len(self._trail), len(self._assumed)
        try:
            answer = compute(expr)
        finally:
            self._open.discard(expr)
        if expr in self._assumed[assumed:]:
            if not answer:
                for node in self._trail[mark:]:
                    self.answers.pop(node, None)  # they leant on an assumption now refuted
                del self._trail[mark:]
            self._assumed[assumed:] = [a for a in self._assumed[assumed:] if a is not expr]
        leaning = len(self._assumed) > assumed
        self.answers[expr] = answer
        self._trail.append(expr)
        if not leaning and not self._open:
            self._trail.clear()
        return answer


def _dim_given(call: cst.Call, positional: int) -> bool:
    """The call passes a dimension: more than `positional` positional arguments, or `dim=`/`axis=`."""
    plain = [a for a in call.args if a.keyword is None and not a.star]
    if len(plain) > positional or any(a.star for a in call.args):
        return True
    return any(a.keyword is not None and a.keyword.value in ("dim", "axis") for a in call.args)


def _later_dim(call: cst.Call) -> bool:
    """The reduction names one dimension, 1 or later, as an int literal (`t.all(1)`,
    `t.sum(dim=2)`): its input had at least two dimensions, so one is left."""
    plain = [a.value for a in call.args if a.keyword is None and not a.star]
    named = [a.value for a in call.args if a.keyword is not None and a.keyword.value in ("dim", "axis")]
    dims = (plain[:1] if plain else []) + named
    return (
        len(dims) == 1
        and not any(a.star for a in call.args)
        and isinstance(dims[0], cst.Integer)
        and dims[0].evaluated_value >= 1
    )


def _is_integer(expr: cst.BaseExpression, value: int) -> bool:
    return isinstance(expr, cst.Integer) and expr.evaluated_value == value


def _sizes(expr: cst.BaseExpression) -> bool:
    """`x.shape`, `x.shape[a:b]`, `x.size()`: a flat tuple of ints."""
    if isinstance(expr, cst.Subscript) and len(expr.slice) == 1 and _slice(expr.slice[0]):
        expr = expr.value
    if isinstance(expr, cst.Attribute):
        return expr.attr.value == "shape"
    return (
        isinstance(expr, cst.Call)
        and isinstance(expr.func, cst.Attribute)
        and expr.func.attr.value == "size"
        and not expr.args
    )


def _python_number(expr: cst.BaseExpression, names: Names) -> bool:
    """A number Python holds: a literal, a size read off a tensor (`x.shape[2]`, `x.size(0)`,
    `len(x)`), or arithmetic on those."""
    if isinstance(expr, (cst.Integer, cst.Float)):
        return True
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        return _python_number(expr.expression, names)
    if isinstance(expr, cst.BinaryOperation):
        return _python_number(expr.left, names) and _python_number(expr.right, names)
    if isinstance(expr, cst.Subscript):
        holder = expr.value
        return len(expr.slice) == 1 and (
            (isinstance(holder, cst.Attribute) and holder.attr.value == "shape")
            or (
                isinstance(holder, cst.Call)
                and isinstance(holder.func, cst.Attribute)
                and holder.func.attr.value == "size"
            )
        )
    if isinstance(expr, cst.Call):
        if isinstance(expr.func, cst.Attribute):
            return expr.func.attr.value in _SIZE_METHODS
        return names.qualified_name(expr) == "builtins.len"
    return False


def _int_index(element: cst.SubscriptElement, names: Names) -> bool:
    """An index that picks one position: an int literal, or a name a `for` over `range()` or the
    counter of `enumerate()` binds."""
    index = element.slice
    if not isinstance(index, cst.Index):
        return False
    value = index.value
    if isinstance(value, cst.UnaryOperation) and isinstance(value.operator, cst.Minus):
        value = value.expression
    if isinstance(value, cst.Integer):
        return True
    if not isinstance(value, cst.Name):
        return False
    bindings = names.lookup(value.value, value)
    return bool(bindings) and all(_counter(b, value.value, names) for b in bindings)


def _counter(binding: Binding, name: str, names: Names) -> bool:
    loop = binding.node
    if binding.kind != "for" or not isinstance(loop, cst.For) or not isinstance(loop.iter, cst.Call):
        return False
    qualified = names.qualified_name(loop.iter)
    if qualified == "builtins.range":
        return isinstance(loop.target, cst.Name)
    if qualified == "builtins.enumerate" and isinstance(loop.target, cst.Tuple) and loop.target.elements:
        first = loop.target.elements[0].value
        return isinstance(first, cst.Name) and first.value == name
    return False


def _slice(element: cst.SubscriptElement) -> bool:
    return isinstance(element.slice, cst.Slice) or (
        isinstance(element.slice, cst.Index) and isinstance(element.slice.value, cst.Ellipsis)
    )


class _Selections(cst.CSTVisitor):
    """The reads `t[mask]` under a node, in the same function (not in a nested def or lambda)."""

    def __init__(self, selects: Callable[[cst.Subscript], bool]) -> None:
        self._selects = selects
        self.found: list[cst.Subscript] = []
        self._stored: set[cst.CSTNode] = set()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        self._stored.add(node.target)  # `t[mask] = v` writes through the mask: index_put_, no sync

    def visit_Subscript(self, node: cst.Subscript) -> None:
        if node not in self._stored and self._selects(node):
            self.found.append(node)


def mask_selections(root: cst.CSTNode, selects: Callable[[cst.Subscript], bool]) -> list[cst.Subscript]:
    """Every `t[mask]` that reads under `root` (the body of a loop), in source order."""
    visitor = _Selections(selects)
    visit(root, visitor)
    return visitor.found

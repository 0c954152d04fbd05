"""Loops over configuration, not data (RULES.md, TPL201/TPL202): their trip count is a handful
fixed when the model is built (RoPE axes, feature levels, condition types, layers), so one kernel
launch or one re-grown copy per iteration costs nothing that grows with the batch.

A loop is over configuration when it walks a literal tuple or list, an attribute of `self` that is
not a tensor (`self.config.timestep_conditioning_type`, `self.layers`), the entries of a mapping
(`conditions.items()`: named kinds), or a range counted by such an attribute (`range(self.num_layers)`,
`range(len(self.blocks))`); or when its index picks an entry of a `self` attribute that is not a
tensor in the body (`self.axes_dim[i]`, `self.layers[i]`): the loop runs once per entry.

A range loop also walks configuration when its index takes channel slices: the whole batch, one
entry of axis 1 of a map with more axes (`x[:, c, ...]`, `x[:, c, :, :]`) or that axis kept
(`x[:, [c]]`, `x[:, c : c + 1]`). Axis 1 of an NC... map counts classes, channels, bands, speakers or
codebooks, and every iteration already runs over the whole batch. A plain `x[:, t]` or `x[:, t, :]`
may walk the tokens of a (B, T, D) sequence: that is data, and stays reported.
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence

import libcst as cst

from ..syntax.walker import dotted_name, visit

IsTensor = Callable[[cst.BaseExpression], bool]
_WRAPPERS = frozenset({"enumerate", "zip", "reversed", "list", "tuple", "sorted"})
_MAPPING_VIEWS = frozenset({"items", "keys", "values"})


def iterates_configuration(loop: cst.For, is_tensor: IsTensor) -> Optional[str]:
    """What configuration `loop` walks ("a literal", "self.layers", ...), or None."""
    return _configuration(loop.iter, is_tensor) or _channel_axis(loop, is_tensor)


def _channel_axis(loop: cst.For, is_tensor: IsTensor) -> Optional[str]:
    """`the channels of x` when a range loop's index takes a channel slice of a tensor `x`."""
    iterated = loop.iter
    if not (
        isinstance(iterated, cst.Call)
        and isinstance(iterated.func, cst.Name)
        and iterated.func.value == "range"
        and isinstance(loop.target, cst.Name)
    ):
        return None
    finder = _ChannelSlice(loop.target.value, is_tensor)
    visit(loop.body, finder)
    return finder.found


def indexed_configuration(body: cst.CSTNode, index: str, is_tensor: IsTensor) -> Optional[str]:
    """A `self.<attr>[index]` read in `body` whose attribute is not a tensor: `self.axes_dim[i]`."""
    finder = _IndexedAttribute(index, is_tensor)
    visit(body, finder)
    return finder.found


def _configuration(expr: cst.BaseExpression, is_tensor: IsTensor) -> Optional[str]:
    if isinstance(expr, (cst.Tuple, cst.List, cst.Set)):
        return "a literal"
    if _is_self_attribute(expr) and not is_tensor(expr):
        return dotted_name(expr)
    if not isinstance(expr, cst.Call):
        return None
    func = expr.func
    if isinstance(func, cst.Attribute) and func.attr.value in _MAPPING_VIEWS and not expr.args:
        return f"the entries of {dotted_name(func.value) or 'a mapping'}"
    name = func.value if isinstance(func, cst.Name) else None
    if name in _WRAPPERS and expr.args:
        return _configuration(expr.args[0].value, is_tensor)
    if name == "range" and len(expr.args) in (1, 2):
        stop = expr.args[-1].value
        counted = stop.args[0].value if _is_len(stop) else stop  # type: ignore[attr-defined]
        if _is_self_attribute(counted) and not is_tensor(counted):
            return dotted_name(counted)
    return None


def _is_len(expr: cst.BaseExpression) -> bool:
    return (
        isinstance(expr, cst.Call)
        and isinstance(expr.func, cst.Name)
        and expr.func.value == "len"
        and len(expr.args) == 1
    )


def _is_self_attribute(expr: cst.BaseExpression) -> bool:
    name = dotted_name(expr) if isinstance(expr, cst.Attribute) else None
    return name is not None and name.startswith("self.")


class _IndexedAttribute(cst.CSTVisitor):
    def __init__(self, index: str, is_tensor: IsTensor) -> None:
        self.index = index
        self.is_tensor = is_tensor
        self.found: Optional[str] = None

    def visit_Subscript(self, node: cst.Subscript) -> Optional[bool]:
        if self.found is None and _is_self_attribute(node.value) and not self.is_tensor(node.value):
            for element in node.slice:
                value = element.slice.value if isinstance(element.slice, cst.Index) else None
                if isinstance(value, cst.Name) and value.value == self.index:
                    self.found = f"{dotted_name(node.value)}[{self.index}]"
        return self.found is None

    def visit_FunctionDef(self, node: cst.FunctionDef) -> Optional[bool]:
        return False  # a nested function's names are its own


class _ChannelSlice(cst.CSTVisitor):
    def __init__(self, index: str, is_tensor: IsTensor) -> None:
        self.index = index
        self.is_tensor = is_tensor
        self.found: Optional[str] = None

    def visit_Subscript(self, node: cst.Subscript) -> Optional[bool]:
        if self.found is None and _takes_channel(node.slice, self.index) and self.is_tensor(node.value):
            self.found = f"the channels of {cst.Module(body=[]).code_for_node(node.value)}"
        return self.found is None

    def visit_FunctionDef(self, node: cst.FunctionDef) -> Optional[bool]:
        return False  # a nested function's names are its own


def _takes_channel(elements: Sequence[cst.SubscriptElement], index: str) -> bool:
    """`[:, c, ...]`, `[:, c, :, :]`, `[:, [c]]`, `[:, c : c + 1]` with `c` the index."""
    if len(elements) < 2 or not _whole(elements[0].slice):
        return False
    picked = elements[1].slice
    rest = [e.slice for e in elements[2:]]
    more_axes = len(rest) >= 2 or any(
        isinstance(r, cst.Index) and isinstance(r.value, cst.Ellipsis) for r in rest
    )
    if isinstance(picked, cst.Index):
        value = picked.value
        if _is_name(value, index):
            return more_axes
        return (
            isinstance(value, cst.List)
            and len(value.elements) == 1
            and _is_name(value.elements[0].value, index)
        )
    return (
        isinstance(picked, cst.Slice)
        and picked.step is None
        and picked.lower is not None
        and _is_name(picked.lower, index)
        and isinstance(picked.upper, cst.BinaryOperation)
        and isinstance(picked.upper.operator, cst.Add)
        and _is_name(picked.upper.left, index)
        and isinstance(picked.upper.right, cst.Integer)
        and picked.upper.right.value == "1"
    )


def _whole(element: cst.BaseSlice) -> bool:
    return (
        isinstance(element, cst.Slice)
        and element.lower is None
        and element.upper is None
        and element.step is None
    )


def _is_name(expr: cst.BaseExpression, name: str) -> bool:
    return isinstance(expr, cst.Name) and expr.value == name

"""Sequences of a model's own tensors: what `for p in model.parameters()` walks (RULES.md, TPL204).

A *parameter sequence* is an iterable whose elements are a module's parameters, buffers or
state-dict tensors: `m.parameters()`, `m.named_parameters()`, `m.buffers()`, `m.named_buffers()`,
`m.state_dict().values()`/`.items()`, and what is built from one: `list(...)`, `dict(...)` (or `OrderedDict(...)`),
`filter(f, ...)`, `enumerate(...)`, a comprehension over one (`[p for p in m.parameters() if
p.requires_grad]`), a `zip` that pairs one with anything, a name or `self.` attribute every
assignment binds to one; and an optimizer's parameter group's `group["params"]`, where `group`
iterates `<optimizer>.param_groups` (source `param_groups`: an optimizer's own update). Each iterable is described by the *shape* of its elements, so a loop
knows which of its targets are tensors (`for name, p in m.named_parameters()`: `p`) and a mapping
built from one knows that indexing it gives a tensor (`shadow[name].lerp_(p, w)`).
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Union

import libcst as cst

from ..syntax.walker import dotted_name
from .hotpath import HotPaths
from .names import Names

# What the module method yields, and which of its elements is the tensor.
_TENSOR_METHODS = {"parameters": "parameters", "buffers": "buffers"}
_NAMED_METHODS = {"named_parameters": "parameters", "named_buffers": "buffers"}
# Builtins whose result iterates the same elements as their (first or only) iterable argument.
_SAME_ELEMENTS = frozenset(
    {"builtins.list", "builtins.tuple", "builtins.iter", "builtins.reversed", "builtins.sorted"}
)

# Mappings built from an iterable of pairs: `OrderedDict(m.named_parameters())` maps names to tensors.
_MAPPINGS = frozenset({"builtins.dict", "collections.OrderedDict"})


@dataclasses.dataclass(frozen=True)
class Tensor:
    """An element that is one of the module's tensors."""

    source: str  # "parameters" | "buffers" | "state_dict"


@dataclasses.dataclass(frozen=True)
class Other:
    """An element that is not one of them: a name, an index, an unknown zipped value."""


@dataclasses.dataclass(frozen=True)
class Group:
    """A tuple element: `(name, tensor)` of `named_parameters()`, the pairs of a `zip`."""

    parts: tuple[Element, ...]


Element = Union[Tensor, Other, Group]


@dataclasses.dataclass(frozen=True)
class ParameterSequence:
    """An iterable of a module's tensors: the shape of its elements, and whether it is a mapping
    from names to tensors (`dict(m.named_parameters())`: iterating it gives names, indexing it
    gives tensors)."""

    element: Element
    mapping: Optional[str] = None  # the source of the mapped tensors

    @property
    def sources(self) -> frozenset[str]:
        found: set[str] = {self.mapping} if self.mapping else set()
        todo: list[Element] = [self.element]
        while todo:
            element = todo.pop()
            if isinstance(element, Tensor):
                found.add(element.source)
            elif isinstance(element, Group):
                todo.extend(element.parts)
        return frozenset(found)


class ParameterSequences:
    def __init__(self, names: Names, hot: HotPaths) -> None:
        self._names = names
        self._hot = hot
        self._memo: dict[cst.CSTNode, Optional[ParameterSequence]] = {}
        self._in_progress: set[cst.CSTNode] = set()

    def of(self, expr: cst.BaseExpression) -> Optional[ParameterSequence]:
        """The parameter sequence `expr` is, or None."""
        if expr in self._memo:
            return self._memo[expr]
        if expr in self._in_progress:
            return None  # `params = list(params)`
        self._in_progress.add(expr)
        try:
            found = self._of(expr)
        finally:
            self._in_progress.discard(expr)
        self._memo[expr] = found
        return found

    def tensor_targets(self, loop: Union[cst.For, cst.CompFor]) -> dict[str, str]:
        """The names `loop` binds to a module's tensors, with where each comes from."""
        sequence = self.of(loop.iter)
        if sequence is None:
            return {}
        found: dict[str, str] = {}
        _match(loop.target, sequence.element, found)
        return found

    def is_tensor_mapping(self, expr: cst.BaseExpression) -> bool:
        """Indexing `expr` gives one of a module's tensors (`shadow = dict(m.named_buffers())`)."""
        sequence = self.of(expr)
        return sequence is not None and sequence.mapping is not None

    def _of(self, expr: cst.BaseExpression) -> Optional[ParameterSequence]:
        if isinstance(expr, cst.Name):
            return self._name(expr)
        if isinstance(expr, cst.Attribute) and dotted_name(expr.value) == "self":
            cls = self._hot.enclosing_class(expr)
            values = self._hot.attribute_values(cls, expr.attr.value) if cls is not None else []
            return _agreed([self.of(v) for v in values])
        if isinstance(expr, (cst.ListComp, cst.GeneratorExp, cst.SetComp)):
            return self._comprehension(expr.elt, expr.for_in)
        if isinstance(expr, cst.DictComp):
            value = self._comprehension(expr.value, expr.for_in)
            if value is not None and isinstance(value.element, Tensor):
                return ParameterSequence(Other(), mapping=value.element.source)
            return None
        if isinstance(expr, cst.Call):
            return self._call(expr)
        if isinstance(expr, cst.Subscript):
            return self._group_params(expr)
        return None

    def _group_params(self, expr: cst.Subscript) -> Optional[ParameterSequence]:
        """`group["params"]` where every binding of `group` is a loop over `<x>.param_groups`."""
        if len(expr.slice) != 1 or not isinstance(expr.slice[0].slice, cst.Index):
            return None
        key = expr.slice[0].slice.value
        if not (isinstance(key, cst.SimpleString) and key.evaluated_value == "params"):
            return None
        group = expr.value
        if not isinstance(group, cst.Name):
            return None
        bindings = self._names.lookup(group.value, group)
        if not bindings or not all(
            b.kind == "for"
            and isinstance(b.node, cst.For)
            and b.node.target is not None
            and isinstance(b.node.target, cst.Name)
            and b.node.target.value == group.value
            and isinstance(b.node.iter, cst.Attribute)
            and b.node.iter.attr.value == "param_groups"
            for b in bindings
        ):
            return None
        return ParameterSequence(Tensor("param_groups"))

    def _name(self, name: cst.Name) -> Optional[ParameterSequence]:
        bindings = self._names.lookup(name.value, name)
        values = [b.node for b in bindings if b.kind == "assign" and isinstance(b.node, cst.BaseExpression)]
        if not bindings or len(values) != len(bindings):
            return None
        return _agreed([self.of(v) for v in values])

    def _comprehension(self, element: cst.BaseExpression, for_in: cst.CompFor) -> Optional[ParameterSequence]:
        if for_in.inner_for_in is not None:
            return None
        targets = self.tensor_targets(for_in)
        if isinstance(element, cst.Attribute) and element.attr.value in ("data", "grad"):
            element = element.value
        if isinstance(element, cst.Name) and element.value in targets:
            return ParameterSequence(Tensor(targets[element.value]))
        return None

    def _call(self, call: cst.Call) -> Optional[ParameterSequence]:
        func = call.func
        positional = [a.value for a in call.args if a.keyword is None and not a.star]
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            if method in _TENSOR_METHODS:
                return ParameterSequence(Tensor(_TENSOR_METHODS[method]))
            if method in _NAMED_METHODS:
                return ParameterSequence(Group((Other(), Tensor(_NAMED_METHODS[method]))))
            if method == "state_dict" and not positional:
                return ParameterSequence(Other(), mapping="state_dict")
            if method in ("values", "items", "keys") and not call.args:
                mapped = self.of(func.value)
                if mapped is None or mapped.mapping is None:
                    return None
                tensor = Tensor(mapped.mapping)
                shapes: dict[str, Element] = {
                    "values": tensor,
                    "items": Group((Other(), tensor)),
                    "keys": Other(),
                }
                return ParameterSequence(shapes[method])
            return None
        qualified = self._names.qualified_name(call)
        if qualified in _SAME_ELEMENTS and positional:
            return self.of(positional[0])
        if qualified == "builtins.filter" and len(positional) == 2:
            return self.of(positional[1])
        if qualified in _MAPPINGS and len(positional) == 1:
            inner = self.of(positional[0])
            if inner is None:
                return None
            if inner.mapping is not None:
                return inner
            pair = inner.element
            if isinstance(pair, Group) and len(pair.parts) == 2 and isinstance(pair.parts[1], Tensor):
                return ParameterSequence(Other(), mapping=pair.parts[1].source)
            return None
        if qualified == "builtins.enumerate" and positional:
            inner = self.of(positional[0])
            return ParameterSequence(Group((Other(), inner.element))) if inner is not None else None
        if qualified == "builtins.zip" and positional and len(positional) == len(call.args):
            parts = [self.of(p) for p in positional]
            if all(p is None for p in parts):
                return None
            return ParameterSequence(Group(tuple(p.element if p is not None else Other() for p in parts)))
        return None


def _agreed(found: list[Optional[ParameterSequence]]) -> Optional[ParameterSequence]:
    """The one sequence every value is; None when any is not one, or they differ."""
    if not found or any(f is None for f in found):
        return None
    return found[0] if all(f == found[0] for f in found) else None


def _match(target: cst.BaseExpression, element: Element, found: dict[str, str]) -> None:
    if isinstance(target, cst.Name) and isinstance(element, Tensor):
        found[target.value] = element.source
    elif isinstance(target, (cst.Tuple, cst.List)) and isinstance(element, Group):
        if len(target.elements) == len(element.parts):
            for part, inner in zip(target.elements, element.parts, strict=True):
                _match(part.value, inner, found)

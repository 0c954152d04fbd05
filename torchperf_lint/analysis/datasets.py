"""Which dataset a DataLoader reads, and whether it is held in memory: a `TensorDataset`, or a
dataset the project pass found in-memory (project/datasets.py), reached through a name bound to
its construction, a name unpacked from the tuple a project function returns
(`train_set, model, opt = load_train_objs()`), or a parameter every project caller passes one for.
Tokens are spelled as the summary spells them: `Callee` and `f#i`.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from ..syntax.walker import Binding, FileFacts
from .entry import EntryFacts
from .hotpath import HotPaths
from .names import Names
from .vocabulary import TENSOR_DATASETS


class InMemoryData:
    def __init__(self, facts: FileFacts, names: Names, hot: HotPaths, entry: EntryFacts) -> None:
        self.facts = facts
        self.names = names
        self.hot = hot
        self.entry = entry

    def holds(self, dataset: cst.BaseExpression) -> bool:
        """`dataset` is certainly held in memory, on every binding that reaches it."""
        if isinstance(dataset, cst.Call):
            if self.names.qualified_name(dataset) in TENSOR_DATASETS:
                return True
            return _dotted(dataset.func) in self.entry.in_memory_datasets
        if not isinstance(dataset, cst.Name):
            return False
        bindings = self.names.lookup(dataset.value, dataset)
        return bool(bindings) and all(self._binding_holds(b, dataset) for b in bindings)

    def _binding_holds(self, binding: Binding, use: cst.Name) -> bool:
        if binding.kind == "assign":
            return isinstance(binding.node, cst.Call) and self.holds(binding.node)
        if binding.kind == "unpack":
            token = self._unpacked_token(binding.node, use.value)
            return token is not None and token in self.entry.in_memory_datasets
        if binding.kind == "param":
            function = self.facts.enclosing_function(use)
            if function is None:
                return False
            params = function.params
            if binding.node not in (*params.posonly_params, *params.params, *params.kwonly_params):
                return False  # a parameter of an enclosing function, or `*args`
            index = self.hot.function_index(function)
            return index is not None and use.value in self.entry.in_memory_params_of(index)
        return False

    def _unpacked_token(self, value: cst.CSTNode, name: str) -> Optional[str]:
        """`f#i` for `name` at position `i` of `a, b = f()`."""
        assign = self.facts.parents.get(value)
        if not isinstance(value, cst.Call) or not isinstance(assign, cst.Assign) or len(assign.targets) != 1:
            return None
        target = assign.targets[0].target
        callee = _dotted(value.func)
        if not isinstance(target, cst.Tuple) or callee is None:
            return None
        if any(isinstance(element, cst.StarredElement) for element in target.elements):
            return None
        for position, element in enumerate(target.elements):
            if isinstance(element.value, cst.Name) and element.value.value == name:
                return f"{callee}#{position}"
        return None


def _dotted(expr: cst.BaseExpression) -> Optional[str]:
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute):
        head = _dotted(expr.value)
        return f"{head}.{expr.attr.value}" if head is not None else None
    return None

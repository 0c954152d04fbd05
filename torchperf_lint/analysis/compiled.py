"""What `torch.compile` reaches in a file, and whether the file decides about compiling at all.

Compiled code: a function decorated with `torch.compile` (bare or called), a function of the file
handed to `torch.compile(f)`, the `forward` of a class of the file whose instance is compiled
(`torch.compile(Net())`, `model = Net(); model = torch.compile(model)`, `model.compile()`), and
the functions of the file those call, to a fixed point. A host sync there is also a graph break:
Dynamo stops the graph at it, runs it eagerly and starts a new one.

A decision about compiling is any of the above, or an option that turns it on or off: a
`compile=`/`torch_compile=` keyword (a trainer's option), a name or attribute assigned that says
`compile` (nanoGPT's `compile = True`), a `--compile` command-line flag.
"""

from __future__ import annotations

import functools
import re
from typing import Iterator

import libcst as cst

from ..syntax.walker import FileFacts
from .hotpath import HotPaths
from .names import Names

_COMPILE = "torch.compile"
_OPTION = re.compile(r"(^|_)compile(d)?($|_)", re.IGNORECASE)
_FLAG = re.compile(r"""^['"]--?[\w-]*compile[\w-]*['"]$""")


class Compiled:
    def __init__(self, facts: FileFacts, names: Names, hot: HotPaths) -> None:
        self._facts = facts
        self._names = names
        self._hot = hot

    def _is_compile(self, expr: cst.BaseExpression) -> bool:
        target = expr.func if isinstance(expr, cst.Call) else expr
        return self._names.qualified_name(target) == _COMPILE

    @functools.cached_property
    def functions(self) -> frozenset[cst.FunctionDef]:
        """The functions of the file that run compiled."""
        found: set[cst.FunctionDef] = set()
        for function in self._facts.functions:
            if any(self._is_compile(d.decorator) for d in function.decorators):
                found.add(function)
        for call in self._compile_calls():
            for target in self._compiled_targets(call):
                found.update(self._entries(target))
        queue = list(found)
        while queue:
            function = queue.pop()
            info = self._facts.functions.get(function)
            for call in info.calls if info is not None else ():
                for callee in self._hot.resolve_call(call):
                    if callee not in found:
                        found.add(callee)
                        queue.append(callee)
        return frozenset(found)

    def _compile_calls(self) -> Iterator[cst.Call]:
        for call in self._facts.calls:
            if self._is_compile(call) and call.args:
                yield call
        for call in self._facts.method_calls.get("compile", ()):
            assert isinstance(call.func, cst.Attribute)
            if not call.args and self._names.qualified_name(call.func.value) is None:
                yield call  # `model.compile()`: nn.Module.compile, not `re.compile(...)`

    @staticmethod
    def _compiled_targets(call: cst.Call) -> list[cst.BaseExpression]:
        if isinstance(call.func, cst.Attribute) and call.func.attr.value == "compile" and not call.args:
            return [call.func.value]
        return [call.args[0].value]

    def _entries(self, target: cst.BaseExpression) -> list[cst.FunctionDef]:
        """The functions of the file that compiling `target` compiles: the function it names, or
        the forward of the instance it is (directly, or through the name's bindings)."""
        values: list[cst.BaseExpression] = [target]
        if isinstance(target, cst.Name):
            for binding in self._names.lookup(target.value, target):
                if binding.kind == "def" and isinstance(binding.node, cst.FunctionDef):
                    return [binding.node]
                if binding.kind == "assign" and isinstance(binding.node, cst.BaseExpression):
                    values.append(binding.node)
        found: list[cst.FunctionDef] = []
        for value in values:
            for cls in self._hot.instance_classes(value):
                forward = self._hot.find_method(cls, "forward")
                if forward is not None:
                    found.append(forward)
        return found

    def holds(self, node: cst.CSTNode) -> bool:
        """`node` runs inside compiled code."""
        if not self.functions:
            return False
        return any(a in self.functions for a in self._facts.ancestors(node) if isinstance(a, cst.FunctionDef))

    @functools.cached_property
    def decided(self) -> bool:
        """The file compiles something, or keeps an option that decides whether to."""
        if self.functions or any(True for _ in self._compile_calls()):
            return True
        for call in self._facts.calls:
            if self._is_compile(call):
                return True
            for arg in call.args:
                if arg.keyword is not None and _OPTION.search(arg.keyword.value):
                    return True
                if isinstance(arg.value, cst.SimpleString) and _FLAG.match(arg.value.value):
                    return True
        for scope in self._facts.scope_of.values():
            if any(_OPTION.search(name) for name in scope.bindings):
                return True
        return any(_OPTION.search(attr) for cls in self._facts.classes.values() for attr in cls.attributes)

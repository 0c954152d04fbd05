"""Which model objects are wrapped for data parallelism (DDP, FSDP): their every `backward()`
all-reduces (or reduce-scatters) the gradients unless the code says not to.

A name or attribute holds a wrapped model when one of the values it may be given is the wrapper's
call: a binding of the name in scope (any of them: `if args.distributed: model = DDP(model)`), a
value `self.<attr>` is given anywhere in its class, what a function of this file it is bound to
returns (`model = wrap(model)` with `return DDP(...)`) or one of another module does (the project
pass's `EntryFacts.wrapper_builders`: yolov5's `smart_DDP`), or what the callers of the function
whose parameter it is pass: in this file through their arguments, from other modules through the
project pass (`EntryFacts.wrapped_parameters`). FSDP2's `fully_shard(model)` wraps in place: a
call of it on the name counts as a binding. A union counts: the waste happens in the run that
wraps, and the message says which binding it assumed.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import libcst as cst

from ..syntax.walker import FileFacts, all_params, dotted_name, returned_values
from .entry import EntryFacts
from .hotpath import HotPaths
from .names import Names
from .vocabulary import FULLY_SHARD, GRADIENT_SYNC_WRAPPERS, MODULE_CHAIN_METHODS

_DEPTH = 4  # names handed through more bindings than this are not followed


@dataclasses.dataclass(frozen=True)
class Wrapped:
    wrapper: str  # the wrapper's qualified name
    call: Optional[cst.Call]  # the wrapping call in this file; None when a caller elsewhere wraps
    receiver: str = ""  # then, the function whose parameter receives the wrapped model

    @property
    def sharded_in_place(self) -> bool:
        """FSDP2: no `no_sync()`; gradient sync is switched with `set_requires_gradient_sync`."""
        return self.wrapper in FULLY_SHARD

    @property
    def short_name(self) -> str:
        if self.sharded_in_place:
            return "module sharded by fully_shard"
        return self.wrapper.rsplit(".", 1)[-1]


class Wrappers:
    def __init__(self, facts: FileFacts, names: Names, hot: HotPaths, entry: EntryFacts) -> None:
        self._facts = facts
        self._names = names
        self._hot = hot
        self._entry = entry

    def of(self, expr: cst.BaseExpression, depth: int = 0) -> Optional[Wrapped]:
        """The wrapper one of `expr`'s possible values comes from, or None."""
        if depth > _DEPTH:
            return None
        expr = _unchained(expr)
        if isinstance(expr, cst.Call):
            return self._built(expr, depth)
        if isinstance(expr, cst.Name):
            return self._of_name(expr, depth)
        if (
            isinstance(expr, cst.Attribute)
            and isinstance(expr.value, cst.Name)
            and expr.value.value == "self"
        ):
            cls = self._hot.enclosing_class(expr)
            if cls is None:
                return None
            for value in self._hot.attribute_values(cls, expr.attr.value):
                found = self.of(value, depth + 1)
                if found is not None:
                    return found
        return None

    def _built(self, call: cst.Call, depth: int) -> Optional[Wrapped]:
        qualified = self._names.qualified_name(call)
        if qualified in GRADIENT_SYNC_WRAPPERS:
            return Wrapped(qualified, call)
        built = dict(self._entry.wrapper_builders).get(dotted_name(call.func) or "")
        if built is not None:
            return Wrapped(built, call)  # a project helper of another module returns it (yolov5's smart_DDP)
        for function in self._hot.resolve_call(call):
            for value in returned_values(function)[0]:
                found = self.of(value, depth + 1)
                if found is not None:
                    return found
        return None

    def _of_name(self, name: cst.Name, depth: int) -> Optional[Wrapped]:
        bindings = self._names.lookup(name.value, name)
        for binding in bindings:
            if binding.kind == "assign" and isinstance(binding.node, cst.BaseExpression):
                found = self.of(binding.node, depth + 1)
                if found is not None:
                    return found
            if binding.kind == "param" and isinstance(binding.node, cst.Param):
                found = self._passed(binding.node, depth)
                if found is not None:
                    return found
        if bindings:
            return self._sharded_in_place(name, bindings[0].scope.node)
        return None

    def _sharded_in_place(self, name: cst.Name, scope: cst.CSTNode) -> Optional[Wrapped]:
        """`fully_shard(model)` as a statement of the scope that binds `model`."""
        for call in self._facts.calls:
            if (
                call.args
                and isinstance(call.args[0].value, cst.Name)
                and call.args[0].value.value == name.value
                and self._names.qualified_name(call) in FULLY_SHARD
                and self._names.scope_at(call).node is scope
            ):
                return Wrapped(str(self._names.qualified_name(call)), call)
        return None

    def _passed(self, param: cst.Param, depth: int) -> Optional[Wrapped]:
        """What the callers of the function that declares `param` pass for it."""
        function = self._facts.enclosing_function(param)
        if function is None:
            return None
        params = all_params(function.params)
        position = next(i for i, p in enumerate(params) if p is param)
        info = self._facts.functions.get(function)
        is_method = info is not None and info.cls is not None and params[0].name.value == "self"
        for call in self._hot.call_sites(function):
            value = _argument(call, param.name.value, position - (1 if is_method else 0))
            found = self.of(value, depth + 1) if value is not None else None
            if found is not None:
                return found
        index = self._hot.function_index(function)
        wrapper = self._entry.wrapped_params_of(index).get(param.name.value) if index is not None else None
        return Wrapped(wrapper, None, function.name.value) if wrapper is not None else None


def _argument(call: cst.Call, keyword: str, position: int) -> Optional[cst.BaseExpression]:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == keyword:
            return arg.value
    positional = [arg for arg in call.args if arg.keyword is None]
    if any(arg.star for arg in positional[: position + 1]) or not 0 <= position < len(positional):
        return None
    return positional[position].value


def _unchained(expr: cst.BaseExpression) -> cst.BaseExpression:
    """`DDP(model).cuda()` is still the wrapper."""
    while (
        isinstance(expr, cst.Call)
        and isinstance(expr.func, cst.Attribute)
        and expr.func.attr.value in MODULE_CHAIN_METHODS
    ):
        expr = expr.func.value
    return expr

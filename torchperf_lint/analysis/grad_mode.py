"""Where autograd is off: code under `torch.no_grad()`, `torch.inference_mode()` or
`torch.set_grad_enabled(False)`, as a `with` block, a decorator of an enclosing function, a
`torch.set_grad_enabled(False)` statement earlier in the same function, or in a function whose
every call site in the file (or, as the project pass found, in the project) is itself in such code. `with torch.enable_grad():` turns it back on.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from ..syntax.walker import FileFacts, dotted_name
from .hotpath import HotPaths
from .names import Names
from .vocabulary import NO_GRAD_CONTEXTS

_DISABLING = NO_GRAD_CONTEXTS
_ENABLING = frozenset(
    {"torch.enable_grad", "torch.autograd.enable_grad", "torch.autograd.grad_mode.enable_grad"}
)
_SWITCHES = frozenset(
    {"torch.set_grad_enabled", "torch.autograd.set_grad_enabled", "torch.autograd.grad_mode.set_grad_enabled"}
)

# Moves and casts that keep a tensor's graph: `x.cpu().numpy()` raises where `x.numpy()` would.
_GRAPH_KEEPING_MOVES = frozenset({"cpu", "to", "double", "float", "half", "contiguous", "clone"})


def _parameter_loop_setting(loop: cst.CSTNode) -> Optional[tuple[str, bool]]:
    """(X, frozen) for `for p in X.parameters():` whose body sets `p.requires_grad` to a
    constant in a statement of its own (not under a condition that picks some parameters)."""
    if not isinstance(loop, cst.For) or not isinstance(loop.target, cst.Name):
        return None
    source = loop.iter
    if not (isinstance(source, cst.Call) and isinstance(source.func, cst.Attribute)) or source.args:
        return None
    owner = dotted_name(source.func.value)
    if source.func.attr.value != "parameters" or owner is None:
        return None
    parameter = loop.target.value
    body = loop.body.body if isinstance(loop.body, cst.IndentedBlock) else ()
    for line in body:
        for statement in line.body if isinstance(line, cst.SimpleStatementLine) else ():
            if isinstance(statement, cst.Assign) and len(statement.targets) == 1:
                target = statement.targets[0].target
                if dotted_name(target) == f"{parameter}.requires_grad":
                    for flag in ("False", "True"):
                        if _is_constant(statement.value, flag):
                            return owner, flag == "False"
            if isinstance(statement, cst.Expr) and isinstance(statement.value, cst.Call):
                call = statement.value
                if dotted_name(call.func) == f"{parameter}.requires_grad_":
                    return owner, bool(call.args) and _is_constant(call.args[0].value, "False")
    return None


def _is_constant(expr: cst.BaseExpression, value: str) -> bool:
    return isinstance(expr, cst.Name) and expr.value == value


class GradMode:
    def __init__(self, facts: FileFacts, names: Names, hot: HotPaths) -> None:
        self._facts = facts
        self._names = names
        self._hot = hot
        self._memo: dict[cst.CSTNode, Optional[cst.CSTNode]] = {}
        self._callers: Optional[dict[cst.FunctionDef, list[cst.Call]]] = None
        self._in_progress: set[cst.FunctionDef] = set()
        self._frozen: Optional[dict[str, cst.CSTNode]] = None

    def _switch(self, expr: cst.BaseExpression) -> Optional[bool]:
        """False for an expression that turns autograd off (`torch.no_grad()`, `torch.no_grad`,
        `torch.inference_mode()`, `torch.set_grad_enabled(False)`), True for one that turns it
        on, None for anything else."""
        written = dotted_name(expr.func if isinstance(expr, cst.Call) else expr)
        if written is not None and written in self._hot.entry.no_grad_callables:
            return False  # a decorator or context manager of the project that enters no_grad
        qualified = self._names.qualified_name(expr)
        if qualified in _DISABLING:
            if isinstance(expr, cst.Call) and any(_is_constant(a.value, "False") for a in expr.args):
                return None  # inference_mode(False)
            return False
        if qualified in _ENABLING:
            return True
        if qualified in _SWITCHES and isinstance(expr, cst.Call) and len(expr.args) == 1:
            value = expr.args[0].value
            if _is_constant(value, "False"):
                return False
            if _is_constant(value, "True"):
                return True
        return None

    def disabled_by(self, node: cst.CSTNode) -> Optional[cst.CSTNode]:
        """The `with` item, decorator, `set_grad_enabled(False)` call or no-grad call site that
        turns autograd off around `node`, or None when it is on (as far as this file shows)."""
        if node in self._memo:
            return self._memo[node]
        result: Optional[cst.CSTNode] = None
        function: Optional[cst.FunctionDef] = None
        enabled = False
        current = self._facts.parents.get(node)
        while current is not None and result is None and not enabled:
            if isinstance(current, cst.With):
                for item in current.items:
                    switch = self._switch(item.item)
                    if switch is True:
                        enabled = True  # `with torch.enable_grad():` inside a no-grad region
                    elif switch is False and result is None:
                        result = item
            elif isinstance(current, cst.FunctionDef):
                if function is None:
                    function = current
                for decorator in current.decorators:
                    if self._switch(decorator.decorator) is False:
                        result = decorator
                if result is None:
                    break  # a nested function runs when it is called, not where it is defined
            current = self._facts.parents.get(current)
        if result is None and not enabled:
            result = self._switched_off_before(node, function)
        if result is None and not enabled and function is not None:
            result = self._every_caller_disabled(function)
        self._memo[node] = result
        return result

    def frozen(self, module: cst.BaseExpression) -> Optional[cst.CSTNode]:
        """Where the file freezes every parameter of `module` (a name or attribute, matched as
        written) and never unfreezes one: `net.requires_grad_(False)`, an assignment of
        `Net().eval().requires_grad_(False)`, or a loop over `net.parameters()` setting
        `p.requires_grad = False` (or `p.requires_grad_(False)`) unconditionally. Calls of such a
        module build no graph (a frozen feature network used as a metric)."""
        key = dotted_name(module)
        if key is None:
            return None
        if self._frozen is None:
            self._frozen = self._find_frozen()
        return self._frozen.get(key)

    def _find_frozen(self) -> dict[str, cst.CSTNode]:
        frozen: dict[str, cst.CSTNode] = {}
        thawed: set[str] = set()
        for call in self._facts.method_calls.get("requires_grad_", ()):
            flag = bool(call.args) and _is_constant(call.args[0].value, "False")
            for key in self._receivers(call):
                if flag:
                    frozen.setdefault(key, call)
                else:
                    thawed.add(key)
        for loop in self._facts.loops:
            found = _parameter_loop_setting(loop)
            if found is not None:
                key, flag = found
                if flag:
                    frozen.setdefault(key, loop)
                else:
                    thawed.add(key)
        return {key: node for key, node in frozen.items() if key not in thawed}

    def _receivers(self, call: cst.Call) -> list[str]:
        """What `X.requires_grad_(...)` sets: X, and the targets of an assignment whose value
        is a chain through the call (`self.net = Net().eval().requires_grad_(False).to(d)`)."""
        keys = [dotted_name(call.func.value)]  # type: ignore[attr-defined]  # a method call
        current: cst.CSTNode = call
        parent = self._facts.parents.get(current)
        while (isinstance(parent, cst.Attribute) and parent.value is current) or (
            isinstance(parent, cst.Call) and parent.func is current
        ):
            current, parent = parent, self._facts.parents.get(parent)
        if isinstance(parent, cst.Assign) and parent.value is current:
            keys.extend(dotted_name(t.target) for t in parent.targets)
        return [key for key in keys if key is not None]

    def converted_to_numpy_after(self, value: cst.BaseExpression, node: cst.CSTNode) -> Optional[cst.Call]:
        """A later `.numpy()` of `value` (a name or attribute, through `.cpu()`-style moves and
        casts, never `.detach()`) in the same function as `node`: `numpy()` raises on a tensor
        that requires grad, so as the code runs `value` carries no graph (edm's FID statistics,
        summed from a frozen detector's features and returned as `mu.cpu().numpy()`)."""
        key = dotted_name(value)
        order = self._facts.order.get(node)
        if key is None or order is None:
            return None
        function = self._facts.enclosing_function(node)
        for call in self._facts.method_calls.get("numpy", ()):
            if (
                self._facts.order.get(call, -1) <= order
                or self._facts.enclosing_function(call) is not function
            ):
                continue
            receiver = call.func.value  # type: ignore[attr-defined]  # a method call
            while (
                isinstance(receiver, cst.Call)
                and isinstance(receiver.func, cst.Attribute)
                and receiver.func.attr.value in _GRAPH_KEEPING_MOVES
            ):
                receiver = receiver.func.value
            if dotted_name(receiver) == key:
                return call
        return None

    def _switched_off_before(
        self, node: cst.CSTNode, function: Optional[cst.FunctionDef]
    ) -> Optional[cst.Call]:
        """A `torch.set_grad_enabled(False)` statement earlier in the same function (or at module
        level for module-level code) that no `set_grad_enabled(True)` statement undoes."""
        order = self._facts.order.get(node)
        if order is None:
            return None
        last: Optional[cst.Call] = None
        for call in self._facts.method_calls.get("set_grad_enabled", ()):
            call_order = self._facts.order.get(call)
            if call_order is None or call_order >= order:
                continue
            if (
                not isinstance(self._facts.parents.get(call), cst.Expr)
                or self._facts.enclosing_function(call) is not function
            ):
                continue
            switch = self._switch(call)
            if switch is not None:
                last = None if switch else call
        return last

    def _every_caller_disabled(self, function: cst.FunctionDef) -> Optional[cst.CSTNode]:
        """The first call site when every call of `function` in this file runs without grad; the
        function itself when every call of the project does (project/grad_free.py)."""
        if self._hot.function_index(function) in self._hot.entry.grad_free_functions:
            return function
        if function in self._in_progress:
            return None
        callers = self._call_sites().get(function, [])
        if not callers:
            return None
        self._in_progress.add(function)
        try:
            for call in callers:
                if self.disabled_by(call) is None:
                    return None
        finally:
            self._in_progress.discard(function)
        return callers[0]

    def _call_sites(self) -> dict[cst.FunctionDef, list[cst.Call]]:
        if self._callers is None:
            self._callers = {}
            for call in self._facts.calls:
                for callee in self._hot.resolve_call(call):
                    self._callers.setdefault(callee, []).append(call)
        return self._callers

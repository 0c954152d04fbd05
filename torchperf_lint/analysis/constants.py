"""Which host values are the same at every step (RULES.md, TPL102): literals, and names and
attributes that hot code never rebinds.

A value is *step-invariant* when it is a literal (or a display, arithmetic or subscript of
literals, a slice with such bounds, either side of a conditional expression), a name whose
every binding that may reach the read is an import, a definition, a constant expression or an
assignment made in cold code (module level, `__init__`, the setup part of a training function),
a parameter of a cold function, a `self.<attr>` that no hot code assigns, or a pure call
(`np.array`, `np.log`, `np.append`, `list`, `range`...) of such values. Loop targets change every step; a parameter of a hot function is
step-invariant when every call of it in this file passes a step-invariant value (the schedule
handed to guided diffusion's `_extract_into_tensor(self.sqrt_alphas_cumprod, t, shape)`).

A *host array built once* is a step-invariant value that holds host data: a NumPy array, a
Python list or a CPU tensor (a torch factory or host-data constructor without `device=`), bound
at set-up (RULES.md, TPL102's host arrays), whose items no loop stores into (a rollout buffer
refilled once per phase is storage the program keeps on the host, not data built once). Copying
one to the device in hot code pays the same host-to-device copy at every call.
"""

from __future__ import annotations

from typing import Callable, Optional

import libcst as cst

from ..syntax.walker import Binding, FileFacts, dotted_name
from .hotpath import HotPaths
from .names import Names
from .vocabulary import builds_host_array, keeps_host_array, maps_a_file

_LITERALS = (cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.ConcatenatedString, cst.Ellipsis)
_CONSTANT_NAMES = frozenset({"True", "False", "None"})
# Calls whose result depends only on their arguments.
PURE_CALLS = frozenset(
    """numpy.array numpy.asarray numpy.arange numpy.linspace numpy.ones numpy.zeros numpy.full
    numpy.eye numpy.float32 numpy.float64 numpy.int64 builtins.list builtins.tuple builtins.range
    builtins.float builtins.int builtins.len builtins.sorted builtins.min builtins.max builtins.abs
    builtins.sum builtins.round numpy.log numpy.exp numpy.sqrt numpy.append numpy.concatenate
    numpy.cumprod numpy.cumsum numpy.maximum numpy.minimum numpy.clip""".split()
)
# NumPy calls that make an array of several values, fit to index with (not a scalar: `np.sum(a)`).
_INDEX_ARRAYS = frozenset(
    """numpy.arange numpy.array numpy.asarray numpy.random.permutation numpy.argsort
    numpy.flatnonzero numpy.concatenate""".split()
)


def holds_no_values(expr: cst.BaseExpression) -> bool:
    """`[]`, `()`: an empty display has no values to copy (the typed result for an empty input,
    `torch.tensor([], device=d)`), so it is neither a constant worth caching nor a host array."""
    return isinstance(expr, (cst.List, cst.Tuple)) and not expr.elements


# methods that put values into a list, dict or set in place
_FILLING_METHODS = ("append", "extend", "insert", "update", "add", "setdefault")


class HostConstants:
    def __init__(self, facts: FileFacts, names: Names, hot: HotPaths) -> None:
        self._facts = facts
        self._names = names
        self._hot = hot
        self._memo: dict[cst.CSTNode, bool] = {}
        self._in_progress: set[cst.CSTNode] = set()
        self._arrays: dict[cst.CSTNode, bool] = {}

    def is_step_invariant(self, expr: cst.BaseExpression) -> bool:
        """`expr` has the same host value at every step (see the module docstring)."""
        cached = self._memo.get(expr)
        if cached is not None:
            return cached
        if expr in self._in_progress:
            return False  # `n = n + 1` in a loop: a value that feeds on itself changes every step
        self._in_progress.add(expr)
        try:
            result = self._invariant(expr)
        finally:
            self._in_progress.discard(expr)
        self._memo[expr] = result
        return result

    def _all(self, exprs: list[cst.BaseExpression]) -> bool:
        return all(self.is_step_invariant(e) for e in exprs)

    def _invariant(self, expr: cst.BaseExpression) -> bool:
        if isinstance(expr, _LITERALS):
            return True
        if isinstance(expr, cst.Name):
            return expr.value in _CONSTANT_NAMES or self._name(expr)
        if isinstance(expr, cst.UnaryOperation):
            return self.is_step_invariant(expr.expression)
        if isinstance(expr, cst.BinaryOperation):
            return self._all([expr.left, expr.right])
        if isinstance(expr, cst.IfExp):
            return self._all([expr.test, expr.body, expr.orelse])
        if isinstance(expr, (cst.List, cst.Tuple, cst.Set)):
            return self._all([e.value for e in expr.elements])
        if isinstance(expr, cst.Dict):
            values: list[cst.BaseExpression] = []
            for element in expr.elements:
                if isinstance(element, cst.DictElement):
                    values.extend((element.key, element.value))
                else:
                    values.append(element.value)
            return self._all(values)
        if isinstance(expr, cst.Subscript):
            parts: list[cst.BaseExpression] = [expr.value]
            for index in expr.slice:
                if isinstance(index.slice, cst.Index):
                    parts.append(index.slice.value)
                elif isinstance(index.slice, cst.Slice):  # `a[1:]`: a slice with invariant bounds
                    bounds = (index.slice.lower, index.slice.upper, index.slice.step)
                    parts.extend(bound for bound in bounds if bound is not None)
                else:
                    return False
            return self._all(parts)
        if isinstance(expr, cst.Attribute):
            if isinstance(expr.value, cst.Name) and expr.value.value == "self":
                return self._self_attribute(expr)
            return self.is_step_invariant(expr.value)
        if isinstance(expr, cst.Call):
            if self._names.qualified_name(expr) not in PURE_CALLS:
                return False
            return self._all([arg.value for arg in expr.args])
        return False

    def _name(self, name: cst.Name) -> bool:
        bindings = self._names.reaching(name)
        return bool(bindings) and all(self._binding(b) for b in bindings) and not self._stored_per_step(name)

    def _stored_per_step(self, read: cst.BaseExpression) -> bool:
        """Hot code stores into the items of what `read` names (`self.buffer_obs[idx] = obs` in the
        step of a replay buffer, `aux_obs[:, part] = obs.cpu()` per rollout): its values change."""
        return self._items_stored(read, lambda store: not self._cold(store))

    def _refilled(self, read: cst.BaseExpression) -> bool:
        """A loop stores into the items of what `read` names, hot or not (cleanrl's PPG fills
        `aux_obs[:, part] = obs.cpu()` once per rollout, then trains on it): a buffer the program
        refills, which no code can build once and move."""
        return self._items_stored(read, lambda store: bool(self._hot.loops_around(store)))

    def _items_stored(self, read: cst.BaseExpression, counts: Callable[[cst.Subscript], bool]) -> bool:
        written = dotted_name(read)
        stores = self._facts.item_stores.get(written, ()) if written is not None else ()
        counted = [store for store in stores if counts(store)]
        if not counted:
            return False
        if isinstance(read, cst.Name):
            bindings = self._names.lookup(read.value, read)
            return any(b in bindings for store in counted for b in self._names.lookup(read.value, store))
        cls = self._hot.enclosing_class(read)
        return any(self._hot.enclosing_class(store) == cls for store in counted)

    def _binding(self, binding: Binding) -> bool:
        node = binding.node
        if binding.kind in ("import", "def", "class"):
            return True
        if binding.kind in ("assign", "unpack") and isinstance(node, cst.BaseExpression):
            if self._cold(node):
                return True
            return self.is_step_invariant(node) and not self._filled_later(node, binding)
        if binding.kind == "augassign" and isinstance(node, cst.AugAssign):
            return self._cold(node) or self.is_step_invariant(node.value)
        if binding.kind == "param" and isinstance(node, cst.Param):
            if self._cold(node):
                return True
            passed = self._passed(node, binding)
            return passed is not None and self._all(passed)
        return False  # loop and `with` targets take a new value every time

    def _filled_later(self, value: cst.BaseExpression, binding: Binding) -> bool:
        """`inside = []` then `inside.append(...)`: a container display bound in hot code and
        filled by a method call through the same binding holds what each call puts in it."""
        if not isinstance(value, (cst.List, cst.Dict, cst.Set)):
            return False
        for method in _FILLING_METHODS:
            for call in self._facts.method_calls.get(method, ()):
                receiver = call.func.value if isinstance(call.func, cst.Attribute) else None
                if isinstance(receiver, cst.Name) and binding in self._names.lookup(receiver.value, call):
                    return True
        return False

    def _passed(self, param: cst.Param, binding: Binding) -> Optional[list[cst.BaseExpression]]:
        """What every call of the function in this file passes for `param` (its default where a
        call leaves it out); None when there is no call or one passes it through `*`/`**`."""
        function = binding.scope.node
        if not isinstance(function, cst.FunctionDef):
            return None
        calls = self._hot.call_sites(function)
        if not calls:
            return None
        passed = []
        for call in calls:
            value = argument_for(call, function, param)
            if value is None:
                return None
            passed.append(value)
        return passed

    # -- host arrays ------------------------------------------------------------------
    def is_host_array(self, expr: cst.BaseExpression) -> bool:
        """`expr` is a host array built once (see the module docstring)."""
        return self._holds_array(expr) and self.is_step_invariant(expr) and not self._refilled(expr)

    def _holds_array(self, expr: cst.BaseExpression) -> bool:
        cached = self._arrays.get(expr)
        if cached is not None:
            return cached
        self._arrays[expr] = False  # a value built from itself is not known to be an array
        result = self._array(expr)
        self._arrays[expr] = result
        return result

    def _array(self, expr: cst.BaseExpression) -> bool:
        if isinstance(expr, (cst.List, cst.ListComp)):
            return not holds_no_values(expr)
        if isinstance(expr, (cst.Subscript, cst.UnaryOperation)):
            return self._holds_array(expr.value if isinstance(expr, cst.Subscript) else expr.expression)
        if isinstance(expr, cst.BinaryOperation):
            return self._holds_array(expr.left) or self._holds_array(expr.right)
        if isinstance(expr, cst.IfExp):
            return self._holds_array(expr.body) and self._holds_array(expr.orelse)
        if isinstance(expr, cst.Call):
            return self._array_call(expr)
        if isinstance(expr, cst.Name):
            bindings = self._names.lookup(expr.value, expr)
            return bool(bindings) and all(self._array_binding(b) for b in bindings)
        if isinstance(expr, cst.Attribute) and dotted_name(expr.value) == "self":
            cls = self._hot.enclosing_class(expr)
            writes = [] if cls is None else self._hot.attribute_values(cls, expr.attr.value)
            written = [w for w in writes if not (isinstance(w, cst.Name) and w.value == "None")]
            return bool(written) and all(self._holds_array(w) for w in written)
        return False

    def _array_call(self, call: cst.Call) -> bool:
        qualified = self._names.qualified_name(call) or ""
        if qualified.startswith(("numpy.", "torch.", "builtins.")):
            names_device = any(a.keyword is not None and a.keyword.value == "device" for a in call.args)
            return builds_host_array(qualified, names_device)
        written = dotted_name(call.func)
        if written is not None and written in self._hot.entry.host_data_builders:
            return True  # a project function whose every return is host data (`corpus.get_data(path)`)
        func = call.func
        if isinstance(func, cst.Attribute) and not qualified:
            return keeps_host_array(func.attr.value) and self._holds_array(func.value)
        return False

    def reads_a_file_map(self, expr: cst.BaseExpression, seen: frozenset[cst.CSTNode] = frozenset()) -> bool:
        """`expr` may hold a memory-mapped file or a view of one (`np.memmap(path)[a:b]`,
        `torch.from_numpy(np.load(path, mmap_mode="r"))`): data read from disk as it is used, which
        need not fit in memory, let alone on a device."""
        if isinstance(expr, cst.Subscript):
            return self.reads_a_file_map(expr.value, seen)
        if isinstance(expr, cst.Call):
            qualified = self._names.qualified_name(expr) or ""
            keywords = [a.keyword.value for a in expr.args if a.keyword is not None]
            if maps_a_file(qualified, keywords):
                return True
            if isinstance(expr.func, cst.Attribute) and not qualified:  # `tokens.astype(np.int64)`
                return self.reads_a_file_map(expr.func.value, seen)
            first = expr.args[0] if expr.args else None  # `torch.from_numpy(tokens)`
            return first is not None and first.keyword is None and self.reads_a_file_map(first.value, seen)
        if isinstance(expr, cst.Name) and expr not in seen:
            return any(
                b.kind == "assign"
                and isinstance(b.node, cst.BaseExpression)
                and self.reads_a_file_map(b.node, seen | {expr})
                for b in self._names.lookup(expr.value, expr)
            )
        if isinstance(expr, cst.Attribute) and dotted_name(expr.value) == "self":
            cls = self._hot.enclosing_class(expr)
            writes = [] if cls is None else self._hot.attribute_values(cls, expr.attr.value)
            return any(w not in seen and self.reads_a_file_map(w, seen | {w}) for w in writes)
        return False

    def _array_binding(self, binding: Binding) -> bool:
        node = binding.node
        if binding.kind == "assign" and isinstance(node, cst.BaseExpression):
            return self._holds_array(node)
        if binding.kind == "unpack" and isinstance(node, cst.BaseExpression):
            return self._unpacks_arrays(node)
        if binding.kind == "param" and isinstance(node, cst.Param):
            passed = self._passed(node, binding)
            return passed is not None and all(self._holds_array(p) for p in passed)
        return False

    def _unpacks_arrays(self, value: cst.BaseExpression) -> bool:
        """Every element an unpacking of `value` may bind holds an array: a tuple or list display
        of arrays, or one picked from a dict display of such (DiT's `model_variance,
        model_log_variance = {FIXED_LARGE: (..., ...), FIXED_SMALL: (..., ...)}[self.model_var_type]`)."""
        if isinstance(value, (cst.Tuple, cst.List)):
            elements = [e.value for e in value.elements]
            return bool(elements) and all(self._holds_array(e) for e in elements)
        if isinstance(value, cst.Subscript) and isinstance(value.value, cst.Dict):
            entries = [e.value for e in value.value.elements if isinstance(e, cst.DictElement)]
            return len(entries) == len(value.value.elements) > 0 and all(
                self._unpacks_arrays(e) for e in entries
            )
        return False

    def is_index_array(self, expr: cst.BaseExpression, seen: frozenset[cst.CSTNode] = frozenset()) -> bool:
        """`expr` is a NumPy array of several values: made by a NumPy call (`np.arange(n)`,
        `np.random.permutation(n)`), a slice of one (`inds[start:end]`), or a name every binding of
        which is one of these. A tensor indexed with it gets a copy of it, made on the host."""
        if isinstance(expr, cst.Subscript):
            sliced = all(isinstance(element.slice, cst.Slice) for element in expr.slice)
            return sliced and self.is_index_array(expr.value, seen)
        if isinstance(expr, cst.Call):
            return self._names.qualified_name(expr) in _INDEX_ARRAYS
        if isinstance(expr, cst.Name) and expr not in seen:
            bindings = self._names.lookup(expr.value, expr)
            return bool(bindings) and all(
                b.kind == "assign"
                and isinstance(b.node, cst.BaseExpression)
                and self.is_index_array(b.node, seen | {expr})
                for b in bindings
            )
        return False

    def _cold(self, node: cst.CSTNode) -> bool:
        return self._hot.reason(node) is None

    def _self_attribute(self, expr: cst.Attribute) -> bool:
        """`self.<attr>` set somewhere in the class, and never in hot code."""
        cls = self._hot.enclosing_class(expr)
        if cls is None:
            return False
        attr = expr.attr.value
        writes = self._hot.attribute_values(cls, attr)
        in_body = self._class_body_binding(cls.node, attr)
        if not writes and in_body is None:
            return False
        return all(self._cold(value) for value in writes) and not self._stored_per_step(expr)

    def _class_body_binding(self, cls: cst.ClassDef, attr: str) -> Optional[list[Binding]]:
        scope = self._facts.scope_of.get(cls)
        if scope is None or attr not in scope.bindings:
            return None
        return scope.bindings[attr]


def argument_for(call: cst.Call, function: cst.FunctionDef, param: cst.Param) -> Optional[cst.BaseExpression]:
    """The value `call` passes to `function`'s `param`: by keyword, by position (past `self` when
    the call goes through an instance or `self.`), else the parameter's default."""
    name = param.name.value
    for arg in call.args:
        if arg.star:
            return None
        if arg.keyword is not None and arg.keyword.value == name:
            return arg.value
    positional = [*function.params.posonly_params, *function.params.params]
    if param in positional:
        index = positional.index(param)
        if isinstance(call.func, cst.Attribute) and positional[:1] and positional[0].name.value == "self":
            index -= 1
        given = [arg.value for arg in call.args if arg.keyword is None]
        if 0 <= index < len(given):
            return given[index]
    return param.default

"""Where an object built by a call is iterated, and whether that iteration runs again and again.

A DataLoader's worker processes start each time a `for` loop begins iterating it; when that loop
sits inside another loop (an epoch loop), they start over on every pass. The object is followed
through the name or `self.<attr>` the call is assigned to, through `enumerate`/`tqdm`/`zip`-style
wrappers, and one call deep into a function of the same file that receives it as an argument or
reads the same `self.<attr>`. The repeating loop may be around the iterating loop or around a call
of the function that holds it. A loop that also holds the constructing call does not count: the
object is rebuilt on each of its passes anyway.

Also here: whether a loop walks chunks of indices, the rows of a permutation or range grouped k
at a time (`torch.randperm(n).view(-1, k)`): each iteration takes a sub-batch, as `range(0, n, k)`
or `.split(k)` would give it (lightly's W-MSE whitens each sub-batch on purpose).

And whether a loop builds a ragged list, one entry per iteration whose size depends on the
data (`nonzero`, `unique`, `masked_select`), returned as a list (a detector's keypoints per
image). Such a loop is the output's shape, not a batch waiting to be vectorised; one that
concatenates the pieces after the loop is not ragged.
"""

from __future__ import annotations

import dataclasses

import libcst as cst

from ..syntax.walker import FileFacts, Loop, dotted_name, returned_values, visit
from .hotpath import HotPaths
from .names import Names
from .vocabulary import ITERATION_WRAPPERS

Target = cst.Name | cst.Attribute


@dataclasses.dataclass(frozen=True)
class RepeatedPass:
    """`loop` iterates the object; `outer` makes that loop start again and again."""

    target: str  # how the object is spelled where it is bound: `train_loader`, `self.loader`
    loop: cst.For
    outer: Loop


class Iterations:
    def __init__(self, facts: FileFacts, names: Names, hot: HotPaths) -> None:
        self._facts = facts
        self._names = names
        self._hot = hot

    def bound_target(self, call: cst.Call) -> Target | None:
        """The name or `self.<attr>` that `target = call` assigns, if that is all the statement does."""
        statement = self._facts.parents.get(call)
        if isinstance(statement, cst.Assign) and len(statement.targets) == 1:
            target = statement.targets[0].target
        elif isinstance(statement, cst.AnnAssign):
            target = statement.target
        else:
            return None
        if isinstance(target, cst.Name):
            return target
        if isinstance(target, cst.Attribute) and _is_self(target.value):
            return target
        return None

    def repeated_pass(self, call: cst.Call) -> RepeatedPass | None:
        """The first loop over the object `call` builds that starts over inside another loop."""
        target = self.bound_target(call)
        if target is None:
            return None
        spelled = dotted_name(target) or ""
        for loop in self._facts.loops:
            if not isinstance(loop, cst.For):
                continue
            for iterated in _iterated(loop.iter):
                if self._refers_to(iterated, call, target):
                    outer = self._repeating_loop(loop, call, site=None)
                    if outer is not None:
                        return RepeatedPass(spelled, loop, outer)
        for site, parameter_loops in self._passed_to_functions(call, target):
            for loop in parameter_loops:
                outer = self._repeating_loop(loop, call, site)
                if outer is not None:
                    return RepeatedPass(spelled, loop, outer)
        return None

    # -- references -------------------------------------------------------------------------
    def _refers_to(self, expr: cst.BaseExpression, call: cst.Call, target: Target) -> bool:
        """`expr` reads the object that `target = call` stored."""
        if isinstance(target, cst.Name):
            return (
                isinstance(expr, cst.Name)
                and expr.value == target.value
                and any(b.kind == "assign" and b.node is call for b in self._names.lookup(expr.value, expr))
            )
        if not (
            isinstance(expr, cst.Attribute)
            and isinstance(expr.value, cst.Name)
            and expr.value.value == "self"
            and expr.attr.value == target.attr.value
        ):
            return False
        cls = self._hot.enclosing_class(expr)
        return cls is not None and any(v is call for v in self._hot.attribute_values(cls, target.attr.value))

    def _passed_to_functions(self, call: cst.Call, target: Target) -> list[tuple[cst.Call, list[cst.For]]]:
        """(call site, loops over the receiving parameter) for in-file functions handed the object."""
        found: list[tuple[cst.Call, list[cst.For]]] = []
        for site in self._facts.calls:
            for position, arg in enumerate(site.args):
                if arg.star or not self._refers_to(arg.value, call, target):
                    continue
                for function in self._hot.resolve_call(site):
                    parameter = self._parameter(function, site, position, arg)
                    if parameter is not None:
                        found.append((site, self._loops_over_parameter(function, parameter)))
        return found

    def _parameter(
        self, function: cst.FunctionDef, site: cst.Call, position: int, arg: cst.Arg
    ) -> cst.Param | None:
        params = [*function.params.posonly_params, *function.params.params]
        if arg.keyword is not None:
            every = [*params, *function.params.kwonly_params]
            return next((p for p in every if p.name.value == arg.keyword.value), None)
        info = self._facts.functions.get(function)
        bound = info is not None and info.cls is not None and isinstance(site.func, cst.Attribute)
        static = any(dotted_name(d.decorator) == "staticmethod" for d in function.decorators)
        if bound and not static:
            params = params[1:]
        positional = sum(1 for a in site.args[:position] if a.keyword is None)
        return params[positional] if positional < len(params) else None

    def _loops_over_parameter(self, function: cst.FunctionDef, parameter: cst.Param) -> list[cst.For]:
        loops: list[cst.For] = []
        for loop in self._facts.loops:
            if not isinstance(loop, cst.For) or self._facts.enclosing_function(loop) is not function:
                continue
            for iterated in _iterated(loop.iter):
                if isinstance(iterated, cst.Name) and iterated.value == parameter.name.value:
                    bindings = self._names.lookup(iterated.value, iterated)
                    if any(b.kind == "param" and b.node is parameter for b in bindings):
                        loops.append(loop)
        return loops

    # -- repetition -------------------------------------------------------------------------
    def _repeating_loop(self, loop: cst.For, call: cst.Call, site: cst.Call | None) -> Loop | None:
        """A loop that starts `loop` over and over without rebuilding the object: around `loop` in
        its function, else around `site` (the given call of that function, or any call of it)."""
        rebuilt = set(self._hot.loops_around(call))
        for outer in self._hot.loops_around(loop):
            if outer not in rebuilt:
                return outer
        function = self._facts.enclosing_function(loop)
        if function is None or self._facts.enclosing_function(call) is function:
            return None  # each call of the function builds the object again
        sites = [site] if site is not None else self._calls_of(function)
        for caller in sites:
            for outer in self._hot.loops_around(caller):
                if outer not in rebuilt:
                    return outer
        return None

    def _calls_of(self, function: cst.FunctionDef) -> list[cst.Call]:
        name = function.name.value
        return [
            c
            for c in self._facts.calls
            if (dotted_name(c.func) or "").split(".")[-1] == name and function in self._hot.resolve_call(c)
        ]


def _is_self(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "self"


def _iterated(expr: cst.BaseExpression) -> list[cst.BaseExpression]:
    """What a `for` loop over `expr` iterates: `expr`, and the positional arguments of wrappers."""
    found: list[cst.BaseExpression] = []
    todo = [expr]
    while todo:
        current = todo.pop()
        found.append(current)
        if (
            isinstance(current, cst.Call)
            and (dotted_name(current.func) or "").split(".")[-1] in ITERATION_WRAPPERS
        ):
            todo.extend(arg.value for arg in current.args if arg.keyword is None and not arg.star)
    return found


# Calls whose result has a size read from the data.
_DATA_SIZED = frozenset({"nonzero", "argwhere", "masked_select", "unique", "unique_consecutive"})


def ragged_list(loop: cst.For, function: cst.FunctionDef | None) -> str | None:
    """The list that `loop` appends data-sized results to and `function` returns as a list."""
    if function is None:
        return None
    finder = _Appends()
    visit(loop.body, finder)
    if not finder.data_sized:
        return None
    returned = _returned_names(function)
    return next((name for name in finder.appended if name in returned), None)


class _Appends(cst.CSTVisitor):
    def __init__(self) -> None:
        self.appended: list[str] = []
        self.data_sized = False

    def visit_Call(self, node: cst.Call) -> None:
        name = (dotted_name(node.func) or "").split(".")[-1]
        if isinstance(node.func, cst.Attribute):
            name = node.func.attr.value  # also on a call's result: `(x > t).nonzero()`
            if name == "append" and isinstance(node.func.value, cst.Name):
                self.appended.append(node.func.value.value)
        if name in _DATA_SIZED:
            self.data_sized = True

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False


def _returned_names(function: cst.FunctionDef) -> set[str]:
    """The names `function`'s own body returns, alone or as elements of a returned tuple."""
    names: set[str] = set()
    for value in returned_values(function)[0]:
        values = [e.value for e in value.elements] if isinstance(value, cst.Tuple) else [value]
        names.update(v.value for v in values if isinstance(v, cst.Name))
    return names


_INDEX_BUILDERS = frozenset({"torch.randperm", "torch.arange"})
_REGROUPS = frozenset({"view", "reshape"})


def index_chunks(expr: cst.BaseExpression, names: Names) -> bool:
    """`expr` is a permutation or range of indices grouped into rows of k, k not 1
    (`torch.randperm(n).view(-1, k)`), or a name bound only to one: each row is one chunk."""
    if isinstance(expr, cst.Name):
        bindings = names.reaching(expr)
        return bool(bindings) and all(
            b.kind == "assign" and isinstance(b.node, cst.Call) and index_chunks(b.node, names)
            for b in bindings
        )
    if not (
        isinstance(expr, cst.Call)
        and isinstance(expr.func, cst.Attribute)
        and expr.func.attr.value in _REGROUPS
        and len(expr.args) == 2
        and all(a.keyword is None and not a.star for a in expr.args)
    ):
        return False
    rows, width = (a.value for a in expr.args)
    built = expr.func.value
    return (
        _is_minus_one(rows)
        and not (isinstance(width, cst.Integer) and width.evaluated_value == 1)
        and isinstance(built, cst.Call)
        and names.qualified_name(built) in _INDEX_BUILDERS
    )


def _is_minus_one(expr: cst.BaseExpression) -> bool:
    return (
        isinstance(expr, cst.UnaryOperation)
        and isinstance(expr.operator, cst.Minus)
        and isinstance(expr.expression, cst.Integer)
        and expr.expression.evaluated_value == 1
    )

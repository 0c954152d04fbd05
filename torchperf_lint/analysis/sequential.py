"""Loop-carried dependences: is a loop sequential by nature?

A loop is *sequential* when one iteration needs what an earlier one computed: a name (or an
attribute chain such as `self.hidden`) assigned in the body is read by the next iteration before
the body assigns it again (`h = cell(x[t], h)`, `tok = model(tok).argmax(-1)`), or a container is
read elsewhere than where it is written (`h[t + 1] = f(h[t])`, `toks.append(model(toks[-1]))`).
A call that receives a cache of empty slots (analysis/caches.py: `feat_cache=self._feat_map`, a
`[None] * n` list the callee fills) updates it for the next iteration the same way. Such loops
cannot be replaced by one batched tensor op.

Two carried patterns do *not* make a loop sequential:

- appending to a list (`rows.append(f(x[i]))`) that the body never reads: the appends are
  independent of each other;
- a *reduction*: the only statement that touches the name updates it with an associative
  operator or accumulating call and reads it nowhere else (`acc = acc + f(x[i])`, `total += v`,
  `best = torch.maximum(best, v)`, `acc.add_(v)`, `acc = torch.cat([acc, v])`). A reduction over
  independent terms is what `sum`, `amax` or one `torch.cat` compute in a single kernel, so the
  loop stays vectorisable. Two updates (`h *= a; h += x[t]`) are a recurrence, not a reduction.

The analysis is syntactic and local to the loop body, computed lazily for the loops a rule asks
about. It follows control flow only as far as "definitely assigned earlier in this iteration":
a branch assigns a name only when every branch does, a nested loop or `try` body may not run.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Callable, Iterable, Optional, Union

import libcst as cst

from ..syntax.walker import Loop, all_params, children, dotted_name, final_statement

_REDUCING_BINARY = (cst.Add, cst.Multiply, cst.BitOr, cst.BitAnd, cst.BitXor)
_REDUCING_AUGMENTED = (
    cst.AddAssign,
    cst.SubtractAssign,
    cst.MultiplyAssign,
    cst.BitOrAssign,
    cst.BitAndAssign,
    cst.BitXorAssign,
)
# Calls whose result accumulates their arguments: `acc = torch.maximum(acc, v)`, `max(best, v)`.
_REDUCING_CALLS = frozenset(
    """cat concat concatenate stack hstack vstack dstack column_stack row_stack max min maximum
    minimum fmax fmin logaddexp add mul""".split()
)
_REDUCING_IN_PLACE = frozenset(
    "add_ sub_ mul_ index_add_ scatter_add_ scatter_reduce_ addcmul_ addcdiv_ logaddexp_".split()
)
# Methods that add to a container without reading what it holds.
_GROWING_METHODS = frozenset({"append", "extend", "insert", "appendleft"})
_EMPTY: frozenset[str] = frozenset()
HoldsSlots = Callable[[cst.BaseExpression], bool]


def _no_slots(expr: cst.BaseExpression) -> bool:
    return False


class Carry(enum.Enum):
    """How a name is carried from one iteration to the next."""

    REDUCTION = "reduction"  # accumulated from independent terms: still vectorisable
    RECURRENCE = "recurrence"  # each iteration needs the previous result: sequential


@dataclasses.dataclass(frozen=True)
class Read:
    key: str  # `h`, `self.hidden`, `acc.shape`: the longest name/attribute chain read
    node: cst.BaseExpression  # the Name or Attribute node in the tree
    defined: frozenset[str]  # keys definitely assigned earlier in the same iteration
    index: Optional[str]  # the subscript's code when the chain is subscripted (`[t - 1]`)
    statement: cst.CSTNode  # the small statement (or compound header) holding the read


@dataclasses.dataclass(frozen=True)
class LoopFacts:
    carried: dict[str, Carry]  # keys read by an iteration before it assigns them
    reads: tuple[Read, ...]  # every read in the body (and a while loop's test), in order
    exits_early: bool  # `break`, `return` or `yield` at this loop's level

    @property
    def sequential(self) -> bool:
        return any(kind is Carry.RECURRENCE for kind in self.carried.values())

    def uses(self, key: str) -> list[Read]:
        """Reads that may see `key`'s value: `key` itself, `key.attr...`, or a prefix of it."""
        return [r for r in self.reads if touches(r.key, key)]

    def bound_afresh(self, key: str, statement: cst.CSTNode) -> bool:
        """`statement` reads `key` only where this iteration has already bound it on every
        path (`loss = a` then `loss = loss + b`, also inside one branch): it sees a value of
        this iteration, never one carried from the last."""
        reads = [r for r in self.reads if r.statement is statement and r.key == key]
        return bool(reads) and all(key in r.defined for r in reads)


def touches(read: str, key: str) -> bool:
    return read == key or read.startswith(key + ".") or key.startswith(read + ".")


_CODE = cst.Module(body=[])


def _index_code(subscript: cst.Subscript) -> str:
    return ", ".join(_CODE.code_for_node(e.slice).strip() for e in subscript.slice)


def _target_keys(target: cst.BaseExpression) -> list[str]:
    if isinstance(target, (cst.Tuple, cst.List)):
        return [k for element in target.elements for k in _target_keys(element.value)]
    if isinstance(target, cst.StarredElement):
        return _target_keys(target.value)
    key = dotted_name(target)
    return [key] if key is not None else []


Suite = Union[cst.BaseSuite, cst.Else, cst.Finally]


class _BodyScan:
    """One pass over a loop body: reads with what is defined at that point, and writes."""

    def __init__(self, modules: frozenset[str], holds_slots: HoldsSlots = _no_slots) -> None:
        self.modules = modules  # imported names: `nn.init.zeros_(w)` mutates w, not `nn.init`
        self.holds_slots = holds_slots  # a cache the callee fills: passing it updates it
        self.defined: set[str] = set()
        self.reads: list[Read] = []
        self.writes: dict[str, list[cst.CSTNode]] = {}  # key -> statements assigning or updating it
        self.element_writes: dict[str, set[Optional[str]]] = {}  # key -> written indexes (None: grown)
        self.statement: cst.CSTNode = _CODE
        self.depth = 0  # nested loops: a `break` there leaves only the inner loop
        self.exits_early = False

    # -- recording ----------------------------------------------------------------------
    def _read(self, key: str, node: cst.BaseExpression, index: Optional[str] = None) -> None:
        self.reads.append(Read(key, node, frozenset(self.defined), index, self.statement))

    def _define(self, key: str) -> None:
        self.writes.setdefault(key, []).append(self.statement)
        self.defined.add(key)

    def _update(self, key: str) -> None:
        self.writes.setdefault(key, []).append(self.statement)

    def _write_element(self, key: str, index: Optional[str]) -> None:
        self.element_writes.setdefault(key, set()).add(index)

    def _chain(self, expr: cst.BaseExpression, bound: frozenset[str]) -> Optional[str]:
        key = dotted_name(expr)
        if key is None or key.split(".")[0] in bound:
            return None
        return key

    # -- statements ---------------------------------------------------------------------
    def suite(self, suite: Suite) -> None:
        body = suite.body
        if isinstance(body, cst.BaseSuite):
            body = body.body
        for statement in body:
            if isinstance(statement, cst.BaseSmallStatement):
                self._small(statement)
            else:
                self._statement(statement)

    def _branches(self, suites: Iterable[Optional[Suite]], exhaustive: bool) -> None:
        """Run each suite from the same state; keep what every one that falls through assigns
        (a branch ending in `continue`, `break`, `return` or `raise` never reaches the join)."""
        before = set(self.defined)
        after: Optional[set[str]] = None
        for suite in suites:
            self.defined = set(before)
            if suite is not None:
                self.suite(suite)
                if _leaves(suite):
                    continue
            after = set(self.defined) if after is None else after & self.defined
        self.defined = after if exhaustive and after is not None else before

    def _statement(self, statement: cst.BaseStatement) -> None:
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                self._small(small)
            return
        self.statement = statement
        if isinstance(statement, cst.If):
            self._if(statement)
        elif isinstance(statement, (cst.For, cst.While)):
            self._nested_loop(statement)
        elif isinstance(statement, (cst.Try, cst.TryStar)):
            self._try(statement)
        elif isinstance(statement, cst.With):
            for item in statement.items:
                self.expr(item.item)
                if item.asname is not None:
                    self._assign_target(item.asname.name)
            self.suite(statement.body)
        elif isinstance(statement, cst.FunctionDef):
            for decorator in statement.decorators:
                self.expr(decorator.decorator)
            self._define(statement.name.value)  # the body runs when called, not here
        elif isinstance(statement, cst.ClassDef):
            self._define(statement.name.value)
        elif isinstance(statement, cst.Match):
            self.expr(statement.subject)
            self._branches((case.body for case in statement.cases), exhaustive=False)

    def _if(self, statement: cst.If) -> None:
        self.expr(statement.test)
        before = set(self.defined)
        self.suite(statement.body)
        after_body = None if _leaves(statement.body) else self.defined
        self.defined = set(before)
        orelse = statement.orelse
        if isinstance(orelse, cst.If):
            self.statement = orelse
            self._if(orelse)
        elif orelse is not None:
            self.suite(orelse)
            if _leaves(orelse):
                self.defined = after_body if after_body is not None else before
                return
        if after_body is not None:
            self.defined = after_body & self.defined

    def _nested_loop(self, loop: Loop) -> None:
        if isinstance(loop, cst.For):
            self.expr(loop.iter)
        before = set(self.defined)
        if isinstance(loop, cst.For):
            self._assign_target(loop.target)
        else:
            self.expr(loop.test)
        self.depth += 1
        self.suite(loop.body)
        self.depth -= 1
        self.defined = set(before)  # the body may not run
        if loop.orelse is not None:
            self.suite(loop.orelse)
        self.defined = before

    def _try(self, statement: Union[cst.Try, cst.TryStar]) -> None:
        before = set(self.defined)
        self.suite(statement.body)
        if statement.orelse is not None:
            self.suite(statement.orelse)
        after = set(self.defined)
        for handler in statement.handlers:
            self.defined = set(before)
            if handler.type is not None:
                self.expr(handler.type)
            if handler.name is not None:
                self._assign_target(handler.name.name)
            self.suite(handler.body)
            if not _leaves(handler.body):
                after = before  # the exception may have left the body at any point
        self.defined = after
        if statement.finalbody is not None:
            self.suite(statement.finalbody)

    def _small(self, small: cst.BaseSmallStatement) -> None:
        self.statement = small
        if isinstance(small, cst.Assign):
            self.expr(small.value)
            for target in small.targets:
                self._assign_target(target.target)
        elif isinstance(small, cst.AnnAssign):
            if small.value is not None:
                self.expr(small.value)
                self._assign_target(small.target)
        elif isinstance(small, cst.AugAssign):
            self._augmented(small)
        elif isinstance(small, cst.Expr):
            self.expr(small.value)
        elif isinstance(small, cst.Return):
            self.exits_early = True
            if small.value is not None:
                self.expr(small.value)
        elif isinstance(small, cst.Break):
            if self.depth == 0:
                self.exits_early = True
        elif isinstance(small, cst.Raise):
            if small.exc is not None:
                self.expr(small.exc)
        elif isinstance(small, cst.Assert):
            self.expr(small.test)
            if small.msg is not None:
                self.expr(small.msg)

    def _augmented(self, small: cst.AugAssign) -> None:
        target = small.target
        if isinstance(target, cst.Subscript):
            key = self._chain(target.value, _EMPTY)
            if key is not None:
                self._read(key, target.value, _index_code(target))
                self._slices(target, _EMPTY)
                self.expr(small.value)
                self._write_element(key, _index_code(target))
                return
        key = self._chain(target, _EMPTY)
        self.expr(target)
        self.expr(small.value)
        if key is not None:
            self._update(key)

    def _assign_target(self, target: cst.BaseExpression) -> None:
        if isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._assign_target(element.value)
        elif isinstance(target, cst.StarredElement):
            self._assign_target(target.value)
        elif isinstance(target, cst.Subscript):
            key = self._chain(target.value, _EMPTY)
            if key is None:
                self.expr(target.value)
            else:
                self._write_element(key, _index_code(target))
            self._slices(target, _EMPTY)
        elif isinstance(target, (cst.Name, cst.Attribute)):
            key = self._chain(target, _EMPTY)
            if key is not None:
                self._define(key)
            elif isinstance(target, cst.Attribute):
                self.expr(target.value)

    # -- expressions --------------------------------------------------------------------
    def _slices(self, subscript: cst.Subscript, bound: frozenset[str]) -> None:
        for element in subscript.slice:
            self.expr(element.slice, bound)

    def expr(self, node: cst.CSTNode, bound: frozenset[str] = _EMPTY) -> None:
        if isinstance(node, (cst.Name, cst.Attribute)):
            key = dotted_name(node)
            if key is None:
                assert isinstance(node, cst.Attribute)
                self.expr(node.value, bound)
            elif key.split(".")[0] not in bound:
                self._read(key, node)
        elif isinstance(node, cst.Subscript):
            key = self._chain(node.value, bound)
            if key is not None:
                self._read(key, node.value, _index_code(node))
            else:
                self.expr(node.value, bound)
            self._slices(node, bound)
        elif isinstance(node, cst.Call):
            self._call(node, bound)
        elif isinstance(node, cst.Arg):
            self.expr(node.value, bound)
        elif isinstance(node, cst.NamedExpr):
            self.expr(node.value, bound)
            self._assign_target(node.target)
        elif isinstance(node, cst.Lambda):
            every = all_params(node.params)
            for param in every:
                if param.default is not None:
                    self.expr(param.default, bound)
            self.expr(node.body, bound | {p.name.value for p in every})
        elif isinstance(node, (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)):
            self._comprehension(node, bound)
        else:
            if isinstance(node, cst.Yield):
                self.exits_early = True
            for child in children(node):
                self.expr(child, bound)

    def _comprehension(
        self, node: Union[cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp], bound: frozenset[str]
    ) -> None:
        inner = bound
        comp: Optional[cst.CompFor] = node.for_in
        while comp is not None:
            self.expr(comp.iter, inner)
            inner = inner | {k.split(".")[0] for k in _target_keys(comp.target)}
            for condition in comp.ifs:
                self.expr(condition.test, inner)
            comp = comp.inner_for_in
        if isinstance(node, cst.DictComp):
            self.expr(node.key, inner)
            self.expr(node.value, inner)
        else:
            self.expr(node.elt, inner)

    def _call(self, call: cst.Call, bound: frozenset[str]) -> None:
        func = call.func
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            receiver = func.value
            key = self._chain(receiver, bound)
            if method in _GROWING_METHODS and key is not None and key.split(".")[0] not in self.modules:
                for arg in call.args:
                    self.expr(arg.value, bound)
                self._write_element(key, None)  # grows the container; reads nothing in it
                return
            if method.endswith("_") and not method.startswith("_"):
                self.expr(receiver, bound)
                for arg in call.args:
                    self.expr(arg.value, bound)
                self._in_place(receiver, bound)
                return
        self.expr(func, bound)
        for arg in call.args:
            self.expr(arg.value, bound)
            key = self._chain(arg.value, bound)
            if key is not None and self.holds_slots(arg.value):
                self._update(key)

    def _in_place(self, receiver: cst.BaseExpression, bound: frozenset[str]) -> None:
        """`h.add_(v)`, `h[i].mul_(a)`, `h.mul_(a).add_(v)`: an update of h."""
        while (
            isinstance(receiver, cst.Call)
            and isinstance(receiver.func, cst.Attribute)
            and receiver.func.attr.value.endswith("_")
        ):
            receiver = receiver.func.value
        if isinstance(receiver, cst.Subscript):
            key = self._chain(receiver.value, bound)
            if key is not None and key.split(".")[0] not in self.modules:
                self._write_element(key, _index_code(receiver))
            return
        key = self._chain(receiver, bound)
        if key is not None and key.split(".")[0] not in self.modules:
            self._update(key)


def _leaves(suite: Suite) -> bool:
    """The suite never falls through: it ends in `continue`, `break`, `return` or `raise`."""
    body = suite.body if isinstance(suite, (cst.Else, cst.Finally)) else suite
    return isinstance(final_statement(body), (cst.Continue, cst.Break, cst.Return, cst.Raise))


def _operands(expr: cst.BaseExpression, operator: type) -> list[cst.BaseExpression]:
    """`a + b + c` -> [a, b, c] for one associative operator."""
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, operator):
        return _operands(expr.left, operator) + _operands(expr.right, operator)
    return [expr]


def _reduces(statement: cst.CSTNode, key: str) -> bool:
    """`statement` folds one new term into `key`: the shapes listed in the module docstring."""
    if isinstance(statement, cst.AugAssign):
        return isinstance(statement.operator, _REDUCING_AUGMENTED)
    if isinstance(statement, cst.Expr):
        call = statement.value
        return (
            isinstance(call, cst.Call)
            and isinstance(call.func, cst.Attribute)
            and call.func.attr.value in _REDUCING_IN_PLACE
            and dotted_name(call.func.value) == key
        )
    if not isinstance(statement, cst.Assign) or len(statement.targets) != 1:
        return False
    value = statement.value
    if isinstance(value, cst.BinaryOperation):
        if isinstance(value.operator, cst.Subtract):
            return dotted_name(value.left) == key
        for operator in _REDUCING_BINARY:
            if isinstance(value.operator, operator):
                return any(dotted_name(o) == key for o in _operands(value, operator))
        return False
    if isinstance(value, cst.Call):
        name = (dotted_name(value.func) or "").rsplit(".", 1)[-1]
        if name not in _REDUCING_CALLS or not value.args:
            return False
        first = value.args[0].value
        if isinstance(first, (cst.List, cst.Tuple)):
            return any(dotted_name(e.value) == key for e in first.elements)
        return any(dotted_name(a.value) == key for a in value.args)
    return False


def analyse_loop(
    loop: Loop, modules: frozenset[str] = _EMPTY, holds_slots: HoldsSlots = _no_slots
) -> LoopFacts:
    """What one iteration of `loop` hands to the next. `modules`: names bound to imports;
    `holds_slots`: whether an argument is a cache of empty slots that its callee fills."""
    scan = _BodyScan(modules, holds_slots)
    own: set[str] = set()
    if isinstance(loop, cst.For):
        own = set(_target_keys(loop.target))  # rebound by the loop before every iteration
        scan.defined = set(own)
    else:
        scan.statement = loop
        scan.expr(loop.test)
    scan.suite(loop.body)
    carried: dict[str, Carry] = {}
    for key in (scan.writes.keys() | scan.element_writes.keys()) - own:
        indexes = scan.element_writes.get(key, set())
        exposed = [
            r
            for r in scan.reads
            if touches(r.key, key)
            and key not in r.defined
            and not (key not in scan.writes and r.key == key and r.index is not None and r.index in indexes)
        ]
        if not exposed:
            continue
        statements = scan.writes.get(key, [])
        uses = [r for r in scan.reads if touches(r.key, key)]
        reduction = (
            not indexes
            and len(statements) == 1
            and len(uses) == 1
            and uses[0].statement is statements[0]
            and _reduces(statements[0], key)
        )
        carried[key] = Carry.REDUCTION if reduction else Carry.RECURRENCE
    return LoopFacts(carried, tuple(scan.reads), scan.exits_early)


class LoopDependences:
    """Memoised `analyse_loop` for one file."""

    def __init__(self, modules: Iterable[str], holds_slots: HoldsSlots = _no_slots) -> None:
        self._modules = frozenset(modules)
        self._holds_slots = holds_slots
        self._memo: dict[Loop, LoopFacts] = {}

    def facts(self, loop: Loop) -> LoopFacts:
        found = self._memo.get(loop)
        if found is None:
            found = self._memo[loop] = analyse_loop(loop, self._modules, self._holds_slots)
        return found

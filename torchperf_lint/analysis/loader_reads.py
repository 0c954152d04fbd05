"""A DataLoader read for a few batches, once: every read of the name it is bound to is a `for` loop
that leaves once its counter reaches a bound (`for i, x in enumerate(test_loader): ...; if i == n - 1:
break`). MelGAN dumps eight reference clips that way before training: loading settings that pay off
over an epoch (worker processes, pinned memory) cost more there than they save."""

from __future__ import annotations

from typing import Optional

import libcst as cst


def read_a_few_batches(call: cst.Call, bound_to: Optional[str], scope: Optional[cst.CSTNode]) -> bool:
    """`call` builds a loader bound to the name `bound_to` in `scope` (the function or module
    around it), and the only reads of that name in `scope` are loops that break at a counter's
    bound."""
    if bound_to is None or scope is None:
        return False
    reads = _Reads(bound_to)
    scope.visit(reads)
    return bool(reads.loops) and reads.loops == reads.bounded and not reads.other


class _Reads(cst.CSTVisitor):
    def __init__(self, name: str) -> None:
        self.name = name
        self.loops = 0
        self.bounded = 0
        self.other = False
        self._iterables: set[int] = set()

    def visit_For(self, node: cst.For) -> None:
        counter = _counted_iteration(node, self.name)
        if counter is None:
            return
        self._iterables.add(id(node.iter))
        self.loops += 1
        if _breaks_at_bound(node.body, counter):
            self.bounded += 1

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == self.name and not self.other:
            self.other = True  # confirmed below unless it is the iterable of a counted loop

    def on_visit(self, node: cst.CSTNode) -> bool:
        if id(node) in self._iterables:
            return False  # `enumerate(loader)` or `loader` itself: the read this loop makes
        if isinstance(node, (cst.Assign, cst.AnnAssign)):
            for target in _targets(node):
                if isinstance(target, cst.Name) and target.value == self.name:
                    value = node.value
                    if value is not None:
                        value.visit(self)
                    return False  # the binding itself is no read
        return super().on_visit(node)


def _targets(node: cst.CSTNode) -> list[cst.BaseExpression]:
    if isinstance(node, cst.Assign):
        return [t.target for t in node.targets]
    if isinstance(node, cst.AnnAssign):
        return [node.target]
    return []


def _counted_iteration(loop: cst.For, name: str) -> Optional[str]:
    """The counter of `for i, x in enumerate(name)`, or None when the loop is not that."""
    iterable = loop.iter
    if not (
        isinstance(iterable, cst.Call)
        and isinstance(iterable.func, cst.Name)
        and iterable.func.value == "enumerate"
        and iterable.args
        and isinstance(iterable.args[0].value, cst.Name)
        and iterable.args[0].value.value == name
    ):
        return None
    target = loop.target
    if isinstance(target, cst.Tuple) and target.elements and isinstance(target.elements[0].value, cst.Name):
        return target.elements[0].value.value
    return None


def _breaks_at_bound(body: cst.BaseSuite, counter: str) -> bool:
    """The loop's own body (not a nested loop's) holds `if <counter> == / >= / > ...: break`."""
    if not isinstance(body, cst.IndentedBlock):
        return False
    for statement in body.body:
        if not isinstance(statement, cst.If) or not _compares_counter(statement.test, counter):
            continue
        inner = statement.body
        lines = inner.body if isinstance(inner, cst.IndentedBlock) else [inner]
        for line in lines:
            small = line.body if isinstance(line, cst.SimpleStatementLine) else []
            if any(isinstance(part, cst.Break) for part in small):
                return True
    return False


def _compares_counter(test: cst.BaseExpression, counter: str) -> bool:
    return (
        isinstance(test, cst.Comparison)
        and isinstance(test.left, cst.Name)
        and test.left.value == counter
        and len(test.comparisons) == 1
        and isinstance(test.comparisons[0].operator, (cst.Equal, cst.GreaterThanEqual, cst.GreaterThan))
    )

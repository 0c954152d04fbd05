"""A DataLoader read for a few batches, once: every read of the name it is bound to is a `for` loop
that leaves once its counter reaches a bound (`for i, x in enumerate(test_loader): ...; if i == n - 1:
break`). MelGAN dumps eight reference clips that way before training: loading settings that pay off
over an epoch (worker processes, pinned memory) cost more there than they save. Which loops are
bounded the project pass says (project/summary.py, `Loop.bounded`); this module finds the reads."""

from __future__ import annotations

from typing import Collection, Optional

import libcst as cst

from ..syntax.walker import visit


def read_a_few_batches(
    bound_to: Optional[str], scope: Optional[cst.CSTNode], bounded: Collection[cst.CSTNode]
) -> bool:
    """The loader bound to the name `bound_to` in `scope` (the function or module around its
    construction) is read only by loops among `bounded`, over `enumerate(bound_to)`."""
    if bound_to is None or scope is None or not bounded:
        return False
    reads = _Reads(bound_to, {id(loop) for loop in bounded})
    visit(scope, reads)
    return bool(reads.loops) and reads.loops == reads.bounded and not reads.other


class _Reads(cst.CSTVisitor):
    def __init__(self, name: str, bounded: set[int]) -> None:
        self.name = name
        self._bounded = bounded
        self.loops = 0
        self.bounded = 0
        self.other = False
        self._iterables: set[int] = set()

    def visit_For(self, node: cst.For) -> None:
        if not _iterates(node, self.name):
            return
        self._iterables.add(id(node.iter))
        self.loops += 1
        if id(node) in self._bounded:
            self.bounded += 1

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == self.name and not self.other:
            self.other = True  # a read other than the iterable of a loop over it

    def on_visit(self, node: cst.CSTNode) -> bool:
        if id(node) in self._iterables:
            return False  # `enumerate(loader)` or `loader` itself: the read this loop makes
        if isinstance(node, (cst.Assign, cst.AnnAssign)):
            for target in _targets(node):
                if isinstance(target, cst.Name) and target.value == self.name:
                    value = node.value
                    if value is not None:
                        visit(value, self)
                    return False  # the binding itself is no read
        return super().on_visit(node)


def _targets(node: cst.CSTNode) -> list[cst.BaseExpression]:
    if isinstance(node, cst.Assign):
        return [t.target for t in node.targets]
    if isinstance(node, cst.AnnAssign):
        return [node.target]
    return []


def _iterates(loop: cst.For, name: str) -> bool:
    """`loop` is `for i, x in enumerate(name)`."""
    iterable = loop.iter
    return (
        isinstance(iterable, cst.Call)
        and isinstance(iterable.func, cst.Name)
        and iterable.func.value == "enumerate"
        and bool(iterable.args)
        and isinstance(iterable.args[0].value, cst.Name)
        and iterable.args[0].value.value == name
    )

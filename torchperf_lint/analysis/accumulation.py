"""Gradient accumulation: a loop whose iterations are micro-steps, each running `backward()`, while
the optimizer steps on only some of them. Two shapes are read:

- the step under a guard in the same loop (`if (i + 1) % accum == 0: optimizer.step()`), the
  guard an accumulation test: a `%`, a name that says so (`accum`), or a name bound to a test
  that is one (timm's `need_update = last_batch or (i + 1) % accum_steps == 0`);
- an inner loop of micro-steps (`for micro_step in range(grad_accum_steps):`, the loop says
  `accum`/`micro` in its target or what it iterates) with no step of its own, and the step after
  it in the loop around it.

Who runs `backward()` matters too: `loss.backward()` is the code's own; `accelerator.backward(loss)`,
`fabric.backward(loss)`, a DeepSpeed engine's `backward` belong to a framework that owns
accumulation (and gradient synchronisation) itself.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Iterator, Optional

import libcst as cst

from ..syntax.walker import FileFacts, Loop, children, dotted_name
from .hotpath import HotPaths
from .names import Names
from .vocabulary import is_optimizer_name

# Receivers of `.backward(loss)` that are a framework's object, not a tensor: accelerate,
# Lightning Fabric and strategies, DeepSpeed engines, trainers.
_DELEGATED_BACKWARD = ("accelerator", "fabric", "engine", "strategy", "trainer")
_SAYS_ACCUMULATION = ("accum",)
_SAYS_MICRO_STEPS = ("accum", "micro")


def runs_own_backward(call: cst.Call) -> bool:
    """`loss.backward()`, not `accelerator.backward(loss)`: a trainer object owns that step."""
    if not isinstance(call.func, cst.Attribute):
        return False
    receiver = (dotted_name(call.func.value) or "").split(".")[-1].lower()
    return not any(word in receiver for word in _DELEGATED_BACKWARD)


def steps_an_optimizer(call: cst.Call, is_optimizer_step: Callable[[cst.Call], bool]) -> bool:
    """`optimizer.step()`, or a loss scaler's `grad_scaler.step(optimizer)` (whatever the scaler is
    called: Pytorch-UNet's `grad_scaler`)."""
    if not (isinstance(call.func, cst.Attribute) and call.func.attr.value == "step"):
        return False
    if is_optimizer_step(call):
        return True
    first = call.args[0].value if call.args and call.args[0].keyword is None else None
    return first is not None and is_optimizer_name(dotted_name(first) or "")


@dataclasses.dataclass(frozen=True)
class Accumulation:
    backward: cst.Call
    loop: Loop  # its iterations are the micro-steps
    step: cst.Call  # the optimizer step, run on some micro-steps only
    guard: Optional[cst.If] = None  # the step's guard in `loop` (the first shape)
    # the second shape: `for counter in range(count):`, when the loop is written so
    counter: Optional[cst.Name] = None
    count: Optional[cst.BaseExpression] = None


class Accumulations:
    def __init__(
        self, facts: FileFacts, names: Names, hot: HotPaths, is_step: Callable[[cst.Call], bool]
    ) -> None:
        self._facts = facts
        self._names = names
        self._hot = hot
        self._is_step = is_step

    def of(self, backward: cst.Call) -> Optional[Accumulation]:
        """The accumulation whose micro-steps run `backward`, or None."""
        loops = self._hot.loops_around(backward)
        if not loops:
            return None
        loop = loops[0]
        steps = list(self._steps_in(loop))
        if any(self._steps_with(step, backward, loop) for step in steps):
            return (
                None  # an optimizer steps after every backward (stylegan2's discriminator, then its R1 term)
            )
        for step in steps:
            for guard in self._guards(step, loop):
                if (
                    not _inside(backward, guard, self._facts)
                    and _inside(step, guard.body, self._facts)
                    and not any(guard.orelse and _inside(other, guard.orelse, self._facts) for other in steps)
                    and self._accumulation_test(guard.test)
                ):
                    return Accumulation(backward, loop, step, guard=guard)
        if steps or len(loops) < 2 or not isinstance(loop, cst.For) or not _says(loop, _SAYS_MICRO_STEPS):
            return None
        outer = loops[1]
        after = [
            s
            for s in self._steps_in(outer)
            if not _inside(s, loop, self._facts) and _after(s, loop, outer, self._facts)
        ]
        if not after:
            return None
        counter, count = _range_loop(loop, self._names)
        return Accumulation(backward, loop, after[0], counter=counter, count=count)

    def _steps_in(self, loop: Loop) -> Iterator[cst.Call]:
        """The optimizer steps in `loop`'s body, not in a loop or function nested in it."""
        for call in self._facts.method_calls.get("step", ()):
            if steps_an_optimizer(call, self._is_step) and self._hot.loops_around(call)[:1] == [loop]:
                yield call

    def _steps_with(self, step: cst.Call, backward: cst.Call, loop: Loop) -> bool:
        """`step` runs in every iteration that runs `backward`: no `if` around it in the loop
        leaves `backward` out."""
        return all(_inside(backward, guard, self._facts) for guard in self._guards(step, loop))

    def _guards(self, node: cst.CSTNode, loop: Loop) -> Iterator[cst.If]:
        """The `if` statements around `node` inside `loop`, innermost first."""
        for ancestor in self._facts.ancestors(node):
            if ancestor is loop:
                return
            if isinstance(ancestor, cst.If):
                yield ancestor

    def _accumulation_test(self, test: cst.BaseExpression, depth: int = 0) -> bool:
        for node in _expressions(test):
            if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Modulo):
                return True
            if isinstance(node, (cst.Name, cst.Attribute)):
                text = (dotted_name(node) or "").lower()
                if any(word in text for word in _SAYS_ACCUMULATION):
                    return True
                if isinstance(node, cst.Name) and depth == 0:
                    bindings = self._names.lookup(node.value, node)
                    if any(
                        b.kind == "assign"
                        and isinstance(b.node, (cst.Comparison, cst.BooleanOperation, cst.UnaryOperation))
                        and self._accumulation_test(b.node, depth + 1)
                        for b in bindings
                    ):
                        return True
        return False


def _expressions(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    yield node
    for child in children(node):
        yield from _expressions(child)


def _inside(node: cst.CSTNode, block: cst.CSTNode, facts: FileFacts) -> bool:
    return any(ancestor is block for ancestor in facts.ancestors(node))


def _after(node: cst.CSTNode, loop: Loop, outer: Loop, facts: FileFacts) -> bool:
    """`node` is in a statement of `outer`'s body after the one that holds `loop`."""
    statements = list(outer.body.body) if isinstance(outer.body, cst.IndentedBlock) else []

    def position(inner: cst.CSTNode) -> int:
        return next((i for i, s in enumerate(statements) if s is inner or _inside(inner, s, facts)), -1)

    return position(node) > position(loop) >= 0


def _says(loop: cst.For, words: tuple[str, ...]) -> bool:
    text = ""
    for node in [*_expressions(loop.target), *_expressions(loop.iter)]:
        if isinstance(node, (cst.Name, cst.Attribute)):
            text += " " + (dotted_name(node) or "").lower()
    return any(word in text for word in words)


def _range_loop(loop: cst.For, names: Names) -> tuple[Optional[cst.Name], Optional[cst.BaseExpression]]:
    """`for i in range(n):` -> (i, n); else (None, None)."""
    it = loop.iter
    if (
        isinstance(loop.target, cst.Name)
        and isinstance(it, cst.Call)
        and names.qualified_name(it) == "builtins.range"
        and len(it.args) == 1
        and it.args[0].keyword is None
        and not it.args[0].star
    ):
        return loop.target, it.args[0].value
    return None, None

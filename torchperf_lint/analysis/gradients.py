"""What a file does with `.grad` tensors besides letting backward write them.

Code that adds into a gradient in place (`p.grad += g`, `p.grad.add_(g)`, `p.grad.data.copy_(g)`;
an RPC parameter server summing workers' gradients) needs the gradient to exist: zeroing it is
deliberate there, and setting it to None makes the next `+=` raise (RULES.md, TPL301).
"""

from __future__ import annotations

import libcst as cst

from ..syntax.walker import FileFacts

_IN_PLACE_WRITES = ("add_", "copy_", "addcmul_", "addcdiv_")


def _is_grad(expr: cst.BaseExpression) -> bool:
    """`x.grad` or `x.grad.data`."""
    if isinstance(expr, cst.Attribute) and expr.attr.value == "data":
        expr = expr.value
    return isinstance(expr, cst.Attribute) and expr.attr.value == "grad"


def accumulates_into_grad(facts: FileFacts) -> bool:
    if any(_is_grad(node.target) for node in facts.aug_assigns):
        return True
    for method in _IN_PLACE_WRITES:
        for call in facts.method_calls.get(method, ()):
            if isinstance(call.func, cst.Attribute) and _is_grad(call.func.value):
                return True
    return False

"""Optimizers that take one step: built in a function that calls `step()` on them outside any loop
and never hands them on (a toy demo's single update, pytorch/examples' `ddp/example.py`).

Fusing their update saves one multi-tensor chain once: nothing a user would notice. An optimizer
returned, stored on `self`, passed as an argument or stepped in a loop (or in hot code) is not one.
"""

from __future__ import annotations

import libcst as cst

from ..syntax.walker import FileFacts, descendants
from .hotpath import HotPaths

# Methods whose call keeps the optimizer where it is.
_LOCAL_METHODS = frozenset({"step", "zero_grad", "add_param_group", "state_dict", "load_state_dict"})


def steps_once(built: cst.Call, facts: FileFacts, hot: HotPaths) -> bool:
    """`name = <built>` in a function whose only uses of `name` are method calls, with every
    `name.step()` outside loops, in a function that is not hot."""
    assign = facts.parents.get(built)
    if not (isinstance(assign, cst.Assign) and len(assign.targets) == 1):
        return False
    target = assign.targets[0].target
    function = facts.enclosing_function(built)
    if not isinstance(target, cst.Name) or function is None or hot.reason(function) is not None:
        return False
    steps = 0
    for node in descendants(function.body):
        if not (isinstance(node, cst.Name) and node.value == target.value) or node is target:
            continue
        parent = facts.parents.get(node)
        call = facts.parents.get(parent) if parent is not None else None
        if not (
            isinstance(parent, cst.Attribute)
            and parent.attr.value in _LOCAL_METHODS
            and isinstance(call, cst.Call)
            and call.func is parent
        ):
            return False  # passed on, returned or aliased: it may step elsewhere
        if parent.attr.value == "step":
            if _in_loop(call, function, facts):
                return False
            steps += 1
    return steps == 1


def _in_loop(node: cst.CSTNode, function: cst.FunctionDef, facts: FileFacts) -> bool:
    current = facts.parents.get(node)
    while current is not None and current is not function:
        if isinstance(current, (cst.For, cst.While)):
            return True
        current = facts.parents.get(current)
    return False

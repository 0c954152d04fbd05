"""Values torch requires on the host: `pack_padded_sequence` raises unless a tensor of lengths
is a CPU tensor ("must be on the CPU if provided as a tensor", its documentation). A name given
there by a statement that runs on every path to a later read holds a host value at that read,
if no other binding reaches the read (NISQA's `int(n_wins.max())` after packing with `n_wins`).
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from ..syntax.walker import Binding, FileFacts, argument_at, dotted_name
from .names import Names

# function -> (position, keyword) of the argument it requires on the host
_HOST_ARGUMENTS = {"torch.nn.utils.rnn.pack_padded_sequence": (1, "lengths")}
_SHORT_NAMES = frozenset(name.rsplit(".", 1)[1] for name in _HOST_ARGUMENTS)


class HostArguments:
    """For one file: which reads of a name see a value that an earlier call required on the host."""

    def __init__(self, facts: FileFacts, names: Names) -> None:
        self._facts = facts
        self._names = names
        self._given: Optional[dict[cst.FunctionDef, list[tuple[int, cst.Name]]]] = None

    def required_on_host(self, read: cst.Name, bindings: list[Binding]) -> bool:
        """`read` sees the value (the same bindings) that a call of an earlier statement of its
        function's own body, which runs whenever the read does, gave a host-only argument."""
        function = self._facts.enclosing_function(read)
        if function is None:
            return False
        given = self._given_by_function().get(function, ())
        if not given:
            return False
        index = _body_index(read, function, self._facts)
        if index is None:
            return False
        reaching = {id(b) for b in bindings}
        return any(
            at < index
            and name.value == read.value
            and {id(b) for b in self._names.reaching(name)} == reaching
            for at, name in given
        )

    def _given_by_function(self) -> dict[cst.FunctionDef, list[tuple[int, cst.Name]]]:
        """Per function, the names its own body statements pass as host-only arguments, with
        the index of the statement."""
        if self._given is None:
            self._given = {}
            for call in self._facts.calls:
                name = dotted_name(call.func)
                if name is None or name.rsplit(".", 1)[-1] not in _SHORT_NAMES:
                    continue
                where = _HOST_ARGUMENTS.get(self._names.qualified_name(call) or "")
                argument = argument_at(call, *where) if where is not None else None
                function = self._facts.enclosing_function(call)
                if not isinstance(argument, cst.Name) or function is None:
                    continue
                index = _body_index(call, function, self._facts)
                if index is not None:
                    self._given.setdefault(function, []).append((index, argument))
        return self._given


def _body_index(node: cst.CSTNode, function: cst.FunctionDef, facts: FileFacts) -> Optional[int]:
    """The index of the statement of `function`'s own body that holds `node`; None when `node`
    sits in a branch, loop, `try` or `with` of it (it may not run) or the body is one line."""
    body = function.body
    if not isinstance(body, cst.IndentedBlock):
        return None
    child, parent = node, facts.parents.get(node)
    while parent is not None and parent is not body:
        if isinstance(parent, cst.BaseCompoundStatement):
            return None
        child, parent = parent, facts.parents.get(parent)
    if parent is None:
        return None
    return next((i for i, statement in enumerate(body.body) if statement is child), None)

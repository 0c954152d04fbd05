"""Integer sizes a file states where a static reading can find them (RULES.md, TPL405): a literal,
a name bound once to one, or a configuration field (`config.vocab_size`) whose class in the file
gives it a literal default (`vocab_size: int = 50257` in a dataclass). Anything computed, passed
in or read from several places is unreadable (None), never a guess.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from ..syntax.walker import FileFacts
from .names import Names


def _literal(expr: cst.BaseExpression) -> Optional[int]:
    if isinstance(expr, cst.Integer):
        value = expr.evaluated_value
        return value if isinstance(value, int) else None
    return None


class Sizes:
    def __init__(self, facts: FileFacts, names: Names) -> None:
        self._facts = facts
        self._names = names
        self._fields: Optional[dict[str, list[tuple[int, str]]]] = None

    def value(self, expr: cst.BaseExpression) -> Optional[tuple[int, str]]:
        """(the size, where it was read: "" for a literal, `GPTConfig.vocab_size`, a name)."""
        literal = _literal(expr)
        if literal is not None:
            return literal, ""
        if isinstance(expr, cst.Name):
            bindings = self._names.lookup(expr.value, expr)
            if len(bindings) == 1 and bindings[0].kind == "assign":
                node = bindings[0].node
                if isinstance(node, cst.BaseExpression) and (bound := _literal(node)) is not None:
                    return bound, expr.value
            return None
        if isinstance(expr, cst.Attribute) and not (
            isinstance(expr.value, cst.Name) and expr.value.value == "self"
        ):
            defaults = self._class_fields().get(expr.attr.value, [])
            if len({value for value, _ in defaults}) == 1:
                return defaults[0]
        return None

    def _class_fields(self) -> dict[str, list[tuple[int, str]]]:
        """Integer defaults that classes of the file give their fields in the class body."""
        if self._fields is None:
            self._fields = {}
            for info in self._facts.class_of.values():
                for line in info.node.body.body:
                    if not isinstance(line, cst.SimpleStatementLine):
                        continue
                    for statement in line.body:
                        target, value = _field(statement)
                        if (
                            target is not None
                            and value is not None
                            and (number := _literal(value)) is not None
                        ):
                            self._fields.setdefault(target, []).append((number, f"{info.name}.{target}"))
        return self._fields


def _field(statement: cst.BaseSmallStatement) -> tuple[Optional[str], Optional[cst.BaseExpression]]:
    if isinstance(statement, cst.AnnAssign) and isinstance(statement.target, cst.Name):
        return statement.target.value, statement.value
    if isinstance(statement, cst.Assign) and len(statement.targets) == 1:
        target = statement.targets[0].target
        if isinstance(target, cst.Name):
            return target.value, statement.value
    return None, None

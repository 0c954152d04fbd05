"""What an item of a local dict holds (RULES.md, "Values that travel": dict items under literal
keys): `losses["d"]` of `losses = {}` is every value the scope stores under `"d"`, by
`losses["d"] = d_loss` or in the dict display itself. A dict bound to anything else, handed in,
or stored into under a key computed at run time (`losses[name] = v`) holds what nothing here says.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from ..syntax.walker import argument_at, descendants, dotted_name
from .names import Names

Items = dict[str, list[cst.BaseExpression]]


HandedBack = tuple[tuple[str, int, str], ...]  # EntryFacts.handed_back


class DictItems:
    def __init__(self, names: Names, handed_back: HandedBack) -> None:
        """`handed_back`: the project helpers that may return an argument as it was given (a
        `return loss_dict` on one GPU), as this module writes them."""
        self._names = names
        self._handed_back = handed_back
        self._by_scope: dict[tuple[int, str], Optional[Items]] = {}

    def values(self, item: cst.Subscript) -> Optional[list[cst.BaseExpression]]:
        """The values stored under `item`'s literal key, or None when `item` is no read of a
        local dict under a literal key, or nothing is stored there."""
        key = literal_key(item)
        if key is None or not isinstance(item.value, cst.Name):
            return None
        return self._stored(item.value, key, 0)

    def _stored(self, holder: cst.Name, key: str, depth: int) -> Optional[list[cst.BaseExpression]]:
        bindings = self._names.lookup(holder.value, holder)
        if len(bindings) == 1 and bindings[0].kind == "assign" and isinstance(bindings[0].node, cst.Call):
            # `reduced = reduce_loss_dict(losses)`: the dict handed in, handed back
            given = handed_back(bindings[0].node, self._handed_back)
            if isinstance(given, cst.Name) and depth < 4:
                return self._stored(given, key, depth + 1)
            return None
        if not bindings or not all(b.kind == "assign" and _dict_display(b.node) for b in bindings):
            return None
        scope = bindings[0].scope.node
        if any(b.scope.node is not scope for b in bindings):
            return None
        memo_key = (id(scope), holder.value)
        if memo_key not in self._by_scope:
            self._by_scope[memo_key] = _items(scope, holder.value, bindings)
        items = self._by_scope[memo_key]
        return items.get(key) if items is not None else None


def handed_back(call: cst.Call, callees: HandedBack) -> Optional[cst.BaseExpression]:
    """The argument `call` may return as it was given (EntryFacts.handed_back), or None. A tensor
    handed back is not read as its argument yet: its location is where the callers' values are,
    which host_parameters does not follow through rebinding (audiocraft's audio_write gets host
    audio, and f32_pcm(wav) hands it back)."""
    written = dotted_name(call.func)
    if written is None:
        return None
    for callee, position, param in callees:
        given = argument_at(call, position, param) if callee == written else None
        if given is not None:
            return given
    return None


def mapping_values(
    mapping: cst.BaseExpression, names: Names, callees: HandedBack, depth: int = 0
) -> tuple[list[cst.BaseExpression], list[cst.BaseExpression]]:
    """(the expressions `mapping`'s values are, the mappings it may be that nothing here shows):
    a dict display's values, a comprehension's value, through names bound only to those and
    through project helpers that hand their argument back (`reduce_dict(losses)` on one GPU);
    a call's result or a parameter is opaque (a loss module's dict of tensors)."""
    if isinstance(mapping, cst.DictComp):
        return [mapping.value], []
    if isinstance(mapping, cst.Dict):
        elements = mapping.elements
        if any(not isinstance(e, cst.DictElement) for e in elements):
            return [], [mapping]  # `{**other}`: what it unpacks is not known here
        return [e.value for e in elements], []
    if depth < _MAX_DEPTH and isinstance(mapping, cst.Name):
        bindings = names.lookup(mapping.value, mapping)
        if bindings and all(b.kind == "assign" and isinstance(b.node, cst.BaseExpression) for b in bindings):
            values: list[cst.BaseExpression] = []
            opaque: list[cst.BaseExpression] = []
            for binding in bindings:
                more, unknown = mapping_values(binding.node, names, callees, depth + 1)  # type: ignore[arg-type]
                values.extend(more)
                opaque.extend(unknown)
            return values, opaque
    if depth < _MAX_DEPTH and isinstance(mapping, cst.Call):
        given = handed_back(mapping, callees)
        if given is not None:
            return mapping_values(given, names, callees, depth + 1)
    return [], [mapping]


_MAX_DEPTH = 6  # names and handed-back helpers followed to a mapping's values


def walked_mapping(
    source: Optional[cst.BaseExpression], methods: tuple[str, ...] = ("items", "values")
) -> Optional[cst.BaseExpression]:
    """`d` of `d.items()` or `d.values()` (`methods`): what a loop over `source` takes values of."""
    if (
        isinstance(source, cst.Call)
        and not source.args
        and isinstance(source.func, cst.Attribute)
        and source.func.attr.value in methods
    ):
        return source.func.value
    return None


def summed_values(
    call: cst.Call, names: Names, callees: HandedBack
) -> Optional[tuple[list[cst.BaseExpression], list[cst.BaseExpression]]]:
    """What `sum(...)` adds up, as `mapping_values` gives it: a mapping's values (`sum(losses.values())`)
    or a comprehension's element (`sum(w[k] * d[k] for k in d)`); None for anything else."""
    first = call.args[0] if call.args else None
    given = first.value if first is not None and first.keyword is None and not first.star else None
    if isinstance(given, (cst.GeneratorExp, cst.ListComp)):
        return [given.elt], []
    mapping = walked_mapping(given, ("values",))
    return mapping_values(mapping, names, callees) if mapping is not None else None


def literal_key(item: cst.Subscript) -> Optional[str]:
    """ "d" of `x["d"]`."""
    if len(item.slice) != 1 or not isinstance(item.slice[0].slice, cst.Index):
        return None
    index = item.slice[0].slice.value
    if isinstance(index, cst.SimpleString):
        value = index.evaluated_value
        return value if isinstance(value, str) else None
    return None


def _dict_display(node: cst.CSTNode) -> bool:
    """`{}`, `{"d": v}` or `dict()`, `dict(d=v)`."""
    if isinstance(node, cst.Dict):
        return True
    return (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Name)
        and node.func.value == "dict"
        and all(a.keyword is not None for a in node.args)
    )


def _items(scope: cst.CSTNode, name: str, bindings: list) -> Optional[Items]:
    """Every value the scope gives each key of the dict `name`; None when a key is computed."""
    items: Items = {}
    for binding in bindings:
        node = binding.node
        if isinstance(node, cst.Dict):
            for element in node.elements:
                if not isinstance(element, cst.DictElement):
                    return None  # `**other`: keys not written here
                key = element.key.evaluated_value if isinstance(element.key, cst.SimpleString) else None
                if not isinstance(key, str):
                    return None
                items.setdefault(key, []).append(element.value)
        elif isinstance(node, cst.Call):
            for arg in node.args:
                assert arg.keyword is not None
                items.setdefault(arg.keyword.value, []).append(arg.value)
    for node in descendants(scope, enter_scopes=False):
        if not isinstance(node, (cst.Assign, cst.AugAssign)):
            continue
        targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
        for target in targets:
            if (
                isinstance(target, cst.Subscript)
                and isinstance(target.value, cst.Name)
                and target.value.value == name
            ):
                key = literal_key(target)
                if key is None:
                    return None
                if isinstance(node, cst.Assign):  # `d["k"] += 1` updates the item in place
                    items.setdefault(key, []).append(node.value)
    return items

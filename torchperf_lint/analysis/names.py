"""Name resolution from the walk's own scopes and import table (no libcst metadata providers)."""

from __future__ import annotations

import builtins
from typing import Optional

import libcst as cst

from ..syntax.walker import Binding, FileFacts, Scope, dotted_name

_BUILTINS = frozenset(dir(builtins))

# Spellings that name the same object as the public one.
_CANONICAL = {
    "torch.nn.modules.module.Module": "torch.nn.Module",
    "torch.utils.data.dataloader.DataLoader": "torch.utils.data.DataLoader",
    "torch.functional.F": "torch.nn.functional",
    "lightning.pytorch.LightningModule": "lightning.LightningModule",
    "pytorch_lightning.core.LightningModule": "pytorch_lightning.LightningModule",
    "pytorch_lightning.core.module.LightningModule": "pytorch_lightning.LightningModule",
}


class Names:
    def __init__(self, facts: FileFacts) -> None:
        self._facts = facts
        # Several rules ask about the same call: answer each question once per file.
        self._scopes: dict[cst.CSTNode, Scope] = {}
        self._qualified: dict[cst.CSTNode, Optional[str]] = {}

    def scope_at(self, node: cst.CSTNode) -> Scope:
        """The innermost scope whose body holds `node`."""
        known = self._scopes.get(node)
        if known is not None:
            return known
        parents = self._facts.parents
        scope_of = self._facts.scope_of
        found = self._facts.module_scope
        current = parents.get(node)
        while current is not None:
            scope = scope_of.get(current)
            if scope is not None:
                found = scope
                break
            current = parents.get(current)
        self._scopes[node] = found
        return found

    def lookup(self, name: str, at: cst.CSTNode) -> list[Binding]:
        """Bindings of `name` visible at `at`, following Python's rule that class bodies
        are not visible from the methods inside them."""
        scope: Optional[Scope] = self.scope_at(at)
        first = True
        while scope is not None:
            if (first or not scope.is_class) and name in scope.bindings:
                return scope.bindings[name]
            first = False
            scope = scope.parent
        return []

    def qualified_name(self, expr: cst.BaseExpression) -> Optional[str]:
        """`torch.nn.functional.relu` for `F.relu` after `import torch.nn.functional as F`.

        A call resolves through its callee. Builtins resolve as `builtins.<name>` unless the
        file rebinds the name where it is used. Local variables resolve to None.
        """
        if type(expr) is cst.Call:  # not isinstance: libcst's classes are ABCs, slow to miss
            expr = expr.func
        if expr in self._qualified:
            return self._qualified[expr]
        result = self._resolve(expr)
        self._qualified[expr] = result
        return result

    def _resolve(self, expr: cst.BaseExpression) -> Optional[str]:
        dotted = dotted_name(expr)
        if dotted is None:
            return None
        head, _, rest = dotted.partition(".")
        bindings = self.lookup(head, expr)
        if not bindings:
            return f"builtins.{dotted}" if head in _BUILTINS else None
        if bindings[-1].kind != "import" or head not in self._facts.imports:
            return None
        full = self._facts.imports[head] + (f".{rest}" if rest else "")
        return _CANONICAL.get(full, full)

    def torch_alias(self) -> Optional[str]:
        """The name the module binds to the `torch` package at top level, if any."""
        for bound, target in self._facts.imports.items():
            if target == "torch" and "." not in bound:
                module_bindings = self._facts.module_scope.bindings.get(bound)
                if module_bindings and module_bindings[-1].kind == "import":
                    return bound
        return None

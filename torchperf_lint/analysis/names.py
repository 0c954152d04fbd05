"""Name resolution from the walk's own scopes and import table (no libcst metadata providers)."""

from __future__ import annotations

import builtins
from types import MappingProxyType
from typing import Callable, Mapping, Optional

import libcst as cst

from ..syntax.unset import UNSET
from ..syntax.walker import Binding, FileFacts, Scope, ancestors, dotted_name, final_statement

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
    def __init__(self, facts: FileFacts, star_imports: Mapping[str, str] = MappingProxyType({})) -> None:
        self._facts = facts
        # names `from m import *` of a project module binds to outside modules (the project pass)
        self._star_imports = star_imports
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
                bindings = scope.bindings[name]
                if any(b.kind == "compfor" for b in bindings):
                    bindings = self._outside_comprehensions(bindings, at)
                if bindings:
                    return bindings
            first = False
            scope = scope.parent
        return []

    def _outside_comprehensions(self, bindings: list[Binding], at: cst.CSTNode) -> list[Binding]:
        """`bindings` without the targets of comprehensions that do not hold `at`: the walk
        binds them in the function around, but Python keeps them inside the comprehension (the
        `t` of `{t["id"]: o for t, o in zip(ts, outs)}` is not the `t` of a later `for t in ts:`)."""
        parents = self._facts.parents
        around = set(ancestors(at, parents))
        kept = []
        for binding in bindings:
            if binding.kind == "compfor":
                comprehension: Optional[cst.CSTNode] = binding.node
                while isinstance(comprehension, cst.CompFor):
                    comprehension = parents.get(comprehension)
                if comprehension not in around:
                    continue
            kept.append(binding)
        return kept

    def reaching(self, name: cst.Name) -> list[Binding]:
        """The bindings of `name` that may reach this read: only the last one before it when that
        one is a statement of a block around the read (it runs on every path to the read), every
        other binding before the read comes earlier, and none after it shares a loop with the read
        (so none comes round); the same for an `if`/`else` around the read's block whose every
        branch binds the name (or leaves): the bindings in it; otherwise every binding. `m = x.softmax(-1)` ...
        `m = torch.from_numpy(a)`, then `m.sum()` reads only the last."""
        bindings = self.lookup(name.value, name)
        if len(bindings) < 2 or self.scope_at(name) is not bindings[0].scope:
            return bindings
        parents = self._facts.parents
        around = _blocks_around(name, parents)
        loops = {id(n) for n in ancestors(name, parents) if isinstance(n, (cst.For, cst.While))}
        enclosing = set(ancestors(name, parents))
        before: list[Binding] = []
        later: list[Binding] = []  # bindings after the read in a loop around it
        for binding in bindings:
            if binding.kind in ("assign", "unpack") and binding.node in enclosing:
                placed: Optional[bool] = False  # `w = w.to(dtype)`: the read runs before its own binding
            elif (
                binding.kind == "for"
                and isinstance(binding.node, cst.For)
                and binding.node in enclosing
                and binding.node.body in enclosing
            ):
                placed = True  # the loop's target, bound anew before each run of the body
            elif binding.kind == "param":
                placed = True  # bound before the body runs
            else:
                placed = _placed_before(binding.node, around, parents)
            if placed is None:
                return bindings
            if placed:
                before.append(binding)
            elif any(id(n) in loops for n in ancestors(binding.node, parents)):
                later.append(binding)
        if not before:
            return bindings
        # the last binding before the read that runs on every path to it: what came earlier, and
        # what a later binding brings round the loops it shares with it, stops there
        unconditional = [b for b in before if _statement_in(b.node, around, parents)]
        killer = max(unconditional, key=lambda b: b.order) if unconditional else None
        if later and (killer is None or not all(_rebinds_first(killer, b, loops, parents) for b in later)):
            return bindings  # a later binding in a loop around the read comes round to it
        last = max(before, key=lambda b: b.order)
        if last is killer:
            return [last]
        branches = _branching_statement(last.node, around, parents)
        if branches is not None and _every_branch_binds(branches, before, parents):
            # `if ...: a = f() else: a = g()`: one of the branches' bindings reaches the read
            return [b for b in before if branches in ancestors(b.node, parents)]
        if killer is not None:
            # `x = batch["x"]`, then `if use_cuda: x = x.cuda()`: the last of these, or the first
            return [b for b in before if b.order >= killer.order]
        return bindings  # inside a branch: it may not run

    def is_bare_parameter(self, expr: cst.BaseExpression) -> bool:
        """A name bound only as a parameter: a flag or a number as often as a tensor (`t[flag > 0]`
        is no mask, `print(name)` reads no device value)."""
        if not isinstance(expr, cst.Name):
            return False
        bindings = self.lookup(expr.value, expr)
        return bool(bindings) and all(b.kind == "param" for b in bindings)

    def qualified_name(self, expr: cst.BaseExpression) -> Optional[str]:
        """`torch.nn.functional.relu` for `F.relu` after `import torch.nn.functional as F`.

        A call resolves through its callee. Builtins resolve as `builtins.<name>` unless the
        file rebinds the name where it is used. Local variables resolve to None.
        """
        if type(expr) is cst.Call:  # not isinstance: libcst's classes are ABCs, slow to miss
            expr = expr.func
        known = self._qualified.get(expr, UNSET)  # None is an answer: a local variable
        if known is not UNSET:
            return known
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
            starred = self._star_imports.get(head)
            if starred is not None:
                full = starred + (f".{rest}" if rest else "")
                return _CANONICAL.get(full, full)
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


_BLOCKS = (cst.IndentedBlock, cst.Module)


def _statement_in(
    node: cst.CSTNode, around: dict[int, cst.CSTNode], parents: dict[cst.CSTNode, cst.CSTNode]
) -> bool:
    """`node` is (in) a statement of one of the blocks around the read: it runs on every path there."""
    statement = statement_of(node, parents)
    return statement is not None and id(statement[0]) in around


def _rebinds_first(
    killer: Binding, later: Binding, loops: set[int], parents: dict[cst.CSTNode, cst.CSTNode]
) -> bool:
    """Every loop that holds both the read and `later` also holds `killer`: each pass rebinds the
    name there before the read, so what `later` gave it never comes round."""
    killer_loops = {id(n) for n in ancestors(killer.node, parents)}
    return all(id(n) in killer_loops for n in ancestors(later.node, parents) if id(n) in loops)


def annotated_parameter(bindings: list[Binding], annotation: Callable[[cst.BaseExpression], bool]) -> bool:
    """Every binding is a parameter with an annotation that `annotation` accepts."""
    return bool(bindings) and all(
        b.kind == "param"
        and isinstance(b.node, cst.Param)
        and b.node.annotation is not None
        and annotation(b.node.annotation.annotation)
        for b in bindings
    )


def _branching_statement(
    node: cst.CSTNode, around: dict[int, cst.CSTNode], parents: dict[cst.CSTNode, cst.CSTNode]
) -> Optional[cst.If]:
    """The `if` statement of a block around the read that holds `node` in one of its branches."""
    child, parent = node, parents.get(node)
    while parent is not None:
        if isinstance(parent, _BLOCKS) and id(parent) in around:
            return child if isinstance(child, cst.If) else None
        child, parent = parent, parents.get(parent)
    return None


def _every_branch_binds(
    branch: cst.If, bindings: list[Binding], parents: dict[cst.CSTNode, cst.CSTNode]
) -> bool:
    """Each branch of the `if`/`elif`/`else` chain binds one of `bindings` in its own block, or
    leaves (`return`, `raise`); a chain without `else` may bind nothing."""
    blocks = {id(s[0]) for s in (statement_of(b.node, parents) for b in bindings) if s is not None}
    current: Optional[cst.BaseSuite | cst.If | cst.Else] = branch
    while isinstance(current, cst.If):
        if id(current.body) not in blocks and not _leaves(current.body):
            return False
        current = current.orelse
    if not isinstance(current, cst.Else):
        return False
    return id(current.body) in blocks or _leaves(current.body)


def _leaves(block: cst.BaseSuite) -> bool:
    return isinstance(block, cst.IndentedBlock) and isinstance(
        final_statement(block), (cst.Return, cst.Raise)
    )


def statement_of(
    node: cst.CSTNode, parents: dict[cst.CSTNode, cst.CSTNode]
) -> Optional[tuple[cst.CSTNode, cst.CSTNode]]:
    """The block and the statement of it that hold `node`."""
    child, parent = node, parents.get(node)
    while parent is not None and not isinstance(parent, _BLOCKS):
        child, parent = parent, parents.get(parent)
    return None if parent is None else (parent, child)


def _blocks_around(node: cst.CSTNode, parents: dict[cst.CSTNode, cst.CSTNode]) -> dict[int, cst.CSTNode]:
    """Each block around `node` (by id), with its statement that holds `node`."""
    around: dict[int, cst.CSTNode] = {}
    child, parent = node, parents.get(node)
    while parent is not None:
        if isinstance(parent, _BLOCKS):
            around[id(parent)] = child
        child, parent = parent, parents.get(parent)
    return around


def _placed_before(
    node: cst.CSTNode, around: dict[int, cst.CSTNode], parents: dict[cst.CSTNode, cst.CSTNode]
) -> Optional[bool]:
    """Whether `node` comes before the read whose blocks are `around`, compared in the innermost
    block both are in; None when both are in the same statement of it (`x = x.cpu()`, or an
    `if` with the read in one branch and `node` in the other)."""
    child, parent = node, parents.get(node)
    while parent is not None:
        if isinstance(parent, _BLOCKS) and id(parent) in around:
            read_at = around[id(parent)]
            if read_at is child:
                return False if _other_branch(child, node, around, parents) else None
            return _precedes(parent, child, read_at)
        child, parent = parent, parents.get(parent)
    return None


def _other_branch(
    statement: cst.CSTNode,
    node: cst.CSTNode,
    around: dict[int, cst.CSTNode],
    parents: dict[cst.CSTNode, cst.CSTNode],
) -> bool:
    """`node` and the read are in different branches of the `if`/`elif` chain `statement`: one
    run takes only one of them (a loop around both is the caller's to check)."""
    above = set(map(id, ancestors(node, parents)))
    current: Optional[cst.CSTNode] = statement
    while isinstance(current, cst.If):
        node_in_body = id(current.body) in above
        read_in_body = id(current.body) in around
        if node_in_body != read_in_body:
            return True
        if node_in_body:
            return False
        current = current.orelse
    return False


def _precedes(block: cst.CSTNode, first: cst.CSTNode, second: cst.CSTNode) -> bool:
    body = block.body  # type: ignore[attr-defined]
    for statement in body:
        if statement is second:
            return False
        if statement is first:
            return True
    return False

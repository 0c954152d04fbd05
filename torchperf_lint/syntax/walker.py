"""The single walk over a parsed file.

It records what the analysis and the rules need (parents, scopes and their bindings, import
aliases, classes, functions, loops, calls) and collects the nodes each rule asked for, so
that no rule walks the tree again. pyflakes keeps parents and scopes the same way.
"""

from __future__ import annotations

import dataclasses
import re
import weakref
from collections import defaultdict
from typing import Callable, Iterator, Optional, Union

import libcst as cst

ScopeNode = Union[cst.Module, cst.FunctionDef, cst.ClassDef, cst.Lambda]
Loop = Union[cst.For, cst.While]


def imported_names(node: Union[cst.Import, cst.ImportFrom]) -> Iterator[tuple[str, str]]:
    """(the name bound, what it names) for each name an import statement binds: `import a.b`
    binds `a`, `import a.b as c` binds `c` to `a.b`, `from a import b as c` binds `c` to `a.b`.
    Relative and star imports bind nothing known."""
    if isinstance(node, cst.Import):
        for alias in node.names:
            full = dotted_name(alias.name)
            if full is None:
                continue
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                yield alias.asname.name.value, full
            else:
                yield full.split(".")[0], full.split(".")[0]
        return
    if node.relative or node.module is None or isinstance(node.names, cst.ImportStar):
        return
    module = dotted_name(node.module)
    if module is None:
        return
    for alias in node.names:
        name = dotted_name(alias.name)
        if name is None:
            continue
        bound = name
        if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
            bound = alias.asname.name.value
        yield bound, f"{module}.{name}"


class Binding:
    """One place where a name gets a value.

    kind: "assign" (node is the value), "unpack" (node is the unpacked value), "augassign"
    (node is the AugAssign), "param" (node is the Param), "for" (node is the For),
    "compfor" (node is the CompFor), "with" (node is the WithItem), "import", "def", "class".
    order: its position in the walk, to tell bindings before a use from those after.
    """

    __slots__ = ("kind", "node", "_scope", "order")

    def __init__(self, kind: str, node: cst.CSTNode, scope: Scope, order: int = 0) -> None:
        self.kind = kind
        self.node = node
        # A weak reference: the scope holds its bindings, and a cycle between them would keep
        # the whole tree alive until the garbage collector's next full pass. FileFacts holds
        # every scope for as long as the file's analysis lives.
        self._scope = weakref.ref(scope)
        self.order = order

    @property
    def scope(self) -> Scope:
        scope = self._scope()
        assert scope is not None, "a binding outlived its file's facts"
        return scope

    def __repr__(self) -> str:
        return f"Binding({self.kind!r}, {type(self.node).__name__}, order={self.order})"


@dataclasses.dataclass(eq=False)
class Scope:
    node: ScopeNode
    parent: Optional[Scope]
    bindings: dict[str, list[Binding]] = dataclasses.field(default_factory=lambda: defaultdict(list))

    @property
    def is_class(self) -> bool:
        return isinstance(self.node, cst.ClassDef)


@dataclasses.dataclass(eq=False)
class ClassInfo:
    node: cst.ClassDef
    name: str
    methods: dict[str, cst.FunctionDef] = dataclasses.field(default_factory=dict)
    # self.<attr> = <value> anywhere in the class's methods
    attributes: dict[str, list[cst.BaseExpression]] = dataclasses.field(
        default_factory=lambda: defaultdict(list)
    )


@dataclasses.dataclass(eq=False)
class FunctionInfo:
    node: cst.FunctionDef
    name: str
    cls: Optional[ClassInfo]
    scope: Scope
    calls: list[cst.Call] = dataclasses.field(default_factory=list)

    @property
    def qualname(self) -> str:
        return f"{self.cls.name}.{self.name}" if self.cls else self.name


class FileFacts:
    """Everything the walk learned about one file."""

    def __init__(self, module: cst.Module) -> None:
        self.module = module
        self.parents: dict[cst.CSTNode, cst.CSTNode] = {}
        self.module_scope = Scope(module, None)
        self.scope_of: dict[cst.CSTNode, Scope] = {module: self.module_scope}
        self.imports: dict[str, str] = {}  # bound name -> qualified name
        self.classes: dict[str, ClassInfo] = {}
        self.class_of: dict[cst.ClassDef, ClassInfo] = {}
        self.functions: dict[cst.FunctionDef, FunctionInfo] = {}
        self.module_functions: dict[str, cst.FunctionDef] = {}
        self.loops: list[Loop] = []
        self.calls: list[cst.Call] = []  # every call, in source order
        self.module_calls: list[cst.Call] = []  # calls outside any function
        self.method_calls: dict[str, list[cst.Call]] = defaultdict(list)  # by attribute name
        self.aug_assigns: list[cst.AugAssign] = []
        # `buf[i] = v`, `self.buf[i] += v`: the stored subscripts, by the dotted name of what they index
        self.item_stores: dict[str, list[cst.Subscript]] = defaultdict(list)
        self.collected: dict[type, list[cst.CSTNode]] = defaultdict(list)
        self.order: dict[cst.CSTNode, int] = {}  # walk position of collected nodes

    def ancestors(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        """The nodes above `node`, innermost first."""
        return ancestors(node, self.parents)

    def enclosing_function(self, node: cst.CSTNode) -> Optional[cst.FunctionDef]:
        """The innermost `def` around `node`, if any."""
        current = self.parents.get(node)
        while current is not None:
            if isinstance(current, cst.FunctionDef):
                return current
            current = self.parents.get(current)
        return None


def ancestors(node: cst.CSTNode, parents: dict[cst.CSTNode, cst.CSTNode]) -> Iterator[cst.CSTNode]:
    """The nodes above `node` in a file's parent map, innermost first."""
    current = parents.get(node)
    while current is not None:
        yield current
        current = parents.get(current)


def final_statement(suite: cst.BaseSuite) -> Optional[cst.CSTNode]:
    """The statement a block ends with, a small statement unwrapped from its line (`return x`,
    `break`); None for an empty block."""
    last: Optional[cst.CSTNode] = suite.body[-1] if suite.body else None
    if isinstance(last, cst.SimpleStatementLine):
        last = last.body[-1] if last.body else None
    return last


def signed_int(expr: cst.BaseExpression) -> Optional[int]:
    """The value of an int literal, signs included (`3`, `-1`, `-(2)`), else None."""
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        inner = signed_int(expr.expression)
        return -inner if inner is not None else None
    if isinstance(expr, cst.Integer):
        value = expr.evaluated_value
        return value if isinstance(value, int) else None
    return None


def dotted_name(node: cst.BaseExpression) -> Optional[str]:
    """`a.b.c` for Name/Attribute chains, else None."""
    # type() rather than isinstance: libcst's classes are ABCs, and a miss costs a call into Python
    parts: list[str] = []
    while type(node) is cst.Attribute:
        parts.append(node.attr.value)
        node = node.value
    if type(node) is cst.Name:
        parts.append(node.value)
        return ".".join(reversed(parts))
    return None


_SCOPES = (cst.FunctionDef, cst.ClassDef, cst.Lambda)


def descendants(root: cst.CSTNode, enter_scopes: bool = True) -> Iterator[cst.CSTNode]:
    """`root` and every node under it but punctuation (`children`); with `enter_scopes=False`,
    the functions, classes and lambdas nested in it are yielded but not entered."""
    todo: list[cst.CSTNode] = [root]
    while todo:
        node = todo.pop()
        yield node
        if enter_scopes or node is root or not isinstance(node, _SCOPES):
            todo.extend(_children(node))


def children(node: cst.CSTNode) -> list[cst.CSTNode]:
    """The nodes directly under `node`, in source order, without punctuation, whitespace and
    operators (read from their parent). libcst's own `node.children` copies the node to find them."""
    return list(_children(node))


def visit(root: cst.CSTNode, visitor: cst.CSTVisitor) -> None:
    """`root.visit(visitor)` for a visitor that only reads: the same `visit_X`/`leave_X` calls in
    source order (punctuation, whitespace and operators left out), without the copy of every node
    that libcst's own visit makes on the way back up."""
    todo: list[tuple[cst.CSTNode, bool]] = [(root, False)]
    while todo:
        node, leaving = todo.pop()
        if leaving:
            visitor.on_leave(node)
            continue
        todo.append((node, True))
        if visitor.on_visit(node):
            todo.extend((child, False) for child in reversed(list(_children(node))))


class _OwnReturns(cst.CSTVisitor):
    def __init__(self) -> None:
        self.values: list[cst.BaseExpression] = []
        self.yields = False

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def visit_Yield(self, node: cst.Yield) -> None:
        self.yields = True

    def visit_Return(self, node: cst.Return) -> None:
        if node.value is not None:
            self.values.append(node.value)


def returned_values(function: cst.FunctionDef) -> tuple[list[cst.BaseExpression], bool]:
    """The values `function`'s own body returns (not those of functions, classes or lambdas
    nested in it), and whether it yields (a call of it makes a generator)."""
    visitor = _OwnReturns()
    visit(function.body, visitor)
    return visitor.values, visitor.yields


def unpacked_position(
    value: cst.BaseExpression, name: str, parents: dict[cst.CSTNode, cst.CSTNode]
) -> Optional[tuple[int, int]]:
    """Where `name` stands in `a, b = value`, and how many names there are."""
    assign = parents.get(value)
    if not isinstance(assign, cst.Assign):
        return None
    for target in assign.targets:
        names = target.target
        if not isinstance(names, (cst.Tuple, cst.List)):
            continue
        if any(isinstance(e, cst.StarredElement) for e in names.elements):
            return None
        for index, element in enumerate(names.elements):
            if isinstance(element.value, cst.Name) and element.value.value == name:
                return index, len(names.elements)
    return None


def argument_at(call: cst.Call, position: int, keyword: str) -> Optional[cst.BaseExpression]:
    """What `call` passes for the parameter at `position` named `keyword`; None past a `*args`
    or `**kwargs` that may hold it, or when it is not passed."""
    for number, arg in enumerate(call.args):
        if arg.star:
            return None
        named = arg.keyword.value if arg.keyword is not None else None
        if named == keyword or (named is None and number == position):
            return arg.value
    return None


def all_params(params: cst.Parameters) -> list[cst.Param]:
    """Every parameter of a signature: positional-only, regular, *args, keyword-only, **kwargs."""
    every = [*params.posonly_params, *params.params, *params.kwonly_params]
    if isinstance(params.star_arg, cst.Param):
        every.append(params.star_arg)
    if params.star_kwarg is not None:
        every.append(params.star_kwarg)
    return every


def _paired(
    target: cst.Tuple | cst.List, value: cst.BaseExpression
) -> list[tuple[cst.BaseExpression, cst.BaseExpression]]:
    """The element pairs of `a, b = x, y`; none where either side has a starred element or the
    lengths differ."""
    if not isinstance(value, (cst.Tuple, cst.List)) or len(value.elements) != len(target.elements):
        return []
    pairs = list(zip(target.elements, value.elements, strict=True))
    if any(isinstance(e, cst.StarredElement) for pair in pairs for e in pair):
        return []
    return [(t.value, v.value) for t, v in pairs]


def unpacked_element(value: cst.BaseExpression, name: str, facts: FileFacts) -> Optional[cst.BaseExpression]:
    """The element of `a, b = x.cpu(), y` that `name` takes, when both sides are plain tuples of
    the same length."""
    assign = facts.parents.get(value)
    if not isinstance(assign, cst.Assign) or not isinstance(value, (cst.Tuple, cst.List)):
        return None
    for target in assign.targets:
        if not isinstance(target.target, (cst.Tuple, cst.List)):
            continue
        for element, given in _paired(target.target, value):
            if isinstance(element, cst.Name) and element.value == name:
                return given
    return None


def bound_value(binding: Binding, name: str, facts: FileFacts) -> Optional[cst.BaseExpression]:
    """What an assignment gives `name`: the value of `name = v`, or the element of `a, b = x, y`
    it takes; None for other bindings and for unpacking anything but a plain tuple."""
    node = binding.node
    if binding.kind == "assign" and isinstance(node, cst.BaseExpression):
        return node
    if binding.kind == "unpack" and isinstance(node, cst.BaseExpression):
        return unpacked_element(node, name, facts)
    return None


def _target_names(target: cst.BaseExpression) -> list[cst.Name]:
    if isinstance(target, cst.Name):
        return [target]
    if isinstance(target, (cst.Tuple, cst.List)):
        names: list[cst.Name] = []
        for element in target.elements:
            names.extend(_target_names(element.value))
        return names
    if isinstance(target, cst.StarredElement):
        return _target_names(target.value)
    return []


class Walker:
    """Records facts while `walk` visits every node once."""

    def __init__(self, module: cst.Module, interest: frozenset[type]) -> None:
        self.facts = FileFacts(module)
        self._interest = interest
        self._count = 0
        self._scopes: list[Scope] = [self.facts.module_scope]
        self._functions: list[FunctionInfo] = []
        self._classes: list[ClassInfo] = []

    # -- generic dispatch -------------------------------------------------------------
    def enter(self, node: cst.CSTNode) -> None:
        """`node` is entered (its parent is already recorded)."""
        self._count += 1
        kind = type(node)
        handler = _ENTER.get(kind)
        if handler is not None:
            handler(self, node)
        if kind in self._interest:
            self.facts.collected[kind].append(node)
            self.facts.order[node] = self._count

    def leave(self, node: cst.CSTNode) -> None:
        """A scope node (`_SCOPE_NODES`) is left."""
        kind = type(node)
        self._scopes.pop()
        if kind is cst.FunctionDef:
            self._functions.pop()
        elif kind is cst.ClassDef:
            self._classes.pop()

    # -- helpers ----------------------------------------------------------------------
    def _bind(self, name: str, kind: str, node: cst.CSTNode) -> None:
        scope = self._scopes[-1]
        scope.bindings[name].append(Binding(kind, node, scope, self._count))

    def _push_scope(self, node: ScopeNode) -> Scope:
        scope = Scope(node, self._scopes[-1])
        self._scopes.append(scope)
        self.facts.scope_of[node] = scope
        return scope

    def _bind_params(self, params: cst.Parameters) -> None:
        for param in all_params(params):
            self._bind(param.name.value, "param", param)

    # -- handlers ---------------------------------------------------------------------
    def _import(self, node: cst.Import) -> None:
        for bound, target in imported_names(node):
            self.facts.imports[bound] = target
            self._bind(bound, "import", node)

    def _import_from(self, node: cst.ImportFrom) -> None:
        for bound, target in imported_names(node):
            self.facts.imports[bound] = target
            self._bind(bound, "import", node)

    def _function(self, node: cst.FunctionDef) -> None:
        name = node.name.value
        self._bind(name, "def", node)
        outer = self._scopes[-1]
        cls = self._classes[-1] if outer.is_class and self._classes else None
        if cls is not None:
            cls.methods.setdefault(name, node)
        elif outer.node is self.facts.module:
            self.facts.module_functions.setdefault(name, node)
        scope = self._push_scope(node)
        info = FunctionInfo(node, name, cls, scope)
        self.facts.functions[node] = info
        self._functions.append(info)
        self._bind_params(node.params)

    def _lambda(self, node: cst.Lambda) -> None:
        self._push_scope(node)
        self._bind_params(node.params)

    def _class(self, node: cst.ClassDef) -> None:
        name = node.name.value
        self._bind(name, "class", node)
        info = ClassInfo(node, name)
        self.facts.classes.setdefault(name, info)
        self.facts.class_of[node] = info
        self._classes.append(info)
        self._push_scope(node)

    def _record_target(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        if isinstance(target, cst.Name):
            self._bind(target.value, "assign", value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for name in _target_names(target):
                self._bind(name.value, "unpack", value)
            for element, given in _paired(target, value):
                if isinstance(element, cst.Attribute):  # `self.model, self.optimizer = model, optimizer`
                    self._record_target(element, given)
        elif (
            isinstance(target, cst.Attribute)
            and isinstance(target.value, cst.Name)
            and target.value.value == "self"
            and self._functions
            and self._functions[-1].cls is not None
        ):
            self._functions[-1].cls.attributes[target.attr.value].append(value)
        elif isinstance(target, cst.Subscript):
            self._record_item_store(target)

    def _record_item_store(self, target: cst.Subscript) -> None:
        indexed = target.value
        while isinstance(indexed, cst.Subscript):
            indexed = indexed.value
        name = dotted_name(indexed)
        if name is not None:
            self.facts.item_stores[name].append(target)

    def _assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._record_target(target.target, node.value)

    def _ann_assign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._record_target(node.target, node.value)

    def _aug_assign(self, node: cst.AugAssign) -> None:
        self.facts.aug_assigns.append(node)
        if isinstance(node.target, cst.Name):
            self._bind(node.target.value, "augassign", node)
        elif isinstance(node.target, cst.Subscript):
            self._record_item_store(node.target)

    def _for(self, node: cst.For) -> None:
        self.facts.loops.append(node)
        for name in _target_names(node.target):
            self._bind(name.value, "for", node)

    def _while(self, node: cst.While) -> None:
        self.facts.loops.append(node)

    def _comp_for(self, node: cst.CompFor) -> None:
        for name in _target_names(node.target):
            self._bind(name.value, "compfor", node)

    def _with_item(self, node: cst.WithItem) -> None:
        if node.asname is not None:
            for name in _target_names(node.asname.name):
                self._bind(name.value, "with", node)

    def _call(self, node: cst.Call) -> None:
        self.facts.calls.append(node)
        if self._functions:
            self._functions[-1].calls.append(node)
        else:
            self.facts.module_calls.append(node)
        if isinstance(node.func, cst.Attribute):
            self.facts.method_calls[node.func.attr.value].append(node)


# Handlers by node type, as plain functions: bound methods stored on the walker would make it a
# reference cycle, which keeps the whole tree alive until the garbage collector's next full pass.
_ENTER: dict[type, Callable[[Walker, cst.CSTNode], None]] = {
    cst.Import: Walker._import,  # type: ignore[dict-item]  # handlers narrow the node type
    cst.ImportFrom: Walker._import_from,  # type: ignore[dict-item]
    cst.FunctionDef: Walker._function,  # type: ignore[dict-item]
    cst.ClassDef: Walker._class,  # type: ignore[dict-item]
    cst.Lambda: Walker._lambda,  # type: ignore[dict-item]
    cst.Assign: Walker._assign,  # type: ignore[dict-item]
    cst.AnnAssign: Walker._ann_assign,  # type: ignore[dict-item]
    cst.AugAssign: Walker._aug_assign,  # type: ignore[dict-item]
    cst.For: Walker._for,  # type: ignore[dict-item]
    cst.While: Walker._while,  # type: ignore[dict-item]
    cst.CompFor: Walker._comp_for,  # type: ignore[dict-item]
    cst.WithItem: Walker._with_item,  # type: ignore[dict-item]
    cst.Call: Walker._call,  # type: ignore[dict-item]
}


# Fields that hold only whitespace, comments and punctuation: no rule or fact needs them, and
# skipping them halves the walk.
_PUNCTUATION_FIELD = re.compile(
    r"whitespace|lpar|rpar|lbracket|rbracket|lbrace|rbrace|comma|semicolon|colon|leading_lines"
    r"|lines_after|footer|header|newline|operator|equal|^dot$|arrow|walrus|asynchronous|trailing"
)
# Where dataclass field order differs from source order.
_SOURCE_ORDER: dict[type, tuple[str, ...]] = {
    cst.FunctionDef: ("decorators", "name", "params", "returns", "body"),
    cst.ClassDef: ("decorators", "name", "bases", "keywords", "body"),
    cst.IfExp: ("body", "test", "orelse"),
    cst.Arg: ("keyword", "value"),
    cst.ImportFrom: ("relative", "module", "names"),
    cst.ExceptHandler: ("type", "name", "body"),
    cst.ExceptStarHandler: ("type", "name", "body"),
}


class _ChildFields(dict[type, tuple[str, ...]]):
    """The fields of a node type that can hold nodes, in source order; found once per type."""

    def __missing__(self, kind: type) -> tuple[str, ...]:
        names = _SOURCE_ORDER.get(kind) or tuple(
            f.name for f in dataclasses.fields(kind) if not _PUNCTUATION_FIELD.search(f.name)
        )
        self[kind] = names
        return names


class _ValueKinds(dict[type, int]):
    """What a field's value is, by its type: 1 a node, 2 a list or tuple (of nodes, maybe), 0
    neither. Looked up by type, because isinstance against libcst's classes (ABCs) costs a call
    into Python for every value that is not one."""

    def __missing__(self, kind: type) -> int:
        found = 1 if issubclass(kind, cst.CSTNode) else 2 if issubclass(kind, (list, tuple)) else 0
        self[kind] = found
        return found


_child_fields = _ChildFields()
# Nodes that open a scope: leaving one is all that Walker.leave records (the module's is never left).
_SCOPE_NODES = frozenset({cst.FunctionDef, cst.Lambda, cst.ClassDef})
_value_kinds = _ValueKinds()


def _children(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    kinds = _value_kinds
    for name in _child_fields[type(node)]:
        value = getattr(node, name)
        kind = kinds[type(value)]
        if kind == 1:
            yield value
        elif kind == 2:
            for item in value:
                if kinds[type(item)] == 1:
                    yield item


def walk(module: cst.Module, interest: frozenset[type]) -> FileFacts:
    """Visit every node once, depth first in source order, without recursion (so deeply nested
    code cannot exhaust the stack) and without libcst's visitor machinery, which rebuilds every
    node it passes."""
    walker = Walker(module, interest)
    parents = walker.facts.parents
    walker.enter(module)
    stack: list[tuple[cst.CSTNode, Iterator[cst.CSTNode]]] = [(module, _children(module))]
    while stack:
        node, children = stack[-1]
        child = next(children, None)
        if child is None:
            stack.pop()
            if type(node) in _SCOPE_NODES:
                walker.leave(node)
            continue
        parents[child] = node
        walker.enter(child)
        stack.append((child, _children(child)))
    return walker.facts


# the keyword each registration method takes its value by
_REGISTERED_VALUE = {"register_buffer": "tensor", "register_parameter": "param"}


def registrations(
    facts: FileFacts, name: str, methods: tuple[str, ...] = ("register_buffer",)
) -> list[tuple[cst.Call, Optional[cst.BaseExpression]]]:
    """Each `x.register_buffer("name", value)` of the file (or another of `methods`), with the value
    it registers, by position or keyword; None where `*args`/`**kwargs` or its absence hide it."""
    found: list[tuple[cst.Call, Optional[cst.BaseExpression]]] = []
    for method in methods:
        for call in facts.method_calls.get(method, ()):
            starred = any(arg.star for arg in call.args)
            positional = [] if starred else [arg.value for arg in call.args if arg.keyword is None]
            named = {arg.keyword.value: arg.value for arg in call.args if arg.keyword is not None}
            label = positional[0] if positional else named.get("name")
            if not isinstance(label, cst.SimpleString) or label.evaluated_value != name:
                continue
            found.append(
                (call, positional[1] if len(positional) > 1 else named.get(_REGISTERED_VALUE[method]))
            )
    return found

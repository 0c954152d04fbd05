"""How `nn.Module` objects are built and wired, read from the walk's facts.

Construction-time rules (conv bias before a norm) need three facts that no single node holds:
which constructor call built the module behind a name or `self.<attr>`; which modules sit next to
each other in an `nn.Sequential(...)`, including one built from a `layers` list; and which module
call's output another module call receives (`self.bn(self.conv(x))`, or `x = self.conv(x)`
followed by `x = self.bn(x)`). Everything here is syntactic and local: an answer it cannot be
sure of is None or missing, never a guess.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import libcst as cst

from ..syntax.walker import Binding, FileFacts, descendants, dotted_name
from .added_keys import added_keys
from .hotpath import HotPaths
from .names import Names

_ORDERED_DICTS = frozenset({"collections.OrderedDict", "typing.OrderedDict"})
# Module methods that return the module they are called on: `nn.Conv2d(...).cuda()` is still the conv.
_CHAINED = frozenset(
    {"to", "cuda", "cpu", "float", "double", "half", "bfloat16", "train", "eval", "requires_grad_"}
)
_Lines = (cst.SimpleStatementLine, cst.SimpleStatementSuite)
Pair = tuple[cst.BaseExpression, cst.BaseExpression]


def _index(items: Sequence[cst.CSTNode], node: cst.CSTNode) -> int:
    return next(i for i, item in enumerate(items) if item is node)


class ModuleGraph:
    def __init__(self, facts: FileFacts, names: Names, hot: HotPaths) -> None:
        self._facts = facts
        self._names = names
        self._hot = hot

    # -- constructors -------------------------------------------------------------------
    def constructor_calls(self, expr: cst.BaseExpression) -> list[cst.Call] | None:
        """The calls that may have built the object `expr` refers to: `expr` itself when it is a
        call, the value of a name's only binding, or every value `self.<attr>` is given in its
        class (and the in-file classes it derives from); `.to(...)`/`.cuda()` chained on a
        constructor lead back to it. None when any of them is not a call."""
        if isinstance(expr, cst.Call):
            return [_unchained(expr)]
        if isinstance(expr, cst.Name):
            call = self._single_call_binding(expr)
            return [call] if call is not None else None
        if isinstance(expr, cst.Attribute) and _is_self(expr.value):
            cls = self._hot.enclosing_class(expr)
            if cls is None:
                return None
            values = self._hot.attribute_values(cls, expr.attr.value)
            calls: list[cst.Call] = []
            for value in values:
                call = _unchained(value) if isinstance(value, cst.Call) else None
                if isinstance(value, cst.Name):
                    call = self._single_call_binding(value)
                if call is None:
                    return None
                calls.append(call)
            return calls or None
        return None

    def _single_call_binding(self, name: cst.Name) -> cst.Call | None:
        bindings = self._names.lookup(name.value, name)
        if len(bindings) == 1 and bindings[0].kind == "assign" and isinstance(bindings[0].node, cst.Call):
            return _unchained(bindings[0].node)
        return None

    def star_kwargs_may_supply(self, call: cst.Call, keyword: str) -> bool:
        """A `**mapping` argument of `call` could pass `keyword`: true unless every such mapping is a
        name bound once, in scope, to a dict display or `dict(k=v)` whose keys are known and differ
        (timm's `**dd`, with `dd = {'device': device, 'dtype': dtype}`), and that its scope never
        adds keys to (`kwargs.update(...)`, `kwargs[k] = v`)."""
        for arg in call.args:
            if arg.star != "**":
                continue
            items = self._known_items(arg.value)
            if items is None or keyword in items:
                return True
        return False

    def star_kwargs_value(self, call: cst.Call, keyword: str) -> cst.BaseExpression | None:
        """The value a known `**mapping` of `call` passes for `keyword` (`loader_args =
        dict(num_workers=os.cpu_count(), ...)` then `DataLoader(ds, **loader_args)`), or None."""
        for arg in call.args:
            items = self._known_items(arg.value) if arg.star == "**" else None
            if items is not None and keyword in items:
                return items[keyword]
        return None

    def _known_items(self, expr: cst.BaseExpression) -> dict[str, cst.BaseExpression] | None:
        """The keys and values of a dict whose keys are all known, or None."""
        if isinstance(expr, cst.Name):
            bindings = self._names.lookup(expr.value, expr)
            if (
                len(bindings) == 1
                and bindings[0].kind == "param"
                and not self._mutated(expr.value, bindings[0])
            ):
                return self._handed_items(expr.value, bindings[0])
            added = self._added_keys(expr.value, bindings[0]) if len(bindings) == 1 else None
            if added is None or bindings[0].kind != "assign":
                return None
            value = bindings[0].node
        else:
            value, added = expr, {}
        items: dict[str, cst.BaseExpression] = dict(added)
        if isinstance(value, cst.Dict):
            for element in value.elements:
                key = element.key if isinstance(element, cst.DictElement) else None
                text = key.evaluated_value if isinstance(key, cst.SimpleString) else None
                if not isinstance(text, str) or not isinstance(element, cst.DictElement):
                    return None
                items[text] = element.value
            return items
        if isinstance(value, cst.Call) and self._names.qualified_name(value) == "builtins.dict":
            for arg in value.args:
                if arg.keyword is None:
                    return None
                items[arg.keyword.value] = arg.value
            return items
        return None

    def _handed_items(self, name: str, binding: Binding) -> dict[str, cst.BaseExpression] | None:
        """The keys of a function's own `**name`, where every project call hands it the same ones
        (EntryFacts.keyword_items), each read as `name['key']`: what the function passes on."""
        function = binding.scope.node
        if not isinstance(function, cst.FunctionDef):
            return None
        star = function.params.star_kwarg
        index = self._hot.function_index(function)
        if star is None or star.name.value != name or index is None:
            return None
        keys = self._hot.entry.keyword_items_of(index)
        if keys is None:
            return None
        return {key: cst.parse_expression(f"{name}[{key!r}]") for key in keys}

    def _mutated(self, name: str, binding: Binding) -> bool:
        """The scope that binds `name` may add keys to it (`d.update(...)`, `d[k] = v`, `d |= ...`)."""
        return self._added_keys(name, binding) != {}

    def _added_keys(self, name: str, binding: Binding) -> dict[str, cst.BaseExpression] | None:
        """The keys the scope that binds `name` adds to it under string literals (ConvNeXt's
        `opt_args['eps'] = args.opt_eps`), each read back as `name['key']`; None where it may add
        others (`d.update(...)`, `d[k] = v`, `d.setdefault(k, v)`, `d |= ...`). A literal key
        given to `setdefault` counts as added (its `opt_args.setdefault('betas', ...)`)."""
        keys = added_keys(self._facts.module.code_for_node(binding.scope.node), name)
        if keys is None:
            return None
        # each read back as `name['key']`: `opt_args.setdefault('betas', ...)` counts as a store
        return {key: cst.parse_expression(f"{name}[{key!r}]") for key in keys}

    # -- nn.Sequential --------------------------------------------------------------------
    def sequential_neighbours(self, call: cst.Call) -> list[Pair]:
        """(a, b) for each module expression `a` directly followed by `b` in an `nn.Sequential(...)`
        call (or `super().__init__(...)` in a subclass of it): positional arguments, an
        `OrderedDict` of named modules, or `*layers` where `layers` is a list the same function
        builds with a literal, `+=`, `.append` and `.extend`. A list
        grown in several statements is followed only across consecutive statements: anything in
        between (an `if`, a call) may add modules of its own."""
        is_sequential = self._names.qualified_name(call) == "torch.nn.Sequential"
        if not is_sequential and not self._sequential_super_init(call):
            return []
        args = list(call.args)
        if any(arg.keyword is not None or arg.star == "**" for arg in args):
            return []
        if len(args) == 1 and not args[0].star and isinstance(args[0].value, cst.Call):
            named = self._ordered_dict_values(args[0].value)
            if named is not None:
                return _pairs(named)
        pairs: list[Pair] = []
        run: list[cst.BaseExpression | None] = []
        for arg in args:
            if not arg.star:
                run.append(arg.value)
                continue
            pairs.extend(_pairs(run))
            run = []
            if isinstance(arg.value, (cst.List, cst.Tuple)):
                pairs.extend(_pairs(_elements(arg.value)))
            elif isinstance(arg.value, cst.Name):
                pairs.extend(self._list_neighbours(arg.value, call))
        pairs.extend(_pairs(run))
        return pairs

    def _sequential_super_init(self, call: cst.Call) -> bool:
        """`super().__init__(...)` in a class deriving from `nn.Sequential`."""
        func = call.func
        if not (
            isinstance(func, cst.Attribute)
            and func.attr.value == "__init__"
            and isinstance(func.value, cst.Call)
            and isinstance(func.value.func, cst.Name)
            and func.value.func.value == "super"
        ):
            return False
        cls = self._hot.enclosing_class(call)
        return cls is not None and any(
            self._names.qualified_name(base.value) == "torch.nn.Sequential" for base in cls.node.bases
        )

    def _ordered_dict_values(self, call: cst.Call) -> list[cst.BaseExpression | None] | None:
        if self._names.qualified_name(call) not in _ORDERED_DICTS:
            return None
        if all(arg.keyword is not None for arg in call.args):
            return [arg.value for arg in call.args]
        if len(call.args) != 1 or call.args[0].keyword is not None or call.args[0].star:
            return None
        items = call.args[0].value
        if not isinstance(items, (cst.List, cst.Tuple)):
            return None
        values: list[cst.BaseExpression | None] = []
        for element in items.elements:
            pair = element.value
            if isinstance(element, cst.StarredElement) or not isinstance(pair, cst.Tuple):
                values.append(None)
            elif len(pair.elements) == 2 and not isinstance(pair.elements[1], cst.StarredElement):
                values.append(pair.elements[1].value)
            else:
                values.append(None)
        return values

    def _list_neighbours(self, name: cst.Name, at: cst.Call) -> list[Pair]:
        bindings = self._names.lookup(name.value, at)
        if not bindings or bindings[0].scope is not self._names.scope_at(at):
            return []
        additions: dict[cst.CSTNode, list[cst.BaseExpression | None]] = {}
        for binding in bindings:
            added = self._binding_additions(binding)
            if added is None:
                return []  # bound to something that is not a list we can read
            statement, items = added
            additions[statement] = items
        for method in ("append", "extend"):
            for call in self._facts.method_calls.get(method, ()):
                receiver = call.func.value  # type: ignore[attr-defined]  # method calls are attributes
                if not (isinstance(receiver, cst.Name) and receiver.value == name.value):
                    continue
                if self._names.lookup(name.value, call) is not bindings:
                    continue
                expression = self._facts.parents.get(call)
                if not isinstance(expression, cst.Expr) or len(call.args) != 1 or call.args[0].keyword:
                    continue
                value = call.args[0].value
                if method == "append":
                    additions[expression] = [value]
                elif isinstance(value, (cst.List, cst.Tuple)):
                    additions[expression] = _elements(value)
        pairs: list[Pair] = []
        for statement, items in additions.items():
            pairs.extend(_pairs(items))
            following = sibling_statement(statement, self._facts.parents, 1)
            if following is not None and following in additions and items and additions[following]:
                pairs.extend(_pairs([items[-1], additions[following][0]]))
        return pairs

    def _binding_additions(
        self, binding: Binding
    ) -> tuple[cst.CSTNode, list[cst.BaseExpression | None]] | None:
        """The statement a binding of the list is, and the modules it adds."""
        node = binding.node
        if binding.kind == "assign" and isinstance(node, (cst.List, cst.Tuple)):
            statement = self._facts.parents.get(node)
            if isinstance(statement, (cst.Assign, cst.AnnAssign)):
                return statement, _elements(node)
        if (
            binding.kind == "augassign"
            and isinstance(node, cst.AugAssign)
            and isinstance(node.operator, cst.AddAssign)
            and isinstance(node.value, (cst.List, cst.Tuple))
        ):
            return node, _elements(node.value)
        return None

    # -- data flow between module calls -------------------------------------------------------
    def producer(self, call: cst.Call) -> cst.Call | None:
        """The call whose result is the only argument of `call`: `inner` in `outer(inner(x))`, or
        the value of the statement just before, when it assigns the argument's name
        (`x = self.conv(x)` then `x = self.bn(x)`)."""
        if len(call.args) != 1 or call.args[0].keyword is not None or call.args[0].star:
            return None
        argument = call.args[0].value
        if isinstance(argument, cst.Call):
            return argument
        if not isinstance(argument, cst.Name):
            return None
        statement = self._statement_of(call)
        previous = sibling_statement(statement, self._facts.parents, -1) if statement is not None else None
        if not isinstance(previous, cst.Assign) or len(previous.targets) != 1:
            return None
        target = previous.targets[0].target
        if not (isinstance(target, cst.Name) and target.value == argument.value):
            return None
        if not isinstance(previous.value, cst.Call):
            return None
        if any(b.node is previous.value for b in self._names.lookup(argument.value, call)):
            return previous.value
        return None

    def folded_away(self, built: cst.Call, module: cst.BaseExpression) -> bool:
        """`module` is `self.<attr>`, deleted by the method that calls `built` (`delattr(self, "bn")`,
        `self.__delattr__("bn")`, `del self.bn`): a fold for deployment, the norm's statistics folded
        into the new module (yolov5's and ultralytics' `fuse()`), which never meets the norm."""
        if not (isinstance(module, cst.Attribute) and _is_self(module.value)):
            return False
        function = self._facts.enclosing_function(built)
        info = self._facts.functions.get(function) if function is not None else None
        if function is None or info is None:
            return False
        attr = module.attr.value
        for call in info.calls:
            args = [a.value for a in call.args if a.keyword is None and not a.star]
            if dotted_name(call.func) == "delattr" and len(args) == 2 and _is_self(args[0]):
                deleted = args[1]
            elif dotted_name(call.func) == "self.__delattr__" and len(args) == 1:
                deleted = args[0]
            else:
                continue
            if isinstance(deleted, cst.SimpleString) and deleted.evaluated_value == attr:
                return True
        return any(
            isinstance(target, cst.Attribute) and _is_self(target.value) and target.attr.value == attr
            for statement in descendants(function)
            if isinstance(statement, cst.Del)
            for target in _deleted(statement.target)
        )

    def _statement_of(self, node: cst.CSTNode) -> cst.BaseSmallStatement | None:
        """The simple statement holding `node`, unless a compound statement or function is nearer."""
        current = self._facts.parents.get(node)
        while current is not None:
            if isinstance(current, cst.BaseSmallStatement):
                return current
            if isinstance(current, (cst.BaseCompoundStatement, cst.Lambda, cst.BaseComp)):
                return None
            current = self._facts.parents.get(current)
        return None


def _unchained(call: cst.Call) -> cst.Call:
    """`nn.Conv2d(...)` for `nn.Conv2d(...).to(device).train()`."""
    while (
        isinstance(call.func, cst.Attribute)
        and call.func.attr.value in _CHAINED
        and isinstance(call.func.value, cst.Call)
    ):
        call = call.func.value
    return call


def _deleted(target: cst.BaseExpression) -> list[cst.BaseExpression]:
    """`del a, b` -> `a`, `b`."""
    if isinstance(target, (cst.Tuple, cst.List)):
        return [element.value for element in target.elements]
    return [target]


def _is_self(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "self"


def _elements(literal: cst.List | cst.Tuple) -> list[cst.BaseExpression | None]:
    """A list display's items; None stands for a `*starred` item, whose length is unknown."""
    return [None if isinstance(e, cst.StarredElement) else e.value for e in literal.elements]


def _pairs(items: Sequence[cst.BaseExpression | None]) -> list[Pair]:
    return [(a, b) for a, b in itertools.pairwise(items) if a is not None and b is not None]


def sibling_statement(
    statement: cst.CSTNode, parents: dict[cst.CSTNode, cst.CSTNode], step: int
) -> cst.BaseSmallStatement | None:
    """The simple statement that runs just before (step -1) or after (+1) `statement` in the same
    block, across `;` and line breaks; None when a compound statement or the block's edge is there."""
    line = parents.get(statement)
    if not isinstance(line, _Lines):
        return None
    position = _index(line.body, statement) + step
    if 0 <= position < len(line.body):
        return line.body[position]
    if isinstance(line, cst.SimpleStatementSuite):
        return None
    block = parents.get(line)
    if not isinstance(block, (cst.IndentedBlock, cst.Module)):
        return None
    position = _index(block.body, line) + step
    if 0 <= position < len(block.body):
        neighbour = block.body[position]
        if isinstance(neighbour, cst.SimpleStatementLine) and neighbour.body:
            return neighbour.body[0 if step > 0 else -1]
    return None

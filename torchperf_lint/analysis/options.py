"""Command-line options and what the default run gives them (RULES.md, "Values that travel": a
branch taken only under an option that is off by default is cold, `if not args.prefetcher:` where
`--no-prefetcher` is opt-in, `if args.metrics_avg:` defaulting to None).

Read on CPython's `ast` for the project pass, one module at a time:
- the defaults its parsers declare: `add_argument("--no-prefetcher", action="store_true")` gives
  `no_prefetcher` False, `add_argument("--metrics-avg", default=None)` None, `set_defaults(k=v)`
  v; a default that is not a literal, a required option and a positional one are unknown ("?");
  the keywords of a namespace built from keywords alone are defaults too (tacotron2's
  `hparams = HParams(fp16_run=False, ...)`, `SimpleNamespace(...)`);
- the names that hold the parsed options in each scope: bound to `parser.parse_args()`, to the
  first element of `parse_known_args()`, to such a namespace, or to what a function of the module
  returns that holds them (`args, args_text = _parse_args()`), and a module's such names seen from
  its functions;
- what the code stores on an attribute of a plain name (`args.prefetcher = not args.no_prefetcher`),
  since a stored value replaces the default, and whether it stores on the options by a computed
  name (`setattr(args, k, v)`, `vars(args).update(cfg)`), after which no default is known.
The project pass (project/options.py) joins them across modules and call sites.
"""

from __future__ import annotations

import ast
import dataclasses
from typing import Iterator, Optional, Union

from ..syntax.ast_nodes import every_node
from .arguments import value_token

UNKNOWN = "?"
# Namespaces a configuration builds from keywords (`tf.contrib.training.HParams(fp16_run=False, ...)`,
# `SimpleNamespace(...)`, `argparse.Namespace(...)`): their keywords are the defaults, as a parser's
_NAMESPACES = frozenset({"HParams", "SimpleNamespace", "Namespace"})
_PARSE = frozenset({"parse_args", "parse_known_args", "parse_intermixed_args", "parse_known_intermixed_args"})
_KNOWN = frozenset({"parse_known_args", "parse_known_intermixed_args"})  # (namespace, the rest)
Scope = Union[ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda]


@dataclasses.dataclass
class ModuleOptions:
    defaults: dict[str, str] = dataclasses.field(default_factory=dict)  # dest -> token
    # attribute -> [receiver, the stored value's text] for `NAME.attr = value`, NAME not self
    stores: dict[str, list[list[str]]] = dataclasses.field(default_factory=dict)
    computed_store: bool = False  # stores on the options by a name worked out at run time
    # the names holding the parsed options, per scope (the module or a function node)
    holders: dict[int, list[str]] = dataclasses.field(default_factory=dict)
    # the module's functions that return the options: name -> -1 for the whole value, i for
    # element i of a tuple (`def parse_opt(): ...; return opt`)
    returning: dict[str, int] = dataclasses.field(default_factory=dict)

    def holders_anywhere(self) -> set[str]:
        return {name for names in self.holders.values() for name in names}


def _dest(call: ast.Call) -> Optional[tuple[str, bool]]:
    """(the attribute an `add_argument` call sets, whether it is positional)."""
    for keyword in call.keywords:
        if keyword.arg == "dest":
            value = keyword.value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                return value.value, False
            return None
    names = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    if not names or len(names) != len(call.args):
        return None
    if not names[0].startswith("-"):
        return names[0], True
    long = next((n for n in names if n.startswith("--")), names[0])
    return long.lstrip("-").replace("-", "_"), False


def _default(call: ast.Call, positional: bool) -> str:
    keywords = {k.arg: k.value for k in call.keywords if k.arg}
    if "default" in keywords:
        return value_token(keywords["default"]) or UNKNOWN
    required = keywords.get("required")
    if positional or not (required is None or (isinstance(required, ast.Constant) and not required.value)):
        return UNKNOWN  # every run passes it: what it holds is the caller's
    action = keywords.get("action")
    name = action.value if isinstance(action, ast.Constant) else None
    if name == "store_true":
        return "False"
    if name == "store_false":
        return "True"
    if action is None or name in ("store", "store_const", "append", "append_const", "count", "extend"):
        return "None"
    return UNKNOWN  # a custom action or BooleanOptionalAction without a default


def _keyword_namespace(node: ast.AST) -> bool:
    """`HParams(epochs=500, fp16_run=False)`: a namespace of options built from keywords alone."""
    if not (isinstance(node, ast.Call) and node.keywords and not node.args):
        return False
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return name in _NAMESPACES and all(k.arg is not None for k in node.keywords)


def _join(defaults: dict[str, str], dest: str, token: str) -> None:
    known = defaults.get(dest)
    defaults[dest] = token if known is None or known == token else UNKNOWN


def _scopes(tree: ast.Module, nodes: list[ast.AST]) -> Iterator[Scope]:
    yield tree
    for node in nodes:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def _own(scope: Scope) -> Iterator[ast.AST]:
    """The nodes of a scope's own body, not those of functions or classes nested in it."""
    todo: list[ast.AST] = list(scope.body) if isinstance(scope.body, list) else [scope.body]
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            todo.extend(ast.iter_child_nodes(node))
        elif isinstance(node, ast.ClassDef):
            todo.extend(node.body)  # a class body's statements run in the scope around it


def parsed_position(value: ast.AST, returning: dict[str, int]) -> Optional[int]:
    """Where `value` holds the options: -1 for the whole value, i for element i of a tuple."""
    if isinstance(value, ast.Subscript) and isinstance(value.slice, ast.Constant):
        inner = parsed_position(value.value, returning)
        return -1 if inner == value.slice.value else None
    if not isinstance(value, ast.Call):
        return None
    if _keyword_namespace(value):
        return -1
    func = value.func
    if isinstance(func, ast.Attribute) and func.attr in _PARSE:
        return 0 if func.attr in _KNOWN else -1
    if isinstance(func, ast.Name):
        return returning.get(func.id)
    return None


def _bound(scope: Scope, own: list[ast.AST], returning: dict[str, int]) -> tuple[set[str], set[str]]:
    """(names every binding of which holds the options, every name the scope binds); `own`: the
    scope's own nodes."""
    holding: dict[str, bool] = {}
    for node in own:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            holding[node.name] = False
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            holding.setdefault(node.id, False)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            where = parsed_position(node.value, returning)
            for target in targets:
                if isinstance(target, ast.Name):
                    holding[target.id] = holding.get(target.id, True) and where == -1
                elif isinstance(target, ast.Tuple):
                    for position, element in enumerate(target.elts):
                        if isinstance(element, ast.Name):
                            holding[element.id] = holding.get(element.id, True) and where == position
    if not isinstance(scope, ast.Module):
        args = scope.args
        for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
            if arg is not None:
                holding[arg.arg] = False
    return {name for name, holds in holding.items() if holds}, set(holding)


def _returned(own: list[ast.AST], holders: set[str], returning: dict[str, int]) -> Optional[int]:
    for node in own:
        if isinstance(node, ast.Return) and node.value is not None:
            value = node.value
            if parsed_position(value, returning) is not None:
                return parsed_position(value, returning)
            if isinstance(value, ast.Name) and value.id in holders:
                return -1
            if isinstance(value, ast.Tuple):
                for position, element in enumerate(value.elts):
                    if isinstance(element, ast.Name) and element.id in holders:
                        return position
    return None


def module_options(tree: ast.Module, source: str) -> ModuleOptions:
    """What `tree` says of command-line options, read only where its text declares or parses
    them; the stores on them are the caller's to record, node by node in a walk of its own
    (`record_store`, with `holders_anywhere()`): the project pass's summarizer walks every node."""
    found = ModuleOptions()
    namespaces = "Namespace(" in source or "HParams(" in source
    declares = "add_argument" in source or "set_defaults" in source or namespaces
    parses = namespaces or any(method in source for method in _PARSE)
    nodes = every_node(tree) if declares or parses else []
    if declares:
        _declared(nodes, found.defaults)
        if "cuda" in source:
            _open_cuda_switches(nodes, found.defaults)
    if parses:
        _find_holders(tree, nodes, found.holders, found.returning)
    return found


def _declared(nodes: list[ast.AST], defaults: dict[str, str]) -> None:
    for node in nodes:
        if _keyword_namespace(node):
            for keyword in node.keywords:  # type: ignore[attr-defined]  # a Call
                _join(defaults, keyword.arg, value_token(keyword.value) or UNKNOWN)
            continue
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if node.func.attr == "add_argument":
            dest = _dest(node)
            if dest is not None:
                _join(defaults, dest[0], _default(node, dest[1]))
        elif node.func.attr == "set_defaults":
            for keyword in node.keywords:
                if keyword.arg:
                    defaults[keyword.arg] = value_token(keyword.value) or UNKNOWN


def _moves_to_cuda(nodes: list[ast.AST]) -> bool:
    """A `.cuda(...)` call or a "cuda..." string among `nodes` and what they hold."""
    for node in (inner for outer in nodes for inner in ast.walk(outer)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "cuda":
            return True
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("cuda"):
            return True
    return False


def _open_cuda_switches(nodes: list[ast.AST], defaults: dict[str, str]) -> None:
    """An option whose branch moves work to CUDA (`if args.gpu: images = images.cuda()`, `"cuda" if
    args.cuda else "cpu"`) selects the configuration the device rules judge: a GPU run passes it, whatever
    its default, so it is left open rather than decided by that default."""
    for node in nodes:
        if isinstance(node, ast.If):
            sides: list[ast.AST] = [*node.body, *node.orelse]
        elif isinstance(node, ast.IfExp):
            sides = [node.body, node.orelse]
        else:
            continue
        tested = {
            n.attr
            for n in ast.walk(node.test)
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
        }
        if tested & defaults.keys() and _moves_to_cuda(sides):
            for name in tested & defaults.keys():
                defaults[name] = UNKNOWN


def _find_holders(
    tree: ast.Module, nodes: list[ast.AST], into: dict[int, list[str]], returning: dict[str, int]
) -> None:
    scopes = list(_scopes(tree, nodes))
    own = {id(scope): list(_own(scope)) for scope in scopes}  # read once, asked up to four times
    bound: dict[int, tuple[set[str], set[str]]] = {}
    for _ in range(4):  # a function returning what another returns: a short chain
        bound = {id(scope): _bound(scope, own[id(scope)], returning) for scope in scopes}
        before = dict(returning)
        for scope in scopes:
            if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
                position = _returned(own[id(scope)], bound[id(scope)][0], returning)
                if position is not None:
                    returning[scope.name] = position
        if returning == before:
            break
    _declared_global(tree, scopes, own, bound)
    _visible(tree, set(), bound, own, into)


def _declared_global(
    tree: ast.Module,
    scopes: list[Scope],
    own: dict[int, list[ast.AST]],
    bound: dict[int, tuple[set[str], set[str]]],
) -> None:
    """A function that binds the options to a name it declares `global` (`global args; args =
    parser.parse_args()` in `main`) binds the module's name, which every function then reads."""
    module_holders, module_names = bound[id(tree)]
    holding: dict[str, bool] = {name: name in module_holders for name in module_names}
    for scope in scopes:
        if scope is tree:
            continue
        declared = {name for node in own[id(scope)] if isinstance(node, ast.Global) for name in node.names}
        holders, names = bound[id(scope)]
        for name in declared & names:
            holding[name] = holding.get(name, True) and name in holders  # every binding holds them
            names.discard(name)
            holders.discard(name)
    module_names.update(holding)
    module_holders.difference_update(holding)
    module_holders.update(name for name, holds in holding.items() if holds)


def _visible(
    scope: Scope,
    outer: set[str],
    bound: dict[int, tuple[set[str], set[str]]],
    own: dict[int, list[ast.AST]],
    into: dict[int, list[str]],
) -> None:
    """Each scope's holders: its own, and those of the scopes around it that it does not rebind."""
    holders, names = bound[id(scope)]
    seen = holders | (outer - names)
    if seen:
        into[id(scope)] = sorted(seen)
    for node in own[id(scope)]:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            _visible(node, seen, bound, own, into)


def _stored_text(node: Union[ast.Assign, ast.AugAssign, ast.AnnAssign], target: ast.Attribute) -> str:
    """The text of what a store gives `target`: the value; `a | b` for `a |= b` (a flag joined
    with another, `opt.save_txt |= opt.save_hybrid`); UNKNOWN for another augmented store
    (`args.lr *= world_size` depends on more than the defaults) or no value."""
    if node.value is None:
        return UNKNOWN
    if isinstance(node, ast.AugAssign):
        if isinstance(node.op, (ast.BitOr, ast.BitAnd)):
            return ast.unparse(ast.BinOp(left=target, op=node.op, right=node.value))
        return UNKNOWN
    return ast.unparse(node.value)


def _option_targets(
    target: ast.AST, value: Optional[ast.AST]
) -> Iterator[tuple[ast.Attribute, Optional[ast.AST]]]:
    """(`NAME.attr` stored on, NAME not self; the value it gets, None when not known), through
    tuple targets (`opt.conf, opt.save_json = 0.25, False`)."""
    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id != "self":
        yield target, value
    elif isinstance(target, (ast.Tuple, ast.List)):
        paired = isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts)
        for position, element in enumerate(target.elts):
            yield from _option_targets(element, value.elts[position] if paired else None)  # type: ignore[union-attr]


# the kinds of node that may store on the options
STORING = frozenset(
    {ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor, ast.comprehension, ast.Call}
)


def record_store(node: ast.AST, holders: set[str], found: ModuleOptions) -> None:
    """What `node` stores on a name that may hold the options, into `found`."""
    if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for whole in targets:
            for target, value in _option_targets(whole, node.value):
                if value is node.value:
                    text = _stored_text(node, target)
                else:
                    text = ast.unparse(value) if value is not None else UNKNOWN
                found.stores.setdefault(target.attr, []).append([target.value.id, text])  # type: ignore[attr-defined]
    elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
        for target, _ in _option_targets(node.target, None):  # `for opt.weights in weights:`
            found.stores.setdefault(target.attr, []).append([target.value.id, UNKNOWN])  # type: ignore[attr-defined]
    elif not isinstance(node, ast.Call):
        return
    elif _stores_by_computed_name(node, holders):
        found.computed_store = True
    elif (named := _named_setattr(node)) is not None:
        attribute, receiver, text = named
        found.stores.setdefault(attribute, []).append([receiver, text])


def _named_setattr(node: ast.AST) -> Optional[tuple[str, str, str]]:
    """(attribute, receiver, value text) of `setattr(args, "prefetcher", value)`: a store under a
    name written out."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr"):
        return None
    if len(node.args) != 3:
        return None
    receiver, name, value = node.args
    if (
        isinstance(receiver, ast.Name)
        and receiver.id != "self"
        and isinstance(name, ast.Constant)
        and isinstance(name.value, str)
    ):
        return name.value, receiver.id, ast.unparse(value)
    return None


def _stores_by_computed_name(call: ast.Call, holders: set[str]) -> bool:
    """`setattr(args, k, v)`, `vars(args).update(cfg)`, `args.__dict__.update(cfg)`."""
    func = call.func
    if isinstance(func, ast.Name) and func.id == "setattr" and len(call.args) == 3:
        receiver = call.args[0]
        return (
            isinstance(receiver, ast.Name)
            and receiver.id in holders
            and not (len(call.args) > 1 and isinstance(call.args[1], ast.Constant))
        )
    if isinstance(func, ast.Attribute) and func.attr in ("update", "__setitem__", "setdefault"):
        owner = func.value
        if isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "vars":
            return any(isinstance(a, ast.Name) and a.id in holders for a in owner.args)
        return (
            isinstance(owner, ast.Attribute)
            and owner.attr == "__dict__"
            and isinstance(owner.value, ast.Name)
            and owner.value.id in holders
        )
    return False

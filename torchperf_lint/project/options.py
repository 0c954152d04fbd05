"""What the default run gives the project's command-line options, and where a name holds them
(RULES.md, "Values that travel": a branch taken only under an option or a configuration value
that is off by default is cold). analysis/options.py reads each module; this joins them:

- an option's default is known when every parser that declares it, in the module that parses
  the options and the modules it imports (another script's parser is not this one), declares the
  same literal, no shipped config file names it (a YAML key or a `--flag` in a YAML or shell
  file: `parser.set_defaults(**yaml_cfg)` or a launch script may set it), and every store on an
  attribute of that name (`args.prefetcher = not args.no_prefetcher`) gives a value the defaults
  decide; any store on the options by a computed name (`setattr(args, k, v)`) leaves them all open;
- a name holds the options where its module binds it to them, or to what a function of another
  module returns that holds them (tacotron2's `hparams = create_hparams()`, a namespace of
  keywords built in hparams.py), and a parameter does when every call of its function in the
  project passes it a name that does (a function handed on as a callback has callers nobody
  sees: its parameters stay open).
Each function then knows `NAME.dest` for each name that holds the options there: the values that
project/arguments.py hands to both walks, which decide a test on them (analysis/arguments.py).
"""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path
from typing import Optional

from ..analysis.arguments import OPTIONS, truth, value_token
from ..analysis.module_flags import READ_PREFIX
from ..analysis.options import UNKNOWN
from .arguments import Values, bound_self, passed_tokens
from .refs import ClassRef, FunctionRef, Module, ProjectView
from .summary import Call

_CONFIG_SUFFIXES = (".yaml", ".yml", ".sh")
_SKIPPED_DIRECTORIES = frozenset({"node_modules", "site-packages", "venv", "__pycache__"})
_MOST_CONFIG_FILES = 2000
_YAML_KEY = re.compile(r"^\s*(?:-\s*)?[\"']?([A-Za-z_][\w-]*)[\"']?\s*:", re.MULTILINE)
_FLAG = re.compile(r"(?<![\w-])--([A-Za-z][\w-]*)")
_ROUNDS = 8


def option_values(project: ProjectView, configured: frozenset[str]) -> dict[tuple[int, int], Values]:
    """Per function (the top level is -1), `NAME.dest` -> token for each name holding the options
    there and each option whose default run value is known; `configured`: configured_names()."""
    if not any(m.summary.option_defaults for m in project.modules.values()):
        return {}
    known: dict[int, dict[str, str]] = {}  # per module that parses them: the options it may see
    found: dict[tuple[int, int], Values] = {}
    for key, names in _holders(project).items():
        values: Values = {}
        for name, origins in sorted(names.items()):
            for origin in origins:
                if origin not in known:
                    known[origin] = _known(project, project_module(project, origin), configured)
            # options parsed by several scripts (main.py's and a launcher's whose parser takes it
            # as a parent): what their defaults agree on
            first, *others = [known[origin] for origin in origins]
            agreed = {
                dest: token for dest, token in first.items() if all(o.get(dest) == token for o in others)
            }
            values.update((f"{name}.{dest}", token) for dest, token in agreed.items())
        if values:
            found[key] = values
    return found


def flag_values(
    project: ProjectView, configured: frozenset[str], options: dict[tuple[int, int], Values]
) -> dict[tuple[int, int], Values]:
    """Per module's top level (-1), and per function that reads them as globals
    (Function.flag_reads), the settings the top level fixes (analysis/module_flags.py) that the
    default run keeps: none a shipped config names, none stored as an attribute anywhere
    (`bench.profile = True`), and, in a module that calls `exec`, none another module assigns
    at its top level (a config file a configurator may run). A name bound more than once takes
    the value its bindings agree on, an option read by the option's default (`options`: what the
    top level's options hold): `FLASH = 0`, then `FLASH = args.flash` with `--flash` 0."""

    flagged = [m for m in project.modules.values() if m.summary.module_flags or m.summary.module_flag_choices]
    if not flagged:
        return {}
    outer = {a for m in project.modules.values() for a in m.summary.outer_stores}
    elsewhere: dict[str, int] = {}
    if any(m.summary.execs for m in flagged):
        for module in project.modules.values():
            for name in module.summary.assigned_globals:
                elsewhere[name] = elsewhere.get(name, 0) + 1
    found: dict[tuple[int, int], Values] = {}
    for module in flagged:
        summary = module.summary
        top = FunctionRef(module, -1).key()
        fixed = {**summary.module_flags, **_agreed_choices(summary.module_flag_choices, options.get(top, {}))}
        values = {
            name: token
            for name, token in fixed.items()
            if name not in configured
            and name not in outer
            and not (summary.execs and elsewhere.get(name, 0) > 1)
        }
        if not values:
            continue
        found[top] = values
        for index, function in enumerate(summary.functions):
            read = {name: values[name] for name in function.flag_reads if name in values}
            if read:
                found[FunctionRef(module, index).key()] = read
    return found


def _agreed_choices(choices: dict[str, list[str]], options: Values) -> dict[str, str]:
    """The names whose every binding gives an equal value on the default run (`0` and `False`
    too, as Python compares them): the token of the first."""
    agreed: dict[str, str] = {}
    for name, tokens in choices.items():
        resolved = [options.get(t[len(READ_PREFIX) :]) if t.startswith(READ_PREFIX) else t for t in tokens]
        values = [_literal(token) for token in resolved]
        first, token = values[0], resolved[0]
        if (
            token is not None
            and first is not _UNKNOWN
            and all(v is not _UNKNOWN and v == first for v in values)
        ):
            agreed[name] = token
    return agreed


_UNKNOWN = object()


def _literal(token: Optional[str]) -> object:
    try:
        return ast.literal_eval(token) if token is not None else _UNKNOWN
    except (ValueError, SyntaxError, RecursionError, MemoryError):
        return _UNKNOWN


def project_module(project: ProjectView, key: int) -> Module:
    return next(m for m in project.modules.values() if id(m) == key)


def _known(project: ProjectView, origin: Module, configured: frozenset[str]) -> dict[str, str]:
    """The options a namespace parsed in `origin` holds with a known value: declared by the
    parsers of `origin` and of what it imports (another script's parser is not this one)."""
    seen = {id(origin): origin}
    todo = [origin]
    while todo:
        for module in project.imported_modules(todo.pop()):
            if id(module) not in seen:
                seen[id(module)] = module
                todo.append(module)
    modules = list(seen.values())
    if any(m.summary.option_computed_store for m in modules):
        return {}
    defaults: dict[str, str] = {}
    for module in modules:
        for dest, token in module.summary.option_defaults.items():
            _join(defaults, dest, token)
    for name in configured & set(defaults):
        defaults[name] = UNKNOWN
    return _with_stores(defaults, modules)


def _join(tokens: dict[str, str], name: str, token: str) -> None:
    seen = tokens.get(name)
    tokens[name] = token if seen is None or seen == token else UNKNOWN


def _with_stores(defaults: dict[str, str], modules: list[Module]) -> dict[str, str]:
    """The known values once the stores are joined in: a store may run or not, so the value is
    the default only when every store gives it too; an attribute only stored (not declared)
    takes what every store gives, when every store is on a name that holds the options."""
    stores: dict[str, list[list[str]]] = {}
    for module in modules:
        for attribute, written in module.summary.option_stores.items():
            stores.setdefault(attribute, []).extend(written)
    holders = {n for m in modules for f in (m.summary.toplevel, *m.summary.functions) for n in f.namespaces}
    tokens = dict(defaults)
    for _ in range(3):  # a derived option read by another store: a short chain
        settled = {d: t for d, t in tokens.items() if t != UNKNOWN}
        after = dict(defaults)
        for attribute, written in stores.items():
            if attribute not in defaults and not all(receiver in holders for receiver, _ in written):
                continue
            for receiver, text in written:
                _join(after, attribute, _stored(text, receiver, settled))
        if after == tokens:
            break
        tokens = after
    return {d: t for d, t in tokens.items() if t != UNKNOWN}


def _stored(text: str, receiver: str, known: dict[str, str]) -> str:
    try:
        value = ast.parse(text, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return UNKNOWN
    token = value_token(value)
    if token is not None:
        return token
    if isinstance(value, ast.BinOp) and isinstance(value.op, (ast.BitOr, ast.BitAnd)):
        return _flags_joined(value, receiver, known)
    if isinstance(value, (ast.UnaryOp, ast.Compare)) or (
        isinstance(value, ast.BoolOp) and all(isinstance(v, (ast.UnaryOp, ast.Compare)) for v in value.values)
    ):
        holds = truth(value, {f"{receiver}.{dest}": token for dest, token in known.items()})
        if holds is not None:
            return repr(holds)
    return UNKNOWN


def _flags_joined(value: ast.BinOp, receiver: str, known: dict[str, str]) -> str:
    """`opt.save_txt | opt.save_hybrid` of two flags whose values are known booleans."""
    flags: list[bool] = []
    for side in (value.left, value.right):
        token = value_token(side)
        if token is None and isinstance(side, ast.Attribute) and isinstance(side.value, ast.Name):
            token = known.get(side.attr) if side.value.id == receiver else None
        if token not in ("True", "False"):
            return UNKNOWN
        flags.append(token == "True")
    joined = flags[0] or flags[1] if isinstance(value.op, ast.BitOr) else flags[0] and flags[1]
    return repr(joined)


# function -> name -> the modules that parsed them (sorted ids)
Holders = dict[tuple[int, int], dict[str, tuple[int, ...]]]


def _holders(project: ProjectView) -> Holders:
    """The names holding the options in each function, with the module that parsed them: its
    module's own, and parameters every call of the project passes options parsed in one module."""

    holders: Holders = {}
    sites: dict[tuple[int, int], tuple[FunctionRef, list[tuple[FunctionRef, Call]]]] = {}
    owners = [
        (FunctionRef(module, offset - 1), info)
        for module in project.modules.values()
        for offset, info in enumerate([module.summary.toplevel, *module.summary.functions])
    ]
    for caller, info in owners:
        if info.namespaces:
            holders[caller.key()] = {name: (id(caller.module),) for name in info.namespaces}
        for name, written in info.options_calls.items():
            origin = _options_returned_by(project, caller.module, written)
            if origin is not None:
                holders.setdefault(caller.key(), {})[name] = (origin,)
    passing = any(info.options_calls for _, info in owners) or any(
        OPTIONS in call.args.values() for _, info in owners for call in [*info.calls, *info.cold_calls]
    )
    if not passing:
        return holders  # no call passes the options on: no parameter holds them
    for caller, info in owners:
        for call in [*info.calls, *info.cold_calls]:
            for callee in project.resolve_call(caller, call) or _constructor(project, caller, call):
                sites.setdefault(callee.key(), (callee, []))[1].append((caller, call))
    sites = {key: entry for key, entry in sites.items() if not project.handed_on(entry[0])}
    kept = _kept_from_init(project)
    for _ in range(_ROUNDS):
        changed = False
        for key, (callee, calls) in sites.items():
            own = holders.get(key, {})
            for param, origins in _passed_options(callee, calls, holders).items():
                if own.get(param) != origins:
                    holders.setdefault(key, {})[param] = origins
                    own = holders[key]
                    changed = True
        for init_key, stores in kept.items():
            held = holders.get(init_key, {})
            for param, (attribute, methods) in stores.items():
                if param not in held:
                    continue
                for method in methods:
                    mine = holders.setdefault(method, {})
                    if mine.get(f"self.{attribute}") != held[param]:
                        mine[f"self.{attribute}"] = held[param]
                        changed = True
        if not changed:
            break
    return holders


def _kept_from_init(
    project: ProjectView,
) -> dict[tuple[int, int], dict[str, tuple[str, list[tuple[int, int]]]]]:
    """Per `__init__`, its parameters that it keeps on an attribute no other method of the class
    stores (`self.args = args`), with the attribute and the class's methods that read it: the
    options a construction hands `__init__` travel with the instance (submitit launchers'
    `Trainer(args)`, then `main(self.args)` in `__call__`)."""
    found: dict[tuple[int, int], dict[str, tuple[str, list[tuple[int, int]]]]] = {}
    for module in project.modules.values():
        functions = module.summary.functions
        by_class: dict[int, list[int]] = {}
        for index, info in enumerate(functions):
            if info.cls >= 0:
                by_class.setdefault(info.cls, []).append(index)
        for indices in by_class.values():
            stores: dict[str, list[tuple[int, str]]] = {}
            for index in indices:
                for attribute, param in functions[index].self_stores:
                    stores.setdefault(attribute, []).append((index, param))
            for attribute, where in stores.items():
                index, param = where[0]
                if len(where) > 1 or not param or functions[index].name != "__init__":
                    continue
                methods = [FunctionRef(module, i).key() for i in indices if i != index]
                key = FunctionRef(module, index).key()
                found.setdefault(key, {})[param] = (attribute, methods)
    return found


def _options_returned_by(project: ProjectView, module: Module, callee: str) -> Optional[int]:
    """The module whose options `callee` (a function another module defines, as `module` writes
    it) returns whole: tacotron2's `create_hparams()` in hparams.py."""
    found = project.resolve_dotted(module, callee)
    if not isinstance(found, FunctionRef) or found.index < 0 or found.info.parent >= 0 or found.info.cls >= 0:
        return None
    return id(found.module) if found.module.summary.options_returning.get(found.info.name) == -1 else None


def _constructor(project: ProjectView, caller: FunctionRef, call: Call) -> list[FunctionRef]:
    """The `__init__` a construction of a project class runs (`Trainer(args)`)."""
    if call.kind not in ("global", "dotted"):
        return []
    cls = project.resolve_dotted(caller.module, call.target)
    init = project.find_method(cls, "__init__") if isinstance(cls, ClassRef) else None
    return [init] if init is not None else []


def _passed_options(
    callee: FunctionRef, calls: list[tuple[FunctionRef, Call]], holders: Holders
) -> dict[str, tuple[int, ...]]:
    """The parameters of `callee` every call passes options to, with the modules that parsed them."""
    found: Optional[dict[str, tuple[int, ...]]] = None
    for caller, call in calls:
        held = holders.get(caller.key(), {})

        def handed(param: str, into: str, held: dict[str, tuple[int, ...]] = held) -> Optional[str]:
            return f"{OPTIONS}:{','.join(map(str, held[param]))}" if param in held else None

        passed: dict[str, tuple[int, ...]] = {}
        for param, token in passed_tokens(call, callee.info, bound_self(call, callee.info), handed).items():
            if token == OPTIONS:
                passed[param] = (id(caller.module),)  # a name of the caller's module holds them
            elif token is not None and token.startswith(f"{OPTIONS}:"):
                passed[param] = tuple(int(o) for o in token.split(":", 1)[1].split(","))
        if found is None:
            found = passed
        else:
            found = {p: tuple(sorted({*o, *passed[p]})) for p, o in found.items() if p in passed}
        if not found:
            return {}
    return found or {}


def configured_names(root: Path) -> frozenset[str]:
    """The option names a shipped config file sets: YAML keys and `--flags` in YAML and shell
    files under the project root, as argparse spells their attributes (`no_prefetcher`)."""
    names: set[str] = set()
    seen = 0
    for folder, directories, files in os.walk(root):
        directories[:] = [d for d in directories if not d.startswith(".") and d not in _SKIPPED_DIRECTORIES]
        for file in files:
            if not file.endswith(_CONFIG_SUFFIXES):
                continue
            seen += 1
            if seen > _MOST_CONFIG_FILES:
                return frozenset(names)
            try:
                text = Path(folder, file).read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            if not file.endswith(".sh"):
                names.update(m.replace("-", "_") for m in _YAML_KEY.findall(text))
            names.update(m.replace("-", "_") for m in _FLAG.findall(text))
    return frozenset(names)

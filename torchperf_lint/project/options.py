"""What the default run gives the project's command-line options, and where a name holds them
(RULES.md, "Values that travel": a branch taken only under an option or a configuration value
that is off by default is cold). analysis/options.py reads each module; this joins them:

- an option's default is known when every parser of the project that declares it declares the
  same literal, no shipped config file names it (a YAML key or a `--flag` in a YAML or shell
  file: `parser.set_defaults(**yaml_cfg)` or a launch script may set it), and every store on an
  attribute of that name (`args.prefetcher = not args.no_prefetcher`) gives a value the defaults
  decide; any store on the options by a computed name (`setattr(args, k, v)`) leaves them all open;
- a name holds the options where its module binds it to them, and a parameter does when every
  call of its function in the project passes it a name that does (a function handed on as a
  callback has callers nobody sees: its parameters stay open).
Each function then knows `NAME.dest` for each name that holds the options there: the values that
project/arguments.py hands to both walks, which decide a test on them (analysis/arguments.py).
"""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Optional

from ..analysis.arguments import OPTIONS, truth, value_token
from ..analysis.options import UNKNOWN
from .arguments import Values, bound_self, passed_tokens

if TYPE_CHECKING:
    from .graph import FunctionRef, Project

_CONFIG_SUFFIXES = (".yaml", ".yml", ".sh")
_SKIPPED_DIRECTORIES = frozenset({"node_modules", "site-packages", "venv", "__pycache__"})
_MOST_CONFIG_FILES = 2000
_YAML_KEY = re.compile(r"^\s*(?:-\s*)?[\"']?([A-Za-z_][\w-]*)[\"']?\s*:", re.MULTILINE)
_FLAG = re.compile(r"(?<![\w-])--([A-Za-z][\w-]*)")
_ROUNDS = 8


def option_values(project: Project) -> dict[tuple[int, int], Values]:
    """Per function (the top level is -1), `NAME.dest` -> token for each name holding the options
    there and each option whose default run value is known."""
    modules = list(project.modules.values())
    if not any(m.summary.option_defaults for m in modules):
        return {}
    if any(m.summary.option_computed_store for m in modules):
        return {}
    defaults: dict[str, str] = {}
    for module in modules:
        for dest, token in module.summary.option_defaults.items():
            _join(defaults, dest, token)
    for name in configured_names(project.root):
        if name in defaults:
            defaults[name] = UNKNOWN
    known = _with_stores(defaults, modules)
    if not known:
        return {}
    return {
        key: {f"{name}.{dest}": token for name in sorted(names) for dest, token in known.items()}
        for key, names in _holders(project).items()
    }


def _join(tokens: dict[str, str], name: str, token: str) -> None:
    seen = tokens.get(name)
    tokens[name] = token if seen is None or seen == token else UNKNOWN


def _with_stores(defaults: dict[str, str], modules: Iterable) -> dict[str, str]:  # type: ignore[type-arg]
    """The known values once the stores are joined in: a store may run or not, so the value is
    the default only when every store gives it too; an attribute only stored (not declared)
    takes what every store gives."""
    stores: dict[str, list[list[str]]] = {}
    for module in modules:
        for attribute, written in module.summary.option_stores.items():
            stores.setdefault(attribute, []).extend(written)
    tokens = dict(defaults)
    for _ in range(3):  # a derived option read by another store: a short chain
        settled = {d: t for d, t in tokens.items() if t != UNKNOWN}
        after = dict(defaults)
        for attribute, written in stores.items():
            if attribute not in defaults and not _holds_options(written, modules):
                continue
            for receiver, text in written:
                _join(after, attribute, _stored(text, receiver, settled))
        if after == tokens:
            break
        tokens = after
    return {d: t for d, t in tokens.items() if t != UNKNOWN}


def _holds_options(written: list[list[str]], modules: Iterable) -> bool:  # type: ignore[type-arg]
    """Every store of an attribute no parser declares is on a name that holds the options
    somewhere (`args.prefetcher = ...`), not on another object."""
    names = {n for m in modules for f in (m.summary.toplevel, *m.summary.functions) for n in f.namespaces}
    return all(receiver in names for receiver, _ in written)


def _stored(text: str, receiver: str, known: dict[str, str]) -> str:
    try:
        value = ast.parse(text, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return UNKNOWN
    token = value_token(value)
    if token is not None:
        return token
    if isinstance(value, (ast.UnaryOp, ast.Compare)) or (
        isinstance(value, ast.BoolOp) and all(isinstance(v, (ast.UnaryOp, ast.Compare)) for v in value.values)
    ):
        holds = truth(value, {f"{receiver}.{dest}": token for dest, token in known.items()})
        if holds is not None:
            return repr(holds)
    return UNKNOWN


def _holders(project: Project) -> dict[tuple[int, int], set[str]]:
    """The names holding the options in each function: its module's, and parameters every
    call of the project passes them to."""
    from .graph import FunctionRef

    holders: dict[tuple[int, int], set[str]] = {}
    sites: dict[tuple[int, int], tuple[FunctionRef, list[tuple[FunctionRef, object]]]] = {}
    handed: set[str] = set()
    for module in project.modules.values():
        handed.update(module.summary.handed, module.summary.handed_members)
        for offset, info in enumerate([module.summary.toplevel, *module.summary.functions]):
            caller = FunctionRef(module, offset - 1)
            if info.namespaces:
                holders[caller.key()] = set(info.namespaces)
            for call in [*info.calls, *info.cold_calls]:
                for callee in project.resolve_call(caller, call):
                    sites.setdefault(callee.key(), (callee, []))[1].append((caller, call))
    sites = {key: entry for key, entry in sites.items() if entry[0].info.name not in handed}
    for _ in range(_ROUNDS):
        changed = False
        for key, (callee, calls) in sites.items():
            found = _passed_options(callee, calls, holders)
            if not found <= holders.get(key, set()):
                holders.setdefault(key, set()).update(found)
                changed = True
        if not changed:
            break
    return holders


def _passed_options(
    callee: FunctionRef, calls: list[tuple[FunctionRef, object]], holders: dict[tuple[int, int], set[str]]
) -> set[str]:
    """The parameters of `callee` every call passes the options to."""
    found: Optional[set[str]] = None
    for caller, call in calls:
        held = holders.get(caller.key(), set())

        def handed(param: str, into: str, held: set[str] = held) -> Optional[str]:
            return OPTIONS if param in held else None

        tokens = passed_tokens(call, callee.info, bound_self(call, callee.info), handed)  # type: ignore[arg-type]
        params = {param for param, token in tokens.items() if token == OPTIONS}
        found = params if found is None else found & params
    return found or set()


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

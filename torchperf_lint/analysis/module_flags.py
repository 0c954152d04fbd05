"""Module-level settings a script fixes once (RULES.md, "Values that travel": a branch taken only
under a setting that is off by default is cold): `profile = False` at the top of nanoGPT's
bench.py, then `if profile:` around the profiler's loop.

Read on CPython's `ast`, one module at a time: a name is a flag when the module's own scope binds
it exactly once, by `NAME = literal`, no function declares it `global`, and nothing writes the
module's globals by a computed name (`globals()[k] = v`, `globals().update(cfg)`). A module that
calls `exec` (nanoGPT's `exec(open('configurator.py').read())`) may have any global rebound: from
the command line, which is opt-in, or from a config file, which the project pass accounts for by
leaving open every name another module of the project assigns at its top level (config/*.py).
"""

from __future__ import annotations

import ast
import dataclasses
import re
from typing import Iterator, Optional

from .arguments import NOT_NONE, value_token

_TEST_WORD = re.compile(r"\b(?:if|elif|while)\b")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_GLOBAL_STATEMENT = re.compile(r"(?:^|;)[ \t]*global[ \t]+([A-Za-z_][\w \t,]*)", re.MULTILINE)
_GLOBALS_CALL = re.compile(r"\bglobals\s*\(|\bvars\s*\(\s*\)")  # what _writes_globals looks for
# the token of an option read among a name's bindings (`FLASH = args.flash`)
READ_PREFIX = "="
# what a `globals()` call may be read through without writing to it
_READS = frozenset({"items", "keys", "values", "get", "copy"})


@dataclasses.dataclass
class ModuleFlags:
    flags: dict[str, str] = dataclasses.field(default_factory=dict)  # name -> literal token, read by a test
    # names bound more than once, each time to a literal or an option read (`FLASH = 0`, then
    # `FLASH = args.flash` under `if __name__ == "__main__":`): name -> their tokens, an option
    # read as READ_PREFIX + its text; the project pass keeps those whose values agree
    choices: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    execs: bool = False  # calls `exec`: a configurator may rebind its globals
    assigned: list[str] = dataclasses.field(default_factory=list)  # names its top level assigns


def _scope_nodes(body: list[ast.stmt]) -> Iterator[ast.AST]:
    """The nodes of the module's own scope: not those of functions, classes, lambdas or
    comprehensions, which bind names of their own."""
    todo: list[ast.AST] = list(body)
    while todo:
        node = todo.pop()
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            todo.extend(node.decorator_list)  # evaluated in the module's scope
            continue
        if isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            continue
        todo.extend(ast.iter_child_nodes(node))


def _bound_names(node: ast.AST) -> Iterator[str]:
    """The names `node` binds in the scope it runs in."""
    if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
        yield node.id
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        yield node.name
    elif isinstance(node, (ast.Import, ast.ImportFrom)):
        for alias in node.names:
            yield (alias.asname or alias.name).split(".")[0]
    elif isinstance(node, ast.ExceptHandler) and node.name:
        yield node.name
    elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
        yield node.name
    elif isinstance(node, ast.MatchMapping) and node.rest:
        yield node.rest


def _writes_globals(tree: ast.Module) -> bool:
    """`globals()` written or handed on (`globals()[k] = v`, `globals().update(cfg)`, `exec(code,
    globals())`): any global may change by a name worked out at run time."""
    parents: dict[int, ast.AST] = {}
    calls: list[ast.Call] = []
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[id(child)] = node
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("globals", "vars")
        ):
            if node.func.id == "globals" or not node.args:
                calls.append(node)
    for call in calls:
        parent = parents.get(id(call))
        if isinstance(parent, ast.Attribute) and parent.attr in _READS:
            continue
        if isinstance(parent, ast.Subscript) and isinstance(parent.ctx, ast.Load):
            continue
        if isinstance(parent, ast.Compare):
            continue  # `k in globals()`
        return True
    return False


def _setting_token(value: ast.expr) -> Optional[str]:
    """A literal's token, or READ_PREFIX and the text of an attribute read (`args.flash`)."""
    token = value_token(value)
    if token is not None:
        return token if token != NOT_NONE else None
    if isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name):
        return f"{READ_PREFIX}{value.value.id}.{value.attr}"
    return None


def _test_lines(source: str) -> Iterator[str]:
    """The lines that say `if`, `elif` or `while` (the substring check first: a regex scan of every
    line costs four times as much)."""
    for line in source.split("\n"):
        if ("if" in line or "while" in line) and _TEST_WORD.search(line):
            yield line


def module_flags(tree: ast.Module, source: str) -> ModuleFlags:
    """What `tree` fixes at its top level (module docstring)."""
    found = ModuleFlags()
    counts: dict[str, int] = {}
    tokens: dict[str, list[Optional[str]]] = {}
    assigned: set[str] = set()
    for node in _scope_nodes(tree.body):
        for name in _bound_names(node):
            counts[name] = counts.get(name, 0) + 1
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            assigned.update(t.id for t in targets if isinstance(t, ast.Name))
            single = isinstance(node, ast.Assign) and len(node.targets) == 1
            if (single or isinstance(node, ast.AnnAssign)) and node.value is not None:
                target = targets[0]
                if isinstance(target, ast.Name):
                    tokens.setdefault(target.id, []).append(_setting_token(node.value))
    found.assigned = sorted(assigned)
    # what a test may read, at the top level or in a function (which reads the global unless it
    # binds the name itself: project/summary.py's Function.flag_reads): the names on the lines
    # that say `if`, `elif` or `while`, a superset found in the text at a fraction of a walk
    tested = set(_IDENTIFIER.findall("\n".join(_test_lines(source)))) if tokens else set()
    bound = {name: found for name, found in tokens.items() if name in tested and len(found) == counts[name]}
    literal = {
        name: found[0]
        for name, found in bound.items()
        if len(found) == 1 and found[0] is not None and not found[0].startswith(READ_PREFIX)
    }
    choices = {
        name: [token for token in found if token is not None]
        for name, found in bound.items()
        if len(found) > 1 and None not in found
    }
    found.execs = "exec(" in source and any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "exec"
        for n in ast.walk(tree)
    )
    if not (literal or choices) or _GLOBALS_CALL.search(source) and _writes_globals(tree):
        return found
    # the names `global` statements declare, read off their lines (a comment that looks like one
    # only leaves a setting open)
    declared = {name for names in _GLOBAL_STATEMENT.findall(source) for name in _IDENTIFIER.findall(names)}
    found.flags = {
        name: token for name, token in literal.items() if counts.get(name) == 1 and name not in declared
    }
    found.choices = {name: found for name, found in choices.items() if name not in declared}
    return found

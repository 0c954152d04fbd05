"""What building a project class sets up, for project/arguments.py's attributes:

- the methods that run while `__init__` builds an instance: a `self.m(...)` that `__init__` (of
  the class or of a project base, through `super().__init__`) calls, dispatched on the class
  being built (latent-diffusion's `DDPM.__init__` calls `self.register_schedule(...)`, which on
  a `LatentDiffusion` runs `LatentDiffusion.register_schedule`). What they store is stored at
  construction, as `__init__`'s own stores are;
- what such a store holds when it is worked out from values already known: a boolean test
  (`self.shorten_cond_schedule = self.num_timesteps_cond > 1`) or a fallback helper
  (`self.num_timesteps_cond = default(num_timesteps_cond, 1)`, analysis/fallbacks.py);
- the default configuration of a class that no call of the project builds and nothing exports
  or hands on: built by name from a config file (`instantiate_from_config`), it takes its
  constructor's defaults (RULES.md: a branch only an opt-in option takes is cold), except for
  the parameters a shipped config file names. A subclass's `super().__init__(*args, **kwargs)`
  in that configuration hands on nothing through its unpackings. Defaults decide only a
  constructor that no other construction reaches: a class built only through its subclasses
  (ultralytics' `SegmentationHead`, whose subclass passes `use_encoder_inputs=True`) keeps
  what they pass;
- a class a package exports is built by its users too, in their default configuration: a
  keyword whose default leaves an option off (None, False, 0) holds it unless a construction of
  the project may pass it, where one that unpacks a configuration read from a file or a config
  object passes only the keys a shipped config names (`exported_sites`).
"""

from __future__ import annotations

import ast
import dataclasses
from typing import AbstractSet, Callable, Mapping, Optional

from ..analysis.arguments import boolean_token, fallback_result, operand_token, parse_test
from ..analysis.fallbacks import CALLS_SECOND, INLINE_TEST
from .refs import ClassRef, FunctionRef, ProjectView
from .summary import Call


def construction_methods(
    project: ProjectView, init: FunctionRef, below: list[ClassRef]
) -> set[tuple[int, int]]:
    """The methods that run while `init` builds an instance of each class of `below` (the class
    and its subclasses): reached from `init` through `self.m(...)` and `super().m(...)`
    dispatched on that class, for every class of `below`. A method some other call may run
    (one not made in construction, or handed on by name) is left out: it may store again."""
    common: Optional[set[tuple[int, int]]] = None
    every: dict[tuple[int, int], FunctionRef] = {}
    for cls in below:
        reached = _reached(project, init, cls)
        every.update(reached)
        common = set(reached) if common is None else common & set(reached)
    found = {init.key()}
    for key in common or ():
        method = every[key]
        if key == init.key() or project.handed_on(method):
            continue
        if all(caller.key() in every for caller, _ in project.callers_of(method)):
            found.add(key)
    return found


def _reached(project: ProjectView, init: FunctionRef, cls: ClassRef) -> dict[tuple[int, int], FunctionRef]:
    reached = {init.key(): init}
    todo = [init]
    while todo:
        function = todo.pop()
        for call in [*function.info.calls, *function.info.cold_calls]:
            callees: list[FunctionRef] = []
            if call.kind == "self" and call.target != "__call__":
                method = project.find_method(cls, call.target)
                callees = [method] if method is not None else []
            elif call.kind == "super":
                callees = project.resolve_call(function, call)
            for callee in callees:
                if callee.key() not in reached:
                    reached[callee.key()] = callee
                    todo.append(callee)
    return reached


def derived_token(
    project: ProjectView, method: FunctionRef, text: str, values: Mapping[str, str]
) -> Optional[str]:
    """The token of a store's value (Function.derived_stores) under `values`: a boolean test's
    result, or what a fallback helper of the project returns; None when not known."""
    value = parse_test(text)
    if value is None:
        return None
    token = boolean_token(value, values)
    if token is not None or not isinstance(value, ast.Call) or len(value.args) != 2:
        return token
    shape = _fallback(project, method, ast.unparse(value.func))
    if shape is None:
        return None
    first, second = (operand_token(a, values) for a in value.args)
    return fallback_result(first, second, shape[1] == CALLS_SECOND)


def _fallback(project: ProjectView, method: FunctionRef, written: str) -> Optional[list[str]]:
    """The shape of the project function `written` names in `method`'s module, when it is a
    fallback helper whose test is written out or calls an `exists(x)` helper."""
    helper = project.resolve_dotted(method.module, written)
    if not isinstance(helper, FunctionRef) or not helper.info.fallback:
        return None
    shape = helper.info.fallback
    if shape[0] == INLINE_TEST:
        return shape
    test = project.resolve_dotted(helper.module, shape[0])
    return shape if isinstance(test, FunctionRef) and test.info.tests_not_none else None


def default_classes(project: ProjectView, handed: AbstractSet[str]) -> dict[tuple[int, int], ClassRef]:
    """The project classes in their default configuration: no call of the project builds them
    or a subclass of theirs (whose `super().__init__` may hand on what its construction
    passes), and no name of theirs is handed on or exported, which would let code the project
    does not hold build them."""
    found: dict[tuple[int, int], ClassRef] = {}
    for module in project.modules.values():
        for index, info in enumerate(module.summary.classes):
            cls = ClassRef(module, index)
            if info.name not in handed and not any(
                project.is_built(each) for each in [cls, *project.subclasses(cls)]
            ):
                found[cls.key()] = cls
    return found


Handed = Callable[[str, str], Optional[str]]


# the defaults that leave an option off (`reset_every=0`): a value a config file passes for
# another parameter (a size, a rate, a mode) is a setting the defaults say nothing of
_OFF = frozenset({"None", "False", "0"})


def _taken(defaults: Mapping[str, str], param: str, configured: frozenset[str]) -> Optional[str]:
    """What a parameter left out holds in the default configuration: its default when that
    leaves an option off and no shipped config file names it; None (not known) otherwise."""
    token = defaults.get(param)
    return token if token in _OFF and param not in configured else None


def default_construction(init: FunctionRef, configured: frozenset[str]) -> tuple[Call, bool, Handed]:
    """A construction of `init`'s class that passes nothing, for a class in its default
    configuration, as project/arguments.py's sites are: each parameter holds its default where
    that leaves an option off (`_taken`), an unknown value (`?`) otherwise."""
    info = init.info
    call = Call("global", info.name, -1, info.line)
    call.args = {p: "?" for p in info.params if _taken(info.defaults, p, configured) is None}
    return call, True, _nothing


def configured_construction(
    call: Call,
    caller: FunctionRef,
    callee: FunctionRef,
    defaults: Mapping[tuple[int, int], ClassRef],
    configured: frozenset[str],
) -> Optional[tuple[Call, Handed]]:
    """A `super().__init__(...)` that `__init__` of a class in its default configuration makes,
    as it runs there: a parameter of the caller it hands on holds the caller's default, and
    unpackings of the caller's own `*args`/`**kwargs` hand on nothing, so what they would fill
    holds the callee's default (both as `_taken` reads them). None for another call."""
    if (
        call.kind != "super"
        or call.target != "__init__"
        or caller.info.name != "__init__"
        or (id(caller.module), caller.info.cls) not in defaults
    ):
        return None
    if call.forwards >= 0:
        args = {s: t for s, t in call.args.items() if not s.isdigit() or int(s) < call.forwards}
        call = _writing_only(call, args, callee, call.forwards, configured)
    info = caller.info

    def handed(param: str, into: str) -> Optional[str]:
        return None if param in info.rebinds else _taken(info.defaults, param, configured)

    return call, handed


def exported_sites(
    init: FunctionRef, sites: list[tuple[Call, bool, Handed]], configured: frozenset[str]
) -> list[tuple[Call, bool, Handed]]:
    """The constructions of a class a package exports, which code the project does not hold may
    build: the project's own, where one that unpacks a configuration (Call.config_unpack) passes
    what it writes and, of the rest, only the keys a config file names; and a user's that passes
    nothing (default_construction). A keyword only a user's code or config sets is opt-in
    (RULES.md): imagen-pytorch's `ImagenTrainer(imagen, **config["trainer"])` leaves
    `checkpoint_path` at its default, None."""
    found: list[tuple[Call, bool, Handed]] = []
    for call, bound, handed in sites:
        if call.config_unpack:
            positional = sum(1 for slot in call.args if slot.isdigit())
            call = _writing_only(call, dict(call.args), init, positional, configured)
        found.append((call, bound, handed))
    found.append(default_construction(init, configured))
    return found


def _writing_only(
    call: Call, args: dict[str, str], callee: FunctionRef, positional: int, configured: frozenset[str]
) -> Call:
    """`call` passing `args` (of which `positional` plain positional arguments) and nothing
    through its unpackings: a parameter it leaves out holds its default where `_taken` knows it."""
    given = {s for s in args if not s.isdigit()}
    given.update(callee.info.params[1 : 1 + positional])
    for param in callee.info.params[1:]:
        if param not in given and _taken(callee.info.defaults, param, configured) is None:
            args[param] = "?"
    return dataclasses.replace(call, star=False, args=args)


def _nothing(param: str, into: str) -> Optional[str]:
    return None

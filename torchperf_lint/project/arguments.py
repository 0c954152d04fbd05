"""What the project's calls pass: for each function, the parameters for which every call that
runs per step passes the same value (analysis/arguments.py's tokens), and for each method the
`self.` attributes that only construction sets (`__init__`, or a method it runs on the instance
being built: project/construction.py) from such a parameter, or to a boolean test or fallback
helper of known values, the same in every construction of the project. A branch on them that
the value never takes is cold.

What counts as every call:
- a parameter: the calls from hot code (forward and what it calls, step loops). A call from
  cold code runs rarely, so it does not make a branch hot. Roots (forward, step hooks, methods a
  library base calls) are left out: their callers are the framework and the user. A call that
  hands on a parameter of its caller (`g(x, size)` in `f(x, size=None)`) passes what f's own
  callers decided for it; a root's parameters stay open, so what it hands on does too.
- an attribute: every construction in the project, cold ones included (construction is cold);
  none for a class a package's `__init__.py` exports (monai's `FocalLoss`): its users build it.
  A class no call builds (built by name from a config file) takes its defaults.
Calls the project pass does not resolve are not seen, so a function or class whose name is read
without being called (handed on as a callback, kept in a registry) gets no values. A library's
users are not seen either: its branches are decided for the project's own hot paths, the ones
the linted code runs.
"""

from __future__ import annotations

import ast
from typing import AbstractSet, Callable, Iterable, Mapping, Optional

from ..analysis.arguments import (
    ABSENT,
    BUILT_PREFIX,
    CHOSEN_PREFIX,
    INSTANCE_PREFIX,
    ITEMS_PREFIX,
    NOT_NONE,
    NOT_NONE_TEST,
    PARAM_PREFIX,
    TRUTHY,
    chosen_sides,
    decided_sides,
    items_token,
    merge,
    parse_test,
    truth,
)
from .construction import (
    configured_construction,
    construction_methods,
    default_classes,
    default_construction,
    derived_token,
    exported_sites,
)
from .refs import ClassRef, FunctionRef, ProjectView
from .summary import Call, Function

Values = dict[str, str]
SAME = "=same"  # a recursive call hands the parameter on to itself: it adds no value of its own
_ROUNDS = 32  # values handed on through more calls than this stay open
Sites = dict[tuple[int, int], tuple["FunctionRef", list[tuple["FunctionRef", Call]]]]


def bound_self(call: Call, callee: Function) -> bool:
    """The call passes the callee's `self` itself (`obj.m(...)`), so positions start after it."""
    if callee.cls < 0 or call.kind == "def" or "staticmethod" in callee.decorators:
        return False
    if call.kind in ("global", "dotted"):
        if callee.name == "__init__":  # a construction (`mod.Net(...)`), not `Base.__init__(self, ...)`
            return not call.target.endswith(".__init__")
        # an instance's __call__/forward passes `self` itself; `Cls.method(obj, ...)` does not
        return callee.params[:1] == ["self"] and "." not in call.target
    return True  # self.m(...), super().m(...), obj.m(...)


def slot_parameter(call: Call, callee: Function, slot: str) -> Optional[str]:
    """The callee's parameter that a call's argument slot ("0", "1", ... or a keyword) fills."""
    if not slot.isdigit():
        return slot if slot in callee.params else None
    position = int(slot) + bound_self(call, callee)
    return callee.params[position] if position < min(callee.positional, len(callee.params)) else None


Handed = Callable[[str, str], Optional[str]]  # (caller's parameter, callee's) -> token


def _open(param: str, into: str) -> Optional[str]:
    return None


def passed_tokens(
    call: Call, callee: Function, bound: bool, handed: Handed = _open
) -> dict[str, Optional[str]]:
    """The token each parameter gets from `call`; None when not known."""
    found: dict[str, Optional[str]] = {}
    for position, param in enumerate(callee.params):
        token: Optional[str]
        slot = str(position - bound)
        placed = position < callee.positional and position >= bound and slot in call.args
        if call.star and not call.spread and (call.unpacks_args or not (placed or param in call.args)):
            # what `*args` fills is not known, nor what `**kwargs` may; `f(x, **kwargs)` places `x`
            token = None
        elif placed:
            token = call.args[slot]
        elif param in call.args:
            token = call.args[param]
        elif call.spread:
            # `run(**vars(opt))`: what the option of the parameter's name holds, where known
            token = PARAM_PREFIX + f"{call.spread}.{param}" if position >= bound else None
        else:
            token = callee.defaults.get(param)
        if token is not None and token.startswith(PARAM_PREFIX):
            token = handed(token[len(PARAM_PREFIX) :], param)
        elif token is not None and token.startswith((BUILT_PREFIX, CHOSEN_PREFIX, ITEMS_PREFIX)):
            token = handed(token, param)  # only a handler that knows the caller's values resolves it
        found[param] = None if token == "?" else token
    return found


def choose(token: str, known: Mapping[str, str], handed: Handed, into: str) -> Optional[str]:
    """What a name bound once to an if-expression passes (CHOSEN_PREFIX): the side the caller's
    values pick (`None` for `ids if opts.enable_vis else None` with `--enable_vis` off by
    default), or what both sides agree on when the test is not decided."""
    result: Optional[str] = None
    for number, side in enumerate(chosen_sides(token, known)):
        value: Optional[str]
        if side.startswith(PARAM_PREFIX):
            value = handed(side[len(PARAM_PREFIX) :], into)
        elif side == "?" or side.startswith((BUILT_PREFIX, CHOSEN_PREFIX)):
            value = None
        else:
            value = side
        result = value if number == 0 else _merge(result, value)
    return result


def side_is_cold(guard: list[str], values: Values) -> bool:
    """A guard ([test, "body"|"else"]) whose side the values never take."""
    test = parse_test(guard[0])
    if test is None:
        return False
    body, orelse = decided_sides(test, values)
    return body if guard[1] == "body" else orelse


def guarded_off(guards: Iterable[list[str]], values: Optional[Values]) -> bool:
    return bool(values) and any(side_is_cold(g, values) for g in guards)  # type: ignore[arg-type]


def _merge(first: Optional[str], second: Optional[str]) -> Optional[str]:
    if first == SAME or second == SAME:
        return second if first == SAME else first
    return merge(first, second)


def _agreed(callee: Function, calls: Iterable[tuple[Call, bool, Handed]]) -> Values:
    """The parameters every call passes the same token for (or tokens never None), kept only
    when the function binds them again only where those values never go (`if size is None:
    size = ...` with `size` always given)."""
    merged: dict[str, Optional[str]] = {}
    for number, (call, bound, handed) in enumerate(calls):
        passed = passed_tokens(call, callee, bound, handed)
        merged = passed if number == 0 else {p: _merge(merged.get(p), t) for p, t in passed.items()}
    values = {
        param: token
        for param, token in merged.items()
        if token is not None and token != SAME and param != "self"
    }
    for param, token in callee.asserted.items():
        if values.get(param) in (None, NOT_NONE) or token == "None":
            values[param] = token  # what the assert lets through; a constant already says more
    return {
        param: token
        for param, token in values.items()
        if all(guarded_off(guards, values) for guards in callee.rebinds.get(param, ()))
    }


def argument_values(
    project: ProjectView, sites: Sites, options: Optional[dict[tuple[int, int], Values]] = None
) -> dict[tuple[int, int], Values]:
    """`options`: per function, the command-line options the default run decides
    (project/options.py), which a call may hand on (`UNet(n_classes=args.classes)`)."""
    options = options or {}
    outer: set[str] = set()
    exported: set[str] = set()
    for module in project.modules.values():
        outer.update(module.summary.outer_stores)
        if module.is_package:
            exported.update(module.summary.imports)
    roots = {function.key() for function, _ in project.roots()}
    decided = {
        key: entry
        for key, entry in sites.items()
        if key not in roots and entry[0].index >= 0 and not project.handed_on(entry[0])
    }
    for key, entry in _own_step_sites(project, sites, roots).items():
        if not project.handed_on(entry[0]):
            decided.setdefault(key, entry)
    instances: dict[str, Values] = {}
    # what construction sets the attributes to, known before the calls that hand them on
    attributes: dict[tuple[int, int], Values] = {}
    handed = project.handed_names() | project.handed_members()  # classes: by name
    for cls, init, values in _constructions(project, handed, exported, options):
        for method, attribute, token in _attributes(project, cls, init, values, outer):
            attributes.setdefault(method.key(), {})[f"self.{attribute}"] = token
    found = _handed_on(decided, project, options, outer, instances, attributes)
    _instance_attributes(found, instances)
    for key, stored in attributes.items():
        found.setdefault(key, {}).update(stored)
    for function, attribute in _absent_attributes(project, {*sites, *roots}):
        found.setdefault(function.key(), {})[f"self.{attribute}"] = ABSENT
    _name_not_none_tests(project, found)
    return found


def _key(resolved: object) -> Optional[tuple[int, int]]:
    return resolved.key() if isinstance(resolved, FunctionRef) else None


def _name_not_none_tests(project: ProjectView, found: dict[tuple[int, int], Values]) -> None:
    """Give each function with known values the helpers its module can call that test their
    argument against None (`exists(self.checkpoint_path)`), as `NAME()` -> NOT_NONE_TEST."""
    helpers: dict[str, set[tuple[int, int]]] = {}
    for module in project.modules.values():
        for index, info in enumerate(module.summary.functions):
            if info.tests_not_none and info.cls < 0:
                helpers.setdefault(info.name, set()).add((id(module), index))
    if not helpers:
        return
    for module in project.modules.values():
        named = {
            f"{name}()": NOT_NONE_TEST
            for name, keys in helpers.items()
            if _key(project.resolve_dotted(module, name)) in keys
        }
        for index in range(-1, len(module.summary.functions)):
            values = found.get((id(module), index)) if named else None
            if values:
                values.update(named)


def handed_methods(call: Call, builder: FunctionRef, options: Values) -> list[str]:
    """The methods of `self` that `builder`, called by `call` (whose caller holds `options`), may
    hand back: each `return self.NAME` whose guards the values the call passes do not rule out
    (deeplab-xception's `build_loss(mode=args.loss_type)`, 'ce' by default: `CrossEntropyLoss`,
    not `FocalLoss`)."""
    passed = passed_tokens(call, builder.info, True, _held_options(options))
    values = {param: token for param, token in passed.items() if token is not None and param != "self"}
    return [name for name, guards in builder.info.returned_methods if not guarded_off(guards, values)]


def _own_step_sites(project: ProjectView, sites: Sites, roots: set[tuple[int, int]]) -> Sites:
    """Every project call of each function that runs a step or inference loop of its own and
    that no call made per step reaches (`evaluate(net, loader)` called every N steps, a
    script's `train_model(model=model)`): such a function is hot whoever calls it, so what its
    parameters hold is what all its callers pass, cold or not."""

    owners: dict[tuple[int, int], FunctionRef] = {}
    for module in project.modules.values():
        loops = module.summary.loops
        # the inference loops the first spread found (project.inference_loops() would spread again)
        for index in [*project.step_loops(module), *project.found_inference_loops(module)]:
            function = FunctionRef(module, loops[index].function)
            if function.index >= 0 and function.key() not in sites and function.key() not in roots:
                owners[function.key()] = function
    found: Sites = {}
    for key, owner in owners.items():
        for caller, call in project.callers_of(owner):
            found.setdefault(key, (owner, []))[1].append((caller, call))
    return found


def _handed_on(
    decided: Sites,
    project: ProjectView,
    options: dict[tuple[int, int], Values],
    outer: set[str],
    instances: dict[str, Values],
    attributes: Mapping[tuple[int, int], Values],
) -> dict[tuple[int, int], Values]:
    """The values of each function's parameters, where a caller that hands on a parameter of
    its own (or an option it holds) passes what its callers decided for it, and an instance it
    builds is its class and the attributes its construction sets (`instances` gathers them).
    Each round reads the last one's values, which are right as far as they go, so every round
    is, and later rounds only learn more; a recursive call handing a parameter on to itself
    passes it unchanged (SAME)."""
    found: dict[tuple[int, int], Values] = {}
    built: dict[tuple[tuple[int, int], str], Optional[str]] = {}  # (caller, class as written) -> token

    def handed_by(caller: FunctionRef, callee_key: tuple[int, int]) -> Handed:
        values = found.get(caller.key(), {})
        held = options.get(caller.key(), {})
        stored = attributes.get(caller.key(), {})
        recursive = caller.key() == callee_key

        def handed(param: str, into: str) -> Optional[str]:
            if param.startswith(CHOSEN_PREFIX):
                return choose(param, {**held, **values}, handed, into)
            if param.startswith(ITEMS_PREFIX):  # `for loss in self.losses: f(loss)`: one of its items
                walked = param[len(ITEMS_PREFIX) :]
                return items_token(values.get(walked, stored.get(walked, held.get(walked))))
            if param.startswith(BUILT_PREFIX):
                key = (caller.key(), param)
                if key not in built:
                    written = param[len(BUILT_PREFIX) :]
                    built[key] = _instance_token(project, caller, written, options, outer, instances)
                return built[key]
            if recursive and param == into:
                return SAME
            return values.get(param, held.get(param))

        return handed

    pending = list(decided)
    for _ in range(_ROUNDS):
        changed: set[tuple[int, int]] = set()
        for key in pending:
            callee, calls = decided[key]
            info = callee.info
            values = _agreed(
                info, ((call, bound_self(call, info), handed_by(caller, key)) for caller, call in calls)
            )
            if values != found.get(key, {}):
                changed.add(key)
                if values:
                    found[key] = values
                else:
                    found.pop(key, None)
        # only a function that hands on a parameter of a function that changed can change
        pending = [
            key
            for key, (_, calls) in decided.items()
            if any(caller.key() in changed and _hands_on(call) for caller, call in calls)
        ]
        if not pending:
            break
    return found


def _hands_on(call: Call) -> bool:
    return bool(call.spread) or any(
        token.startswith((PARAM_PREFIX, CHOSEN_PREFIX, ITEMS_PREFIX)) for token in call.args.values()
    )


def _instance_token(
    project: ProjectView,
    caller: FunctionRef,
    written: str,
    options: dict[tuple[int, int], Values],
    outer: set[str],
    instances: dict[str, Values],
) -> Optional[str]:
    """INSTANCE_PREFIX + the project class `written` names in the caller's module, with the
    attributes its `__init__` sets from what the caller's own constructions of it pass
    (`UNet(n_classes=args.classes)`: `n_classes` is the option's default); `instances` keeps
    those attributes by token."""

    cls = project.resolve_dotted(caller.module, written)
    init = project.find_method(cls, "__init__") if isinstance(cls, ClassRef) else None
    if not isinstance(cls, ClassRef) or init is None:
        return None
    handed = _held_options(options.get(caller.key(), {}))
    sites = [
        (call, True, handed)
        for call in [*caller.info.calls, *caller.info.cold_calls]
        if call.kind in ("global", "dotted") and call.target == written
    ]
    values = _agreed(init.info, sites) if sites else {}
    owner = ClassRef(init.module, init.info.cls)
    attributes = {a: t for _, a, t in _attributes(project, owner, init, values, outer)}
    shown = ",".join(f"{a}={t}" for a, t in sorted(attributes.items()))
    token = f"{INSTANCE_PREFIX}{cls.module.display}#{cls.index}|{shown}"
    instances[token] = attributes
    return token


def _instance_attributes(found: dict[tuple[int, int], Values], instances: dict[str, Values]) -> None:
    """`net.ATTR` for a parameter `net` that holds an instance built the same way by every
    caller: what that construction makes its `__init__` set `self.ATTR` to."""
    for values in found.values():
        for param, token in list(values.items()):
            for attribute, value in instances.get(token, {}).items():
                values.setdefault(f"{param}.{attribute}", value)


def _constructions(
    project: ProjectView, handed: AbstractSet[str], exported: set[str], options: dict[tuple[int, int], Values]
) -> Iterable[tuple[ClassRef, FunctionRef, Values]]:
    """Each class of the project with the values every construction passes its `__init__`
    (an option the caller holds counts as its default, `UNet(n_classes=args.classes)`); a class
    a package exports is built by its users too (construction.exported_sites)."""

    calls: dict[tuple[int, int], tuple[ClassRef, FunctionRef, list[tuple[Call, bool, Handed]]]] = {}
    # the sites as they run in the default configuration, for constructors only it reaches
    configured_sites: dict[tuple[int, int], list[tuple[Call, bool, Handed]]] = {}
    reached: set[tuple[int, int]] = set()  # constructors some other construction reaches
    defaults = default_classes(project, handed | exported)
    configured = project.configured_names() if defaults or exported else frozenset()
    for module in project.modules.values():
        owners = [module.summary.toplevel, *module.summary.functions]
        for offset, info in enumerate(owners):
            caller = FunctionRef(module, offset - 1)
            for call in [*info.calls, *info.cold_calls]:
                cls: Optional[ClassRef] = None
                init: Optional[FunctionRef] = None
                if call.kind in ("global", "dotted"):
                    target = project.resolve_dotted(module, call.target)
                    if isinstance(target, ClassRef):
                        cls, init = target, project.find_method(target, "__init__")
                elif call.kind == "super" and call.target == "__init__":
                    inits = project.resolve_call(caller, call)
                    init = inits[0] if inits else None
                    cls = ClassRef(init.module, init.info.cls) if init is not None else None
                if cls is None or init is None:
                    continue
                entry = calls.setdefault(init.key(), (ClassRef(init.module, init.info.cls), init, []))
                entry[2].append((call, True, _held_options(options.get(caller.key(), {}))))
                site = configured_construction(call, caller, init, defaults, configured)
                if site is None:
                    reached.add(init.key())
                else:
                    configured_sites.setdefault(init.key(), []).append((site[0], True, site[1]))
    for built in defaults.values():
        init = project.find_method(built, "__init__")
        if init is not None and init.key() not in reached:
            calls.setdefault(init.key(), (ClassRef(init.module, init.info.cls), init, []))
            configured_sites.setdefault(init.key(), []).append(default_construction(init, configured))
    for key, sites in configured_sites.items():
        if key not in reached:
            calls[key][2][:] = sites
    for module in project.modules.values():
        for index, cls_info in enumerate(module.summary.classes):
            init = (
                project.find_method(ClassRef(module, index), "__init__")
                if cls_info.name in exported
                else None
            )
            if init is not None and init.info.cls == index and init.module is module:
                entry = calls.setdefault(init.key(), (ClassRef(module, index), init, []))
                entry[2][:] = exported_sites(init, entry[2], configured)
    for cls, init, sites in calls.values():
        if cls.info.name in handed:
            continue
        # a construction may run in any call of its caller, not only those made per step
        values = _agreed(init.info, sites)
        if values:
            yield cls, init, values


def _held_options(held: Values) -> Handed:
    """What a caller hands on of its own: only the options it holds are known here."""

    def handed(param: str, into: str) -> Optional[str]:
        if param.startswith(CHOSEN_PREFIX):
            return choose(param, held, handed, into)
        return held.get(param)

    return handed


def _attributes(
    project: ProjectView, cls: ClassRef, init: FunctionRef, values: Values, outer: set[str]
) -> Iterable[tuple[FunctionRef, str, str]]:
    """(method, attribute, token) for each attribute that, in the class, its project bases and
    its subclasses, only construction stores (`__init__` or a method it runs on the instance
    being built, project/construction.py), from a parameter of `__init__` of known value or a
    value worked out from such values and attributes; the methods are the class's and its
    subclasses' (a base's methods also run for its other subclasses)."""

    below = [cls, *project.subclasses(cls)]  # whose instances this __init__ sets up
    members = [*project.lineage(cls), *below]
    family = {member.key() for member in members}
    owners = {member.key() for member in below}
    stores: dict[str, list[tuple[FunctionRef, str]]] = {}
    derived: dict[tuple[tuple[int, int], str], str] = {}  # (method, attribute) -> the value's text
    methods: list[FunctionRef] = []
    for module in {id(m.module): m.module for m in members}.values():
        for index, info in enumerate(module.summary.functions):
            owner = info
            while owner.cls < 0 and owner.parent >= 0:
                owner = module.summary.functions[owner.parent]
            if (id(module), owner.cls) not in family:
                continue
            method = FunctionRef(module, index)
            if (id(module), owner.cls) in owners:
                methods.append(method)
            for attribute, param in info.self_stores:
                # a store in a nested function is not `__init__`'s own
                stores.setdefault(attribute, []).append((method, param if info is owner else ""))
            if info is owner:
                for attribute, text in info.derived_stores:
                    derived[(method.key(), attribute)] = text
    single = {
        attribute: where[0]
        for attribute, where in stores.items()
        if len(where) == 1 and attribute not in outer
    }
    building: Optional[set[tuple[int, int]]] = None
    # only a value worked out from attributes is known from a store outside `__init__`
    if any(m.key() != init.key() and (m.key(), a) in derived for a, (m, _) in single.items()):
        building = construction_methods(project, init, below)
    known: dict[str, str] = {}
    pending: dict[str, tuple[FunctionRef, str]] = {}  # attribute -> (method, the value's text)
    for attribute, (method, param) in single.items():
        own = method.key() == init.key()
        if (method.key(), attribute) in derived and (own or method.key() in (building or ())):
            pending[attribute] = (method, derived[(method.key(), attribute)])
        elif own:
            token = values.get(param) if param else _flagged_token(project, init, attribute, values)
            if token is not None:
                known[attribute] = token
    # a value worked out from attributes waits for theirs: each round adds what it can
    while pending:
        added = {}
        for attribute, (method, text) in pending.items():
            scope = {f"self.{a}": t for a, t in known.items()}
            if method.key() == init.key():
                scope.update(values)  # `__init__`'s parameters; another method's are its own
            token = derived_token(project, method, text, scope)
            if token is not None:
                added[attribute] = token
        if not added:
            break
        known.update(added)
        for attribute in added:
            del pending[attribute]
    for attribute, token in known.items():
        for each in methods:
            yield each, attribute, token


# external bases whose instances are always true (no `__len__`/`__bool__`)
_TRUE_BASES = frozenset({"torch.nn.Module", "torch.nn.modules.module.Module", "object"})


def _flagged_token(project: ProjectView, init: FunctionRef, attribute: str, values: Values) -> Optional[str]:
    """The token of `self.ATTR = Callee(...) if PARAM else None` (or `None if PARAM else
    Callee(...)`) in `__init__` when PARAM's value is decided: "None" on the side left None,
    else TRUTHY where Callee is a project class whose instances are always true, NOT_NONE for
    another project class, None (not decided) for a function or a library's class."""

    for stored, param, side, callee in init.info.flagged_stores:
        if stored != attribute or param not in values:
            continue
        on = truth(ast.Name(id=param), values)
        if on is None:
            return None
        if on != (side == "body"):
            return "None"
        cls = project.resolve_dotted(init.module, callee)
        if not isinstance(cls, ClassRef):
            return None  # a function may return None, a library class may define __len__
        if (
            project.find_method(cls, "__len__") is None
            and project.find_method(cls, "__bool__") is None
            and all(base in _TRUE_BASES for base in project.external_bases(cls))
        ):
            return TRUTHY
        return NOT_NONE
    return None


def _absent_attributes(
    project: ProjectView, reached: set[tuple[int, int]]
) -> Iterable[tuple[FunctionRef, str]]:
    """(function, attribute) for each `hasattr(self, "A")` probe no step sees set: no method of
    the class's family (its project bases and subclasses) stores `self.A` or sets attributes by
    a computed name, and every store of `.A` on another object is in code a step never runs (a
    function not reached per step, in a module with no step loop that no module imports:
    latent-diffusion's notebook_helpers.py setting `model.split_input_params`). With no
    store at all the attribute stays open: a hook the library's users set."""

    probes = [
        (FunctionRef(module, index), info)
        for module in project.modules.values()
        for index, info in enumerate(module.summary.functions)
        if info.probes
    ]
    if not probes:
        return
    # a module of the library itself (imported by another) may be called by its users' loops
    step_side = {
        id(m) for m in project.modules.values() if project.step_loops(m)
    } | project.imported_anywhere()
    outside: dict[str, bool] = {}  # attribute -> every store of it on another object is off the step path
    anything = False  # some store sets an attribute of another object by a computed name
    for module in project.modules.values():
        for index, info in enumerate([module.summary.toplevel, *module.summary.functions]):
            anything = anything or "other" in info.computed_stores
            cold = id(module) not in step_side and (id(module), index - 1) not in reached
            for attribute in info.attribute_stores:
                outside[attribute] = outside.get(attribute, True) and cold
    if anything:
        return
    families: dict[tuple[int, int], Optional[set[str]]] = {}
    for function, info in probes:
        cls = owner_class(function)
        if cls is None:
            continue
        key = (id(function.module), cls)
        if key not in families:
            families[key] = _family_stores(project, ClassRef(function.module, cls))
        stored = families[key]
        for attribute in dict.fromkeys(info.probes):
            if stored is not None and attribute not in stored and outside.get(attribute, False):
                yield function, attribute


def owner_class(function: FunctionRef) -> Optional[int]:
    """The class whose method `function` is, or is nested in."""
    functions, info = function.module.summary.functions, function.info
    while info.cls < 0 and info.parent >= 0:
        info = functions[info.parent]
    return info.cls if info.cls >= 0 else None


def _family_stores(project: ProjectView, cls: ClassRef) -> Optional[set[str]]:
    """The attributes the methods of `cls`, its project bases and its subclasses store on self;
    None when one of them stores by a computed name."""

    # whatever runs on an instance: the class's and its subclasses' methods and their bases'
    members = [base for each in [cls, *project.subclasses(cls)] for base in project.lineage(each)]
    family = {member.key() for member in members}
    stored: set[str] = set()
    for module in {id(m.module): m.module for m in members}.values():
        for index, info in enumerate(module.summary.functions):
            owner = owner_class(FunctionRef(module, index))
            if owner is None or (id(module), owner) not in family:
                continue
            if "self" in info.computed_stores:
                return None
            stored.update(attribute for attribute, _ in info.self_stores)
    return stored

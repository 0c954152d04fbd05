"""Instances an object keeps from its constructor's arguments (RULES.md, "Values that travel":
attributes of `self`, and call arguments joined over every call site).

`self.ema = ema` in `Trainer.__init__(self, model, ema, ...)`, where every construction of the
class in the project hands that parameter a name bound only to instances of project classes
(`ema = Ema(model)`, then `Trainer(model, ema, loader, optimizer)`): `self.ema` holds one of
those classes, so `self.ema.update(model)` in the step runs `Ema.update`, and `self.matcher(...)`
runs the forward of the matcher `build()` handed DETR's criterion. Only where the attribute is
stored once, by `__init__` (another store, in any method, leaves it unknown); a construction
that passes something else, or nothing (the default), leaves it unknown too.
"""

from __future__ import annotations

from typing import Optional

from .arguments import owner_class, slot_parameter
from .refs import ClassRef, FunctionRef, ProjectView
from .summary import Call

# (module id, __init__'s index) -> attribute -> the classes it holds
Held = dict[tuple[int, int], dict[str, list[ClassRef]]]


def held_instances(project: ProjectView) -> Held:
    """Per `__init__`, the attributes it stores from a parameter that every construction of its
    class passes instances of project classes for, with the union of those classes (a subclass's
    `super().__init__(...)` is one of its constructions)."""
    passed: dict[tuple[int, int], dict[str, Optional[dict[tuple[int, int], ClassRef]]]] = {}
    inits: dict[tuple[int, int], FunctionRef] = {}
    for module in project.modules.values():
        for offset, info in enumerate([module.summary.toplevel, *module.summary.functions]):
            for call in [*info.calls, *info.cold_calls]:
                init = _initializer(project, FunctionRef(module, offset - 1), call)
                if init is None:
                    continue
                inits[init.key()] = init
                joined = passed.setdefault(init.key(), {})
                caller = FunctionRef(module, offset - 1)
                handed = {} if call.star else _handed_classes(project, caller, call, init)
                for param in {param for _, param in init.info.self_stores if param}:
                    classes, before = handed.get(param), joined.get(param, {})
                    # one construction that hands something else leaves the parameter unknown
                    joined[param] = None if classes is None or before is None else {**before, **classes}
    held: Held = {}
    outer = {a for m in project.modules.values() for a in m.summary.outer_stores}  # `obj.ATTR = ...`
    for key, params in passed.items():
        stores = _single_stores(project, inits[key], outer)
        for attribute, param in stores.items():
            classes = params.get(param)
            if classes:
                held.setdefault(key, {})[attribute] = list(classes.values())
    return held


def _initializer(project: ProjectView, caller: FunctionRef, call: Call) -> Optional[FunctionRef]:
    """The project `__init__` a call runs: a construction (`Trainer(...)`), or a subclass's
    `super().__init__(...)`, which hands the base its values for the subclass's instances."""
    if call.kind == "super" and call.target == "__init__":
        inits = project.resolve_call(caller, call)
        return inits[0] if len(inits) == 1 else None
    if call.kind not in ("global", "dotted"):
        return None
    cls = project.resolve_dotted(caller.module, call.target)
    return project.find_method(cls, "__init__") if isinstance(cls, ClassRef) else None


def _handed_classes(
    project: ProjectView, caller: FunctionRef, call: Call, init: FunctionRef
) -> dict[str, dict[tuple[int, int], ClassRef]]:
    """`__init__`'s parameters this construction passes a name bound only to instances of
    project classes for, with those classes: constructed there, or returned by the project
    functions it is bound to (DETR's `matcher = build_matcher(args)`)."""
    found: dict[str, dict[tuple[int, int], ClassRef]] = {}
    for slot, written in call.instances.items():
        param = slot_parameter(call, init.info, slot)
        classes = [project.resolve_dotted(caller.module, name) for name in written]
        if param is not None and classes and all(isinstance(c, ClassRef) for c in classes):
            found[param] = {c.key(): c for c in classes if isinstance(c, ClassRef)}
    for slot, name in call.bound_args.items():
        param = slot_parameter(call, init.info, slot)
        built = _built_by(project, caller, name) if param is not None and slot not in call.instances else []
        if param is not None and built:
            found[param] = {c.key(): c for c in built}
    return found


def _built_by(project: ProjectView, caller: FunctionRef, name: str) -> list[ClassRef]:
    """The classes of the instances the project functions `caller` binds `name` to return, each
    binding one; empty where any returns something else. Only module functions (`build_x(args)`):
    a method's call would ask for the held instances being found."""
    binders = caller.info.binders_of(name)
    classes: list[ClassRef] = []
    for binder in binders:
        targets = project.resolve_call(caller, binder) if binder.kind in ("global", "dotted") else []
        returned = [project.returned_classes(target) for target in targets]
        if not returned or not all(returned):
            return []
        classes.extend(cls for each in returned for cls in each)
    return classes


def _single_stores(project: ProjectView, init: FunctionRef, outer: set[str]) -> dict[str, str]:
    """The attributes `init` stores from one of its parameters that no other store of the class,
    its bases or its subclasses binds (`self.ema = None` in `reset()` would), nor a store on
    another object anywhere in the project (`trainer.ema = ...`), with the parameter."""
    cls = ClassRef(init.module, init.info.cls)
    members = [*project.lineage(cls), *project.subclasses(cls)]
    family = {member.key() for member in members}
    counts: dict[str, int] = {}
    for module in {id(member.module): member.module for member in members}.values():
        for index, info in enumerate(module.summary.functions):
            if (id(module), owner_class(FunctionRef(module, index))) not in family:
                continue
            for attribute, _ in info.self_stores:  # every `self.ATTR = ...`, a nested function's too
                counts[attribute] = counts.get(attribute, 0) + 1
    return {
        attribute: param
        for attribute, param in init.info.self_stores
        if param and counts.get(attribute) == 1 and attribute not in outer
    }

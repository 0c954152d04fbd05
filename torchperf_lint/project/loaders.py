"""DataLoaders that another function of the project iterates again and again (TPL503), found
across modules where the file's own walk (analysis/iteration.py) sees one call deep in one file:

- a loader handed to a function that iterates its parameter inside a loop of its own
  (SimCLR's run.py builds `train_loader` and calls `simclr.train(train_loader)`, whose epoch loop
  runs `for images, _ in tqdm(train_loader)`), or that iterates it once per call, called from a
  loop (Pytorch-UNet's `evaluate(model, val_loader, ...)` in the training loop);
- a loader a project function builds and returns (alone, or as an element of the tuple it returns),
  bound by its caller to a name (or unpacked into one) that is
  iterated again and again: in a loop inside a loop, or by a function of that module called from
  a loop (pytorch-cifar100's utils.get_training_dataloader, bound at the top of train.py to
  `cifar100_training_loader`, which `train(epoch)` iterates once per epoch).

The answer is, per module, the lines of the `DataLoader(...)` calls so iterated.
"""

from __future__ import annotations

from typing import Iterator

from ..analysis.vocabulary import is_loader_name
from .arguments import slot_parameter
from .refs import FunctionRef, Module, ProjectView
from .summary import Call, Loop


def reiterated_loaders(project: ProjectView) -> dict[int, frozenset[int]]:
    """Module id -> the lines of its `DataLoader(...)` calls some project code iterates again
    and again, as seen across modules."""
    found: dict[int, set[int]] = {}
    iterated = _Iterated(project)
    for caller, call in _calls(project):
        if not (call.loaders or call.bound or call.unpacked):
            continue
        for callee in project.resolve_call(caller, call):
            # `*args`/`**kwargs` in the call leave unknown which parameter takes which loader
            for slot, line in () if call.star else call.loaders.items():
                if iterated.handed_again(call, callee, slot):
                    found.setdefault(id(caller.module), set()).add(line)
            # `loader = build()`, or `train_loader, valset, collate_fn = prepare_dataloaders(hparams)`
            returned = [(callee.info.returns_loader, call.bound)]
            if len(call.unpacked) == len(callee.info.returns_loader_items):
                returned += list(zip(callee.info.returns_loader_items, call.unpacked, strict=True))
            for line, name in returned:
                if line and name and iterated.name_reiterated(caller, name):
                    found.setdefault(id(callee.module), set()).add(line)
    return {module: frozenset(lines) for module, lines in found.items()}


def _calls(project: ProjectView) -> Iterator[tuple[FunctionRef, Call]]:

    for module in project.modules.values():
        for offset, info in enumerate([module.summary.toplevel, *module.summary.functions]):
            caller = FunctionRef(module, offset - 1)
            for call in (*info.calls, *info.cold_calls):
                yield caller, call


class _Iterated:
    """What the project's loops iterate by name: what a loop names itself (`Loop.iterated`), or
    the argument a project generator it iterates yields the items of (`for samples, targets in
    metric_logger.log_every(data_loader, print_freq)` walks `data_loader`)."""

    def __init__(self, project: ProjectView) -> None:
        self._project = project
        self._through: dict[int, tuple[str, str]] = {}

    def _name(self, module: Module, loop: Loop) -> tuple[str, str]:
        if loop.iterated or not loop.through:
            return loop.iterated, loop.iterated_scope
        if id(loop) not in self._through:
            self._through[id(loop)] = self._yielded(module, loop)
        return self._through[id(loop)]

    def _yielded(self, module: Module, loop: Loop) -> tuple[str, str]:
        kind, target, names = loop.through
        call = Call(kind, target, loop.parent, loop.line, args={slot: "?" for slot in names})
        for callee in self._project.resolve_call(FunctionRef(module, loop.function), call):
            for slot, (name, scope) in names.items():
                param = slot_parameter(call, callee.info, slot)
                if param is not None and param == callee.info.yields_items_of:
                    return name, scope
        return "", ""

    def _loops(self, module: Module, name: str, scope: str) -> Iterator[Loop]:
        """The loops of `module` that iterate `name` of `scope`."""
        return (loop for loop in module.summary.loops if self._name(module, loop) == (name, scope))

    def in_loop(self, function: FunctionRef, name: str, scope: str) -> bool:
        """`function` iterates `name` in a loop of its own."""
        return any(loop.function == function.index for loop in self._loops(function.module, name, scope))

    def in_nested_loop(self, function: FunctionRef, name: str, scope: str) -> bool:
        """`function` iterates `name` in a loop that sits inside another loop of its own."""
        return any(
            loop.function == function.index and loop.parent >= 0
            for loop in self._loops(function.module, name, scope)
        )

    def handed_again(self, call: Call, callee: FunctionRef, slot: str) -> bool:
        """What `call` passes in `slot` is iterated again and again by `callee`: in a nested loop
        of its own, or once per call where the call sits in a loop (`evaluate(model, val_loader)`
        called from the training loop)."""
        param = slot_parameter(call, callee.info, slot)
        return param is not None and (
            self.in_nested_loop(callee, param, "param")
            or (call.loop >= 0 and self.in_loop(callee, param, "param"))
        )

    def name_reiterated(self, binder: FunctionRef, name: str) -> bool:
        """The name `binder` binds a loader to is iterated again and again: a local in a nested loop
        of its function; a module-level name in a nested loop at the top level or in a function of
        the module, or in a function of the module that a loop calls."""
        if name.startswith("self."):
            return self._attribute_reiterated(binder, name)
        if binder.index >= 0:
            return self.in_nested_loop(binder, name, "local") or self._local_handed_again(binder, name)
        return any(
            loop.parent >= 0
            or (loop.function >= 0 and _called_in_a_loop(self._project, binder.module, loop.function))
            for loop in self._loops(binder.module, name, "global")
        )

    def _local_handed_again(self, binder: FunctionRef, name: str) -> bool:
        """`binder` hands its local `name` (bound once to a call's result) to a function that
        iterates it again and again (PyTorch-YOLOv3's `validation_dataloader =
        _create_validation_data_loader(...)`, then `_evaluate(model, validation_dataloader, ...)`
        in the epoch loop)."""
        for call in (*binder.info.calls, *binder.info.cold_calls):
            slots = [
                slot
                for slot, bound in call.bound_args.items()
                if bound == name
                and is_loader_name(bound)
                and not call.star
                and name not in binder.info.call_bindings
            ]
            if slots and any(
                self.handed_again(call, callee, slot)
                for callee in self._project.resolve_call(binder, call)
                for slot in slots
            ):
                return True
        return False

    def _attribute_reiterated(self, binder: FunctionRef, name: str) -> bool:
        """A `self.` attribute a method binds a loader to is iterated again and again by its class: in
        a nested loop of a method, or by a method that a loop calls (deeplab-xception's Trainer keeps
        `self.train_loader`, `training(epoch)` walks it once per call, the epoch loop calls it)."""
        summary = binder.module.summary
        cls = binder.info.cls
        if cls < 0:
            return False
        return any(
            loop.parent >= 0 or _called_in_a_loop(self._project, binder.module, loop.function)
            for loop in self._loops(binder.module, name, "self")
            if loop.function >= 0 and summary.functions[loop.function].cls == cls
        )


def _called_in_a_loop(project: ProjectView, module: Module, index: int) -> bool:

    return any(call.loop >= 0 for _, call in project.callers_of(FunctionRef(module, index)))


def plain_loader_parameters(project: ProjectView) -> dict[tuple[int, int], frozenset[str]]:
    """Per function, the loader parameters whose batches it hands on unmoved (summary's
    `Call.batches`) and for which every project call passes a plain DataLoader: one built by
    `DataLoader(...)` in the caller, or the result of a project function that returns one
    (`dataloader = make_loader(...)`). Their batches are host values: a loader handed in by the
    framework, or prepared by `accelerator.prepare`, may yield batches already on the device."""
    wanted: dict[tuple[int, int], tuple[FunctionRef, set[str]]] = {}
    for function, call in _calls(project):
        if call.batches and function.index >= 0:
            wanted.setdefault(function.key(), (function, set()))[1].update(call.batches.values())
    found: dict[tuple[int, int], frozenset[str]] = {}
    for key, (function, params) in wanted.items():
        sites = project.callers_of(function)
        plain = {
            param
            for param in params
            if sites
            and all(_hands_plain_loader(project, caller, call, function, param) for caller, call in sites)
        }
        if plain:
            found[key] = frozenset(plain)
    return found


def _hands_plain_loader(
    project: ProjectView, caller: FunctionRef, call: Call, callee: FunctionRef, param: str
) -> bool:
    if call.star:
        return False
    slots = [slot for slot in {*call.args, *call.loaders} if slot_parameter(call, callee.info, slot) == param]
    if len(slots) != 1:
        return False
    slot = slots[0]
    if slot in call.loaders:
        return True
    name = call.bound_args.get(slot)
    if not name or not is_loader_name(name):
        return False
    binder = caller.info.binder_of(name)
    targets = project.resolve_call(caller, binder) if binder is not None else []
    return bool(targets) and all(target.info.returns_loader > 0 for target in targets)

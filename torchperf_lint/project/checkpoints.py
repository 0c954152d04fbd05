"""Which functions of the project build models whose weights are published (RULES.md, TPL401).

A root fetches published weights: a function that calls a weight loader (`load_state_dict_from_url`,
`hf_hub_download`, `model_zoo.load_url`, torchvision's `weights.get_state_dict`, timm's
`build_model_with_cfg`) or names a checkpoint's URL, a function that loads a state dict it had
such a function fetch, and a `@register_model` factory; a method's root is its whole class
(`KeyNet.__init__` downloads its own weights). Everything a root reaches through calls and the
classes it names or hands on (`build_model_with_cfg(SwiftFormer, ...)`, `dict(block=Bottleneck)`),
with the classes' bases, keeps the layout of those checkpoints. A project that only resumes its own
checkpoints (`torch.load(args.resume)`) has no root.
"""

from __future__ import annotations

from collections import deque
from typing import Union

from .refs import ClassRef, FunctionRef, Module, ProjectView

Item = Union["FunctionRef", "ClassRef"]


def published_functions(project: ProjectView) -> dict[tuple[int, int], str]:
    """(module id, function index) -> why its layers keep a published checkpoint's layout."""

    found: dict[tuple[int, int], str] = {}
    seen: set[tuple[str, int, int]] = set()
    todo: deque[tuple[Item, str]] = deque()
    for module in project.modules.values():
        if module.is_test:
            continue
        for index, info in enumerate(module.summary.functions):
            ref = FunctionRef(module, index)
            what = info.weights or _fetched_for_loading(project, ref)
            if not what:
                continue
            reason = f"{info.qualname} ({module.display}:{info.line}) {_describe(what)}"
            todo.append((ref, reason))
            if info.cls >= 0:
                todo.append((ClassRef(module, info.cls), reason))
    while todo:
        item, reason = todo.popleft()
        key = ("class" if isinstance(item, ClassRef) else "function", *item.key())
        if key in seen:
            continue
        seen.add(key)
        if isinstance(item, ClassRef):
            for current in project.lineage(item):
                todo.extend((FunctionRef(current.module, m), reason) for m in current.info.methods.values())
                todo.extend((ref, reason) for ref in _named(project, current.module, current.info.builds))
            continue
        found.setdefault(item.key(), reason)
        for position in range(len(item.info.calls)):
            todo.extend((callee, reason) for callee in project.callees(item, position))
        todo.extend((ref, reason) for ref in _named(project, item.module, item.info.refs))
    return found


def _fetched_for_loading(project: ProjectView, function: FunctionRef) -> str:
    """`model.load_state_dict(...)` after a call of a function that downloads the weights
    (torchmetrics' NISQA: `_download_weights()`, then `torch.load`)."""
    if not function.info.loads_state:
        return ""
    for position in range(len(function.info.calls)):
        for callee in project.callees(function, position):
            if callee.info.weights:
                return f"loads the weights {callee.info.qualname} fetches"
    return ""


def _named(project: ProjectView, module: Module, names: list[str]) -> list[Item]:

    found: list[Item] = []
    for name in names:
        resolved = project.resolve_dotted(module, name.partition("#")[0])
        if isinstance(resolved, (ClassRef, FunctionRef)):
            found.append(resolved)
    return found


def _describe(what: str) -> str:
    if what.startswith("@"):
        return f"is a pretrained-model factory ({what})"
    if what.startswith(("a weights URL", "loads the weights")):
        return f"names {what}" if what.startswith("a ") else what
    return f"calls {what}"

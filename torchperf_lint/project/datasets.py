"""Datasets held in memory: a project dataset whose `__getitem__` only indexes what its
`__init__` stored (pytorch/examples' `MyTrainDataset`, a list of ready tensors), or torch's
`TensorDataset`. Loader workers have nothing to load or decode for them, only processes to
spawn and batches to pass back (TPL501).

The summary reads each class's `__getitem__` (`items_in_memory`) and records, per call, what
each argument is as a dataset token: `Callee` (built by `Callee(...)`, directly or through a name
bound to it) or `f#i` (element `i` of the tuple `f()` returns, unpacked into a name). The project
pass resolves the tokens and hands each module those that hold an in-memory dataset, and the
parameters every project caller passes one for (analysis/datasets.py reads them back).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from ..analysis.vocabulary import TENSOR_DATASETS
from .refs import ClassRef, External, FunctionRef, Module, ProjectView

if TYPE_CHECKING:
    from .summary import Call, Function

_DATASET_BASES = frozenset({"torch.utils.data.Dataset", "torch.utils.data.dataset.Dataset"})
_MAX_DEPTH = 8  # tuples returned from tuples returned...


class InMemoryDatasets:
    """The project's in-memory datasets, resolved from the summaries' tokens."""

    def __init__(self, project: ProjectView) -> None:
        self.project = project
        self._classes: dict[tuple[int, int], bool] = {}
        self._parameters: Optional[dict[tuple[int, int], frozenset[str]]] = None

    def is_class(self, cls: ClassRef) -> bool:
        """A dataset (torch's `Dataset` among its bases, or a `__len__`) whose nearest
        `__getitem__` in its lineage reads only memory."""
        key = cls.key()
        if key not in self._classes:
            project = self.project
            verdict = next(
                (c.info.items_in_memory for c in project.lineage(cls) if c.info.items_in_memory is not None),
                False,
            )
            is_dataset = project.find_method(cls, "__len__") is not None or any(
                q in _DATASET_BASES for q in project.external_bases(cls)
            )
            self._classes[key] = bool(verdict) and is_dataset
        return self._classes[key]

    def holds(self, module: Module, token: str, depth: int = 0) -> bool:
        """The dataset `token` names, as `module` writes it, is held in memory."""

        if depth > _MAX_DEPTH:
            return False
        name, _, item = token.partition("#")
        found = self.project.resolve_dotted(module, name)
        if not item:
            if isinstance(found, External):
                return found.qualified in TENSOR_DATASETS
            return isinstance(found, ClassRef) and self.is_class(found)
        if not isinstance(found, FunctionRef) or not found.info.returns_items:
            return False
        position = int(item)
        return all(
            position < len(returned)
            and bool(returned[position])
            and self.holds(found.module, returned[position], depth + 1)
            for returned in found.info.returns_items
        )

    def names(self, module: Module) -> frozenset[str]:
        """The tokens, as `module` writes them, that hold an in-memory dataset."""
        tokens: set[str] = set()
        for info in (module.summary.toplevel, *module.summary.functions):
            for call in (*info.calls, *info.cold_calls):
                tokens.update(call.datasets.values())
                if call.kind in ("global", "dotted"):
                    tokens.add(call.target)
        return frozenset(t for t in tokens if self.holds(module, t))

    def parameters(self) -> dict[tuple[int, int], frozenset[str]]:
        """Parameters for which every call in the project passes an in-memory dataset; none for
        a function whose name is read without being called (its callers are not all seen)."""
        if self._parameters is not None:
            return self._parameters

        project = self.project
        seen: dict[tuple[int, int], tuple[FunctionRef, set[str]]] = {}
        for module in project.modules.values():
            for offset, info in enumerate((module.summary.toplevel, *module.summary.functions)):
                caller = FunctionRef(module, offset - 1)
                for call in (*info.calls, *info.cold_calls):
                    for callee in project.resolve_call(caller, call):
                        names = self._passed(module, call, callee.info)
                        key = callee.key()
                        seen[key] = (callee, names if key not in seen else seen[key][1] & names)
        self._parameters = {
            key: frozenset(names)
            for key, (function, names) in seen.items()
            if names and not project.handed_on(function)
        }
        return self._parameters

    def _passed(self, module: Module, call: Call, callee: Function) -> set[str]:
        from .arguments import bound_self  # arguments.py reads the summary, which reads this module

        if call.star:
            return set()
        params, bound = callee.params, bound_self(call, callee)
        names = set()
        for slot, token in call.datasets.items():
            param = params[int(slot) + bound] if slot.isdigit() and int(slot) + bound < len(params) else slot
            if param in params and self.holds(module, token):
                names.add(param)
        return names

"""What the project pass resolves names to (modules, functions, classes, outside names,
instances), and the view of the project its fact modules ask (ProjectView). graph.py builds
the project; the modules that work out one fact each (arguments, stepping, loaders...) take a
ProjectView, so that they import this module and never graph.py, which imports them."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Iterator, Optional, Protocol, Union

from ..analysis.entry import ExternalReason
from .summary import Call, Class, Function, Summary


@dataclasses.dataclass(eq=False)
class Module:
    path: Path
    display: str  # relative to the project root, with forward slashes
    summary: Summary
    is_test: bool = False

    @property
    def directory(self) -> Path:
        return self.path.parent

    @property
    def is_package(self) -> bool:
        return self.path.name == "__init__.py"


@dataclasses.dataclass(frozen=True)
class Namespace:
    """A directory imported as a package without an `__init__.py`."""

    directory: Path


@dataclasses.dataclass(frozen=True, eq=False)
class FunctionRef:
    module: Module
    index: int

    @property
    def info(self) -> Function:
        """The function, or for index -1 the module's top level."""
        summary = self.module.summary
        return summary.toplevel if self.index < 0 else summary.functions[self.index]

    def key(self) -> tuple[int, int]:
        return (id(self.module), self.index)


@dataclasses.dataclass(frozen=True, eq=False)
class ClassRef:
    module: Module
    index: int

    @property
    def info(self) -> Class:
        return self.module.summary.classes[self.index]

    def key(self) -> tuple[int, int]:
        return (id(self.module), self.index)


@dataclasses.dataclass(frozen=True)
class External:
    qualified: str


@dataclasses.dataclass(frozen=True, eq=False)
class Instance:
    cls: ClassRef


Resolved = Union[Module, Namespace, FunctionRef, ClassRef, External, Instance]
LoopKey = tuple[int, int]  # (id(module), loop index)


class ProjectView(Protocol):
    """What the fact modules ask of the project (graph.py's Project answers)."""

    modules: dict[Path, Module]

    def resolve_dotted(self, module: Module, dotted: str, depth: int = 0) -> Optional[Resolved]: ...

    def resolve_call(self, function: FunctionRef, call: Call) -> list[FunctionRef]: ...

    def callees(self, function: FunctionRef, position: int) -> list[FunctionRef]: ...

    def callers_of(self, function: FunctionRef) -> list[tuple[FunctionRef, Call]]: ...

    def every_caller(self, function: FunctionRef) -> Optional[list[tuple[FunctionRef, Call]]]: ...

    def lineage(self, cls: ClassRef) -> Iterator[ClassRef]: ...

    def subclasses(self, cls: ClassRef) -> list[ClassRef]: ...

    def external_bases(self, cls: ClassRef) -> Iterator[str]: ...

    def find_method(self, cls: ClassRef, name: str) -> Optional[FunctionRef]: ...

    def attribute_builds(self, cls: ClassRef, callee: str) -> list[ClassRef]: ...

    def attribute_classes(self, cls: ClassRef, attribute: str) -> list[ClassRef]: ...

    def returned_classes(self, function: FunctionRef) -> list[ClassRef]: ...

    def handed_names(self) -> frozenset[str]: ...

    def handed_members(self) -> frozenset[str]: ...

    def handed_on(self, function: FunctionRef) -> bool: ...

    def is_built(self, cls: ClassRef) -> bool: ...

    def configured_names(self) -> frozenset[str]: ...

    def imported_anywhere(self) -> frozenset[int]: ...

    def imported_modules(self, module: Module) -> Iterator[Module]: ...

    def roots(self) -> Iterator[tuple[FunctionRef, ExternalReason]]: ...

    def step_loops(self, module: Module) -> frozenset[int]: ...

    def inference_loops(self, module: Module) -> frozenset[int]: ...

    def found_inference_loops(self, module: Module) -> frozenset[int]: ...

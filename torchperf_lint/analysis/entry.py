"""What the project pass hands one module: the facts about it that only other modules show.

Functions, classes and loops are named by their position among the module's `def`s, `class`es
and `for`/`while` loops in source order, which the project pass (CPython's ast) and the file's
own walk (libcst) both count the same way. Everything here is plain data, so it crosses
processes and its digest keys the findings cache.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Optional


@dataclasses.dataclass(frozen=True)
class ExternalReason:
    """Why the project calls a function hot: its origin ("forward" | "step-hook" | "loop") and
    the chain of callers, rendered ("called from WeightedCE.forward (model.py:21)")."""

    origin: str
    callers: str


@dataclasses.dataclass(frozen=True)
class EntryFacts:
    module_classes: frozenset[int] = frozenset()  # classes that are nn.Modules through any base
    hot_functions: tuple[tuple[int, ExternalReason], ...] = ()
    entry_points: tuple[int, ...] = ()  # methods a library base calls per step (MessagePassing.message)
    step_loops: frozenset[int] = frozenset()
    no_grad_callables: frozenset[str] = frozenset()  # dotted names, as written here, entering no_grad
    host_parameters: tuple[tuple[int, frozenset[str]], ...] = ()  # every caller passes a host value
    runs_on_cuda: Optional[str] = None  # why, when a module that shows CUDA use reaches this one
    display_name: str = ""  # the module's path relative to the project root, for reasons
    counts: tuple[int, int, int] = (-1, -1, -1)  # functions, classes, loops the project counted

    def matches(self, functions: int, classes: int, loops: int) -> bool:
        """The file's walk counts what the project counted: the indices name the same things."""
        return self.counts == (-1, -1, -1) or self.counts == (functions, classes, loops)

    def digest(self) -> str:
        """Stable across processes and runs: the findings cache keys on it."""
        data = dataclasses.asdict(self)
        text = json.dumps(data, sort_keys=True, default=sorted)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @property
    def reaches_hot_code(self) -> bool:
        """Other modules run some of this module's code per step."""
        return bool(self.hot_functions or self.step_loops or self.entry_points)

    def host_params_of(self, index: int) -> frozenset[str]:
        for function, params in self.host_parameters:
            if function == index:
                return params
        return frozenset()


NO_FACTS = EntryFacts()

"""Every case of the suite: one module per rule (tpl101.py, ...) and one per seed scenario (seed004.py, ...),
each defining `CASES`."""

from __future__ import annotations

import importlib
import pkgutil

from ..harness import Case


def all_cases() -> list[Case]:
    cases: list[Case] = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: (m.name.startswith("seed"), m.name)):
        if info.name.startswith(("tpl", "seed")):
            cases.extend(importlib.import_module(f"{__name__}.{info.name}").CASES)
    return cases

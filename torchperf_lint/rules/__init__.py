"""The rule registry: every `Rule` subclass defined in this package's family modules."""

from __future__ import annotations

import importlib
import pkgutil
from typing import Iterable, Optional

from ..selection import Selection, resolve_codes
from .base import Rule

_FAMILIES = ("transfer", "loops", "training", "modules", "data", "debug", "precision")


def _load() -> list[type[Rule]]:
    """Every rule class: one module per rule, `<family>/tplNNN_<name>.py`."""
    found: dict[str, type[Rule]] = {}
    for family in _FAMILIES:
        package = importlib.import_module(f"{__name__}.{family}")
        for info in pkgutil.iter_modules(package.__path__):
            if not info.name.startswith("tpl"):
                continue
            module = importlib.import_module(f"{package.__name__}.{info.name}")
            for value in vars(module).values():
                if (
                    isinstance(value, type)
                    and issubclass(value, Rule)
                    and value.__module__ == module.__name__
                ):
                    found[value.code] = value
    return [found[code] for code in sorted(found)]


ALL_RULES: list[type[Rule]] = _load()
BY_CODE = {rule.code: rule for rule in ALL_RULES}
BY_NAME = {rule.name: rule for rule in ALL_RULES}


def lookup(code_or_name: str) -> Optional[type[Rule]]:
    return BY_CODE.get(code_or_name.upper()) or BY_NAME.get(code_or_name.lower())


def resolve(layers: Iterable[Selection], where: str = "selection") -> list[Rule]:
    """Instances of the rules that the layers, applied in order over the default set, enable
    (selection.py resolves them over the catalog)."""
    return [BY_CODE[code]() for code in resolve_codes(layers, where)]


def select_rules(
    select: Optional[Iterable[str]],
    ignore: Iterable[str],
    extend_select: Iterable[str] = (),
    where: str = "selection",
) -> list[Rule]:
    """Instances of the rules one layer of selection enables over the default set."""
    layer = Selection(None if select is None else tuple(select), tuple(extend_select), tuple(ignore))
    return resolve([layer], where)

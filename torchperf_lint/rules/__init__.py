"""The rule registry: every `Rule` subclass defined in this package's family modules."""

from __future__ import annotations

import importlib
import pkgutil
from typing import Iterable, Optional

from ..settings import ConfigError
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
                if isinstance(value, type) and issubclass(value, Rule) and value.__module__ == module.__name__:
                    found[value.code] = value
    return [found[code] for code in sorted(found)]


ALL_RULES: list[type[Rule]] = _load()
BY_CODE = {rule.code: rule for rule in ALL_RULES}
BY_NAME = {rule.name: rule for rule in ALL_RULES}


def lookup(code_or_name: str) -> Optional[type[Rule]]:
    return BY_CODE.get(code_or_name.upper()) or BY_NAME.get(code_or_name.lower())


def _expand(selectors: Iterable[str], where: str, off_by_prefix: bool) -> set[str]:
    codes: set[str] = set()
    for selector in selectors:
        if selector.upper() == "ALL":
            codes.update(r.code for r in ALL_RULES if r.default_on or off_by_prefix)
            continue
        exact = lookup(selector)
        if exact is not None:
            codes.add(exact.code)
            continue
        prefixed = [r for r in ALL_RULES if r.code.startswith(selector.upper())]
        if not prefixed or not selector[:1].isalpha():
            raise ConfigError(f"{where}: unknown rule code or name {selector!r}")
        codes.update(r.code for r in prefixed if r.default_on or off_by_prefix)
    return codes


def select_rules(
    select: Optional[Iterable[str]],
    ignore: Iterable[str],
    extend_select: Iterable[str] = (),
    where: str = "selection",
) -> list[Rule]:
    """Instances of the enabled rules. Off-by-default rules are enabled only by their exact code
    or name, never by a prefix; ignore wins over select."""
    if select is None:
        enabled = {rule.code for rule in ALL_RULES if rule.default_on}
    else:
        enabled = _expand(select, where, off_by_prefix=False)
    enabled |= _expand(extend_select, where, off_by_prefix=False)
    enabled -= _expand(ignore, where, off_by_prefix=True)
    return [BY_CODE[code]() for code in sorted(enabled)]

"""The rule registry: every `Rule` subclass defined in this package's family modules."""

from __future__ import annotations

import dataclasses
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


EXACT = 1_000  # the specificity of a whole code or a rule name: more than any prefix


@dataclasses.dataclass(frozen=True)
class Selection:
    """One layer of rule selection: the config file's, or the command line's."""

    select: Optional[tuple[str, ...]] = None  # None: keep what the layers below chose
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()


def _matches(selector: str, where: str, enabling: bool) -> tuple[int, set[str]]:
    """How specific `selector` is, and the codes it names. ALL names every rule (ruff's meaning:
    the way to turn on the rules below the precision bar at once); enabling, a prefix never names
    an off-by-default rule; ignoring, it does."""
    if selector.upper() == "ALL":
        return 0, {r.code for r in ALL_RULES}
    exact = lookup(selector)
    if exact is not None:
        return EXACT, {exact.code}
    prefixed = [r for r in ALL_RULES if r.code.startswith(selector.upper())]
    if not prefixed or not selector[:1].isalpha():
        raise ConfigError(f"{where}: unknown rule code or name {selector!r}")
    return len(selector), {r.code for r in prefixed if r.default_on or not enabling}


def _apply(enabled: set[str], layer: Selection, where: str) -> set[str]:
    """ruff's rule: within a layer the more specific selector wins (`--select TPL106 --ignore
    TPL1` keeps TPL106) and ignore wins a tie; a layer with `select` replaces what the layers
    below chose, ignores included, and a layer without it adds to and takes from it."""
    decisions: dict[str, tuple[int, bool]] = {}
    for selector in (*(layer.select or ()), *layer.extend_select):
        specificity, codes = _matches(selector, where, enabling=True)
        for code in codes:
            if specificity > decisions.get(code, (-1, True))[0]:
                decisions[code] = (specificity, True)
    for selector in layer.ignore:
        specificity, codes = _matches(selector, where, enabling=False)
        for code in codes:
            if specificity >= decisions.get(code, (-1, True))[0]:
                decisions[code] = (specificity, False)
    result = set() if layer.select is not None else set(enabled)
    for code, (_, enable) in decisions.items():
        if enable:
            result.add(code)
        else:
            result.discard(code)
    return result


def resolve(layers: Iterable[Selection], where: str = "selection") -> list[Rule]:
    """Instances of the rules that the layers, applied in order over the default set, enable.
    Off-by-default rules are enabled by their exact code or name, or by ALL, never by a prefix."""
    enabled = {rule.code for rule in ALL_RULES if rule.default_on}
    for layer in layers:
        enabled = _apply(enabled, layer, where)
    return [BY_CODE[code]() for code in sorted(enabled)]


def select_rules(
    select: Optional[Iterable[str]],
    ignore: Iterable[str],
    extend_select: Iterable[str] = (),
    where: str = "selection",
) -> list[Rule]:
    """Instances of the rules one layer of selection enables over the default set."""
    layer = Selection(None if select is None else tuple(select), tuple(extend_select), tuple(ignore))
    return resolve([layer], where)

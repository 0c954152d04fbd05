"""Rule selection: which rule codes a stack of select/ignore layers enables, as ruff resolves it.

It reads the rule catalog (each rule's code, name and default), not the rule classes, so that
checking a config's selectors and computing the cache key of a run import neither the rules nor
libcst: a run whose files are all cached never needs them.
"""

from __future__ import annotations

import dataclasses
from typing import Iterable, Optional

from . import catalog
from .settings import ConfigError

EXACT = 1_000  # the specificity of a whole code or a rule name: more than any prefix


@dataclasses.dataclass(frozen=True)
class Selection:
    """One layer of rule selection: the config file's, or the command line's."""

    select: Optional[tuple[str, ...]] = None  # None: keep what the layers below chose
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()


def lookup_code(code_or_name: str) -> Optional[str]:
    """The code of the rule with this code or name (any case)."""
    upper, lower = code_or_name.upper(), code_or_name.lower()
    for code, name, _ in catalog.RULES:
        if code == upper or name == lower:
            return code
    return None


def _matches(selector: str, where: str, enabling: bool) -> tuple[int, set[str]]:
    """How specific `selector` is, and the codes it names. ALL names every rule (ruff's meaning:
    the way to turn on the rules below the precision bar at once); enabling, a prefix never names
    an off-by-default rule; ignoring, it does."""
    if selector.upper() == "ALL":
        return 0, {code for code, _, _ in catalog.RULES}
    exact = lookup_code(selector)
    if exact is not None:
        return EXACT, {exact}
    prefixed = [
        (code, default_on) for code, _, default_on in catalog.RULES if code.startswith(selector.upper())
    ]
    if not prefixed or not selector[:1].isalpha():
        raise ConfigError(f"{where}: unknown rule code or name {selector!r}")
    return len(selector), {code for code, default_on in prefixed if default_on or not enabling}


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


def resolve_codes(layers: Iterable[Selection], where: str = "selection") -> list[str]:
    """The codes the layers, applied in order over the default set, enable, sorted.
    Off-by-default rules are enabled by their exact code or name, or by ALL, never by a prefix."""
    enabled = {code for code, _, default_on in catalog.RULES if default_on}
    for layer in layers:
        enabled = _apply(enabled, layer, where)
    return sorted(enabled)


def check_selectors(selectors: Iterable[str], where: str) -> None:
    """Raise ConfigError unless each selector names at least one rule."""
    for selector in selectors:
        _matches(selector, where, enabling=False)


def hidden_codes(layers: Iterable[Selection], enabled: Iterable[str]) -> list[str]:
    """The rules off by default whose findings a text summary counts ("N more from rules that are
    off by default"): those the run leaves off and no ignore of any layer names (by code, name,
    prefix or ALL), since a rule the user deselected is a decision, not news."""
    named: set[str] = set()
    for layer in layers:
        for selector in layer.ignore:
            named |= _matches(selector, "selection", enabling=False)[1]
    on = set(enabled)
    return sorted(code for code, _, default_on in catalog.RULES if not default_on and code not in on | named)

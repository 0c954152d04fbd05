"""Models built by name from a library's registry (RULES.md, "Values that travel"): `models.__dict__[arch]()`
and `getattr(models, arch)()` build the member the name selects. With a string literal that member is known;
with a command-line option (`args.arch`) it is the option's argparse default, and a rule that relies on it says
the default was assumed. Any other name leaves the member unknown.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Optional

import libcst as cst

from ..syntax.walker import FileFacts, dotted_name
from .names import Names


@dataclasses.dataclass(frozen=True)
class RegistryMember:
    """What a registry lookup builds: `torchvision.models.resnet18`, and the option whose default chose it."""

    qualified: str
    option: Optional[str] = None  # `--arch` when the member is that option's default
    written: str = ""  # as the file writes the registry: `resnet.resnet32` for `resnet.__dict__[...]`


class Registries:
    def __init__(self, facts: FileFacts, names: Names) -> None:
        self._facts = facts
        self._names = names

    def member(self, call: cst.Call) -> Optional[RegistryMember]:
        """The member `call` builds when it calls a registry lookup of an imported module, else None."""
        return self.looked_up(call.func)

    def looked_up(self, expr: cst.BaseExpression) -> Optional[RegistryMember]:
        """The member a registry lookup of an imported module selects (`models.__dict__[args.arch]`,
        `getattr(models, name)`), called or handed on uncalled; None for any other expression."""
        if isinstance(expr, cst.Subscript) and len(expr.slice) == 1:
            registry = expr.value
            index = expr.slice[0].slice
            if not (isinstance(registry, cst.Attribute) and registry.attr.value == "__dict__"):
                return None
            if not isinstance(index, cst.Index):
                return None
            return self._member(registry.value, index.value)
        if (
            isinstance(expr, cst.Call)
            and self._names.qualified_name(expr) == "builtins.getattr"
            and len(expr.args) == 2
            and all(a.keyword is None and not a.star for a in expr.args)
        ):
            return self._member(expr.args[0].value, expr.args[1].value)
        return None

    def _member(self, module: cst.BaseExpression, key: cst.BaseExpression) -> Optional[RegistryMember]:
        qualified = self._names.qualified_name(module)
        if qualified is None or qualified.startswith("builtins."):
            return None
        written = dotted_name(module) or qualified
        if isinstance(key, cst.SimpleString) and isinstance(key.evaluated_value, str):
            name = key.evaluated_value
            return RegistryMember(f"{qualified}.{name}", written=f"{written}.{name}")
        if isinstance(key, cst.Attribute) and key.attr.value in self._option_defaults:
            option, default = self._option_defaults[key.attr.value]
            return RegistryMember(f"{qualified}.{default}", option, f"{written}.{default}")
        return None

    def under_defaults(self, test: cst.BaseExpression) -> Optional[bool]:
        """What `test` gives when every option keeps its string default (`args.arch.startswith("vgg")`,
        `args.arch == "resnet18"`, `not`, `and`, `or` of those), or None when it reads anything else."""
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            inner = self.under_defaults(test.expression)
            return None if inner is None else not inner
        if isinstance(test, cst.BooleanOperation):
            left, right = self.under_defaults(test.left), self.under_defaults(test.right)
            if isinstance(test.operator, cst.And):
                return False if False in (left, right) else (None if None in (left, right) else True)
            return True if True in (left, right) else (None if None in (left, right) else False)
        if isinstance(test, cst.Call) and isinstance(test.func, cst.Attribute) and len(test.args) == 1:
            value, argument = self._default_of(test.func.value), _string(test.args[0].value)
            if value is None or argument is None or test.func.attr.value not in ("startswith", "endswith"):
                return None
            return (
                value.startswith(argument)
                if test.func.attr.value == "startswith"
                else value.endswith(argument)
            )
        if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
            value, other = self._default_of(test.left), _string(test.comparisons[0].comparator)
            operator = test.comparisons[0].operator
            if value is None or other is None or not isinstance(operator, (cst.Equal, cst.NotEqual)):
                return None
            return (value == other) == isinstance(operator, cst.Equal)
        return None

    def option_default(self, dest: str) -> Optional[str]:
        """The string default of the file's option stored as `dest` (`'0'` for `--gpu-ids`), if any."""
        found = self._option_defaults.get(dest)
        return found[1] if found else None

    def _default_of(self, expr: cst.BaseExpression) -> Optional[str]:
        if isinstance(expr, cst.Attribute) and expr.attr.value in self._option_defaults:
            return self._option_defaults[expr.attr.value][1]
        return None

    @functools.cached_property
    def _option_defaults(self) -> dict[str, tuple[str, str]]:
        """dest -> (option, string default) of the file's `parser.add_argument(...)` calls; a dest
        declared twice with different defaults has none."""
        found: dict[str, tuple[str, str]] = {}
        conflicting: set[str] = set()
        for call in self._facts.method_calls.get("add_argument", ()):
            declared = _declared_option(call)
            if declared is None:
                continue
            dest, option, default = declared
            if dest in found and found[dest][1] != default:
                conflicting.add(dest)
            found[dest] = (option, default)
        return {dest: value for dest, value in found.items() if dest not in conflicting}


def _string(expr: cst.BaseExpression) -> Optional[str]:
    if isinstance(expr, cst.SimpleString) and isinstance(expr.evaluated_value, str):
        return expr.evaluated_value
    return None


def _declared_option(call: cst.Call) -> Optional[tuple[str, str, str]]:
    """(dest, option, default) of `add_argument("-a", "--arch", default="resnet18")`, when the default is a
    string literal."""
    flags = [
        a.value.evaluated_value
        for a in call.args
        if a.keyword is None and isinstance(a.value, cst.SimpleString)
    ]
    keywords = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
    default = keywords.get("default")
    if not flags or not isinstance(default, cst.SimpleString):
        return None
    text = default.evaluated_value
    if not isinstance(text, str):
        return None
    names = [f for f in flags if isinstance(f, str)]
    long_options = [f for f in names if f.startswith("--")]
    option = long_options[0] if long_options else names[0]
    dest_value = keywords.get("dest")
    if isinstance(dest_value, cst.SimpleString) and isinstance(dest_value.evaluated_value, str):
        dest = dest_value.evaluated_value
    else:
        dest = option.lstrip("-").replace("-", "_")
    return dest, option, text

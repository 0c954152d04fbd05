"""Branches decided by what a function is given: a test on a parameter for which every call that
runs per step passes the same constant (or a value that is never None), or on a `self.` attribute
that only `__init__` sets from such a parameter (`if self.remap is not None:` where every
construction passes `remap=None`). The project pass works out the values (project/graph.py);
both walks read a test through this one module, on CPython's `ast` (libcst's test is printed
and parsed back), so they agree word for word.

A value is a token: the repr of a literal (`None`, `False`, `3`, `'mean'`, an empty `()`, `[]` or
`{}`, which is false), or NOT_NONE for a value known only not to be None (a tuple or list that holds
something, an f-string).
"""

from __future__ import annotations

import ast
import functools
import json
from operator import ge, gt, le, lt
from typing import Mapping, Optional, cast

NOT_NONE = "!None"
# an object known to be true, not only not None: a project module built in `__init__`
# (`self.fl = FocalLoss() if use_fl else None` with `use_fl` True), so `if self.fl:` is decided
TRUTHY = "!truthy"
# a `self.` attribute nothing sets on the step path (project/arguments.py): `hasattr(self, "A")`
# is False there, `getattr(self, "A", d)` is d; reading `self.A` itself is not decided
ABSENT = "!absent"
# a value key `NAME()` whose token this is: the module's NAME is a project helper that tests its one
# argument against None (`def exists(val): return val is not None`), project/arguments.py
NOT_NONE_TEST = "!tests-not-none"
# what a call passes when it hands on its caller's own parameter (`g(x, size)` in `f(x, size)`):
# the project pass replaces it by the caller's value for that parameter, when it has one
PARAM_PREFIX = "@"
# a name the caller binds to an instance it constructs (`model = UNet(...)`, then
# `train_model(model=model)`): BUILT_PREFIX + the class as written there, which the project pass
# resolves in the caller's module to INSTANCE_PREFIX + the class; a test on an attribute of such
# a parameter (`if net.n_classes == 1:`) reads what the class's `__init__` sets it to
BUILT_PREFIX = "!built:"
INSTANCE_PREFIX = "!instance:"
# the parsed command-line options (analysis/options.py): a test reads their attributes
# (`args.prefetcher`), whose values the project pass knows when the default run decides them
OPTIONS = "!options"
# a name the caller binds once to an if-expression (`ids = np.random.randint(...) if
# opts.enable_vis else None`, then `validate(ret_samples_ids=ids)`): CHOSEN_PREFIX + the JSON of
# [the test, the body's token, the else side's token]; the project pass decides the test with
# the caller's values and takes the side it picks (both, joined, when it is not decided)
CHOSEN_PREFIX = "!if:"
# a name a `for` binds to the items of a parameter or `self.` attribute (`for loss in
# self.losses`, then `self.get_loss(loss, ...)`): ITEMS_PREFIX + what it walks; the project pass
# reads the caller's value for that, a list or tuple of literals, as ONE_OF its items
ITEMS_PREFIX = "!items:"
# one of several literals (ONE_OF + the JSON list of their tokens): a test holds where it holds for
# each of them (`loss == "masks"` for one of "labels", "boxes", "cardinality" does not)
ONE_OF = "!oneof:"
# an empty container, where call sites pass different ones (`()` and `[]`): not None, and false
EMPTY = "()"
_EMPTY = frozenset({"()", "[]", "{}"})


def value_token(node: ast.AST) -> Optional[str]:
    """What an argument or a default is, as a token; None when it is not known here."""
    if isinstance(node, ast.Constant) and not isinstance(node.value, (bytes, type(...))):
        return repr(node.value)
    if (
        isinstance(node, ast.UnaryOp)
        and isinstance(node.op, ast.USub)
        and isinstance(node.operand, ast.Constant)
    ):
        number = node.operand.value
        if isinstance(number, (int, float)) and not isinstance(number, bool):
            return repr(-number)
    if (isinstance(node, (ast.Tuple, ast.List)) and not node.elts) or (
        isinstance(node, ast.Dict) and not node.keys
    ):
        return repr(ast.literal_eval(node))  # an empty container: not None, and false
    if isinstance(node, (ast.Tuple, ast.List, ast.Dict, ast.Set, ast.JoinedStr, ast.Lambda)):
        return NOT_NONE
    if isinstance(node, (ast.ListComp, ast.DictComp, ast.SetComp)):
        return NOT_NONE
    return None


def chosen(test: str, body: str, orelse: str) -> str:
    """The token of a name bound once to `body if test else orelse` (CHOSEN_PREFIX)."""
    return CHOSEN_PREFIX + json.dumps([test, body, orelse])


def chosen_sides(token: str, values: Mapping[str, str]) -> list[str]:
    """The tokens of the sides a CHOSEN_PREFIX token may take under `values`: the one its test
    picks, or both when the test is not decided."""
    try:
        test_text, body, orelse = json.loads(token[len(CHOSEN_PREFIX) :])
    except (ValueError, TypeError):
        return ["?"]
    test = parse_test(test_text) if isinstance(test_text, str) else None
    holds = truth(test, values) if test is not None else None
    sides = [body, orelse] if holds is None else [body if holds else orelse]
    return [side if isinstance(side, str) else "?" for side in sides]


def asserted_values(test: ast.AST, params: set[str]) -> dict[str, str]:
    """What an `assert` in a function's own body says of its parameters (`assert n is None`):
    past it, they hold whatever the caller passed."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        found: dict[str, str] = {}
        for value in test.values:
            found.update(asserted_values(value, params))
        return found
    if (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], (ast.Is, ast.IsNot))
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value is None
        and isinstance(test.left, ast.Name)
        and test.left.id in params
    ):
        return {test.left.id: "None" if isinstance(test.ops[0], ast.Is) else NOT_NONE}
    return {}


def merge(first: Optional[str], second: Optional[str]) -> Optional[str]:
    """What two call sites together say about a parameter."""
    if first is None or second is None:
        return None
    if first == second:
        return first
    if first in _EMPTY and second in _EMPTY:
        return EMPTY  # `labels=()` here, `labels=[]` there: false either way
    if first != "None" and second != "None":
        return NOT_NONE
    return None


def subject(node: ast.AST) -> Optional[str]:
    """`flag` or `self.flag`: what a test reads that a value may be known for."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return f"self.{node.attr}"
    return None


def _read(node: ast.AST) -> Optional[str]:
    """What a test reads that a value may be known for: a `subject`, or an attribute of the
    parsed options (`args.prefetcher`), known only where a name holds them."""
    name = subject(node)
    if name is None and isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return f"{node.value.id}.{node.attr}"
    return name


def is_option_read(read: str) -> bool:
    """`args.prefetcher`: a value key that reads the parsed options, not a parameter or `self.`."""
    return "." in read and not read.startswith("self.")


def mentions(test: ast.AST, names: Mapping[str, object] | frozenset[str] | set[str]) -> bool:
    """`test` reads a parameter among `names`, or a `self.` attribute."""
    for node in ast.walk(test):
        name = subject(node)
        if name is not None and (name.startswith("self.") or name in names):
            return True
    return False


def _literal(token: str) -> tuple[bool, object]:
    if token == NOT_NONE:
        return False, None
    try:
        return True, ast.literal_eval(token)
    except (ValueError, SyntaxError):
        return False, None


def items_token(token: Optional[str]) -> Optional[str]:
    """What an item of the value `token` stands for is: the literal every item is, or ONE_OF
    them, for a list or tuple of literals; None for anything else."""
    known, value = _literal(token) if token is not None else (False, None)
    if not known or not isinstance(value, (list, tuple)) or not value:
        return None
    if not all(isinstance(item, (str, int, float, bool, type(None))) for item in value):
        return None
    members = list(dict.fromkeys(repr(item) for item in value))
    return members[0] if len(members) == 1 else ONE_OF + json.dumps(members)


def truth(test: ast.AST, values: Mapping[str, str]) -> Optional[bool]:
    """Whether `test` holds under `values`; None when that is not decided. A name that holds
    ONE_OF several literals decides the test where every one of them gives the same answer."""
    for node in ast.walk(test):
        name = _read(node)
        token = values.get(name) if name is not None else None
        if name is None or token is None or not token.startswith(ONE_OF):
            continue
        try:
            members = json.loads(token[len(ONE_OF) :])
        except ValueError:
            return None
        answers = {truth(test, {**values, name: str(member)}) for member in members}
        return answers.pop() if len(answers) == 1 else None
    return _truth(test, values)


def _truth(test: ast.AST, values: Mapping[str, str]) -> Optional[bool]:
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = truth(test.operand, values)
        return None if inner is None else not inner
    if isinstance(test, ast.BoolOp):
        parts = [truth(v, values) for v in test.values]
        decisive = isinstance(test.op, ast.Or)  # `or` is decided by one True, `and` by one False
        if decisive in parts:
            return decisive
        return (not decisive) if all(p is not None for p in parts) else None
    probed = _probe(test, values)
    if probed is not None:
        return bool(probed[0])
    if _tests_not_none(test, values):
        token = operand_token(cast(ast.Call, test).args[0], values)
        if token == "None":
            return False
        return True if token in (NOT_NONE, TRUTHY) or (token is not None and _literal(token)[0]) else None
    name = _read(test)
    if name is not None:
        token = values.get(name)
        if token == ABSENT:
            return None
        if token == TRUTHY:
            return True
        known, value = _literal(token) if token is not None else (False, None)
        return bool(value) if known else None
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        right, operator = test.comparators[0], test.ops[0]
        got = _probe(test.left, values)
        if got is not None:  # `getattr(self, "A", None) is not None`
            if (
                isinstance(right, ast.Constant)
                and right.value is None
                and isinstance(operator, (ast.Is, ast.IsNot))
            ):
                return isinstance(operator, ast.Is) == (got[0] is None)
            return None
        name = _read(test.left)
        token = values.get(name) if name is not None else None
        if token == ABSENT:
            return None
        if token is None or not isinstance(right, ast.Constant):
            return None
        if isinstance(operator, (ast.Is, ast.IsNot)) and right.value is None:
            is_none = token == "None"
            return is_none if isinstance(operator, ast.Is) else not is_none
        known, value = _literal(token)
        if known and type(value) is type(right.value) and isinstance(operator, (ast.Eq, ast.NotEq)):
            equal = value == right.value
            return equal if isinstance(operator, ast.Eq) else not equal
        if known and _number(value) and _number(right.value) and type(operator) in _ORDERS:
            return bool(_ORDERS[type(operator)](value, right.value))  # type: ignore[arg-type]  # `args.num_gpu > 1`: both numbers
    return None


_ORDERS = {ast.Lt: lt, ast.LtE: le, ast.Gt: gt, ast.GtE: ge}


def is_boolean_test(node: ast.AST) -> bool:
    """A comparison, a `not`, or `and`/`or` of those: what it evaluates to is a bool (`a and b`
    of other operands gives one of them)."""
    if isinstance(node, ast.Compare):
        return True
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return True
    return isinstance(node, ast.BoolOp) and all(is_boolean_test(v) for v in node.values)


def boolean_token(test: ast.AST, values: Mapping[str, str]) -> Optional[str]:
    """The token of what a boolean test evaluates to under `values` (`self.n > 1` with `self.n`
    known to be 1 is `False`); None when it is no boolean test or is not decided."""
    if not is_boolean_test(test):
        return None
    holds = truth(test, values)
    return None if holds is None else repr(holds)


def operand_token(node: ast.AST, values: Mapping[str, str]) -> Optional[str]:
    """The token of a literal, or of a parameter or `self.` attribute whose value is known."""
    token = value_token(node)
    if token is not None:
        return token
    name = subject(node)
    token = values.get(name) if name is not None else None
    return None if token == ABSENT else token


def fallback_result(first: Optional[str], second: Optional[str], calls_second: bool) -> Optional[str]:
    """What `default(val, d)` (analysis/fallbacks.py) gives for the tokens of its arguments: the
    first unless it is None, then the second; a second it may call (`d() if isfunction(d) else
    d`) only where it is a literal, which no call returns."""
    if first is None or first != "None":
        return first
    if second is None or (calls_second and not _literal(second)[0]):
        return None
    return second


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _tests_not_none(node: ast.AST, values: Mapping[str, str]) -> bool:
    """`exists(x)`, with `exists` a helper that tests its argument against None (NOT_NONE_TEST)."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and len(node.args) == 1
        and not node.keywords
        and values.get(f"{node.func.id}()") == NOT_NONE_TEST
    )


def _probe(node: ast.AST, values: Mapping[str, str]) -> Optional[tuple[object]]:
    """What `hasattr(self, "A")` (False) or `getattr(self, "A", d)` (d) gives, for an attribute
    known ABSENT; None when `node` is neither, or the attribute may be set."""
    if not (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("hasattr", "getattr")
        and len(node.args) in (2, 3)
        and not node.keywords
        and isinstance(node.args[0], ast.Name)
        and node.args[0].id == "self"
        and isinstance(node.args[1], ast.Constant)
        and isinstance(node.args[1].value, str)
        and values.get(f"self.{node.args[1].value}") == ABSENT
    ):
        return None
    if node.func.id == "hasattr":
        return (False,) if len(node.args) == 2 else None
    if len(node.args) == 3 and isinstance(node.args[2], ast.Constant):
        return (node.args[2].value,)
    return None  # getattr without a default raises; a default not known here


def decided_sides(test: ast.AST, values: Mapping[str, str]) -> tuple[bool, bool]:
    """(the body is never taken, the else branch is never taken) for `if test:`."""
    if not values:
        return False, False
    holds = truth(test, values)
    return holds is False, holds is True


@functools.lru_cache(maxsize=4096)
def parse_test(text: str) -> Optional[ast.expr]:
    """A guard's test, read back from its text (the project pass meets the same ones often)."""
    try:
        return ast.parse(f"(\n{text}\n)", mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None

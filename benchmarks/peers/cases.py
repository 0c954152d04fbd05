"""Reading the peers' own rule tests into cases: a source, the peer rule it tests, and whether the
peer expects that rule to fire (a positive) or to stay silent (a negative).

TorchFix keeps a fixture per rule family: `<name>.py` and `<name>.txt`, the lines its rules report.
torch-preflight keeps inline snippets in `tests/test_rules.py`, asserted with `"TG001" in codes(src)`,
`"TG001" not in codes(src)`, `codes(src) == []` or `[d.code for d in analyze(src)] == [...]`. Both are read
as data: the fixtures as text, the test module through `ast`, evaluating only the string expressions
that build a snippet (constants, `+`, f-strings over a literal loop, the module's string helpers).
"""

from __future__ import annotations

import ast
import dataclasses
import re
import textwrap
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Optional

POSITIVE = "positive"
NEGATIVE = "negative"
ANY_RULE = "*"  # a snippet the peer asserts clean of every rule, in a test that names none


@dataclasses.dataclass(frozen=True)
class Case:
    peer: str
    rule: str  # the peer's code, or ANY_RULE
    expect: str  # POSITIVE or NEGATIVE
    name: str  # the test (and the loop value) or fixture line it came from
    source: str
    line: Optional[int] = None  # TorchFix: the line the finding is expected on (or not); None: anywhere


# TorchFix's fixtures say where findings are, not where the rule looked and stayed silent: a negative is
# a line holding the rule's call that the expected output does not list.
TORCHFIX_CALLS = {"TOR401": "DataLoader(", "TOR402": "zero_grad("}
_EXPECTED_LINE = re.compile(r"^(\d+):\d+ (TOR\d{3}) ")


def torchfix_cases(fixtures: Path) -> list[Case]:
    """The cases of TorchFix's checker fixtures (`tests/fixtures/*/checker/`) for the rules in
    TORCHFIX_CALLS."""
    cases = []
    for source_path in sorted(fixtures.glob("**/checker/*.py")):
        expected_path = source_path.with_suffix(".txt")
        if not expected_path.exists():
            continue
        source = source_path.read_text(encoding="utf-8")
        expected: dict[int, str] = {}
        for text in expected_path.read_text(encoding="utf-8").splitlines():
            match = _EXPECTED_LINE.match(text)
            if match and match.group(2) in TORCHFIX_CALLS:
                expected[int(match.group(1))] = match.group(2)
        rules = set(expected.values())
        for number, text in enumerate(source.splitlines(), start=1):
            for rule in sorted(rules):
                if TORCHFIX_CALLS[rule] not in text:
                    continue
                expect = POSITIVE if expected.get(number) == rule else NEGATIVE
                name = f"{source_path.name}:{number}"
                cases.append(Case("torchfix", rule, expect, name, source, number))
    return cases


_PEER_CODE = re.compile(r"tg\d{3}", re.IGNORECASE)
_CHECKS = ("codes", "analyze")


def _helpers(tree: ast.Module) -> dict[str, Any]:
    """The module's string constants and non-test functions (snippet builders such as a loop
    template), evaluated without builtins: nothing of the peer runs but string formatting."""
    kept: list[ast.stmt] = []
    for statement in tree.body:
        if isinstance(statement, ast.FunctionDef) and not statement.name.startswith("test_"):
            kept.append(statement)
        elif isinstance(statement, ast.Assign) and isinstance(statement.value, ast.Constant):
            kept.append(statement)
    namespace: dict[str, Any] = {"__builtins__": {}}
    exec(compile(ast.Module(body=kept, type_ignores=[]), "<peer helpers>", "exec"), namespace)  # noqa: S102 - strings only, no builtins
    return namespace


def _value(node: ast.expr, helpers: Mapping[str, Any], env: Mapping[str, Any]) -> Optional[str]:
    try:
        value = eval(compile(ast.Expression(body=node), "<peer snippet>", "eval"), dict(helpers), dict(env))  # noqa: S307 - see _helpers
    except Exception:  # a snippet built some other way is not read
        return None
    return value if isinstance(value, str) else None


def _check_call(node: ast.expr) -> Optional[ast.expr]:
    """`E` of `codes(E)`/`analyze(E)`."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _CHECKS
        and node.args
    ):
        return node.args[0]
    return None


def _string(node: ast.expr) -> Optional[str]:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


class _TestReader:
    """The cases one test function asserts."""

    def __init__(self, test: ast.FunctionDef, helpers: Mapping[str, Any]) -> None:
        self.test = test
        self.helpers = helpers
        named = sorted({code.upper() for code in _PEER_CODE.findall(test.name)})
        self.named = named or [ANY_RULE]
        self.cases: list[Case] = []
        self.diagnostics: dict[str, ast.expr] = {}  # name bound to analyze(E) -> E
        self.filtered: dict[str, tuple[ast.expr, str]] = {}  # [d for d in D if d.code == "TG..."]

    def read(self) -> list[Case]:
        self._block(self.test.body, {}, "")
        return self.cases

    def _add(self, rule: str, expect: str, snippet: ast.expr, env: Mapping[str, Any], suffix: str) -> None:
        source = _value(snippet, self.helpers, env)
        if source is not None:
            # As the peer's harness hands it to its rules: dedented, leading blank lines dropped.
            source = textwrap.dedent(source).lstrip("\n")
            self.cases.append(Case("torch-preflight", rule, expect, self.test.name + suffix, source))

    def _block(self, body: list[ast.stmt], env: dict[str, Any], suffix: str) -> None:
        for statement in body:
            if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
                self._bind(statement.targets[0], statement.value, env)
            elif isinstance(statement, ast.For) and isinstance(statement.target, ast.Name):
                try:
                    values = ast.literal_eval(statement.iter)
                except (ValueError, TypeError, SyntaxError):
                    continue
                for value in values:
                    inner = {**env, statement.target.id: value}
                    self._block(statement.body, inner, f"{suffix}[{value}]")
            elif isinstance(statement, ast.Assert):
                self._assert(statement.test, env, suffix)

    def _bind(self, target: ast.expr, value: ast.expr, env: dict[str, Any]) -> None:
        if not isinstance(target, ast.Name):
            return
        snippet = _check_call(value)
        if snippet is not None:
            self.diagnostics[target.id] = snippet
        elif isinstance(value, ast.ListComp) and isinstance(value.generators[0].iter, ast.Name):
            source = self.diagnostics.get(value.generators[0].iter.id)
            conditions = value.generators[0].ifs
            if source is not None and len(conditions) == 1:
                compared = conditions[0]
                if isinstance(compared, ast.Compare) and len(compared.comparators) == 1:
                    code = _string(compared.comparators[0])
                    if code:
                        self.filtered[target.id] = (source, code)
        else:
            text = _value(value, self.helpers, env)
            if text is not None:
                env[target.id] = text

    def _snippet(self, node: ast.expr) -> Optional[ast.expr]:
        """The snippet of `codes(E)`, of a name bound to `analyze(E)`, or of `[d.code for d in D]`."""
        direct = _check_call(node)
        if direct is not None:
            return direct
        if isinstance(node, ast.Name):
            return self.diagnostics.get(node.id)
        if isinstance(node, ast.ListComp) and isinstance(node.generators[0].iter, ast.Name):
            return self.diagnostics.get(node.generators[0].iter.id)
        return None

    def _assert(self, test: ast.expr, env: Mapping[str, Any], suffix: str) -> None:
        if isinstance(test, ast.Name) and test.id in self.filtered:
            filtered, filtered_code = self.filtered[test.id]
            self._add(filtered_code, POSITIVE, filtered, env, suffix)
            return
        if not isinstance(test, ast.Compare) or len(test.ops) != 1:
            return
        operator, right = test.ops[0], test.comparators[0]
        code = _string(test.left)
        if code and isinstance(operator, (ast.In, ast.NotIn)):
            snippet = self._snippet(right)
            if snippet is not None:
                self._add(code, POSITIVE if isinstance(operator, ast.In) else NEGATIVE, snippet, env, suffix)
            return
        if isinstance(operator, ast.Eq) and isinstance(right, ast.List):
            snippet = self._snippet(test.left)
            if snippet is None:
                return
            listed = [_string(item) for item in right.elts]
            if not listed:
                for rule in self.named:
                    self._add(rule, NEGATIVE, snippet, env, suffix)
            for rule in sorted({item for item in listed if item}):
                self._add(rule, POSITIVE, snippet, env, suffix)


def preflight_cases(test_module: str) -> list[Case]:
    """The cases of torch-preflight's `tests/test_rules.py` (its text)."""
    tree = ast.parse(test_module)
    helpers = _helpers(tree)
    cases = []
    for statement in tree.body:
        if isinstance(statement, ast.FunctionDef) and statement.name.startswith("test_"):
            cases.extend(_TestReader(statement, helpers).read())
    return cases


def kept(cases: list[Case], rules: Mapping[str, object]) -> Iterator[Case]:
    """The cases of the peer rules we compare with (and the clean-of-everything negatives)."""
    return (case for case in cases if case.rule in rules or case.rule == ANY_RULE)

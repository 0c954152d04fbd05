"""Property tests (hypothesis, hypothesmith): the linter never crashes on valid Python, fixing
reaches a fixed point whose output parses, and findings do not depend on newline style, trailing
whitespace or path separators.

A few examples per property in the normal run; TORCHPERF_HYPOTHESIS_PROFILE=long searches longer
(profiles in tests/conftest.py)."""

from __future__ import annotations

import textwrap

import hypothesmith
import libcst as cst
import pytest
from hypothesis import given, note
from hypothesis import strategies as st

from torchperf_lint.config import Settings
from torchperf_lint.engine.findings import Safety, allowed
from torchperf_lint.engine.fixer import fix_bytes
from torchperf_lint.engine.runner import ERROR_CODE, lint_bytes
from torchperf_lint.rules import select_rules

SETTINGS = Settings()
RULES = select_rules(SETTINGS.select, SETTINGS.ignore, ("ALL",))  # every rule, off by default or not
ALL_FILES = SETTINGS.replace(lint_all_files=True)


def lint(source: bytes | str, path: str = "model.py", settings: Settings = SETTINGS):
    return lint_bytes(source, path, RULES, settings).findings


def fix(source: bytes, unsafe: bool = False) -> bytes:
    return fix_bytes(source, "model.py", RULES, SETTINGS, unsafe=unsafe).fixed


def compiles(source: bytes) -> bool:
    try:
        compile(source, "<fixed>", "exec", dont_inherit=True)
    except SyntaxError:
        return False
    return True


def shape(findings) -> list[tuple[object, ...]]:
    """A finding without its path."""
    return [
        (f.code, f.line, f.col, f.end_line, f.end_col, f.message, f.fix.safety if f.fix else None)
        for f in findings
    ]


# -- (a) any valid module: findings or nothing, never a crash -------------------------------------


def _in_forward(module: cst.Module) -> str:
    """The module's statements as the body of an nn.Module's forward(): hot code."""
    body = list(module.body) or [cst.SimpleStatementLine([cst.Pass()])]
    forward = cst.FunctionDef(
        name=cst.Name("forward"),
        params=cst.Parameters([cst.Param(cst.Name("self")), cst.Param(cst.Name("x"))]),
        body=cst.IndentedBlock(body),
    )
    net = cst.ClassDef(
        name=cst.Name("Net"),
        bases=[cst.Arg(cst.parse_expression("nn.Module"))],
        body=cst.IndentedBlock([forward]),
    )
    header = cst.parse_module("import torch\nfrom torch import nn\n")
    return header.with_changes(body=[*header.body, net]).code


def _assert_no_internal_error(source: str) -> None:
    note(source)
    findings = lint(source, settings=ALL_FILES)
    for finding in findings:
        if finding.code != ERROR_CODE:
            continue
        assert finding.message.startswith("could not parse"), finding.message
        try:
            cst.parse_module(source)
        except cst.ParserSyntaxError:
            continue  # a libcst limitation, reported as such
        raise AssertionError(f"TPL000 on a module libcst parses: {finding.message}")


@pytest.mark.filterwarnings("ignore::SyntaxWarning")  # hypothesmith compiles odd but valid code
@given(hypothesmith.from_grammar())
def test_any_valid_module_lints_without_internal_errors(source: str) -> None:
    _assert_no_internal_error(source)
    _assert_no_internal_error("import torch\nfrom torch import nn\n" + source)
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError:
        return
    _assert_no_internal_error(_in_forward(module))


# -- (b) programs with fixable patterns: fixing reaches a fixed point ----------------------------

# a fixed pool shrinks fast; the names are not builtins, keywords or the templates' own names
NAMES = st.sampled_from(
    [
        "a",
        "b",
        "c",
        "k",
        "m",
        "u",
        "v",
        "w",
        "xs",
        "ys",
        "idx",
        "out",
        "pred",
        "logits",
        "labels",
        "target",
        "mask",
        "batch",
        "feats",
        "emb",
        "hidden",
        "scores",
        "num",
        "size",
        "dim",
        "nb",
        "inp",
        "net",
        "opt",
        "data",
        "it",
        "rows",
        "cols",
        "lr",
        "aux",
        "tmp",
        "val",
        "key",
        "bias",
        "gain",
        "sched_fn",
        "my_model",
        "loader_",
        "step_count",
    ]
)

FACTORIES = {
    "zeros": ["{n}", "{n}, 4", "{x}.shape[0], 3", "({n}, 2)", "{n},"],
    "ones": ["{n}", "{n}, {n}"],
    "rand": ["{n}, 8", "{x}.shape"],
    "randn": ["{n}", "{x}.shape[0], 16"],
    "empty": ["{n}"],
    "arange": ["{n}", "0, {n}", "1, {n}, 2"],
    "randperm": ["{n}"],
    "eye": ["{n}"],
    "full": ["({n}, 2), 0.5"],
    "linspace": ["0, 1, {n}"],
    "randint": ["0, 10, ({n},)"],
}
MOVES = [
    ".cuda()",
    ".cuda(0)",
    '.to("cuda")',
    '.to("cuda:1")',
    '.to(device="cuda")',
    '.to({T}.device("cuda"))',
    ".to({device})",
    ".to( {device} )",
]
RANGES = ["range({n})", "range(0, {n})", "range(1, {n}, 2)", "range(len({t}))", "list(range({n}))"]


@st.composite
def factory_call(draw, torch_name: str) -> str:
    factory = draw(st.sampled_from(sorted(FACTORIES)))
    args = draw(st.sampled_from(FACTORIES[factory]))
    if draw(st.booleans()):  # one argument per line, trailing comma
        parts = [a.strip() for a in args.split(",") if a.strip()] if "(" not in args else [args.rstrip(",")]
        args = "\n" + "".join(f"    {part},\n" for part in parts)
    return f"{torch_name}.{factory}({args}){draw(st.sampled_from(MOVES))}"


@st.composite
def programs(draw) -> str:
    """A module with TPL101/TPL103 patterns in an nn.Module's forward() or a training step loop,
    with random names and torch aliases."""
    names = draw(st.lists(NAMES, min_size=9, max_size=9, unique=True))
    x, n, t, p, q, model, loader, optimizer, cls = names
    torch_name = draw(st.sampled_from(["torch", "th", None, names[0] + "_t"]))
    if torch_name is None:
        imports = "from torch import nn\n"
    elif torch_name == "torch":
        imports = "import torch\nfrom torch import nn\n"
    else:
        imports = f"import torch as {torch_name}\nfrom torch import nn\n"
    in_loop = draw(st.booleans())
    fields = {"x": x, "n": n, "t": t, "p": p, "q": q, "T": torch_name or "torch", "device": "device"}

    statements = []
    for index in range(draw(st.integers(1, 4))):
        kinds = ["range-param", "comment"] + (["factory", "range-local", "nested"] if torch_name else [])
        kind = draw(st.sampled_from(kinds))
        target = f"{q}{index}"
        if kind == "factory":
            statements.append(f"{target} = {draw(factory_call(torch_name))}")
        elif kind == "range-param":
            index_expr = draw(st.sampled_from(RANGES))
            statements.append(f"{target} = {p}[{index_expr}, {t}]")
        elif kind == "range-local":
            statements.append(f'{q} = {torch_name}.randn({n}, 5, device="cuda")')
            statements.append(f"{target} = {q}[{draw(st.sampled_from(RANGES))}]")
        elif kind == "nested":
            statements.append(f'{q} = {torch_name}.randn({n}, 5, device="cuda")')
            move = draw(st.sampled_from(MOVES))
            statements.append(f"{target} = {torch_name}.zeros({q}[range({n}), 0].shape[0]){move}")
        else:
            statements.append(f"# {draw(NAMES)}")
    body = "\n".join(statements).format(**fields)

    if in_loop:
        code = (
            f"def train({model}, {loader}, {optimizer}, {p}, {n}, device):\n"
            f"    for {x}, {t} in {loader}:\n"
            + textwrap.indent(body, " " * 8)
            + f"\n        loss = {model}({x}).sum()\n"
            f"        loss.backward()\n"
            f"        {optimizer}.step()\n"
        )
    else:
        code = (
            f"class {cls.capitalize()}(nn.Module):\n"
            f"    def forward(self, {x}, {p}, {t}, {n}, device):\n"
            + textwrap.indent(body, " " * 8)
            + f"\n        return {x}\n"
        )
    return f"{imports}\n\n{code}"


def test_generated_programs_carry_safe_and_unsafe_fixes() -> None:
    """The templates do produce what the properties are about (else they prove nothing)."""
    seen: set[object] = set()

    @given(programs())
    def collect(source: str) -> None:
        for finding in lint(source.encode()):
            seen.add((finding.code, finding.fix.safety if finding.fix else None))

    collect()
    assert {code for code, _ in seen} >= {"TPL101", "TPL103"}
    assert {safety for _, safety in seen if safety is not None} >= {Safety.SAFE, Safety.UNSAFE}


@given(programs())
def test_safe_fix_parses_leaves_no_safe_fix_and_is_idempotent(source: str) -> None:
    note(source)
    assert compiles(source.encode())
    fixed = fix(source.encode())
    note(fixed.decode())
    assert compiles(fixed)
    remaining = lint(fixed)
    assert [f for f in remaining if f.code == ERROR_CODE] == []
    assert [f for f in remaining if allowed(f.fix, unsafe=False)] == []
    assert fix(fixed) == fixed


@given(programs())
def test_unsafe_fix_parses_and_is_idempotent(source: str) -> None:
    note(source)
    fixed = fix(source.encode(), unsafe=True)
    note(fixed.decode())
    assert compiles(fixed)
    assert [f for f in lint(fixed) if allowed(f.fix, unsafe=True)] == []
    assert fix(fixed, unsafe=True) == fixed


# -- (c) findings do not depend on newline style, trailing whitespace, path separators ----------


@given(programs(), st.data())
def test_findings_do_not_depend_on_newlines_or_trailing_whitespace(source: str, data) -> None:
    lines = source.split("\n")
    trailing = data.draw(
        st.lists(st.sampled_from(["", " ", "\t", "  \t "]), min_size=len(lines), max_size=len(lines))
    )
    newline = data.draw(st.sampled_from(["\n", "\r\n"]))
    variant = newline.join(line + (pad if line else "") for line, pad in zip(lines, trailing, strict=False))
    note(repr(variant))
    assert shape(lint(variant.encode())) == shape(lint(source.encode()))


@given(programs())
def test_crlf_files_are_fixed_like_lf_files(source: str) -> None:
    crlf = source.replace("\n", "\r\n").encode()
    assert fix(crlf, unsafe=True) == fix(source.encode(), unsafe=True).replace(b"\n", b"\r\n")


DIRECTORIES = st.lists(st.sampled_from(["tests", "pkg", "src", "models", "test", "a b"]), max_size=3)
FILE_NAMES = st.sampled_from(["model.py", "test_model.py", "model_test.py", "conftest.py", "train.py"])


@given(programs(), DIRECTORIES, FILE_NAMES)
def test_findings_do_not_depend_on_path_separators(source: str, directories: list[str], name: str) -> None:
    settings = SETTINGS.replace(per_file_ignores=(("tests/*", ("TPL103",)), ("*/models/*", ("TPL101",))))
    posix = "/".join([*directories, name])
    windows = "\\".join([*directories, name])
    data = source.encode()
    assert shape(lint(data, windows, settings)) == shape(lint(data, posix, settings))

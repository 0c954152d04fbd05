"""TPL103's slice and flip fixes, run on CPU tensors: where the list or range was a valid index, the
fixed expression selects the same values in the same shape, and writes the same elements."""

from __future__ import annotations

import itertools
import textwrap
from itertools import pairwise

import pytest
import torch
from hypothesis import given, note, settings
from hypothesis import strategies as st

from torchperf_lint.api import fix_source, lint_source
from torchperf_lint.engine.findings import Safety

HEADER = "import torch\nfrom torch import nn\n\n\nclass Net(nn.Module):\n    def forward(self, x, v):\n"
INDENT = "        "


def _fixed_lines(lines: list[str]) -> list[str]:
    """`lines` as statements of a forward(), each as `--fix --unsafe-fixes` leaves it."""
    source = HEADER + "".join(f"{INDENT}{line}\n" for line in lines)
    fixed = fix_source(source, path="<string>", unsafe=True, select=["TPL103"])
    assert fixed.startswith(HEADER)
    body = fixed[len(HEADER) :].splitlines()
    assert len(body) == len(lines)
    return [line[len(INDENT) :] for line in body]


def _read(expr: str, x: torch.Tensor) -> torch.Tensor | None:
    try:
        result = eval(expr, {"torch": torch, "x": x})  # noqa: S307 - the test's own expressions
    except IndexError:
        return None
    assert isinstance(result, torch.Tensor)
    return result


def _write(statement: str, x: torch.Tensor, v: object) -> torch.Tensor | None:
    x = x.clone()
    try:
        exec(statement, {"torch": torch, "x": x, "v": v})  # noqa: S102 - the test's own statements
    except (IndexError, RuntimeError):
        return None
    return x


def _slicable(values: list[int]) -> bool:
    """The oracle: an even, nonzero step through indices of one sign."""
    steps = {b - a for a, b in pairwise(values)}
    return len(steps) <= 1 and 0 not in steps and (values[0] < 0) == (values[-1] < 0)


SHAPES = [(3, n, 2) for n in range(1, 6)]
SMALL_LISTS = [list(p) for k in (1, 2, 3) for p in itertools.product(range(-3, 4), repeat=k)]


def test_every_short_list_read_is_fixed_to_the_same_values_exactly_when_a_slice_selects_them() -> None:
    original = [f"y = x[:, {values}]" for values in SMALL_LISTS]
    for values, before, after in zip(SMALL_LISTS, original, _fixed_lines(original), strict=True):
        assert (after != before) == _slicable(values), (before, after)
        if after == before:
            continue
        for shape in SHAPES:
            x = torch.arange(float(3 * shape[1] * 2)).reshape(shape)
            want, got = _read(before[4:], x), _read(after[4:], x)
            if want is not None:
                assert got is not None and got.shape == want.shape and torch.equal(got, want), (
                    before,
                    after,
                    shape,
                )


def test_every_short_list_written_is_fixed_to_write_the_same_elements() -> None:
    cases = [(values, op) for values in SMALL_LISTS for op in ("=", "+=")]
    original = [f"x[:, {values}] {op} v" for values, op in cases]
    for (values, _), before, after in zip(cases, original, _fixed_lines(original), strict=True):
        # a descending list written to keeps its list: no slice writes in that order
        assert (after != before) == (_slicable(values) and (len(values) == 1 or values[1] > values[0]))
        if after == before:
            continue
        for shape in SHAPES:
            x = torch.arange(float(3 * shape[1] * 2)).reshape(shape)
            for v in (torch.tensor(-1.0), torch.full((3, len(values), 2), 7.0), torch.ones(len(values), 1)):
                want = _write(before, x, v)
                if want is not None:
                    got = _write(after, x, v)
                    assert got is not None and torch.equal(got, want), (before, after, shape, v.shape)


# the other indices of the subscript: basic ones a slice can sit beside (torch applies ints first,
# so `x[0, :, [0, 1]]` keeps the list's dim in place, unlike NumPy)
OTHERS = st.lists(st.sampled_from([":", "None", "0", "1:", "-1", "..."]), max_size=3)
VALUES = st.lists(st.integers(-6, 6), min_size=1, max_size=5)


@st.composite
def index_lists(draw: st.DrawFn) -> str:
    """A list display, or `range(...)` / `list(range(...))` with literal ints."""
    if draw(st.booleans()):
        return str(draw(VALUES))
    start, stop = draw(st.integers(-7, 7)), draw(st.integers(-7, 7))
    step = draw(st.integers(-3, 3).filter(bool))
    call = (
        f"range({start}, {stop}, {step})" if step != 1 or draw(st.booleans()) else f"range({start}, {stop})"
    )
    return f"list({call})" if draw(st.booleans()) else call


@st.composite
def subscripts(draw: st.DrawFn) -> str:
    before, after = draw(OTHERS), draw(OTHERS)
    if (before + after).count("...") > 1:
        after = [o for o in after if o != "..."]
    return ", ".join([*before, draw(index_lists()), *after])


@settings(max_examples=300)
@given(subscripts(), st.lists(st.integers(1, 5), min_size=3, max_size=5))
def test_fixed_reads_select_the_same_values_wherever_the_original_is_valid(
    index: str, shape: list[int]
) -> None:
    before = f"y = x[{index}]"
    (after,) = _fixed_lines([before])
    note(after)
    x = torch.arange(float(torch.Size(shape).numel())).reshape(shape)
    want = _read(before[4:], x)
    # an empty result proves nothing: torch checks no index it does not read (`x[[1], 1:]` of a
    # 1x1x1 tensor is 1x0x1), so only a non-empty one says the list was a valid index
    if want is not None and want.numel() and after != before:
        got = _read(after[4:], x)
        assert got is not None and got.shape == want.shape and torch.equal(got, want)


@settings(max_examples=300)
@given(subscripts(), st.lists(st.integers(1, 5), min_size=3, max_size=5), st.sampled_from(["=", "+=", "*="]))
def test_fixed_writes_change_the_same_elements_wherever_the_original_is_valid(
    index: str, shape: list[int], op: str
) -> None:
    before = f"x[{index}] {op} v"
    (after,) = _fixed_lines([before])
    note(after)
    x = torch.arange(float(torch.Size(shape).numel())).reshape(shape)
    v = torch.tensor(3.0)
    want = _write(before, x, v)
    if want is not None and after != before:
        assert torch.equal(_write(after, x, v), want)


def _only(source: str):
    (finding,) = lint_source(textwrap.dedent(source).lstrip("\n"), path="<string>", select=["TPL103"])
    return finding


NET = """
    import torch
    from torch import nn

    class Net(nn.Module):
        def forward(self, x):
            y = torch.relu(x)
            {line}
            return y
    """


@pytest.mark.parametrize(
    "line, safety, advice",
    [
        ("z = y[:, [-1]]", Safety.UNSAFE, "index with the slice [:, -1:] (a view, not a copy)"),
        ("z = y[:, [0, 2]]", Safety.UNSAFE, "index with the slice [:, 0:3:2] (a view, not a copy)"),
        ("z = y[..., [-2, -1]]", Safety.UNSAFE, "index with the slice [..., -2:] (a view, not a copy)"),
        ("z = y[[-3, -1]]", Safety.UNSAFE, "index with the slice [-3::2] (a view, not a copy)"),
        (
            "z = y[:, [2, 1, 0]]",
            Safety.UNSAFE,
            "use [:, 0:3].flip(1) (.flip(1) alone if that dim has exactly 3 elements)",
        ),
        ("z = y[..., [5, 3]]", Safety.UNSAFE, "use [..., 3:6:2].flip(-1)"),
        (
            "z = y[0, None, [-1, -2], :]",
            Safety.UNSAFE,
            "use [0, None, -2:, :].flip(1) (.flip(1) alone if that dim has exactly 2 elements)",
        ),
        ("y[:, [0, 1]] = 0", Safety.SAFE, "index with the slice [:, 0:2]"),
        ("y[:, [0, 1]] += x", Safety.UNSAFE, "index with the slice [:, 0:2]"),
        ("y[:, range(0, 6, 2)] = 0", Safety.SAFE, "index with the slice [:, 0:5:2]"),
        (
            "z = y[:, range(3)]",
            Safety.SAFE,
            "use torch.arange(..., device=...), or index with the slice [:, 0:3] (a view, not a copy)",
        ),
        ("z = y[:, range(x.shape[1])]", Safety.SAFE, "use torch.arange(..., device=...)"),
        # torch.arange raises where range() is empty because its stop lies behind its start
        ("z = y[range(x.shape[0] - 1), x]", Safety.UNSAFE, "use torch.arange(..., device=...)"),
        (
            "z = y[range(3, 1), x]",
            None,
            "build the index once on the device (a buffer registered in __init__)",
        ),
        ("z = y[range(4), [0, 1, 2, 3]]", Safety.SAFE, "use torch.arange(..., device=...)"),
        (
            "z = y[[0, 1], [2, 3]]",
            None,
            "build the index once on the device (a buffer registered in __init__)",
        ),
        ("z = y[x, [0, 1]]", None, "build the index once on the device (a buffer registered in __init__)"),
        ("z = y[:, [0, -1]]", None, "build the index once on the device (a buffer registered in __init__)"),
        ("z = y[:, [1, 1]]", None, "build the index once on the device (a buffer registered in __init__)"),
        ("z = y[:, [0, 1, 3]]", None, "build the index once on the device (a buffer registered in __init__)"),
        (
            "z = y[:, [i for i in range(3)]]",
            None,
            "build the index once on the device (a buffer registered in __init__)",
        ),
        ("y[:, [2, 1]] = 0", None, "build the index once on the device (a buffer registered in __init__)"),
    ],
)
def test_message_says_full_sync_and_names_the_alternative_with_its_fix_safety(
    line: str, safety: Safety | None, advice: str
) -> None:
    finding = _only(NET.replace("{line}", line))
    assert "a full sync (the host waits for all queued GPU work), not a small copy; " in finding.message
    assert finding.message.endswith("; " + advice)
    assert (finding.fix.safety if finding.fix else None) is safety


def test_a_read_in_a_statement_that_writes_a_subscript_keeps_its_list() -> None:
    source = NET.replace("{line}", "y[:, [0, 1]] = y[:, [1, 2]] * 2")
    findings = lint_source(textwrap.dedent(source).lstrip("\n"), path="<string>", select=["TPL103"])
    read = next(f for f in findings if f.col > 20)
    assert read.fix is None
    assert read.message.endswith("; index with the slice [:, 1:3] (a view, not a copy)")
    fixed = fix_source(textwrap.dedent(source).lstrip("\n"), path="<string>", unsafe=True, select=["TPL103"])
    assert "y[:, 0:2] = y[:, [1, 2]] * 2" in fixed


def test_flip_fix_keeps_parentheses_and_is_idempotent() -> None:
    source = textwrap.dedent(NET.replace("{line}", "y = (y[:, [1, 0]]) * 2")).lstrip("\n")
    fixed = fix_source(source, path="<string>", unsafe=True, select=["TPL103"])
    assert "y = (y[:, 0:2].flip(1)) * 2" in fixed
    assert fix_source(fixed, path="<string>", unsafe=True, select=["TPL103"]) == fixed
    assert lint_source(fixed, path="<string>", select=["TPL103"]) == []


def test_slice_fix_keeps_comments_and_spacing_around_the_index() -> None:
    source = textwrap.dedent(NET.replace("{line}", "y = y[ :,  [0, 2] ,]  # keep")).lstrip("\n")
    fixed = fix_source(source, path="<string>", unsafe=True, select=["TPL103"])
    assert "y = y[ :,  0:3:2 ,]  # keep" in fixed
    assert fix_source(fixed, path="<string>", unsafe=True, select=["TPL103"]) == fixed


def test_message_quotes_a_multiline_index_on_one_line() -> None:
    source = NET.replace(
        "{line}", "z = y[\n                ...,  # channels\n                [0, 1],\n            ]"
    )
    finding = _only(source)
    assert finding.message.endswith("; index with the slice [..., 0:2] (a view, not a copy)")


def test_a_range_written_into_the_output_of_a_module_attribute_is_reported() -> None:
    # `self.fc = nn.Linear(...)` makes `self.fc(x)` a tensor: the write below indexes one
    source = textwrap.dedent(
        """
        import torch
        from torch import nn

        class Head(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(16, 10)

            def forward(self, x, target):
                logits = self.fc(x)
                logits[range(x.shape[0]), target] = 0.0
                return logits
        """
    )
    assert [(f.line, f.code) for f in lint_source(source, select=["TPL103"])] == [(12, "TPL103")]

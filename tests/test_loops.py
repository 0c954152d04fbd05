"""TPL2xx behaviour beyond the rules' own examples."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from torchperf_lint.api import lint_source

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def lint(code: str, select: str) -> list[tuple[int, str]]:
    source = textwrap.dedent(code).lstrip("\n")
    return sorted((f.line, f.code) for f in lint_source(source, path="m.py", select=[select]))


def messages(code: str, select: str) -> list[str]:
    source = textwrap.dedent(code).lstrip("\n")
    return [f.message for f in lint_source(source, path="m.py", select=[select])]


def findings_by_line_text(path: Path) -> list[tuple[str, str]]:
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    found = lint_source(source, path=str(path), select=["TPL2"])
    return sorted((f.code, lines[f.line - 1].strip()) for f in found)


# -- the shipped examples ----------------------------------------------------------------
@pytest.mark.usefixtures("precision_off_rules_on")
def test_slow_training_example_flags_the_smooth_helper_loop() -> None:
    assert findings_by_line_text(EXAMPLES / "slow_training.py") == [
        ("TPL201", "for i in range(logits.shape[0]):"),
    ]


@pytest.mark.usefixtures("precision_off_rules_on")
def test_loops_example_fires_every_loop_rule_and_spares_the_rnn() -> None:
    found = findings_by_line_text(EXAMPLES / "loops.py")
    assert [code for code, _ in found] == ["TPL201", "TPL201", "TPL202", "TPL203"]
    lines = [line for _, line in found]
    assert any(line.startswith("for b in range(states.size(0))") for line in lines)
    assert any(line.startswith("for i in range(B)") for line in lines)
    assert not any("range(x.shape[1])" in line for line in lines)


# -- TPL201 ------------------------------------------------------------------------------
FORWARD = """\
import torch
from torch import nn

class Net(nn.Module):
    def forward(self, x, y):
{body}"""


def forward(body: str) -> str:
    """`body` as the body of a forward; its first line is line 6."""
    return FORWARD.format(body=textwrap.indent(textwrap.dedent(body).lstrip("\n"), " " * 8))


def test_message_names_the_loop_variable_and_what_it_walks() -> None:
    text = messages(
        forward("""
        for j in range(x.size(1)):
            y[:, j] = x[:, j] * 2
        """),
        "TPL201",
    )
    assert len(text) == 1
    assert "range(x.size(1))" in text[0] and "per j" in text[0] and "torch.gather" in text[0]


def test_nested_per_element_loops_report_only_the_outer_one() -> None:
    assert lint(
        forward("""
        for i in range(x.shape[0]):
            for j in range(x.shape[1]):
                y[i, j] = x[i, j] * 2
        """),
        "TPL201",
    ) == [(6, "TPL201")]


def test_enumerate_over_a_derived_tensor_is_flagged() -> None:
    assert lint(
        forward("""
        z = x.softmax(-1)
        for i, row in enumerate(z):
            y[i] = row.max()
        """),
        "TPL201",
    ) == [(7, "TPL201")]


def test_size_call_then_subscript_and_explicit_unit_step_are_dimensions() -> None:
    assert lint(
        forward("""
        for i in range(1, x.size()[0], 1):
            y[i] = x[i] * 2
        """),
        "TPL201",
    ) == [(6, "TPL201")]


def test_len_of_a_parameter_that_may_be_a_list_is_silent() -> None:
    assert (
        lint(
            forward("""
        for i in range(len(x)):
            y[i] = x[i] * 2
        """),
            "TPL201",
        )
        == []
    )


def test_reduction_is_flagged_but_an_exponential_moving_average_is_not() -> None:
    assert lint(
        forward("""
        acc = 0
        for i in range(x.shape[0]):
            acc = acc + x[i].sum()
        """),
        "TPL201",
    ) == [(7, "TPL201")]
    assert (
        lint(
            forward("""
        avg = x[0]
        for i in range(x.shape[0]):
            avg = 0.9 * avg + 0.1 * x[i]
        """),
            "TPL201",
        )
        == []
    )


def test_rows_paired_with_a_tensor_parameter_are_flagged() -> None:
    assert lint(
        forward("""
        loss = 0
        for i in range(x.shape[0]):
            loss = loss + (x[i] - y[i]).pow(2).mean()
        """),
        "TPL201",
    ) == [(7, "TPL201")]


def test_rows_paired_with_a_list_of_dicts_or_a_host_list_are_silent() -> None:
    assert (
        lint(
            forward("""
        out = []
        for i in range(x.shape[0]):
            out.append(self.match(x[i], y[i]["boxes"]))
        """),
            "TPL201",
        )
        == []
    )
    assert (
        lint(
            forward("""
        sizes = y.tolist()
        out = []
        for i in range(x.shape[0]):
            out.append(x[i, : sizes[i]].mean())
        """),
            "TPL201",
        )
        == []
    )


def test_subscript_of_an_unrelated_parameter_alone_is_not_per_element_work() -> None:
    assert (
        lint(
            forward("""
        for i in range(x.shape[0]):
            self.log(y[i])
        """),
            "TPL201",
        )
        == []
    )


def test_hidden_state_kept_on_self_is_sequential() -> None:
    assert (
        lint(
            forward("""
        for t in range(x.shape[0]):
            self.hidden = self.rnn(x[t], self.hidden)
        """),
            "TPL201",
        )
        == []
    )


def test_function_never_called_from_hot_code_is_cold() -> None:
    assert (
        lint(
            """
        import torch

        def normalise(x):
            for i in range(x.shape[0]):
                x[i] = x[i] / x[i].norm()
            return x
        """,
            "TPL201",
        )
        == []
    )


def test_index_passed_to_a_tensor_method_counts_as_per_element_work() -> None:
    assert lint(
        forward("""
        for k in range(x.shape[-1]):
            y = y + torch.roll(x, k, dims=-1)
        """),
        "TPL201",
    ) == [(6, "TPL201")]


def test_step_loop_over_a_tensor_in_hot_code_is_not_flagged() -> None:
    code = """
        import lightning as L
        import torch

        class Lit(L.LightningModule):
            def training_step(self, batch, index):
                for micro in batch.view(4, -1, 8):
                    loss = self(micro).sum()
                    loss.backward()
    """
    assert lint(code, "TPL201") == []
    assert lint(code.replace("loss.backward()", "print(loss)"), "TPL201") == [(6, "TPL201")]


# -- TPL202 ------------------------------------------------------------------------------
def test_cat_growth_is_flagged_in_cold_module_level_loops() -> None:
    assert lint(
        """
        import glob

        import torch

        data = torch.empty(0, 3)
        for path in sorted(glob.glob("shards/*.pt")):
            data = torch.cat([data, torch.load(path)])
        """,
        "TPL202",
    ) == [(7, "TPL202")]


def test_cat_growth_over_a_literal_of_a_few_entries_is_configuration() -> None:
    # written out by hand, so a handful of iterations: the re-grown copies cost nothing
    assert (
        lint(
            """
        import torch

        data = torch.empty(0, 3)
        for path in ["a.pt", "b.pt"]:
            data = torch.cat([data, torch.load(path)])
        """,
            "TPL202",
        )
        == []
    )


def test_cat_in_a_conditional_expression_and_by_keyword_is_flagged() -> None:
    assert lint(
        """
        import torch

        def collect(loader):
            acc = None
            for c in loader:
                acc = c if acc is None else torch.cat(tensors=[acc, c])
            return acc
        """,
        "TPL202",
    ) == [(6, "TPL202")]


def test_prepending_to_the_accumulator_is_flagged() -> None:
    assert lint(
        """
        import torch

        def reverse(x: torch.Tensor):
            acc = torch.empty(0)
            for c in x.split(16):
                acc = torch.cat((c, acc))
            return acc
        """,
        "TPL202",
    ) == [(6, "TPL202")]


def test_accumulator_used_by_the_loop_body_is_silent() -> None:
    assert (
        lint(
            """
        import torch

        def grow(chunks, model):
            acc = torch.empty(0)
            for c in chunks:
                acc = torch.cat([acc, c])
                model.observe(acc)
            return acc
        """,
            "TPL202",
        )
        == []
    )


def test_numpy_concatenate_is_not_a_torch_cat() -> None:
    assert (
        lint(
            """
        import numpy as np

        def grow(chunks):
            acc = np.empty(0)
            for c in chunks:
                acc = np.concatenate([acc, c])
            return acc
        """,
            "TPL202",
        )
        == []
    )


def test_message_names_the_accumulator_and_the_function() -> None:
    text = messages(
        """
        import torch

        def grow(n, draw):
            out = torch.empty(0)
            for i in range(n):
                out = torch.stack([out, draw(i)])
            return out
        """,
        "TPL202",
    )
    assert len(text) == 1 and "torch.stack()" in text[0] and "re-grows out" in text[0]


# -- TPL203 ------------------------------------------------------------------------------
def test_data_keyword_generator_and_legacy_constructor_are_flagged() -> None:
    assert lint(
        """
        import torch

        def summarise(model, loader, scores):
            logits = torch.log(scores)
            for x in loader:
                a = torch.tensor(data=[l.item() for l in model(x)])
                b = torch.FloatTensor([logits.max(), logits.min()])
                yield a, b
        """,
        "TPL203",
    ) == [(6, "TPL203"), (7, "TPL203")]


def test_float_of_a_derived_tensor_is_flagged_but_of_a_maybe_float_parameter_is_not() -> None:
    assert lint(
        """
        import torch

        def scales_of(loader):
            for x in loader:
                s = torch.abs(x.cuda()).amax()
                yield torch.tensor([float(s)])
        """,
        "TPL203",
    ) == [(6, "TPL203")]
    assert (
        lint(
            """
        import torch
        from torch import Tensor

        def pairs(loader):
            a: Tensor | float
            b: Tensor | float
            for a, b in loader:
                yield torch.tensor([float(a), float(b)])
        """,
            "TPL203",
        )
        == []
    )


def test_list_appended_in_another_function_is_not_this_list() -> None:
    assert (
        lint(
            """
        import torch

        def record(values, t):
            values.append(t.item())

        def build(lines):
            values = []
            for line in lines:
                values.append(float(line))
            return torch.tensor(values)
        """,
            "TPL203",
        )
        == []
    )


def test_message_says_what_the_list_holds() -> None:
    text = messages(
        """
        import torch

        def history(losses: torch.Tensor):
            return torch.tensor([l.item() for l in losses.unbind(0)])
        """,
        "TPL203",
    )
    expected = (
        "torch.tensor() on a list of .item() values copies and syncs once per element; "
        "use torch.stack() on the tensors to keep them on the device"
    )
    assert text == [expected]

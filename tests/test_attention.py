"""TPL306 beyond its examples: the fix computes what the hand-written attention computed (run with CPU
torch on small random tensors), the forms that get only the message, and the traps."""

from __future__ import annotations

import re
import textwrap
import types
from typing import Any, Callable

import pytest
import torch

from torchperf_lint.api import fix_source, lint_source
from torchperf_lint.config import Settings
from torchperf_lint.rules import BY_CODE

from .helpers import example_source

RULE = BY_CODE["TPL306"]
B, H, L, S, D = 2, 3, 5, 7, 8


def _lint(source: str, settings: Settings | None = None) -> list[Any]:
    return lint_source(textwrap.dedent(source), path="model.py", settings=settings, select=["TPL306"])


def _fix(source: str, settings: Settings | None = None) -> str:
    return fix_source(
        textwrap.dedent(source), path="model.py", unsafe=True, settings=settings, select=["TPL306"]
    )


def _load(source: str) -> types.ModuleType:
    module = types.ModuleType("attention_under_test")
    exec(compile(source, "<attention>", "exec"), module.__dict__)  # noqa: S102 (our own examples)
    return module


def _same_result(bad: str, fixed: str, run: Callable[[types.ModuleType], Any], atol: float = 1e-5) -> None:
    """Both sources give the same output from the same seed (float64, so only the kernels differ)."""
    outputs = []
    for source in (bad, fixed):
        torch.manual_seed(0)
        with torch.no_grad():
            outputs.append(run(_load(source)))
    assert outputs[0].shape == outputs[1].shape
    assert torch.allclose(outputs[0], outputs[1], atol=atol, rtol=1e-5), (outputs[0] - outputs[1]).abs().max()


def _qkv(batch: tuple[int, ...] = (B, H)) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return (
        torch.randn(*batch, L, D, dtype=torch.float64),
        torch.randn(*batch, S, D, dtype=torch.float64),
        torch.randn(*batch, S, 4, dtype=torch.float64),
    )


def _keep_mask() -> torch.Tensor:
    """A boolean mask of the positions that take part, at least one per row (no fully masked row)."""
    keep = torch.rand(B, 1, L, S) > 0.4
    keep[..., 0] = True
    return keep


# -- the examples' fixes compute the same values ------------------------------------------------------


def _mingpt(module: types.ModuleType) -> torch.Tensor:
    model = module.CausalSelfAttention(32, 4, 16, 0.1).double().eval()
    return model(torch.randn(2, 10, 32, dtype=torch.float64))


def _one_expression(module: types.ModuleType) -> torch.Tensor:
    return module.Attention()(*_qkv())


def _einsum(module: types.ModuleType) -> torch.Tensor:
    q, k, v = _qkv()
    return module.CrossAttention(D)(q, k, v, ~_keep_mask())


def _additive(module: types.ModuleType) -> torch.Tensor:
    model = module.SelfAttention().eval()
    model.head_dim = D
    q, k, v = _qkv()
    bias = torch.randn(B, 1, L, S, dtype=torch.float64)
    return torch.stack([model(q, k, v, bias), model(q, k, v)])


def _batched(module: types.ModuleType) -> torch.Tensor:
    return module.attend(*_qkv((B * H,)))


RUNS = {
    "mingpt-four-lines": _mingpt,
    "one-expression": _one_expression,
    "einsum-with-boolean-mask": _einsum,
    "additive-mask-and-functional-dropout": _additive,
    "batched-without-scale": _batched,
}


def test_every_fixed_example_is_checked_for_values() -> None:
    assert set(RUNS) == set(RULE.FIXED)


@pytest.mark.parametrize("label", sorted(RUNS))
def test_fixed_example_computes_what_the_bad_one_computed(label: str) -> None:
    _same_result(
        example_source(RULE.BAD[label]), textwrap.dedent(RULE.FIXED[label]).lstrip("\n"), RUNS[label]
    )


def test_causal_buffer_in_training_mode_without_dropout_gives_the_same_values() -> None:
    bad = example_source(RULE.BAD["mingpt-four-lines"])
    fixed = _fix(bad)

    def train_mode(module: types.ModuleType) -> torch.Tensor:
        model = module.CausalSelfAttention(32, 4, 16, 0.0).double().train()
        return model(torch.randn(2, 16, 32, dtype=torch.float64))

    _same_result(bad, fixed, train_mode)


# -- mask and scale forms ------------------------------------------------------------------------------

HEADER = """\
import math

import torch
import torch.nn.functional as F
from torch import nn

L, S = 5, 7

"""


def _attention_module(body: str, init: str = "") -> str:
    """`class Attention(nn.Module)` whose forward(q, k, v, mask) runs `body`."""
    init_block = textwrap.indent(textwrap.dedent(init).strip("\n"), " " * 8)
    return (
        HEADER
        + "class Attention(nn.Module):\n"
        + "    def __init__(self):\n"
        + "        super().__init__()\n"
        + (init_block + "\n" if init else "")
        + "\n    def forward(self, q, k, v, mask=None):\n"
        + textwrap.indent(textwrap.dedent(body).strip("\n"), " " * 8)
        + "\n"
    )


def _run_with(mask: Any) -> Callable[[types.ModuleType], torch.Tensor]:
    def run(module: types.ModuleType) -> torch.Tensor:
        return module.Attention().double().eval()(*_qkv(), mask)

    return run


FORMS = {
    "masked-fill-of-a-comparison": (
        """
        att = q @ k.transpose(-2, -1) / math.sqrt(k.size(-1))
        att = att.masked_fill(mask == 0, float("-inf"))
        return F.softmax(att, dim=-1) @ v
        """,
        "",
        "attn_mask=mask != 0)",
        lambda: _keep_mask().double(),
    ),
    "masked-fill-minus-math-inf": (
        """
        att = (q @ k.transpose(-2, -1)) * q.size(-1) ** -0.5
        att = att.masked_fill(~mask, -math.inf)
        return att.softmax(-1) @ v
        """,
        "",
        "attn_mask=mask)",
        _keep_mask,
    ),
    "torch-where-keeps": (
        """
        att = torch.matmul(q, k.transpose(-1, -2)) * self.scale
        att = torch.where(mask, att, float("-inf"))
        return torch.matmul(torch.softmax(att, dim=-1), v)
        """,
        "self.scale = 0.3",
        "attn_mask=mask, scale=self.scale)",
        _keep_mask,
    ),
    "guarded-additive-mask-given": (
        """
        att = q @ k.mT
        att *= self.scale
        if mask is not None:
            att += mask
        return att.softmax(dim=-1) @ v
        """,
        "self.scale = 0.3",
        "attn_mask=mask, scale=self.scale)",
        lambda: torch.randn(B, 1, L, S, dtype=torch.float64),
    ),
    "guarded-additive-mask-absent": (
        """
        att = q @ k.mT
        att *= self.scale
        if mask is not None:
            att += mask
        return att.softmax(dim=-1) @ v
        """,
        "self.scale = 0.3",
        "attn_mask=mask, scale=self.scale)",
        lambda: None,
    ),
    "query-scaled-inline": (
        """
        att = (q * self.scale) @ k.transpose(-2, -1)
        return self.softmax(att) @ v
        """,
        "self.scale = 0.3\nself.softmax = nn.Softmax(dim=-1)",
        "(q, k, v, scale=self.scale)",
        lambda: None,
    ),
    "divided-by-a-factor": (
        """
        att = torch.einsum("...id,...jd->...ij", q, k) / self.temperature
        return torch.einsum("...ij,...jd->...id", att.softmax(dim=-1), v)
        """,
        "self.temperature = 2.5",
        "scale=1 / self.temperature)",
        lambda: None,
    ),
}


@pytest.mark.parametrize("label", sorted(FORMS))
def test_mask_and_scale_forms_are_fixed_to_the_same_values(label: str) -> None:
    body, init, expected_call, make_mask = FORMS[label]
    bad = _attention_module(body, init)
    assert len(_lint(bad)) == 1
    fixed = _fix(bad)
    assert expected_call in fixed, fixed
    assert _lint(fixed) == []
    torch.manual_seed(0)
    mask = make_mask()
    _same_result(bad, fixed, _run_with(mask))


MESSAGE_ONLY = {
    "finite-fill": """
        att = q @ k.transpose(-2, -1) * self.scale
        att = att.masked_fill(mask, -1e9)
        return att.softmax(-1) @ v
        """,
    "finfo-min-fill": """
        att = q @ k.transpose(-2, -1) * self.scale
        att = att.masked_fill(mask, torch.finfo(att.dtype).min)
        return att.softmax(-1) @ v
        """,
    "two-masks": """
        att = q @ k.transpose(-2, -1) * self.scale
        att = att.masked_fill(mask, float("-inf"))
        att = att + self.position_bias
        return att.softmax(-1) @ v
        """,
    "bias-before-the-scale": """
        att = (q @ k.transpose(-2, -1) + mask) * self.scale
        return att.softmax(-1) @ v
        """,
    "upcast-softmax": """
        att = q @ k.transpose(-2, -1) * self.scale
        att = F.softmax(att, dim=-1, dtype=torch.float32).to(q.dtype)
        return att @ v
        """,
    "learnable-tensor-scale": """
        att = q @ k.transpose(-2, -1) * self.logit_scale.exp()
        return att.softmax(-1) @ v
        """,
    "condition-other-than-none-check": """
        att = q @ k.transpose(-2, -1) * self.scale
        if self.causal:
            att = att.masked_fill(mask, float("-inf"))
        return att.softmax(-1) @ v
        """,
    "query-rebound-between": """
        att = q @ k.transpose(-2, -1) * self.scale
        q = q + 1
        att = att.softmax(-1)
        return att @ v + q.sum()
        """,
}


@pytest.mark.parametrize("label", sorted(MESSAGE_ONLY))
def test_forms_without_a_mechanical_fix_get_the_message_only(label: str) -> None:
    source = _attention_module(MESSAGE_ONLY[label], "self.scale = 0.125")
    (finding,) = _lint(source)
    assert finding.fix is None
    assert "F.scaled_dot_product_attention(q, k, v, ...)" in finding.message


def test_causal_buffer_with_offset_slices_becomes_a_boolean_mask() -> None:
    source = _attention_module(
        """
        T, S = q.size(-2), k.size(-2)
        att = q @ k.transpose(-2, -1) * self.scale
        att = att.masked_fill(self.bias[:, :, S - T : S, :S] == 0, float("-inf"))
        return att.softmax(-1) @ v
        """,
        'self.scale = 0.125\nself.register_buffer("bias", torch.tril(torch.ones(16, 16)).view(1, 1, 16, 16))',
    )
    fixed = _fix(source)
    assert "attn_mask=self.bias[:, :, S - T : S, :S] != 0" in fixed
    assert "is_causal" not in fixed
    _same_result(source, fixed, _run_with(None))


def test_causal_only_for_a_buffer_of_lower_triangular_ones() -> None:
    source = _attention_module(
        """
        T = q.size(-2)
        att = q @ k.transpose(-2, -1) * self.scale
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        return att.softmax(-1) @ v
        """,
        'self.scale = 0.125\nself.register_buffer("bias", torch.triu(torch.ones(16, 16)).view(1, 1, 16, 16))',
    )
    fixed = _fix(source)
    assert "attn_mask=self.bias[:, :, :T, :T] != 0" in fixed


def test_fix_keeps_the_comments_above_removed_statements() -> None:
    source = _attention_module(
        """
        # scores
        att = q @ k.transpose(-2, -1) * self.scale

        # normalise
        att = att.softmax(-1)
        return att @ v
        """,
        "self.scale = 0.125",
    )
    fixed = _fix(source)
    assert "# scores\n" in fixed and "# normalise\n" in fixed
    assert re.search(r"\batt\b", fixed.split("def forward")[1]) is None


def test_scale_needs_torch_2_1_for_the_fix_and_sdpa_needs_2_0() -> None:
    source = _attention_module(
        """
        att = q @ k.transpose(-2, -1) * self.scale
        return att.softmax(-1) @ v
        """,
        "self.scale = 0.125",
    )
    old = Settings(torch_version=(2, 0), torch_version_source="--torch-version 2.0")
    (finding,) = _lint(source, settings=old)
    assert finding.fix is None
    default_scale = source.replace("* self.scale", "/ math.sqrt(q.size(-1))")
    (finding,) = _lint(default_scale, settings=old)
    assert finding.fix is not None
    older = Settings(torch_version=(1, 13), torch_version_source="--torch-version 1.13")
    assert _lint(source, settings=older) == []


def test_finding_is_reported_at_the_score_product() -> None:
    source = _attention_module(
        """
        att = (q @ k.transpose(-2, -1)) * self.scale
        att = att.softmax(-1)
        return att @ v
        """,
        "self.scale = 0.125",
    )
    (finding,) = _lint(source)
    line = source.splitlines()[finding.line - 1]
    assert line[finding.col - 1 :].startswith("q @ k.transpose(-2, -1))")
    assert finding.context == "in Attention.forward"


# -- traps and their twins -----------------------------------------------------------------------------


def test_helper_called_only_beside_sdpa_stays_silent() -> None:
    helper = """
        import torch
        import torch.nn.functional as F
        from torch import nn

        def manual_attention(q, k, v):
            return (q @ k.transpose(-2, -1)).softmax(-1) @ v

        class Attention(nn.Module):
            def forward(self, q, k, v):
                if self.fused:
                    return F.scaled_dot_product_attention(q, k, v)
                return manual_attention(q, k, v)
        """
    assert _lint(helper) == []
    unconditional = helper.replace("return F.scaled_dot_product_attention(q, k, v)", "return q")
    assert len(_lint(unconditional)) == 1


TRAPS = {
    "probabilities-read-after-the-product": (
        """
        att = (q @ k.transpose(-2, -1) * self.scale).softmax(-1)
        out = att @ v
        self.last_entropy = -(att * att.log()).sum(-1)
        return out
        """,
        "self.last_entropy = -(att * att.log()).sum(-1)\n",
    ),
    "scores-read-elsewhere": (
        """
        att = q @ k.transpose(-2, -1) * self.scale
        logits = att.detach()
        return att.softmax(-1) @ v, logits
        """,
        "logits = att.detach()\n",
    ),
    "clamped-scores": (
        """
        att = q @ k.transpose(-2, -1) * self.scale
        att = att.clamp(-50, 50)
        return att.softmax(-1) @ v
        """,
        "att = att.clamp(-50, 50)\n",
    ),
    "probabilities-on-the-right": (
        """
        att = (q @ k.transpose(-2, -1) * self.scale).softmax(-1)
        return v.transpose(-2, -1) @ att
        """,
        None,
    ),
    "product-without-a-transposed-key": (
        """
        att = (q @ k * self.scale).softmax(-1)
        return att @ v
        """,
        None,
    ),
    "masked-fill-with-zero": (
        """
        att = q @ k.transpose(-2, -1) * self.scale
        att = att.masked_fill(mask, 0.0)
        return att.softmax(-1) @ v
        """,
        None,
    ),
}


@pytest.mark.parametrize("label", sorted(TRAPS))
def test_trap_stays_silent_and_its_twin_fires(label: str) -> None:
    body, trap_line = TRAPS[label]
    source = _attention_module(body, "self.scale = 0.125")
    assert _lint(source) == []
    if trap_line is not None:
        twin = source.replace(textwrap.indent(trap_line, " " * 8), "")
        twin = twin.replace(", logits\n", "\n")
        assert len(_lint(twin)) == 1, twin


def test_same_attention_in_init_or_an_uncalled_function_is_cold() -> None:
    good = example_source(RULE.GOOD["cold-code"])
    hot = good.replace(
        "def forward(self, x):\n        return x + self.summary",
        "def forward(self, q, k, v):\n        return reference_attention(q, k, v)",
    )
    assert len(_lint(hot)) == 1


def test_names_reused_in_another_branch_or_after_a_rebinding_do_not_hide_the_chain() -> None:
    source = _attention_module(
        """
        if self.exact:
            scores = torch.matmul(q, k.transpose(-1, -2))
            probs = scores.softmax(dim=-1)
            out = torch.matmul(probs, v)
        else:
            scores = torch.matmul(q, self.landmarks)
            probs = scores.sigmoid()
            out = probs @ v[..., : self.landmarks.size(-1), :]
        att = (q @ k.transpose(-2, -1)).softmax(-1)
        first = att @ v
        att = (k @ q.transpose(-2, -1)).softmax(-1)
        return first + (att @ q).sum()
        """
    )
    lines = source.splitlines()
    found = [lines[f.line - 1].strip() for f in _lint(source)]
    assert found == [
        "scores = torch.matmul(q, k.transpose(-1, -2))",
        "att = (q @ k.transpose(-2, -1)).softmax(-1)",
        "att = (k @ q.transpose(-2, -1)).softmax(-1)",
    ]


def test_a_loop_can_carry_the_probabilities_to_a_mention_before_the_chain() -> None:
    source = _attention_module(
        """
        outs = []
        for layer in self.layers:
            if outs:
                self.previous = att
            att = (q @ k.transpose(-2, -1)).softmax(-1)
            outs.append(att @ v)
        return outs
        """
    )
    assert _lint(source) == []
    assert len(_lint(source.replace("                self.previous = att\n", "                pass\n"))) == 1


def test_product_with_another_normalised_kernel_is_not_attention() -> None:
    source = _attention_module(
        """
        kernel_1 = torch.softmax(q @ self.landmarks.transpose(-1, -2), dim=-1)
        kernel_2 = torch.softmax(self.landmarks @ self.landmarks.transpose(-1, -2), dim=-1)
        return kernel_1 @ self.pinv(kernel_2)
        """
    )
    assert _lint(source) == []
    assert len(_lint(source.replace("self.pinv(kernel_2)", "self.pinv(v)"))) == 1


def test_softmax_module_under_any_name_and_in_place_mask_are_fixed_to_the_same_values() -> None:
    source = _attention_module(
        """
        dots = torch.matmul(q, k.transpose(-1, -2)) * self.scale
        dots.masked_fill_(~mask, float("-inf"))
        attn = self.attend(dots)
        attn = self.dropout(attn)
        return torch.matmul(attn, v)
        """,
        "self.scale = 0.125\nself.attend = nn.Softmax(dim=-1)\nself.dropout = nn.Dropout(0.1)",
    )
    fixed = _fix(source)
    assert "F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=" in fixed
    torch.manual_seed(0)
    _same_result(source, fixed, _run_with(_keep_mask()))


def test_stable_diffusion_cross_attention_gets_the_message() -> None:
    source = """
        import torch
        from torch import nn, einsum

        class CrossAttention(nn.Module):
            def forward(self, q, k, v, mask=None):
                sim = einsum("b i d, b j d -> b i j", q, k) * self.scale
                if mask is not None:
                    mask = mask.flatten(1)
                    max_neg_value = -torch.finfo(sim.dtype).max
                    sim.masked_fill_(~mask, max_neg_value)
                attn = sim.softmax(dim=-1)
                return einsum("b i j, b j d -> b i d", attn, v)
        """
    (finding,) = _lint(source)
    assert finding.line == 7 and finding.fix is None


def test_channel_first_einsum_is_attention_without_a_fix() -> None:
    source = """
        import torch as th
        from torch import nn

        class QKVAttention(nn.Module):
            def forward(self, q, k, v):
                weight = th.einsum("bct,bcs->bts", q * self.scale, k * self.scale)
                weight = th.softmax(weight, dim=-1)
                return th.einsum("bts,bcs->bct", weight, v)
        """
    (finding,) = _lint(source)
    assert finding.fix is None
    assert _lint(source.replace('"bts,bcs->bct"', '"bts,bcs->bcs"')) == []


def test_bias_built_between_the_chain_statements_is_moved_only_after_its_binding() -> None:
    source = _attention_module(
        """
        sim = q @ k.transpose(-2, -1) * self.scale
        bias = self.table[:L, :S]
        sim = sim + bias
        return sim.softmax(-1) @ v
        """,
        "self.scale = 0.125\nself.table = torch.randn(L, S)",
    )
    fixed = _fix(source)
    assert "bias = self.table" in fixed and "attn_mask=bias" in fixed
    _same_result(source, fixed, _run_with(None))
    shape_read = source.replace("self.table[:L, :S]", "self.table[: sim.size(-2), : sim.size(-1)]")
    (finding,) = _lint(shape_read)
    assert finding.fix is None
    rebound_key = source.replace(
        "        bias = self.table", "        k = k.flip(-2)\n        bias = self.table"
    )
    (finding,) = _lint(rebound_key)
    assert finding.fix is None


def test_fused_kernel_behind_a_method_of_the_class_is_a_dispatch() -> None:
    source = _attention_module(
        """
        if self.use_flash:
            return self.flash_attn(q, k, v)
        dots = torch.matmul(q, k.transpose(-1, -2)) * self.scale
        return self.attend(dots) @ v
        """,
        "self.scale = 0.125\nself.attend = nn.Softmax(dim=-1)",
    ) + textwrap.indent(
        textwrap.dedent(
            """
            def flash_attn(self, q, k, v):
                return F.scaled_dot_product_attention(q, k, v)
            """
        ),
        "    ",
    )
    assert _lint(source) == []
    assert len(_lint(source.replace("return F.scaled_dot_product_attention(q, k, v)", "return q"))) == 1


def test_fix_leaves_one_blank_line_where_removed_statements_had_several() -> None:
    source = _attention_module(
        """
        q = q + 1

        dots = torch.matmul(q, k.transpose(-1, -2)) * self.scale

        attn = dots.softmax(dim=-1)

        return torch.matmul(attn, v)
        """,
        "self.scale = 0.125",
    )
    assert "q = q + 1\n\n        return F.scaled_dot_product_attention(" in _fix(source)


MULTI_QUERY = """
    sim = torch.einsum("b h i d, b j d -> b h i j", q, k) * self.scale
    attn = sim.softmax(dim=-1)
    return torch.einsum("b h i j, b j d -> b h i d", attn, v)
    """


def test_a_key_shared_by_the_heads_gets_the_grouped_query_advice() -> None:
    """imagen's multi-query attention: the message says how SDPA takes one key for every head, and
    that advice computes what the hand-written chain does."""
    (finding,) = _lint(_attention_module(MULTI_QUERY, "self.scale = 0.125"))
    assert finding.fix is None
    assert "a heads dimension of size 1 on k and v and enable_gqa=True" in finding.message
    q = torch.randn(2, 4, 5, 8)
    k, v = torch.randn(2, 7, 8), torch.randn(2, 7, 8)
    attn = (torch.einsum("b h i d, b j d -> b h i j", q, k) * 0.125).softmax(dim=-1)
    hand = torch.einsum("b h i j, b j d -> b h i d", attn, v)
    advised = torch.nn.functional.scaled_dot_product_attention(
        q, k.unsqueeze(1), v.unsqueeze(1), scale=0.125, enable_gqa=True
    )
    torch.testing.assert_close(advised, hand)


def test_a_key_with_heads_of_its_own_gets_the_plain_sketch() -> None:
    source = _attention_module(MULTI_QUERY.replace("b j d", "b h j d"), "self.scale = 0.125")
    (finding,) = _lint(source)
    assert "enable_gqa" not in finding.message

"""Loop-carried dependences (analysis/sequential.py): which loops are sequential by nature."""

from __future__ import annotations

import textwrap
from typing import Union

import libcst as cst

from torchperf_lint.analysis.sequential import Carry, LoopFacts, analyse_loop
from torchperf_lint.config import Settings
from torchperf_lint.engine.context import Context
from torchperf_lint.syntax.walker import walk

Loop = Union[cst.For, cst.While]


def _first_loop(code: str) -> Loop:
    module = cst.parse_module(textwrap.dedent(code).lstrip("\n"))
    found: list[Loop] = []

    class Finder(cst.CSTVisitor):
        def visit_For(self, node: cst.For) -> None:
            found.append(node)

        def visit_While(self, node: cst.While) -> None:
            found.append(node)

    module.visit(Finder())
    return found[0]


def facts(code: str, modules: frozenset[str] = frozenset({"torch", "nn"})) -> LoopFacts:
    return analyse_loop(_first_loop(code), modules)


def carried(code: str) -> dict[str, str]:
    return {key: kind.value for key, kind in facts(code).carried.items()}


def test_recurrence_through_a_name_is_sequential() -> None:
    loop = facts("""
        for t in range(x.shape[0]):
            h = cell(x[t], h)
        """)
    assert loop.carried == {"h": Carry.RECURRENCE}
    assert loop.sequential


def test_autoregressive_decoding_is_sequential() -> None:
    assert carried("""
        for t in range(steps):
            logits = model(tok)
            tok = logits.argmax(-1)
        """) == {"tok": "recurrence"}


def test_appending_to_a_list_the_body_never_reads_is_independent() -> None:
    loop = facts("""
        for i in range(x.shape[0]):
            rows.append(x[i] - x[i].max())
        """)
    assert loop.carried == {}
    assert not loop.sequential


def test_list_read_where_it_is_grown_is_a_recurrence() -> None:
    assert carried("""
        for t in range(steps):
            toks.append(model(toks[-1]))
        """) == {"toks": "recurrence"}


def test_single_accumulating_update_is_a_reduction_not_a_recurrence() -> None:
    shapes = [
        "acc = acc + f(x[i])",
        "acc = f(x[i]) + acc + 1",
        "acc += x[i].sum()",
        "acc.add_(x[i])",
        "acc = acc - x[i]",
        "best = torch.maximum(best, x[i])",
        "best = max(best, x[i].item())",
        "acc = torch.cat([acc, x[i]])",
    ]
    for shape in shapes:
        loop = facts(f"for i in range(n):\n    {shape}\n")
        assert set(loop.carried.values()) == {Carry.REDUCTION}, shape
        assert not loop.sequential, shape


def test_two_updates_of_one_accumulator_form_a_recurrence() -> None:
    assert carried("""
        for i in range(n):
            h *= decay
            h += x[i]
        """) == {"h": "recurrence"}
    assert carried("""
        for i in range(n):
            h.mul_(decay).add_(x[i])
        """) == {"h": "recurrence"}


def test_accumulator_scaled_or_read_elsewhere_is_a_recurrence() -> None:
    assert carried("for i in range(n):\n    h = h * a + x[i]\n") == {"h": "recurrence"}
    assert carried("for i in range(n):\n    acc = x[i] - acc\n") == {"acc": "recurrence"}
    assert carried("for i in range(n):\n    acc = acc @ m[i]\n") == {"acc": "recurrence"}
    assert carried("""
        for i in range(n):
            acc = acc + x[i]
            out.append(acc)
        """) == {"acc": "recurrence"}


def test_name_assigned_earlier_in_the_same_iteration_is_not_carried() -> None:
    assert (
        carried("""
        for i in range(n):
            h = x[i]
            h = cell(h, h)
        """)
        == {}
    )


def test_assignment_in_one_branch_only_leaves_the_name_carried() -> None:
    assert carried("""
        for i in range(n):
            if x[i] > 0:
                h = x[i]
            y = h
        """) == {"h": "recurrence"}


def test_assignment_in_every_branch_defines_the_name() -> None:
    assert (
        carried("""
        for i in range(n):
            if c:
                h = 1
            elif d:
                h = 2
            else:
                h = 3
            y = h
        """)
        == {}
    )


def test_assignment_in_a_nested_loop_or_try_may_not_have_run() -> None:
    assert carried("""
        for i in range(n):
            for j in range(m):
                h = x[i, j]
            y = h
        """) == {"h": "recurrence"}
    assert carried("""
        for i in range(n):
            try:
                h = f(x[i])
            except ValueError:
                pass
            y = h
        """) == {"h": "recurrence"}


def test_branch_that_never_falls_through_does_not_undefine_the_name() -> None:
    assert (
        carried("""
        for i in range(n):
            if x[i] is None:
                continue
            else:
                h = x[i]
            y = h
        """)
        == {}
    )
    assert (
        carried("""
        for i in range(n):
            try:
                h = f(x[i])
            except ValueError:
                continue
            y = h
        """)
        == {}
    )


def test_attribute_chain_is_carried_like_a_name() -> None:
    assert carried("""
        for t in range(n):
            self.hidden = self.rnn(x[t], self.hidden)
        """) == {"self.hidden": "recurrence"}


def test_other_attributes_of_the_same_object_are_not_reads_of_it() -> None:
    assert (
        carried("""
        for t in range(n):
            self.cache = self.proj(x[t])
        """)
        == {}
    )


def test_element_written_and_read_at_another_index_is_a_recurrence() -> None:
    assert carried("""
        for t in range(1, n):
            y[:, t] = y[:, t - 1] * a + x[:, t]
        """) == {"y": "recurrence"}


def test_element_written_and_read_at_the_same_index_is_independent() -> None:
    assert (
        carried("""
        for i in range(n):
            out[:, i] = x[:, i] * 2
            out[:, i] += 1
        """)
        == {}
    )


def test_while_condition_is_read_before_each_iteration() -> None:
    assert carried("""
        while not done:
            done = step()
        """) == {"done": "recurrence"}


def test_loop_target_is_rebound_by_the_loop_not_carried() -> None:
    assert carried("for i in range(n):\n    i = i + 1\n") == {}


def test_in_place_function_of_an_imported_module_updates_its_argument_not_the_module() -> None:
    assert carried("for w in ws:\n    nn.init.zeros_(w)\n") == {}


def test_comprehension_and_lambda_variables_are_local() -> None:
    assert (
        carried("""
        for i in range(n):
            zs = [h for h in hs]
            f = lambda h: h * 2
            h = zs[i]
        """)
        == {}
    )


def test_walrus_defines_its_name() -> None:
    assert (
        carried("""
        for i in range(n):
            if (m := x[i].max()) > 0:
                out.append(m)
        """)
        == {}
    )


def test_break_return_and_yield_exit_early_but_not_an_inner_break() -> None:
    assert facts("for i in range(n):\n    if x[i] > 0:\n        break\n").exits_early
    assert facts("for i in range(n):\n    return x[i]\n").exits_early
    assert facts("for i in range(n):\n    yield x[i]\n").exits_early
    assert not facts("for i in range(n):\n    for j in range(m):\n        break\n").exits_early


def test_uses_include_attribute_reads_and_prefix_reads() -> None:
    loop = facts("""
        while acc.shape[0] < n:
            acc = torch.cat([acc, draw(self)])
        """)
    assert sorted(r.key for r in loop.uses("acc")) == ["acc", "acc.shape"]
    assert [r.key for r in loop.uses("self.x")] == ["self"]


def test_context_exposes_the_analysis_per_loop() -> None:
    source = textwrap.dedent("""
        import torch

        def f(x, h):
            for t in range(x.shape[0]):
                h = cell(x[t], h)
            for i in range(x.shape[0]):
                rows.append(x[i])
        """)
    module = cst.parse_module(source)
    file_facts = walk(module, frozenset({cst.For}))
    ctx = Context("f.py", source, file_facts, Settings())
    first, second = file_facts.collected[cst.For]
    assert isinstance(first, cst.For) and isinstance(second, cst.For)
    assert ctx.is_sequential_loop(first)
    assert not ctx.is_sequential_loop(second)
    assert ctx.loop_facts(first) is ctx.loop_facts(first)


def _sums(code: str) -> dict[int, bool]:
    """For each `loss = loss + ...` statement (by its order): whether it reads `loss` bound afresh."""
    loop_facts = facts(code)
    statements = [
        r.statement for r in loop_facts.reads if r.key == "loss" and isinstance(r.statement, cst.Assign)
    ]
    return {i: loop_facts.bound_afresh("loss", s) for i, s in enumerate(dict.fromkeys(statements))}


def test_a_sum_started_in_the_same_branch_reads_a_value_of_this_iteration() -> None:
    code = """
        for x, y in loader:
            if plain:
                loss = f(x, y)
            else:
                loss = 0.5 * f(x, y)
                loss = loss + 0.5 * g(x, y)
    """
    assert _sums(code) == {0: True}


def test_a_sum_after_a_start_on_one_path_only_reads_the_last_iteration() -> None:
    code = """
        for x, y in loader:
            if first:
                loss = 0.0
            loss = loss + f(x, y)
    """
    assert _sums(code) == {0: False}


def _loops_of(source: str) -> tuple[Context, list[cst.For]]:
    source = textwrap.dedent(source)
    file_facts = walk(cst.parse_module(source), frozenset({cst.For}))
    loops = [loop for loop in file_facts.collected[cst.For] if isinstance(loop, cst.For)]
    return Context("f.py", source, file_facts, Settings()), loops


def test_slots_cache_handed_to_a_callee_carries_state_between_iterations() -> None:
    ctx, (on_self, local, output_list, rebuilt) = _loops_of("""
        import torch

        class CausalDecoder:
            def clear_cache(self):
                self._feat_map = [None] * self._conv_num

            def decode(self, z):
                frames = []
                for k in range(z.shape[2]):
                    frames.append(self.decoder(z[:, :, k : k + 1], feat_cache=self._feat_map))
                cache = [None, None]
                for k in range(z.shape[2]):
                    frames.append(self.decoder(z[:, :, k : k + 1], cache))
                outputs = []
                for k in range(z.shape[2]):
                    self.decoder(z[:, :, k : k + 1], outputs)
                for k in range(z.shape[2]):
                    fresh = [None] * 4
                    frames.append(self.decoder(z[:, :, k : k + 1], fresh))
                return frames
        """)
    assert ctx.loop_facts(on_self).carried == {"self._feat_map": Carry.RECURRENCE}
    assert ctx.is_sequential_loop(local)
    assert not ctx.is_sequential_loop(output_list)  # an output list the callee appends to
    assert not ctx.is_sequential_loop(rebuilt)  # new slots every iteration

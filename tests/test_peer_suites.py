"""The peer-suite check's reading and tallying (benchmarks/peers), on small stand-ins for the peers'
tests: no cache and no linter run needed."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from benchmarks.peers.__main__ import MissingPeer, load_cases
from benchmarks.peers.cases import ANY_RULE, NEGATIVE, POSITIVE, kept, preflight_cases, torchfix_cases
from benchmarks.peers.compare import OURS, Found, Verdict, agrees, render, tally

PREFLIGHT_STYLE = textwrap.dedent(
    '''
    PREAMBLE = "import torch\\n"

    def loop(*body):
        return "for x in data:\\n" + "".join(f"    {line}\\n" for line in body)

    def test_tg001_fires():
        assert "TG001" in codes(
            """
            keep.append(x)
            """
        )

    def test_tg001_silent_on_float():
        for kept_value in ("float(x)", "x.item()"):
            assert codes(f"keep.append({kept_value})") == [], kept_value

    def test_tg013_helper_built():
        assert "TG013" not in codes(PREAMBLE + loop("y = x.to(dev)"))

    def test_tg004_listed():
        diagnostics = analyze(PREAMBLE + "DataLoader(ds)")
        assert [d.code for d in diagnostics] == ["TG004", "TG004"]

    def test_tg007_filtered():
        diagnostics = analyze("x.item()")
        found = [d for d in diagnostics if d.code == "TG007"]
        assert found

    def test_unnamed_clean():
        assert codes("pass") == []

    def test_tg003_other_rule():
        assert "TG003" in codes("step()")
    '''
)


def test_preflight_cases_read_every_assertion_shape():
    cases = {(case.rule, case.expect, case.name): case.source for case in preflight_cases(PREFLIGHT_STYLE)}
    assert cases == {
        ("TG001", POSITIVE, "test_tg001_fires"): "keep.append(x)\n",
        ("TG001", NEGATIVE, "test_tg001_silent_on_float[float(x)]"): "keep.append(float(x))",
        ("TG001", NEGATIVE, "test_tg001_silent_on_float[x.item()]"): "keep.append(x.item())",
        ("TG013", NEGATIVE, "test_tg013_helper_built"): "import torch\nfor x in data:\n    y = x.to(dev)\n",
        ("TG004", POSITIVE, "test_tg004_listed"): "import torch\nDataLoader(ds)",
        ("TG007", POSITIVE, "test_tg007_filtered"): "x.item()",
        (ANY_RULE, NEGATIVE, "test_unnamed_clean"): "pass",
        ("TG003", POSITIVE, "test_tg003_other_rule"): "step()",
    }


def test_only_the_rules_both_sides_cover_are_kept():
    rules = {case.rule for case in kept(preflight_cases(PREFLIGHT_STYLE), OURS)}
    assert rules == {"TG001", "TG004", "TG007", "TG013", ANY_RULE}


def test_torchfix_negatives_are_the_call_lines_the_expectations_leave_out(tmp_path: Path):
    checker = tmp_path / "fixtures" / "performance" / "checker"
    checker.mkdir(parents=True)
    (checker / "loaders.py").write_text("a = DataLoader(d)\nb = DataLoader(d, num_workers=2)\nc = 1\n")
    (checker / "loaders.txt").write_text("1:5 TOR401 synchronous loading\n")
    cases = [(case.rule, case.expect, case.line) for case in torchfix_cases(tmp_path / "fixtures")]
    assert cases == [("TOR401", POSITIVE, 1), ("TOR401", NEGATIVE, 2)]


def test_a_torchfix_case_is_judged_on_its_own_line(tmp_path: Path):
    checker = tmp_path / "perf" / "checker"
    checker.mkdir(parents=True)
    (checker / "f.py").write_text("a = DataLoader(d)\nb = DataLoader(d)\n")
    (checker / "f.txt").write_text("2:5 TOR401 x\n")
    negative, positive = torchfix_cases(tmp_path)
    on_line_two = [Found("TPL501", 2)]
    assert agrees(positive, on_line_two) and agrees(negative, on_line_two)
    assert not agrees(negative, [Found("TPL501", 1)])


def test_only_the_mapped_rules_decide_a_snippet_case():
    positive, negative = (
        case
        for case in kept(preflight_cases(PREFLIGHT_STYLE), OURS)
        if case.name in ("test_tg001_fires", "test_tg001_silent_on_float[float(x)]")
    )
    assert agrees(positive, [Found("TPL304", 3)])
    assert not agrees(positive, [Found("TPL107", 1)])  # another rule's finding is not TG001's
    assert agrees(negative, [Found("TPL107", 1)])
    assert not agrees(negative, [Found("TPL304", 1)])


def test_tally_counts_positives_with_and_without_a_cuda_sign():
    cases = list(kept(preflight_cases(PREFLIGHT_STYLE), OURS))
    verdicts = [Verdict(case, case.expect == NEGATIVE, True) for case in cases]
    rows = {row.rule: row for row in tally(verdicts)}
    assert (rows["TG001"].positives, rows["TG001"].caught, rows["TG001"].caught_with_cuda) == (1, 0, 1)
    assert (rows["TG001"].negatives, rows["TG001"].silent) == (2, 2)
    table = render(verdicts)
    assert "| torch-preflight | total |  | 0/3 | 3/3 | 4/4 |" in table
    assert "test_tg001_fires: caught only with a CUDA sign" in table


def test_a_cache_without_the_peers_is_one_clear_error(tmp_path: Path):
    with pytest.raises(MissingPeer, match="README.md"):
        load_cases(tmp_path)

"""The CUDA benchmark suite, checked on the CPU: the smoke run of every case, the good variants that must be
the fixer's own output, the coverage of the rules, and publishing measured results into the rule docs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from benchmarks import report
from benchmarks.__main__ import run_suite
from benchmarks.cases import all_cases
from benchmarks.generate import GenerationError, render
from benchmarks.harness import EXACT, Case, Tolerance, allclose, bootstrap_ci, measure, unavailable
from benchmarks.publish import NO_GAIN, NotPublishable, measured_rows, publish
from torchperf_lint import docs
from torchperf_lint.api import lint_source
from torchperf_lint.rules import ALL_RULES

CASES = all_cases()
REGISTERED = {rule.code for rule in ALL_RULES}
NO_CASE = {"TPL603": "nothing to time"}


def _missing_rules(case: Case) -> list[str]:
    return [code for code in case.fixes if code not in REGISTERED]


def _rule_codes(case: Case) -> list[str]:
    """The rules a case is evidence for: its own code, or for a seed scenario every rule it fixes."""
    codes = [case.code] if case.code.startswith("TPL") else []
    return list(dict.fromkeys([*codes, *case.fixes, *case.publish]))


@pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning")
@pytest.mark.filterwarnings("ignore:'pin_memory' argument is set as true:UserWarning")
def test_smoke_run_checks_every_case_on_the_cpu(tmp_path: Path) -> None:
    results = run_suite(CASES, smoke=True, budget_s=60.0, log=lambda line: None)
    rows = results["results"]
    by_name = {case.name: case for case in CASES}
    problems = [
        f"{row['case']} [{row['size']}]: {row['status']}: {row.get('detail')}"
        for row in rows
        if row["status"] != "ok"
        and not (
            row["status"] == "skipped"
            and (_missing_rules(by_name[row["case"]]) or by_name[row["case"]].missing_modules())
        )
    ]
    assert problems == []
    assert {row["case"] for row in rows} == set(by_name)
    written = report.write_all(results, tmp_path)
    assert {path.suffix for path in written} >= {".json", ".md"}
    assert json.loads(written[0].read_text())["smoke"] is True


def test_every_default_on_rule_has_a_case() -> None:
    covered = {code for case in CASES for code in _rule_codes(case)}
    uncovered = [
        rule.code
        for rule in ALL_RULES
        if rule.default_on and rule.code not in covered and rule.code not in NO_CASE
    ]
    assert uncovered == []


@pytest.mark.parametrize("rule", [r for r in ALL_RULES if r.benchmark], ids=lambda r: r.code)
def test_benchmark_named_by_a_rule_exists(rule) -> None:
    assert rule.benchmark in {case.code for case in CASES}


@pytest.mark.parametrize("case", [c for c in CASES if c.fixes], ids=lambda c: c.name)
def test_generated_good_variant_is_the_fixers_output(case: Case) -> None:
    if _missing_rules(case):
        pytest.skip(f"rule not implemented yet: {', '.join(_missing_rules(case))}")
    assert case.generated_path.exists(), "run `python -m benchmarks.generate`"
    assert case.generated_path.read_text(encoding="utf-8") == render(case)


# Cases written before their rule can see them (issue 39 item 1, another branch): the check runs and must
# fail; strict, so that it fails once the rule flags the bad variant, and the entry must go.
AHEAD_OF_THE_RULE = {
    # its buffers are built from constructor parameters (`torch.tensor(strides)`, `[0, border, 0, border]`):
    # that they hold numbers, and so are 1-D, needs the values constructions pass (issue 33)
    "tpl105_detector_device_scalars": "TPL105 cannot prove these buffers 1-D yet (built from parameters)",
}


def _flag_cases() -> list:
    return [
        pytest.param(
            case,
            id=case.name,
            marks=[pytest.mark.xfail(strict=True, reason=AHEAD_OF_THE_RULE[case.name])]
            if case.name in AHEAD_OF_THE_RULE
            else [],
        )
        for case in CASES
    ]


@pytest.mark.parametrize("case", _flag_cases())
def test_bad_variant_is_flagged_and_good_variant_is_not(case: Case) -> None:
    codes = [code for code in _rule_codes(case) if code in REGISTERED]
    if not codes or (case.fixes and not case.generated_path.exists()):
        pytest.skip("rule or generated good variant not there yet")
    good = case.good if case.good is not None else case.generated_path.read_text(encoding="utf-8")
    for code in codes:
        found = [f.code for f in lint_source(case.bad, path=f"{case.name}.py", select=[code])]
        if case.reported:
            assert found, f"{code} silent on bad"
        else:  # a form the rule leaves alone on purpose: the case measures why
            assert found == [], f"{code} fires on a bad variant it should leave alone"
        assert lint_source(good, path=f"{case.name}.py", select=[code]) == [], f"{code} still fires on good"


def test_generator_fails_loudly_when_the_fix_changes_nothing() -> None:
    clean = Case(
        name="x",
        code="TPL101",
        title="",
        bad="import torch\n",
        make=print,
        sizes=[],
        smoke_sizes=[],
        fixes=("TPL101",),
    )
    with pytest.raises(GenerationError, match="TPL101: fixer made no change"):
        render(clean)
    clean.fixes = ("TPL999",)
    with pytest.raises(GenerationError, match="TPL999 is not implemented yet"):
        render(clean)


def test_allclose_names_the_first_differing_result() -> None:
    same = [torch.tensor([1.0, 2.0]), torch.tensor(3)]
    assert allclose(same, [torch.tensor([1.0, 2.0 + 1e-9]), torch.tensor(3)], Tolerance(1e-6, 0.0)) is None
    assert "result 0" in allclose(same, [torch.tensor([1.0, 2.1]), torch.tensor(3)], Tolerance(1e-3, 0.0))
    assert "result 1" in allclose(same, [torch.tensor([1.0, 2.0]), torch.tensor(4)], EXACT)
    assert (
        allclose([torch.tensor(float("nan"))], [torch.tensor(float("nan"))], Tolerance(1.0, 1.0)) is not None
    )


def test_bootstrap_interval_excludes_one_only_for_a_real_difference() -> None:
    slow = [10.0 + 0.1 * (i % 7) for i in range(30)]
    fast = [1.0 + 0.01 * (i % 5) for i in range(30)]
    low, high = bootstrap_ci(slow, fast)
    assert 1.0 < low <= high
    low, high = bootstrap_ci(slow, list(reversed(slow)))
    assert low <= 1.0 <= high


def _fake_results(smoke: bool = False) -> dict:
    def variant(ms: float, peak: int) -> dict:
        return {"median_ms": ms, "min_ms": ms, "max_ms": ms, "samples": 5, "peak_memory_bytes": peak}

    return {
        "device": "NVIDIA H100 80GB HBM3",
        "torch": "2.11.0+cu128",
        "date": "2026-01-01",
        "smoke": smoke,
        "results": [
            {
                "case": "tpl103_seed_range_index",
                "code": "TPL103",
                "title": "range index",
                "size": "n=4096",
                "regime": "loss alone, batch 4096",
                "status": "ok",
                "memory": False,
                "publish": ["TPL103"],
                "variants": {"bad": variant(2.5, 0), "good": variant(0.05, 0)},
                "comparisons": [{"baseline": "bad", "variant": "good", "speedup": 50.0, "ci": [45.0, 55.0]}],
            },
            {
                "case": "tpl304_validation_total",
                "code": "TPL304",
                "title": "validation total",
                "size": "16 batches",
                "status": "ok",
                "memory": True,
                "publish": ["TPL304"],
                "variants": {"bad": variant(12.0, 6_800_000_000), "good": variant(11.9, 4_300_000_000)},
                "comparisons": [{"baseline": "bad", "variant": "good", "speedup": 1.008, "ci": [0.97, 1.04]}],
            },
            {"case": "broken", "code": "TPL201", "status": "error", "publish": ["TPL201"]},
        ],
    }


def test_publish_writes_rows_that_the_rule_docs_render(tmp_path: Path, monkeypatch) -> None:
    source = tmp_path / "run.json"
    source.write_text(json.dumps(_fake_results()))
    out = tmp_path / "measured.json"
    rows = publish([source], out)
    assert json.loads(out.read_text()) == rows
    assert sorted(rows) == ["TPL103", "TPL304"]
    (fast,) = rows["TPL103"]
    assert fast == {
        "case": "range index [n=4096]",
        "regime": "loss alone, batch 4096",
        "device": "NVIDIA H100 80GB HBM3",
        "torch": "2.11.0+cu128",
        "bad": "2.5 ms",
        "good": "50 us",
        "speedup": 50.0,
        "ci": [45.0, 55.0],
        "note": "",
    }
    (noise,) = rows["TPL304"]
    assert NO_GAIN in noise["note"] and "6.8 GB before, 4.3 GB after" in noise["note"]
    monkeypatch.setattr(docs, "measured", lambda: rows)
    rule = next(r for r in ALL_RULES if r.code == "TPL304")
    page = docs._measured_section(rule)
    assert (
        f"| validation total [16 batches] | {noise['regime']} | NVIDIA H100 80GB HBM3 | 2.11.0+cu128 | 12 ms | 11.9 ms "
        "| 1.01x (0.97-1.04) |" in page
    )
    assert NO_GAIN in page


def test_publish_replaces_the_cases_it_measured_and_keeps_the_others(tmp_path: Path) -> None:
    source = tmp_path / "run.json"
    source.write_text(json.dumps(_fake_results()))
    out = tmp_path / "measured.json"
    earlier = {
        "TPL101": [{"case": "kept [n=1]"}],
        "TPL103": [{"case": "range index [n=1024]"}, {"case": "another case of the rule [n=8]"}],
    }
    out.write_text(json.dumps(earlier))
    publish([source], out)
    table = json.loads(out.read_text())
    assert sorted(table) == ["TPL101", "TPL103", "TPL304"]
    assert table["TPL101"] == [{"case": "kept [n=1]"}]
    assert [row["case"] for row in table["TPL103"]] == [
        "another case of the rule [n=8]",
        "range index [n=4096]",
    ]


def test_publish_refuses_a_smoke_run() -> None:
    with pytest.raises(NotPublishable):
        measured_rows(_fake_results(smoke=True))


def test_publish_falls_back_to_the_size_for_results_without_regimes() -> None:
    results = _fake_results()
    del results["results"][0]["regime"]
    (row,) = measured_rows(results)["TPL103"]
    assert row["regime"] == "n=4096"


def test_publish_quotes_the_first_calls_of_compiled_cases() -> None:
    results = _fake_results()
    compiled = results["results"][0]
    compiled["first_call"] = True
    compiled["variants"]["bad"]["first_call_ms"] = 9000.0
    compiled["variants"]["good"]["first_call_ms"] = 5800.0
    (row,) = measured_rows(results)["TPL103"]
    assert "first call (compilation included) 9 s -> 5.8 s" in row["note"]


def test_markdown_names_where_each_rule_matters_and_where_it_does_not() -> None:
    results = _fake_results()
    results["results"] = results["results"][:2]  # the measured rows
    results["results"][1]["regime"] = "GPU-bound validation"
    text = report.markdown(results)
    assert "| TPL103 | loss alone, batch 4096 (good vs bad) | 50x (45-55) | - |" in text
    assert (
        "| TPL304 | GPU-bound validation (good vs bad) | 1.01x (0.97-1.04) | GPU-bound validation (1x) |"
        in text
    )


def test_every_gpu_size_names_its_regime() -> None:
    assert all(size.get("regime") for case in CASES for size in case.sizes)
    with pytest.raises(ValueError, match="sizes without a regime"):
        Case(
            name="x",
            code="TPL101",
            title="",
            bad="",
            good="",
            make=print,
            sizes=[{"label": "n=1"}],
            smoke_sizes=[],
        )


def test_a_multi_gpu_case_is_skipped_with_the_command_that_runs_it() -> None:
    (case,) = [case for case in CASES if case.code == "TPL402"]
    reason = unavailable(case, torch.device("cpu"), smoke=False) if torch.cuda.device_count() < 2 else None
    if reason is None:
        pytest.skip("this machine has the GPUs")
    assert "needs 2 GPUs" in reason and "python -m benchmarks --only TPL402" in reason
    assert unavailable(case, torch.device("cpu"), smoke=True) is None  # the smoke run uses CPU processes


def test_a_case_whose_first_call_warms_up_is_not_called_again_on_a_smoke_run() -> None:
    calls = []
    timing = measure(
        lambda: calls.append(1), torch.device("cpu"), 0.0, smoke=True, first_call_s=0.5, warmup=False
    )
    assert calls == [] and timing.samples_ms == [500.0]


def test_every_process_of_a_group_makes_the_first_ones_timed_calls() -> None:
    """`share` hands out the first process's decisions: here, one warm-up call, then 3 samples of 2 calls."""
    decisions = iter([[1], [0], [2, 3]])
    calls = []
    timing = measure(
        lambda: calls.append(1), torch.device("cpu"), 1.0, smoke=False, share=lambda values: next(decisions)
    )
    assert len(calls) == 1 + 2 * 3 and timing.inner == 2 and len(timing.samples_ms) == 3


def test_two_rounds_time_bad_good_good_bad_and_pool_their_samples(monkeypatch) -> None:
    from benchmarks import harness

    calls: list[str] = []

    def make(module, size, device):
        return lambda: calls.append(module.NAME) or module.NAME

    case = Case(
        name="rounds_probe",
        code="TPL101",
        title="probe",
        bad="NAME = 'bad'\n",
        good="NAME = 'good'\n",
        make=make,
        sizes=[{"label": "one", "regime": "probe"}],
        smoke_sizes=[],
        rounds=2,
        compare=lambda reference, other, tol: None,
    )
    built: list[str] = []
    real_load = harness.load_module
    monkeypatch.setattr(
        harness,
        "load_module",
        lambda source, filename, name: built.append(name) or real_load(source, filename, name),
    )
    row = harness.run_size(
        case, case.sizes[0], torch.device("cpu"), smoke=False, budget=harness.Budget(0.2, 4)
    )
    assert row["status"] == "ok", row
    assert built == ["rounds_probe_bad", "rounds_probe_good", "rounds_probe_good", "rounds_probe_bad"]
    first_round_samples = harness.MIN_SAMPLES
    assert row["variants"]["bad"]["samples"] >= 2 * first_round_samples
    assert row["variants"]["good"]["samples"] >= 2 * first_round_samples
    assert "bad" not in row["tolerance"]

"""TPL6xx beyond the rule examples: test-file detection, the shape of TPL601's fixes, TPL602's
default, TPL604's timer and periodic exemptions, and the shipped example."""

from __future__ import annotations

import textwrap
from pathlib import Path

import libcst as cst
import pytest

from torchperf_lint.api import fix_source, lint_source
from torchperf_lint.config import Settings

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _src(code: str) -> str:
    return textwrap.dedent(code).lstrip("\n")


def _codes(
    code: str, path: str = "train.py", select: tuple[str, ...] = ("TPL6", "TPL604"), **settings: object
) -> list:
    findings = lint_source(_src(code), path=path, settings=Settings(**settings), select=list(select))  # type: ignore[arg-type]
    return [(f.line, f.code) for f in findings]


def _fix(code: str, path: str = "train.py") -> str:
    fixed = fix_source(_src(code), path=path, select=["TPL601"])
    cst.parse_module(fixed)  # the fix must leave valid code
    return fixed


ANOMALY = """
    import torch

    torch.autograd.set_detect_anomaly(True)
    """
GRADCHECK = """
    import torch

    torch.autograd.gradcheck(torch.sin, (torch.randn(3, dtype=torch.double, requires_grad=True),))
    """


@pytest.mark.parametrize("code, rule", [(ANOMALY, "TPL601"), (GRADCHECK, "TPL603")])
@pytest.mark.parametrize("path", ["tests/helpers.py", "test_model.py", "model_test.py", "pkg/conftest.py"])
def test_default_test_file_patterns_silence_test_only_rules(code: str, rule: str, path: str) -> None:
    assert _codes(code, path="train.py") == [(3, rule)]
    assert _codes(code, path=path) == []


@pytest.mark.parametrize("path", ["test_project/train.py", "experiments/tests_old/train.py"])
def test_name_patterns_match_file_names_not_directories(path: str) -> None:
    assert _codes(ANOMALY, path=path) == [(3, "TPL601")]


@pytest.mark.parametrize("code, rule", [(ANOMALY, "TPL601"), (GRADCHECK, "TPL603")])
def test_configured_test_file_patterns_change_the_result(code: str, rule: str) -> None:
    assert _codes(code, path="checks/grads.py") == [(3, rule)]
    assert _codes(code, path="checks/grads.py", test_file_patterns=("checks/",)) == []
    # configuring patterns replaces pytest's defaults
    assert _codes(code, path="tests/helpers.py", test_file_patterns=("checks/",)) == [(3, rule)]


def test_removing_the_only_statement_of_a_block_leaves_pass() -> None:
    fixed = _fix(
        """
        import torch

        if __name__ == "__main__":
            torch.autograd.set_detect_anomaly(True)  # while hunting NaNs
        """
    )
    assert fixed == _src(
        """
        import torch

        if __name__ == "__main__":
            pass  # while hunting NaNs
        """
    )


def test_removing_one_of_several_statements_on_a_line_keeps_the_others() -> None:
    fixed = _fix(
        """
        import torch

        def main():
            torch.manual_seed(0); torch.autograd.set_detect_anomaly(mode=True); run()
            torch.autograd.set_detect_anomaly(True); run()
        """
    )
    assert fixed == _src(
        """
        import torch

        def main():
            torch.manual_seed(0); run()
            run()
        """
    )


def test_one_line_suite_keeps_a_statement() -> None:
    fixed = _fix(
        """
        import torch

        def debug(): torch.autograd.set_detect_anomaly(True)
        """
    )
    assert fixed == _src(
        """
        import torch

        def debug(): pass
        """
    )


def test_unwrapped_with_body_is_dedented_with_nested_blocks_and_comments() -> None:
    fixed = _fix(
        """
        import torch

        class Trainer:
            def fit(self, loader):
                for x, y in loader:
                    # look for the NaN
                    with torch.autograd.detect_anomaly():
                        loss = self.model(x, y)
                        if loss.isfinite():
                            # only finite losses
                            loss.backward()
                        else:
                            continue
                    self.optimizer.step()
        """
    )
    assert fixed == _src(
        """
        import torch

        class Trainer:
            def fit(self, loader):
                for x, y in loader:
                    # look for the NaN
                    loss = self.model(x, y)
                    if loss.isfinite():
                        # only finite losses
                        loss.backward()
                    else:
                        continue
                    self.optimizer.step()
        """
    )


def test_one_line_with_becomes_its_statements() -> None:
    fixed = _fix(
        """
        import torch

        def step(loss):
            with torch.autograd.detect_anomaly(): loss.backward(); log(loss)
        """
    )
    assert fixed == _src(
        """
        import torch

        def step(loss):
            loss.backward(); log(loss)
        """
    )


def test_removing_the_last_item_of_several_keeps_the_others_and_their_commas() -> None:
    fixed = _fix(
        """
        import torch

        def step(model, x):
            with torch.no_grad(), torch.autograd.detect_anomaly():
                model(x)
        """
    )
    assert "with torch.no_grad():\n" in fixed


@pytest.mark.parametrize(
    "code",
    [
        "import torch\nwith torch.autograd.detect_anomaly() as mode:\n    print(mode)\n",
        "import torch\nanomaly = torch.autograd.set_detect_anomaly(True)\n",
        "import torch\nasync def f():\n    async with torch.autograd.detect_anomaly():\n        pass\n",
    ],
)
def test_reported_without_a_fix_when_removal_could_break_code(code: str) -> None:
    findings = lint_source(code, path="train.py", select=["TPL601"])
    assert [f.code for f in findings] == ["TPL601"]
    assert findings[0].fix is None


def test_fix_of_anomaly_detection_is_safe_and_applied_without_unsafe_fixes() -> None:
    assert fix_source(_src(ANOMALY), path="train.py", unsafe=False, select=["TPL601"]) == "import torch\n"


def test_profiler_rule_is_off_by_default_and_on_when_selected() -> None:
    code = """
        import torch

        def train(model, loader, optimizer):
            with torch.profiler.profile():
                for x, y in loader:
                    model(x, y).backward()
                    optimizer.step()
        """
    assert [f.code for f in lint_source(_src(code), path="train.py")] == []
    assert [f.code for f in lint_source(_src(code), path="train.py", select=["TPL602"])] == ["TPL602"]
    settings = Settings(extend_select=("profiler-in-training-code",))
    assert [f.code for f in lint_source(_src(code), path="train.py", settings=settings)] == ["TPL602"]


def test_timer_outside_the_step_loop_does_not_excuse_a_per_step_synchronize() -> None:
    code = """
        import time
        import torch

        def train(model, loader, optimizer):
            for epoch in range(3):
                start = time.perf_counter()
                for x, y in loader:
                    model(x, y).backward()
                    optimizer.step()
                    torch.cuda.synchronize()
                print(time.perf_counter() - start)
        """
    assert _codes(code) == [(10, "TPL604")]


@pytest.mark.parametrize(
    "timer",
    ["t0 = time.monotonic()", "t0 = timeit.default_timer()", "starter.record()", "ms = a.elapsed_time(b)"],
)
def test_any_clock_read_in_the_step_loop_excuses_the_synchronize(timer: str) -> None:
    code = f"""
        import time
        import timeit
        import torch

        starter = torch.cuda.Event(enable_timing=True)

        def bench(model, loader, optimizer, a, b):
            for x, y in loader:
                {timer}
                model(x, y).backward()
                optimizer.step()
                torch.cuda.synchronize()
        """
    assert _codes(code) == []


def test_record_on_an_object_that_is_not_an_event_is_no_timer() -> None:
    code = """
        import torch

        def train(model, loader, optimizer, history):
            for x, y in loader:
                model(x, y).backward()
                optimizer.step()
                history.record()
                torch.cuda.empty_cache()
        """
    assert _codes(code) == [(8, "TPL604")]


@pytest.mark.parametrize("test", ["not step % 50", "step > 0 and step % 50 == 0", "(step + 1) % 50 == 0"])
def test_periodic_guards_spread_the_cost(test: str) -> None:
    code = f"""
        import torch

        def train(model, loader, optimizer):
            for step, (x, y) in enumerate(loader):
                model(x, y).backward()
                optimizer.step()
                if {test}:
                    torch.cuda.empty_cache()
        """
    assert _codes(code) == []


def test_synchronize_finding_says_which_loop_makes_it_hot() -> None:
    code = """
        import torch

        def train(model, train_loader, optimizer):
            for x, y in train_loader:
                model(x, y).backward()
                optimizer.step()
                torch.cuda.synchronize()
        """
    findings = lint_source(_src(code), path="train.py", select=["TPL604"])
    assert [f.context for f in findings] == ["in loop over train_loader at line 4"]


def test_debug_example_reports_anomaly_gradcheck_and_synchronize() -> None:
    source = (EXAMPLES / "debug_and_precision.py").read_text(encoding="utf-8")
    findings = lint_source(source, path="examples/debug_and_precision.py", select=["TPL6", "TPL604"])
    assert {"TPL601", "TPL603", "TPL604"} <= {f.code for f in findings}
    assert {
        f.code for f in lint_source(source, path="examples/debug_and_precision.py", select=["TPL7"])
    } == set()

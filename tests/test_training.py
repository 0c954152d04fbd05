"""TPL3xx behaviour beyond the rules' own examples: the example scripts, fixes, and traps."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from torchperf_lint.api import fix_source, lint_source
from torchperf_lint.config import Settings

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
TORCH_1_13 = Settings(torch_version=(1, 13), torch_version_source="--torch-version 1.13")


def _lint(source: str, code: str, path: str = "train.py", settings: Settings | None = None) -> list[int]:
    findings = lint_source(textwrap.dedent(source), path=path, settings=settings, select=[code])
    assert all(f.code == code for f in findings), findings
    return [f.line for f in findings]


def _fix(source: str, code: str, settings: Settings | None = None) -> str:
    return fix_source(textwrap.dedent(source), path="train.py", unsafe=True, settings=settings, select=[code])


@pytest.mark.usefixtures("precision_off_rules_on")
def test_training_example_reports_each_commented_line() -> None:
    path = EXAMPLES / "training.py"
    source = path.read_text()
    expected = sorted(
        (number, match.group(1))
        for number, line in enumerate(source.splitlines(), start=1)
        if (match := re.search(r"# (TPL3\d\d):", line))
    )
    assert len({code for _, code in expected}) == 5
    findings = lint_source(source, path=str(path), select=["TPL3"])
    assert sorted((f.line, f.code) for f in findings) == expected


def test_seed_script_zero_grad_false_is_flagged() -> None:
    path = EXAMPLES / "slow_training.py"
    source = path.read_text()
    line = next(n for n, text in enumerate(source.splitlines(), 1) if "zero_grad(set_to_none=False)" in text)
    assert _lint(source, "TPL301", path=str(path)) == [line]


# -- TPL301 ---------------------------------------------------------------------------------

PLAIN = """\
import torch

def train(model, loader, optimizer):
    for x, y in loader:
        model.zero_grad()
        model(x, y).backward()
        optimizer.step()
"""


def test_plain_zero_grad_is_fixed_for_torch_1() -> None:
    assert _lint(PLAIN, "TPL301", settings=TORCH_1_13) == [5]
    assert "model.zero_grad(set_to_none=True)" in _fix(PLAIN, "TPL301", settings=TORCH_1_13)


def test_plain_zero_grad_is_silent_for_torch_2() -> None:
    settings = Settings(torch_version=(2, 0), torch_version_source="--torch-version 2.0")
    assert _lint(PLAIN, "TPL301", settings=settings) == []


def test_zero_grad_with_star_kwargs_or_on_a_plain_function_is_silent() -> None:
    source = """
        import torch
        from helpers import zero_grad

        def train(model, loader, optimizer, options):
            for x, y in loader:
                optimizer.zero_grad(**options)
                zero_grad(False)
                model(x, y).backward()
                optimizer.step()
        """
    assert _lint(source, "TPL301", settings=TORCH_1_13) == []


def test_lightning_optimizers_call_chain_is_flagged() -> None:
    source = """
        import torch

        def step(self, batch):
            self.optimizers().zero_grad(set_to_none=False)
        """
    assert _lint(source, "TPL301") == [5]


def test_manual_zeroing_in_hot_loop_becomes_set_to_none() -> None:
    source = """
        import torch

        def train(model, loader, optimizer):
            for x, y in loader:
                for p in model.parameters():
                    p.grad = torch.zeros_like(p)
                model(x, y).backward()
                optimizer.step()
        """
    assert _lint(source, "TPL301") == [7]
    assert "p.grad = None" in _fix(source, "TPL301")


# -- TPL302 ---------------------------------------------------------------------------------


def test_module_through_its_full_path_and_in_a_step_hook() -> None:
    source = """
        import torch
        import lightning as L

        class Model(L.LightningModule):
            def training_step(self, batch, batch_idx):
                x, y = batch
                loss_fn = torch.nn.modules.loss.CrossEntropyLoss()
                return loss_fn(self(x), y)
        """
    findings = lint_source(textwrap.dedent(source), path="train.py", select=["TPL302"])
    assert [f.line for f in findings] == [8]
    assert "create it once in __init__ or call F.cross_entropy" in findings[0].message


def test_unconditional_attribute_rebuild_in_forward_is_flagged() -> None:
    source = """
        import torch
        from torch import nn

        class Net(nn.Module):
            def forward(self, x):
                self.act = nn.ReLU()
                return self.act(x)
        """
    assert _lint(source, "TPL302") == [7]


def test_non_module_torch_nn_classes_are_silent() -> None:
    source = """
        import torch
        from torch import nn
        from torch.nn.utils.rnn import PackedSequence

        class Net(nn.Module):
            def forward(self, x, lengths):
                self.register_buffer("scale", nn.Buffer(torch.ones(1)))
                packed = PackedSequence(x, lengths)
                return packed
        """
    assert _lint(source, "TPL302") == []


# -- TPL303 ---------------------------------------------------------------------------------


def test_sigmoid_fix_uses_the_torch_alias() -> None:
    source = """
        import torch as th

        def gate(x):
            return 1.0 / (1.0 + (-x).exp())
        """
    assert _lint(source, "TPL303") == [5]
    assert "return th.sigmoid(x)" in _fix(source, "TPL303")


def test_logsigmoid_fix_uses_the_functional_alias() -> None:
    source = """
        import torch
        import torch.nn.functional as F

        def score(x):
            return x.sigmoid().log()
        """
    assert "return F.logsigmoid(x)" in _fix(source, "TPL303")


def test_softmax_without_dim_is_reported_without_a_fix() -> None:
    source = """
        import torch
        import torch.nn.functional as F

        def score(x):
            return torch.log(F.softmax(x))
        """
    findings = lint_source(textwrap.dedent(source), path="train.py", select=["TPL303"])
    assert [(f.line, f.fix) for f in findings] == [(6, None)]


def test_parenthesised_composition_keeps_its_parentheses() -> None:
    source = """
        import torch

        def score(x):
            return (torch.log(torch.softmax(x, 1))) * 2
        """
    assert "return (torch.log_softmax(x, 1)) * 2" in _fix(source, "TPL303")


def test_log_sum_exp_by_hand_in_its_spellings() -> None:
    source = """
        import torch

        def energies(x):
            a = x.exp().sum(-1).log()
            b = torch.log(torch.exp(x).sum(dim=1, keepdim=True))
            c = torch.log(torch.exp(x).sum())
            d = x - x.exp().sum(1, keepdim=True).log()
            return a, b, c, d
        """
    findings = lint_source(textwrap.dedent(source), path="train.py", select=["TPL303"])
    assert [(f.line, "logsumexp" in f.message) for f in findings] == [
        (5, True),
        (6, True),
        (7, True),
        (8, False),
    ]
    fixed = _fix(source, "TPL303")
    assert "a = torch.logsumexp(x, -1)" in fixed
    assert "b = torch.logsumexp(x, dim=1, keepdim=True)" in fixed
    assert "c = torch.log(torch.exp(x).sum())" in fixed  # logsumexp needs a dim: the message says what to do
    assert "d = torch.log_softmax(x, 1)" in fixed


# -- TPL304 ---------------------------------------------------------------------------------


def test_total_reset_only_now_and_then_still_keeps_graphs() -> None:
    source = """
        import torch

        def train(model, loader, optimizer, criterion):
            running = 0.0
            for i, (x, y) in enumerate(loader):
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                running += loss
                if i % 100 == 99:
                    print(running / 100)
                    running = 0.0
        """
    assert _lint(source, "TPL304") == [10]


def test_dict_entry_and_model_output_attribute_are_accumulators() -> None:
    source = """
        import torch

        def train(model, loader, optimizer, stats):
            for batch in loader:
                outputs = model(**batch)
                outputs.loss.backward()
                optimizer.step()
                stats["loss"] += outputs.loss
        """
    assert _lint(source, "TPL304") == [9]
    assert 'stats["loss"] += outputs.loss.detach()' in _fix(source, "TPL304")


def test_sum_backpropagated_through_a_helper_call_is_silent() -> None:
    source = """
        import torch

        def train(model, loader, optimizer, criterion, accelerator):
            total = 0
            for x, y in loader:
                total += criterion(model(x), y)
                optimizer.step()
            accelerator.backward(total)
        """
    assert _lint(source, "TPL304") == []


def test_host_values_are_silent() -> None:
    source = """
        import torch

        def train(model, loader, optimizer, criterion):
            total, seen = 0.0, []
            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                total += float(loss)
                total += loss.data
                seen.append(loss.detach().cpu())
        """
    assert _lint(source, "TPL304") == []


def test_extend_and_insert_keep_the_graph_like_append() -> None:
    source = """
        import torch

        def train(model, loader, optimizer, criterion):
            first, last = [], []
            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
                optimizer.step()
                last.extend([loss])
                first.insert(0, loss)
                last.extend(loss.tolist())
            return first, last
        """
    assert _lint(source, "TPL304") == [10, 11]
    fixed = _fix(source, "TPL304")
    assert "last.extend([loss.detach()])" in fixed and "first.insert(0, loss.detach())" in fixed


def test_a_helpers_returned_tuple_is_not_read_as_a_graph() -> None:
    """The caller keeps one element of what a helper returns; which one is not followed."""
    source = """
        import torch

        def train_once(rnn, criterion, x, y):
            output = rnn(x)
            loss = criterion(output, y)
            loss.backward()
            return output, loss.item()

        def main(rnn, criterion, loader):
            total = 0
            for x, y in loader:
                output, loss = train_once(rnn, criterion, x, y)
                total += loss
            return total
        """
    assert _lint(source, "TPL304") == []


# -- TPL305 ---------------------------------------------------------------------------------


def test_module_level_script_after_eval_is_flagged() -> None:
    source = """
        import torch

        model = torch.load("model.pt")
        model.eval()
        for x in torch.load("batches.pt"):
            print(model(x).argmax())
        """
    assert _lint(source, "TPL305") == [7]


def test_comprehension_in_predict_is_flagged() -> None:
    source = """
        import torch

        def predict(model, batches):
            return [model(x) for x in batches]
        """
    assert _lint(source, "TPL305") == [5]


def test_enable_grad_inside_evaluation_is_flagged() -> None:
    source = """
        import torch

        def validate(model, loader):
            with torch.no_grad():
                with torch.enable_grad():
                    for x in loader:
                        model(x)
        """
    assert _lint(source, "TPL305") == [8]


def test_test_files_are_silent() -> None:
    source = """
        import torch

        def evaluate(model, loader):
            model.eval()
            for x in loader:
                model(x)
        """
    assert _lint(source, "TPL305", path="tests/test_model.py") == []
    assert _lint(source, "TPL305") == [7]


@pytest.mark.parametrize(
    ("name", "held_out"),
    [
        ("val_loader", True),
        ("self.testloader", True),
        ("valid_dataloader", True),
        ("holdout_set", True),
        ("data_loader_val", True),  # DETR's spelling: the word sits beside a data word
        ("dev_loader", True),
        ("train_loader", False),
        ("loader", False),
        ("models_to_test", False),  # models, not data
        ("device", False),
        ("x_test", False),
    ],
)
def test_data_kept_out_of_training_is_read_from_its_name(name: str, held_out: bool) -> None:
    from torchperf_lint.analysis.vocabulary import names_held_out_data

    assert names_held_out_data(name) is held_out


def test_a_loop_over_a_validation_loader_says_so() -> None:
    source = """
        import torch

        def fit(model, train_loader, valid_loader, optimizer):
            model.train()
            for x, y in train_loader:
                model(x).sum().backward()
                optimizer.step()
            scores = [model(x) for x, _ in tqdm(valid_loader)]
            return scores
        """
    findings = lint_source(textwrap.dedent(source), path="train.py", select=["TPL305"])
    assert [f.line for f in findings] == [9]
    assert findings[0].context == "in loop at line 9 over valid_loader"
    assert "in the loop over valid_loader" in findings[0].message


def test_a_lightning_hook_over_a_validation_loader_stays_silent() -> None:
    source = """
        import torch
        import lightning as L

        class Model(L.LightningModule):
            def on_validation_epoch_end(self):
                for x in self.val_loader:
                    self.model(x)
        """
    assert _lint(source, "TPL305") == []


def test_message_names_memory() -> None:
    source = """
        import torch

        def evaluate(model, loader):
            for x in loader:
                model(x)
        """
    findings = lint_source(textwrap.dedent(source), path="train.py", select=["TPL305"])
    assert "memory" in findings[0].message
    assert findings[0].context == "in loop at line 5 of evaluate()"

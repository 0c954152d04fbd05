"""CPU tensors that travel between functions (project/host_tensors.py, graph.py's
host_tensor_parameters): what a function returns on every `return`, handed on through names
bound only to such calls and through parameters, until a loss indexes a CUDA tensor with it
(TPL103). From real code: DETR's HungarianMatcher returns `torch.as_tensor` of SciPy's
assignment, SetCriterion hands the indices to each loss through a dispatch table."""

from __future__ import annotations

import ast
from pathlib import Path

import libcst as cst
import pytest

from tests.helpers import write_project
from tests.test_values_that_travel import routes
from torchperf_lint.analysis.tensors import walked_source
from torchperf_lint.analysis.unpacked_items import WALKED, item_source
from torchperf_lint.project.host_tensors import HostTensors, comprehension_items

BOUND = {
    "pairs": ["[linear_sum_assignment(c) for c in cost]"],
    "ids": ["torch.randperm(n)"],
    "moved": ["torch.randperm(n).cuda()"],
    "either": ["torch.randperm(n)", "x"],
    "table": ["np.arange(4)"],
}


def _reader() -> HostTensors:
    def bindings(name: str) -> list[ast.AST]:
        return [ast.parse(v, mode="eval").body for v in BOUND.get(name, ())]

    def qualify(name: str) -> str:
        return {"linear_sum_assignment": "scipy.optimize.linear_sum_assignment"}.get(
            name, name.replace("np.", "numpy.", 1)
        )

    def host_arrays(expr: ast.AST) -> bool:
        if isinstance(expr, ast.Name):
            return expr.id == "table"
        return isinstance(expr, ast.Call) and qualify(ast.unparse(expr.func)).startswith(("numpy.", "scipy."))

    return HostTensors(bindings, frozenset({"x"}), qualify, host_arrays)


@pytest.mark.parametrize(
    ("code", "holds"),
    [
        ("[(torch.as_tensor(i), torch.as_tensor(j)) for i, j in pairs]", True),
        ("torch.randperm(n)", True),
        ("(torch.arange(3), torch.zeros(2))", True),
        ("ids", True),
        ("torch.cat([ids, torch.arange(2)])", True),
        ("torch.tensor([1, 2, 3])", True),
        ("torch.from_numpy(table)", True),
        ("[torch.as_tensor(k) for k in np.arange(3)]", True),
        ("[torch.full((2,), i) for i, c in enumerate(pairs)]", True),
        # not certainly CPU tensors
        ("[(torch.as_tensor(i, device=d), torch.as_tensor(j)) for i, j in pairs]", False),
        ("torch.as_tensor(x)", False),  # a parameter: maybe a CUDA tensor, which stays there
        ("[torch.as_tensor(t) for t in x]", False),
        ("torch.randperm(n, **placement)", False),
        ("moved", False),
        ("either", False),
        ("torch.normal(mean, 1.0)", False),  # drawn where its tensor operands are
        ("[i for i, c in enumerate(pairs)]", False),  # counts: numbers, not tensors
        ("[]", False),
        ("(ids, *rest)", False),
        ("x", False),
        ("pairs", False),  # NumPy arrays, not tensors
    ],
)
def test_what_holds_cpu_tensors_only(code: str, holds: bool) -> None:
    assert _reader().holds(ast.parse(code, mode="eval").body) is holds


def test_comprehension_names_are_items_of_what_they_walk() -> None:
    expr = ast.parse(
        "[x for t, (_, j) in zip(targets, indices) for i, row in enumerate(t) for a, b in pairs]", mode="eval"
    )
    assert isinstance(expr.body, ast.ListComp)
    found = {name: ast.unparse(value) for name, value in comprehension_items(expr.body).items()}
    assert found == {
        "t": "targets",
        "_": "indices",
        "j": "indices",
        "i": "0",
        "row": "t",
        "a": "pairs",
        "b": "pairs",
    }


@pytest.mark.parametrize(
    ("position", "count", "wrapper", "arguments", "source"),
    [
        (1, 2, "zip", 2, 1),
        (0, 3, "zip", 3, 0),
        (1, 2, "zip", 3, WALKED),  # not one name per argument: the items themselves are unpacked
        (1, 2, "enumerate", 1, 0),
        (0, 2, "enumerate", 1, None),
        (0, 2, "", 0, WALKED),
        (2, 3, "enumerate", 1, WALKED),
    ],
)
def test_where_an_unpacked_name_finds_its_value(
    position: int, count: int, wrapper: str, arguments: int, source: int | None
) -> None:
    assert item_source(position, count, wrapper, arguments) == source


@pytest.mark.parametrize(
    ("loop", "name", "walked", "direct"),
    [
        ("for t, (_, j) in zip(targets, indices): pass", "j", "indices", None),
        ("for t, (_, j) in zip(targets, indices): pass", "t", "targets", "targets"),
        ("for i, (src, _) in enumerate(indices): pass", "src", "indices", None),
        ("for i, (a, b) in enumerate(zip(xs, ys)): pass", "b", "ys", "ys"),
        ("for i, (src, _) in enumerate(indices): pass", "i", None, None),
        ("for a, b in pairs: pass", "b", "pairs", None),
        ("for a, b in zip(xs, ys, zs): pass", "b", "zip(xs, ys, zs)", None),
        ("for row in rows: pass", "row", "rows", "rows"),
        ("for row in rows: pass", "other", None, None),
        ("for a, *rest in pairs: pass", "a", None, None),
    ],
)
def test_what_a_loop_name_is_drawn_from_in_the_file_pass(
    loop: str, name: str, walked: str | None, direct: str | None
) -> None:
    """With items of items (the host reading): `j` is somewhere in `indices`; without (tensorness),
    only a name drawn from the walked value or an argument of `zip`/`enumerate` is."""
    statement = cst.parse_statement(loop)
    assert isinstance(statement, cst.For)

    def code(found: cst.BaseExpression | None) -> str | None:
        return cst.Module([]).code_for_node(found) if found is not None else None

    assert code(walked_source(statement.target, statement.iter, name)) == walked
    assert code(walked_source(statement.target, statement.iter, name, items_of_items=False)) == direct


MATCHER = """
    import torch
    from scipy.optimize import linear_sum_assignment
    from torch import nn

    class Matcher(nn.Module):
        @torch.no_grad()
        def forward(self, logits, targets):
            cost = logits.softmax(-1).cpu()
            pairs = [linear_sum_assignment(c) for c in cost]
            return [(torch.as_tensor(i), torch.as_tensor(j)) for i, j in pairs]

    class DeviceMatcher(nn.Module):
        def forward(self, logits, targets):
            return [(t["rows"], t["labels"]) for t in targets]

    def build_matcher(on_device=False):
        return DeviceMatcher() if on_device else Matcher()

    def build_host_matcher():
        return Matcher()
    """

CRITERION = """
    import torch
    from torch import nn

    class Criterion(nn.Module):
        def __init__(self, matcher):
            super().__init__()
            self.matcher = matcher

        def forward(self, outputs, targets):
            indices = self.matcher(outputs["logits"], targets)
            losses = [self.get_loss(name, outputs, targets, indices) for name in ("labels", "boxes")]
            for aux in outputs["aux"]:
                indices = self.matcher(aux["logits"], targets)
                losses.append(self.get_loss("labels", aux, targets, indices))
            return sum(losses)

        def get_loss(self, name, outputs, targets, indices, **kwargs):
            table = {"labels": self.loss_labels, "boxes": self.loss_boxes}
            return table[name](outputs, targets, indices, **kwargs)

        def loss_labels(self, outputs, targets, indices):
            labels = torch.cat([t["labels"][j] for t, (_, j) in zip(targets, indices)])
            return outputs["logits"][self.permutation(indices)].sum() + labels.sum()

        def loss_boxes(self, outputs, targets, indices):
            idx = self.permutation(indices)
            return outputs["boxes"][idx].sum()

        def permutation(self, indices):
            batch = torch.cat([torch.full_like(src, i) for i, (src, _) in enumerate(indices)])
            return batch, torch.cat([src for src, _ in indices])
    """

TRAIN = """
    from criterion import Criterion
    from matcher import {builder}

    def main(model, loader, optimizer):
        matcher = {builder}()
        criterion = Criterion(matcher).cuda()
        for x, targets in loader:
            loss = criterion(model(x.cuda()), targets)
            loss.backward()
            optimizer.step()
    """


def _lines(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, builder: str, criterion: str = CRITERION
) -> list[int]:
    """TPL103's lines in criterion.py, the same on every route (the editor's, the CLI on the file and
    on the project, flake8)."""
    files = {"matcher.py": MATCHER, "criterion.py": criterion, "train.py": TRAIN.format(builder=builder)}
    return routes(capsys, write_project(tmp_path, files), "criterion.py", "TPL103")


def test_matcher_indices_built_on_the_host_index_cuda_tensors_in_each_loss(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # the label gather, the permutation index in both losses: every step, every decoder layer
    assert _lines(capsys, tmp_path, "build_host_matcher") == [22, 23, 27]


def test_a_builder_that_may_return_a_matcher_of_device_indices_leaves_them_unknown(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert _lines(capsys, tmp_path, "build_matcher") == []


def test_indices_bound_to_anything_else_once_are_unknown(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    rebound = CRITERION.replace(
        "            return sum(losses)", "            indices = []\n            return sum(losses)"
    )
    assert _lines(capsys, tmp_path, "build_host_matcher", rebound) == []

"""What an attribute holds when it is bound to what a project function or method returns: the
instances of the project classes that function builds (`return Loss(self)`, either side of
`return A(self) if c else B(self)`, or its return annotation `-> LMModel`). Calls through the
attribute reach their `__call__`/forward and methods (RULES.md, hot paths, item 4), read the same
by the file's walk and by the project pass. From ultralytics: `self.criterion = self.init_criterion()`
then `self.criterion(preds, batch)` in the model's `loss()`, run at every training step; from
audiocraft: `self.model: LMModel = builders.get_lm_model(cfg)`, then `self.model.generate(...)`."""

from __future__ import annotations

import textwrap

import libcst as cst

from tests.helpers import finding_lines, write_project
from torchperf_lint.config import Settings
from torchperf_lint.engine.context import Context
from torchperf_lint.syntax.walker import walk

_LOSS = """
    import torch


    class DetectionLoss:
        def __init__(self, model):
            self.stride = model.stride

        def __call__(self, preds, batch):
            return self.loss(preds, batch)

        def loss(self, preds, batch):
            imgsz = torch.tensor(preds.shape[2:], device=preds.device) * self.stride
            return (preds * imgsz[[1, 0, 1, 0]]).sum()


    class EndToEndLoss(DetectionLoss):
        pass
    """

_MODEL = """
    from torch import nn
    from loss import DetectionLoss, EndToEndLoss


    class BaseModel(nn.Module):
        def forward(self, batch):
            return self.loss(batch)

        def loss(self, batch):
            if getattr(self, "criterion", None) is None:
                self.criterion = self.init_criterion()
            return self.criterion(self.head(batch["img"]), batch)

        def init_criterion(self):
            raise NotImplementedError


    class DetectionModel(BaseModel):
        def init_criterion(self):
            return EndToEndLoss(self) if self.end2end else DetectionLoss(self)
    """


def _hot_functions(source: str) -> set[str]:
    """The qualnames the file's own walk finds hot (no project pass)."""
    source = textwrap.dedent(source)
    facts = walk(cst.parse_module(source), frozenset({cst.Call}))
    ctx = Context("example.py", source, facts, Settings())
    return {facts.functions[node].qualname for node in ctx.hot.hot_functions}


def test_the_file_pass_follows_an_attribute_bound_to_a_method_building_a_loss() -> None:
    source = textwrap.dedent(_LOSS) + textwrap.dedent(_MODEL).replace(
        "from loss import DetectionLoss, EndToEndLoss", ""
    )
    hot = _hot_functions(source)
    assert {"DetectionLoss.__call__", "DetectionLoss.loss"} <= hot


def test_the_file_pass_follows_a_function_building_an_instance() -> None:
    source = """
        from torch import nn

        class Sampler:
            def __call__(self, x):
                return x

        def build_sampler(cfg):
            return Sampler()

        class Net(nn.Module):
            def __init__(self, cfg):
                super().__init__()
                self.sampler = build_sampler(cfg)

            def forward(self, x):
                return self.sampler(x)
        """
    assert "Sampler.__call__" in _hot_functions(source)
    # a function that returns something else builds nothing the walk can name
    unknown = source.replace("return Sampler()", "return make(cfg)")
    assert "Sampler.__call__" not in _hot_functions(unknown)


def test_the_project_pass_follows_the_criterion_into_another_module(tmp_path) -> None:
    root = write_project(tmp_path, {"loss.py": _LOSS, "model.py": _MODEL})
    assert finding_lines(root, "loss.py", "TPL103") == [13]


def test_a_criterion_no_step_calls_stays_cold(tmp_path) -> None:
    model = _MODEL.replace("return self.loss(batch)", "return self.head(batch)")
    root = write_project(tmp_path, {"loss.py": _LOSS, "model.py": model})
    assert finding_lines(root, "loss.py", "TPL103") == []


_LM = """
    import torch
    from torch import nn


    class LMModel(nn.Module):
        def forward(self, x):
            return x

        @torch.no_grad()
        def generate(self, probs):
            top, _ = torch.topk(probs, 4, dim=-1)
            return top[..., [-1]]
    """

_BUILDERS = """
    from lm import LMModel


    def get_lm_model(cfg) -> LMModel:
        lm_class = LMModel
        return lm_class()
    """

_SOLVER = """
    import builders
    from lm import LMModel


    class Solver:
        def __init__(self, cfg):
            self.model: LMModel = builders.get_lm_model(cfg).to("cuda")

        def evaluate(self, loader):
            for batch in loader:
                self.model.generate(batch)
    """


def test_an_annotated_attribute_bound_to_a_builder_with_a_return_annotation(tmp_path) -> None:
    root = write_project(tmp_path, {"lm.py": _LM, "builders.py": _BUILDERS, "solver.py": _SOLVER})
    assert finding_lines(root, "lm.py", "TPL103") == [12]
    # a builder that says nothing of what it returns leaves the call unresolved
    write_project(tmp_path, {"builders.py": _BUILDERS.replace(" -> LMModel", "")})
    assert finding_lines(root, "lm.py", "TPL103") == []

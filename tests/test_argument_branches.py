"""Branches decided by what a function is given (RULES.md, "Tensor and device inference"): a test
on a parameter for which every call made per step passes the same constant (or never None), or on
a `self.` attribute that only `__init__` sets from a parameter every construction passes the same
constant for. The project pass works the values out (project/arguments.py); the file's walk
(analysis/hotpath.py) and the project pass (a helper in another module called only from such a
branch is not hot) read the test through analysis/arguments.py."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.helpers import finding_lines, write_project
from torchperf_lint.analysis.arguments import items_token, truth

SYNC = "TPL105"  # `.item()` in forward code: hot code reports it, cold code does not

_MODEL = """
    import torch
    from torch import nn


    class Net(nn.Module):
        def decode(self, x, force=False, size=None):
            if size is None:
                size = x.max().item()  # line 8
            if not force:
                x = x * 2
            else:
                x = x * x.max().item()  # line 12
            return x

        def forward(self, x, flag):
            {calls}
            return x
"""


def _decode_lines(tmp_path: Path, calls: str) -> list[int]:
    root = write_project(tmp_path, {"model.py": _MODEL.replace("{calls}", calls)})
    return finding_lines(root, "model.py", SYNC)


@pytest.mark.parametrize(
    "calls",
    [
        "x = self.decode(x, size=(3, 3))",
        "x = self.decode(x, False, [4])",
        "x = self.decode(x, force=False, size=(3, 3))\n            x = self.decode(x, size=5)",
    ],
)
def test_branches_no_call_made_per_step_takes_are_cold(tmp_path: Path, calls: str) -> None:
    assert _decode_lines(tmp_path, calls) == []


@pytest.mark.parametrize(
    ("calls", "hot"),
    [
        ("x = self.decode(x)", [8]),  # size left to its default None: the fallback runs
        ("x = self.decode(x, force=flag, size=(3, 3))", [12]),  # a value the caller decides
        ("x = self.decode(x, size=(3, 3))\n            x = self.decode(x, True, (3, 3))", [12]),
        ("x = self.decode(x, *flag)", [8, 12]),  # where the arguments go is not known
        ("x = self.decode(x, **flag)", [8, 12]),
        (
            "x = torch.utils.checkpoint.checkpoint(self.decode, x)\n            x = self.decode(x, size=(3, 3))",
            [8, 12],
        ),
    ],
)
def test_a_branch_some_call_per_step_takes_stays_hot(tmp_path: Path, calls: str, hot: list[int]) -> None:
    assert _decode_lines(tmp_path, calls) == hot


def test_a_parameter_bound_again_outside_its_fallback_is_not_decided(tmp_path: Path) -> None:
    source = _MODEL.replace(
        "            if not force:", "            force = x.sum() > 0\n            if not force:"
    )
    root = write_project(tmp_path, {"model.py": source.replace("{calls}", "x = self.decode(x, size=(3, 3))")})
    assert finding_lines(root, "model.py", SYNC) == [13]


def test_the_branches_of_forward_stay_hot_whatever_its_project_callers_pass(tmp_path: Path) -> None:
    root = write_project(
        tmp_path,
        {
            "model.py": """
                import torch
                from torch import nn


                class Block(nn.Module):
                    def forward(self, x, scale=None):
                        if scale is not None:
                            x = x * x.max().item()
                        return x


                class Net(nn.Module):
                    def __init__(self):
                        super().__init__()
                        self.block = Block()

                    def forward(self, x):
                        return self.block(x)
            """
        },
    )
    assert finding_lines(root, "model.py", SYNC) == [8]


_QUANTIZER = """
    import torch
    from torch import nn


    class Quantizer(nn.Module):
        def __init__(self, n, remap=None):
            super().__init__()
            self.remap = remap

        def remap_to_used(self, x):
            return x * x.max().item()  # line 11

        def forward(self, x):
            if self.remap is not None:
                x = self.remap_to_used(x)
            return x
"""


@pytest.mark.parametrize("built", ["Quantizer(8)", "Quantizer(8, remap=None)", "Quantizer(8, None)"])
def test_an_attribute_every_construction_leaves_off_makes_its_branch_cold_across_modules(
    tmp_path: Path, built: str
) -> None:
    model = f"""
        from torch import nn
        from quantizer import Quantizer


        class VQ(nn.Module):
            def __init__(self):
                super().__init__()
                self.quantize = {built}

            def forward(self, x):
                return self.quantize(x)
    """
    root = write_project(tmp_path, {"quantizer.py": _QUANTIZER, "model.py": model})
    assert finding_lines(root, "quantizer.py", SYNC) == []


def test_a_class_used_as_a_base_is_not_handed_on(tmp_path: Path) -> None:
    """`class Frozen(Quantizer)` reads the name without calling it, but builds nothing the
    project cannot see: the subclass's constructions reach the base's `__init__` (torchmetrics'
    `_NoTrainLpips(_LPIPS)`, whose `spatial` nobody passes)."""
    model = """
        from torch import nn
        from quantizer import Quantizer


        class Frozen(Quantizer):
            def train(self, mode):
                return super().train(False)


        class VQ(nn.Module):
            def __init__(self):
                super().__init__()
                self.quantize = Frozen(8)
                self.other = Quantizer(4)

            def forward(self, x):
                return self.quantize(x) + self.other(x)
    """
    root = write_project(tmp_path, {"quantizer.py": _QUANTIZER, "model.py": model})
    assert finding_lines(root, "quantizer.py", SYNC) == []


@pytest.mark.parametrize(
    "other",
    [
        "Quantizer(8, remap='used.npy')",  # one construction sets it
        "Quantizer(8, remap=path)",  # a value the caller decides
        "{'vq': Quantizer}",  # built from a registry: constructions not all seen
    ],
)
def test_an_attribute_some_construction_sets_keeps_its_branch_hot(tmp_path: Path, other: str) -> None:
    model = f"""
        from torch import nn
        from quantizer import Quantizer


        class VQ(nn.Module):
            def __init__(self, path):
                super().__init__()
                self.quantize = Quantizer(8)
                self.other = {other}

            def forward(self, x):
                return self.quantize(x)
    """
    root = write_project(tmp_path, {"quantizer.py": _QUANTIZER, "model.py": model})
    assert finding_lines(root, "quantizer.py", SYNC) == [11]


def test_an_attribute_set_outside_init_keeps_its_branch_hot(tmp_path: Path) -> None:
    model = """
        from torch import nn
        from quantizer import Quantizer


        class VQ(nn.Module):
            def __init__(self):
                super().__init__()
                self.quantize = Quantizer(8)
                self.quantize.remap = "used.npy"

            def forward(self, x):
                return self.quantize(x)
    """
    root = write_project(tmp_path, {"quantizer.py": _QUANTIZER, "model.py": model})
    assert finding_lines(root, "quantizer.py", SYNC) == [11]


def test_the_project_pass_leaves_out_a_helper_called_only_from_a_branch_no_call_takes(tmp_path: Path) -> None:
    helpers = """
        def stats(x):
            return x.max().item()
    """
    model = """
        from torch import nn
        from helpers import stats


        class Net(nn.Module):
            def head(self, x, with_stats=False):
                if with_stats:
                    stats(x)
                return x

            def forward(self, x):
                return self.head(x)
    """
    root = write_project(tmp_path, {"helpers.py": helpers, "model.py": model})
    assert finding_lines(root, "helpers.py", SYNC) == []
    root = write_project(
        tmp_path, {"model.py": model.replace("self.head(x)", "self.head(x, with_stats=True)")}
    )
    assert finding_lines(root, "helpers.py", SYNC) == [2]


@pytest.mark.parametrize(
    ("test", "hot"),
    [
        ("size is None and x.max().item() > 0", []),  # given a size: the right never runs
        ("size is not None or x.max().item() > 0", []),
        ("size is not None and x.max().item() > 0", [7]),
        ("not torch.compiler.is_compiling() and x.max().item() > 0", []),  # eager-only check
        ("torch.compiler.is_compiling() or x.max().item() > 0", []),
        ("x.shape[0] > 1 and x.max().item() > 0", [7]),
    ],
)
def test_an_operand_runs_only_when_those_before_it_let_it(tmp_path: Path, test: str, hot: list[int]) -> None:
    source = f"""
        import torch
        from torch import nn


        class Net(nn.Module):
            def check(self, x, size=None):
                if {test}:
                    x = x + 1
                return x

            def forward(self, x):
                return self.check(x, size=(3, 3))
    """
    root = write_project(tmp_path, {"model.py": source})
    assert finding_lines(root, "model.py", SYNC) == hot


def test_the_project_pass_reads_an_operand_as_the_file_does(tmp_path: Path) -> None:
    helpers = """
        def valid(x):
            return x.max().item() > 0
    """
    model = """
        import torch
        from torch import nn
        from helpers import valid


        class Net(nn.Module):
            def forward(self, x):
                if not torch.compiler.is_compiling() and valid(x):
                    x = x + 1
                return x
    """
    root = write_project(tmp_path, {"helpers.py": helpers, "model.py": model})
    assert finding_lines(root, "helpers.py", SYNC) == []
    write_project(tmp_path, {"model.py": model.replace("not torch.compiler.is_compiling() and ", "")})
    assert finding_lines(root, "helpers.py", SYNC) == [2]


def test_a_subclass_init_decides_nothing_in_its_base_methods(tmp_path: Path) -> None:
    model = """
        from torch import nn


        class Base(nn.Module):
            def forward(self, x):
                if getattr(self, "flag", True) and self.flag:
                    x = x * x.max().item()
                return x


        class Quiet(Base):
            def __init__(self, flag=False):
                super().__init__()
                self.flag = flag


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.a = Quiet()

            def forward(self, x):
                return self.a(x)
    """
    root = write_project(tmp_path, {"model.py": model})
    assert finding_lines(root, "model.py", SYNC) == [7]


@pytest.mark.parametrize(
    ("assertion", "hot"), [("assert n_bands is None", []), ("assert n_bands is not None", [14])]
)
def test_an_assert_in_init_decides_the_attribute_whatever_the_constructions_pass(
    tmp_path: Path, assertion: str, hot: list[int]
) -> None:
    model = f"""
        import torch
        from torch import nn


        class Schedule(nn.Module):
            def __init__(self, n_bands=None, **kwargs):
                super().__init__()
                {assertion}
                self.n_bands = n_bands

            def noise(self, x):
                if self.n_bands is None:
                    return torch.randn_like(x)
                return x * x.max().item()

            def forward(self, x):
                return self.noise(x)


        class Net(nn.Module):
            def __init__(self, cfg):
                super().__init__()
                self.schedule = Schedule(**cfg)

            def forward(self, x):
                return self.schedule.noise(x)
    """
    root = write_project(tmp_path, {"model.py": model})
    assert finding_lines(root, "model.py", SYNC) == hot


def test_a_class_a_package_exports_is_built_by_its_users_in_their_default_configuration(
    tmp_path: Path,
) -> None:
    """A user who passes `remap` opts in (RULES.md: a branch only an opt-in option takes is
    cold); a construction of the project that may pass it keeps the branch."""
    model = """
        from torch import nn
        from .quantizer import Quantizer


        class VQ(nn.Module):
            def __init__(self):
                super().__init__()
                self.quantize = Quantizer(8)

            def forward(self, x):
                return self.quantize(x)
    """
    files = {"pkg/quantizer.py": _QUANTIZER, "pkg/model.py": model, "pkg/__init__.py": ""}
    root = write_project(tmp_path, files)
    assert finding_lines(root, "pkg/quantizer.py", SYNC) == []
    write_project(tmp_path, {"pkg/__init__.py": "from .quantizer import Quantizer\n"})
    assert finding_lines(root, "pkg/quantizer.py", SYNC) == []
    write_project(tmp_path, {"pkg/model.py": model.replace("Quantizer(8)", "Quantizer(8, remap=path)")})
    assert finding_lines(root, "pkg/quantizer.py", SYNC) == [11]


_HANDED_ON = """
    import torch
    from torch import nn


    class Net(nn.Module):
        def decode(self, x, size=None):
            if size is None:
                size = x.max().item()  # line 8
            return x

        def middle(self, x, size=None):
            return self.decode(x, size)

        def outer(self, x, size=None):
            return self.middle(x, size=size)

        def forward(self, x, given=None):
            {calls}
            return x
"""


def _handed_on_lines(tmp_path: Path, calls: str) -> list[int]:
    root = write_project(tmp_path, {"model.py": _HANDED_ON.replace("{calls}", calls)})
    return finding_lines(root, "model.py", SYNC)


@pytest.mark.parametrize(
    "calls",
    [
        "x = self.outer(x, size=(3, 3))",  # handed on through two calls
        "x = self.outer(x, (3, 3))\n            x = self.middle(x, 4)",
    ],
)
def test_a_value_handed_on_through_calls_decides_the_callee_branch(tmp_path: Path, calls: str) -> None:
    assert _handed_on_lines(tmp_path, calls) == []


@pytest.mark.parametrize(
    "calls",
    [
        "x = self.outer(x)",  # the outer default None is handed on
        "x = self.outer(x, size=given)",  # the root's own parameter: its callers are not seen
        "x = self.outer(x, (3, 3))\n            x = self.middle(x)",  # one caller leaves it None
        "x = self.decode(x, given)",
    ],
)
def test_a_value_handed_on_from_an_open_parameter_stays_open(tmp_path: Path, calls: str) -> None:
    assert _handed_on_lines(tmp_path, calls) == [8]


def test_a_parameter_the_caller_binds_again_is_not_handed_on(tmp_path: Path) -> None:
    source = _HANDED_ON.replace(
        "            return self.decode(x, size)",
        "            size = None\n            return self.decode(x, size)",
    )
    root = write_project(tmp_path, {"model.py": source.replace("{calls}", "x = self.outer(x, size=(3, 3))")})
    assert finding_lines(root, "model.py", SYNC) == [8]


def test_a_lambda_parameter_of_the_same_name_is_not_the_caller_parameter(tmp_path: Path) -> None:
    source = _HANDED_ON.replace(
        "            return self.decode(x, size)",
        "            return (lambda size: self.decode(x, size))(None)",
    )
    root = write_project(tmp_path, {"model.py": source.replace("{calls}", "x = self.outer(x, size=(3, 3))")})
    assert finding_lines(root, "model.py", SYNC) == [8]


@pytest.mark.parametrize(("passed", "hot"), [("(3, 3)", []), ("None", [7])])
def test_a_value_handed_on_around_a_recursion(tmp_path: Path, passed: str, hot: list[int]) -> None:
    source = f"""
        import torch
        from torch import nn


        def walk(x, depth, size=None):
            if size is None:
                size = x.max().item()  # line 7
            if depth:
                return walk(x, depth - 1, size)
            return x


        class Net(nn.Module):
            def forward(self, x):
                return walk(x, 3, size={passed})
    """
    root = write_project(tmp_path, {"model.py": source})
    assert finding_lines(root, "model.py", SYNC) == hot


@pytest.mark.parametrize(
    ("test", "hot"),
    [
        ("not torch.compiler.is_compiling() and not (x.max() < 3)", []),  # an eager-only check
        ("size is not None or x.max() < 3", []),  # given a size: the right is never read
        ("size is None or x.max() < 3", [7]),
        ("x.shape[0] > 1 and x.max() < 3", [7]),
    ],
)
def test_an_if_on_a_tensor_counts_only_the_operands_a_step_reads(
    tmp_path: Path, test: str, hot: list[int]
) -> None:
    source = f"""
        import torch
        from torch import nn


        class Net(nn.Module):
            def check(self, x, size=None):
                if {test}:
                    raise ValueError("out of range")
                return x

            def forward(self, x):
                return self.check(x, size=(3, 3))
    """
    root = write_project(tmp_path, {"model.py": source})
    assert finding_lines(root, "model.py", SYNC) == hot
    checked = source.replace(
        f'if {test}:\n                    raise ValueError("out of range")', f"assert not ({test})"
    )
    root = write_project(tmp_path, {"model.py": checked})
    assert finding_lines(root, "model.py", "TPL104") == hot  # an assert reads its operands as `if` does


_EDT = """
    import torch


    def edt(img, return_indices=False):
        if return_indices:
            return img.max().item()  # line 6
        return img
"""


@pytest.mark.parametrize(
    ("elsewhere", "hot"),
    [
        ("nd = optional_import('scipy.ndimage'); run = nd.edt", []),  # another module's edt
        ("run = ndimage.edt", []),  # a global object: `ndimage, _ = optional_import(...)`
        ("run = edt", [6]),  # the project's edt handed on: its calls are not all seen
        ("import ops; run = ops.edt", [6]),
    ],
)
def test_a_function_is_handed_on_by_its_own_name_not_by_another_object_attribute(
    tmp_path: Path, elsewhere: str, hot: list[int]
) -> None:
    loss = """
        import torch
        from torch import nn
        from ops import edt


        class Loss(nn.Module):
            def forward(self, x):
                return edt(x)
    """
    other = f"""
        from ops import edt
        from utils import optional_import

        ndimage, has_ndimage = optional_import("scipy.ndimage")

        def helper():
            {elsewhere}
            return run
    """
    root = write_project(tmp_path, {"ops.py": _EDT, "loss.py": loss, "metrics.py": other})
    assert finding_lines(root, "ops.py", SYNC) == hot


_HOOKED = """
    import torch
    from torch import nn


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def tiles(self, x):
            return x * x.max().item()  # line 11

        def forward(self, x):
            if hasattr(self, "split_params"):
                x = self.tiles(x)
                x = x * x.max().item()  # line 16
            if getattr(self, "split_params", None) is not None:
                x = x * x.max().item()  # line 18
            return self.lin(x)
"""

_SAMPLING_HELPER = """
    from model import Net


    def load_for_sampling():
        model = Net()
        model.split_params = {"ks": 4}
        return model
"""

_TRAIN = """
    import torch
    {imports}
    from model import Net

    model = Net().cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    {setup}
    for x in loader:
        loss = model(x.cuda()).sum()
        loss.backward()
        opt.step()
"""


def _hooked_lines(
    tmp_path: Path, model: str = _HOOKED, imports: str = "", setup: str = "", **extra: str
) -> list[int]:
    files = {
        "model.py": model,
        "sampling.py": _SAMPLING_HELPER,
        "train.py": _TRAIN.replace("{imports}", imports).replace("{setup}", setup),
        **extra,
    }
    root = write_project(tmp_path, files)
    return finding_lines(root, "model.py", SYNC)


def test_an_attribute_only_an_unimported_helper_stores_is_absent_on_the_step_path(tmp_path: Path) -> None:
    """latent-diffusion's `hasattr(self, "split_input_params")`: only notebook_helpers.py, which no
    module imports, sets it on a model it loads for sampling."""
    assert _hooked_lines(tmp_path) == []


_SUBCLASS_STORES = """
    from model import Net


    class Tiled(Net):
        def enable_tiling(self, ks):
            self.split_params = {"ks": ks}
"""


@pytest.mark.parametrize(
    ("change", "hot"),
    [
        # no store anywhere: a hook the library's users set
        ({"sampling.py": "def load_for_sampling():\n    return None\n"}, [11, 16, 18]),
        # a store in the class's own __init__, or in a subclass's method
        ({"model": _HOOKED.replace("self.lin = nn.Linear(4, 4)", "self.split_params = None")}, [11, 16, 18]),
        ({"tiled.py": _SUBCLASS_STORES}, [11, 16, 18]),
        # a store under a computed name: any attribute may be meant
        (
            {
                "model": _HOOKED.replace(
                    "self.lin = nn.Linear(4, 4)",
                    "self.lin = nn.Linear(4, 4)\n            setattr(self, name, 1)",
                )
            },
            [12, 17, 19],
        ),
        ({"setup": "setattr(model, key, {})"}, [11, 16, 18]),
        # the training script stores it, or imports the helper that does
        ({"setup": 'model.split_params = {"ks": 4}'}, [11, 16, 18]),
        ({"imports": "import sampling"}, [11, 16, 18]),
        # a module the project imports (a library's utility): its users' loops may call it
        ({"pipeline.py": "import sampling\n"}, [11, 16, 18]),
    ],
)
def test_an_attribute_the_step_path_may_set_keeps_its_branch_hot(
    tmp_path: Path, change: dict[str, str], hot: list[int]
) -> None:
    change = dict(change)
    model = change.pop("model", _HOOKED)
    imports, setup = change.pop("imports", ""), change.pop("setup", "")
    assert _hooked_lines(tmp_path, model, imports, setup, **change) == hot


_FOCAL = """
    import torch
    from torch import nn


    class Focal(nn.Module):
        def forward(self, x):
            return x * 2


    class DetLoss(nn.Module):
        def __init__(self, nc, use_fl=True):
            super().__init__()
            self.fl = Focal() if use_fl else None
            self.nl = None if use_fl else Focal()

        def forward(self, x):
            if self.fl:
                x = self.fl(x)
            else:
                x = x * x.max().item()  # line 20
            if self.fl is None:
                x = x * x.max().item()  # line 22
            if self.nl is not None:
                x = x * x.max().item()  # line 24
            return x
"""


def _focal_lines(tmp_path: Path, focal: str, built: str) -> list[int]:
    model = f"""
        from torch import nn
        from focal import DetLoss


        class Det(nn.Module):
            def __init__(self, flag):
                super().__init__()
                self.loss = {built}

            def forward(self, x):
                return self.loss(x)
    """
    root = write_project(tmp_path, {"focal.py": focal, "model.py": model})
    return finding_lines(root, "focal.py", SYNC)


@pytest.mark.parametrize("built", ["DetLoss(8)", "DetLoss(nc=8, use_fl=True)"])
def test_an_attribute_built_only_when_a_decided_flag_is_on_decides_its_tests(
    tmp_path: Path, built: str
) -> None:
    """`self.fl = Focal() if use_fl else None` with `use_fl` left True: `self.fl` is a module
    (truthy, not None), so `if self.fl:`'s else and `self.fl is None` are cold, and so is
    `self.nl is not None` for `self.nl = None if use_fl else Focal()` (ultralytics' DETRLoss)."""
    assert _focal_lines(tmp_path, _FOCAL, built) == []


@pytest.mark.parametrize(
    ("focal", "built", "hot"),
    [
        # the flag turned off: `self.fl` is None, `self.nl` a module
        (_FOCAL, "DetLoss(8, use_fl=False)", [20, 22, 24]),
        (_FOCAL, "DetLoss(8, use_fl=flag)", [20, 22, 24]),  # a value the caller decides
        # an object either way: `if self.fl:` is not decided by the flag (`self.nl` still is)
        (_FOCAL.replace("if use_fl else None", "if use_fl else nn.Identity()"), "DetLoss(8)", [20, 22]),
    ],
)
def test_an_attribute_built_under_an_undecided_or_off_flag_keeps_its_tests_open(
    tmp_path: Path, focal: str, built: str, hot: list[int]
) -> None:
    assert _focal_lines(tmp_path, focal, built) == hot


def test_a_construction_through_a_scoped_import_decides_its_tests(tmp_path: Path) -> None:
    """`from focal import DetLoss` inside the method that builds it (ultralytics'
    `init_criterion`): the call resolves as the import says, so the construction's flags are
    known like those of a module-level import."""
    model = """
        from torch import nn


        class Det(nn.Module):
            def __init__(self):
                super().__init__()
                self.loss = self.init_criterion()

            def init_criterion(self):
                from focal import DetLoss

                return DetLoss(nc=8)

            def forward(self, x):
                return self.loss(x)
    """
    root = write_project(tmp_path, {"focal.py": _FOCAL, "model.py": model})
    assert finding_lines(root, "focal.py", SYNC) == []
    scoped_flag_off = model.replace("DetLoss(nc=8)", "DetLoss(nc=8, use_fl=False)")
    root = write_project(tmp_path / "off", {"focal.py": _FOCAL, "model.py": scoped_flag_off})
    assert finding_lines(root, "focal.py", SYNC) == [20, 22, 24]


_EMPTY_DEFAULT = """
    import torch
    from torch import nn


    class Detector(nn.Module):
        def nms(self, x, labels=()):
            if labels and len(labels[0]):
                x = x * x.max().item()  # line 8
            return x

        def forward(self, x, boxes):
            {calls}
            return x
"""


@pytest.mark.parametrize(
    ("calls", "hot"),
    [
        ("x = self.nms(x)", []),  # the default, an empty tuple: false
        ("x = self.nms(x, labels=[])\n            x = self.nms(x)", []),  # `[]` and `()`: both false
        ("x = self.nms(x, labels={})", []),
        ("x = self.nms(x, labels=[boxes])", [8]),  # a list that holds something
        ("x = self.nms(x, labels=boxes)", [8]),  # not known
        ("x = self.nms(x)\n            x = self.nms(x, labels=(boxes,))", [8]),
    ],
)
def test_an_empty_container_every_call_passes_is_false(tmp_path: Path, calls: str, hot: list[int]) -> None:
    """yolov5's non_max_suppression(..., labels=()) autolabels only when a caller passes labels:
    val.py passes `lb = [...] if save_hybrid else []`, with --save-hybrid off by default."""
    root = write_project(tmp_path, {"model.py": _EMPTY_DEFAULT.replace("{calls}", calls)})
    assert finding_lines(root, "model.py", SYNC) == hot


@pytest.mark.parametrize(
    ("test", "holds"),
    [
        ("loss == 'masks'", False),  # none of the items is "masks"
        ("loss != 'masks'", True),
        ("loss == 'labels'", None),  # one item is, the others are not
        ("loss in ('labels', 'boxes')", None),  # not a test the values decide
        ("not flag and loss == 'masks'", False),
    ],
)
def test_a_test_on_one_of_several_literals_holds_where_each_gives_the_same(test: str, holds: object) -> None:
    one_of = items_token(repr(["labels", "boxes", "cardinality"]))
    assert truth(ast.parse(test, mode="eval").body, {"loss": str(one_of), "flag": "False"}) is holds


@pytest.mark.parametrize(
    ("walked", "item"),
    [
        (repr(["labels", "labels"]), "'labels'"),  # every item is the same literal
        (repr((1, 2)), '!oneof:["1", "2"]'),
        ("[]", None),  # no item
        ("!None", None),  # a list of what, not known
        (repr([[1], [2]]), None),  # items that are no literals
    ],
)
def test_an_item_of_a_list_of_literals_is_one_of_them(walked: str, item: object) -> None:
    assert items_token(walked) == item

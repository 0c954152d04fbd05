"""What building a class sets an attribute to (project/construction.py, read by
project/arguments.py): a store in a method `__init__` runs on the instance being built, a
boolean test of values already known, a fallback helper of the `default(val, d)` shape, and the
defaults of a class nothing in the project builds (built by name from a config file). From real
code: latent-diffusion's `LatentDiffusion`, whose `shorten_cond_schedule` is
`default(num_timesteps_cond, 1) > 1`, set in `register_schedule`, which `DDPM.__init__` calls.
Each fact has a look-alike that keeps its branch hot."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import finding_lines, write_project

SYNC = "TPL105"  # `.item()` in forward code: hot code reports it, cold code does not

_UTIL = """
    from inspect import isfunction


    def exists(x):
        return x is not None


    def default(val, d):
        if exists(val):
            return val
        return d() if isfunction(d) else d
"""

# the `.item()` under the attribute's test is on line 28
_MODEL = """
    import torch
    from torch import nn
    from util import default


    class Base(nn.Module):
        def __init__(self, steps=1000):
            super().__init__()
            self.steps = steps
            self.register_schedule(steps)

        def register_schedule(self, steps):
            self.table = torch.arange(steps)


    class Net(Base):
        def __init__(self, cond_steps=None, flag=None, *args, **kwargs):
            self.cond_steps = default(cond_steps, 1)
            self.given = flag is not None
            super().__init__(*args, **kwargs)

        def register_schedule(self, steps):
            super().register_schedule(steps)
            self.shorten = self.cond_steps > 1

        def forward(self, x):
            if {test}:
                x = x * x.max().item()
            return x
"""

_BUILDS = """
    from torch import nn
    from model import Net


    class Top(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = {built}

        def forward(self, x):
            return self.net(x)
"""


def _lines(tmp_path: Path, test: str, built: str = "Net()", extra: dict[str, str] | None = None) -> list[int]:
    files = {
        "util.py": _UTIL,
        "model.py": _MODEL.replace("{test}", test),
        "top.py": _BUILDS.replace("{built}", built),
        **(extra or {}),
    }
    return finding_lines(write_project(tmp_path, files), "model.py", SYNC)


def test_a_boolean_test_of_a_parameter_stored_in_init_decides_the_attribute(tmp_path: Path) -> None:
    assert _lines(tmp_path, "self.given") == []
    assert _lines(tmp_path, "self.given", "Net(flag=3)") == [28]
    assert _lines(tmp_path, "self.given", "Net(flag=f)") == [28]  # a value not known here


def test_a_fallback_helper_gives_its_second_argument_for_a_none_first(tmp_path: Path) -> None:
    assert _lines(tmp_path, "self.cond_steps == 2") == []
    assert _lines(tmp_path, "self.cond_steps == 1") == [28]
    assert _lines(tmp_path, "self.cond_steps == 2", "Net(cond_steps=2)") == [28]


def test_a_store_in_a_method_init_runs_on_the_instance_being_built_counts_as_init_s(tmp_path: Path) -> None:
    """`Base.__init__` calls `self.register_schedule`, which on a `Net` is `Net`'s: what it stores
    from attributes already known is known, and `shorten` is False unless a construction gives
    more than one conditioning step."""
    assert _lines(tmp_path, "self.shorten") == []
    assert _lines(tmp_path, "self.shorten", "Net(cond_steps=4)") == [28]


def test_a_construction_method_something_else_calls_may_store_again(tmp_path: Path) -> None:
    model = (
        _MODEL.replace("{test}", "self.shorten")
        + """
        def reset(self):
            self.register_schedule(10)
    """
    )
    assert _lines(tmp_path, "self.shorten", extra={"model.py": model}) == [28]


def test_a_construction_method_a_subclass_overrides_decides_nothing_for_it(tmp_path: Path) -> None:
    model = (
        _MODEL.replace("{test}", "self.shorten")
        + """

    class Other(Net):
        def register_schedule(self, steps):
            pass
    """
    )
    assert _lines(tmp_path, "self.shorten", "Other()", extra={"model.py": model}) == [28]


@pytest.mark.parametrize(
    "helper",
    [
        "def default(val, d):\n        return d if val is not None else val",  # the sides swapped
        "def default(val, d):\n        return val or d",  # not a None test
        "def exists(x):\n        return bool(x)\n\n\n    def default(val, d):\n        return val if exists(val) else d",
    ],
)
def test_a_helper_of_another_shape_decides_nothing(tmp_path: Path, helper: str) -> None:
    assert _lines(tmp_path, "self.cond_steps == 2", extra={"util.py": f"\n    {helper}\n"}) == [28]


@pytest.mark.parametrize(
    "helper",
    [
        "def default(val, d):\n        return val if val is not None else d",
        "def default(val, d):\n        if val is None:\n            return d\n        return val",
    ],
)
def test_a_fallback_helper_may_test_its_first_argument_itself(tmp_path: Path, helper: str) -> None:
    assert _lines(tmp_path, "self.cond_steps == 2", extra={"util.py": f"\n    {helper}\n"}) == []


# -- a class nothing in the project builds: built by name from a config file -------------------

_CONFIGURED = """
    import importlib


    def instantiate_from_config(config):
        module, cls = config["target"].rsplit(".", 1)
        return getattr(importlib.import_module(module), cls)(**config.get("params", {}))
"""


def _unbuilt(tmp_path: Path, test: str, extra: dict[str, str] | None = None) -> list[int]:
    files = {
        "util.py": _UTIL,
        "model.py": _MODEL.replace("{test}", test),
        "main.py": _CONFIGURED,
        **(extra or {}),
    }
    return finding_lines(write_project(tmp_path, files), "model.py", SYNC)


def test_a_class_nothing_builds_takes_its_defaults(tmp_path: Path) -> None:
    assert _unbuilt(tmp_path, "self.shorten") == []
    assert _unbuilt(tmp_path, "self.given") == []


def test_a_default_that_is_a_setting_not_an_option_left_off_decides_nothing(tmp_path: Path) -> None:
    """`steps=1000` is a value a config file may well change; `flag=None` leaves an option off."""
    assert _unbuilt(tmp_path, "self.steps < 10") == [28]


def test_a_subclass_nothing_builds_hands_on_nothing_through_its_unpackings(tmp_path: Path) -> None:
    layout = """
        from model import Net


        class Layout(Net):
            def __init__(self, key, *args, **kwargs):
                super().__init__(*args, **kwargs)
                self.key = key
    """
    assert _unbuilt(tmp_path, "self.shorten", {"layout.py": layout}) == []
    adding = layout.replace(
        "super().__init__(", 'kwargs["cond_steps"] = 4\n                super().__init__('
    )
    assert _unbuilt(tmp_path, "self.shorten", {"layout.py": adding}) == [28]
    built = layout + "\n\n        LAYOUT = Layout('k', cond_steps=4)\n"
    assert _unbuilt(tmp_path, "self.shorten", {"layout.py": built}) == [28]
    deeper = """

        class Deeper(Layout):
            def __init__(self, **kwargs):
                super().__init__("k", **kwargs)


        DEEP = Deeper(cond_steps=4)  # through Layout's unpackings, which nothing builds itself
    """
    assert _unbuilt(tmp_path, "self.shorten", {"layout.py": layout + deeper}) == [28]


@pytest.mark.parametrize(
    "extra",
    [
        {
            "configs/model.yaml": "model:\n  target: model.Net\n  params:\n    cond_steps: 4\n"
        },  # a config names it
        {"registry.py": "from model import Net\n\nMODELS = {'net': Net}\n"},  # handed on by name
    ],
)
def test_a_class_its_configs_or_users_may_build_otherwise_keeps_its_branches(
    tmp_path: Path, extra: dict[str, str]
) -> None:
    assert _unbuilt(tmp_path, "self.shorten", extra) == [28]


def test_a_class_built_only_through_a_subclass_the_project_builds_keeps_what_it_passes(
    tmp_path: Path,
) -> None:
    """ultralytics' `SegmentationHead`, built only as the base of `UniversalSegmentationHead`,
    which passes `use_encoder_inputs=True`: its defaults are not a configuration of its own."""
    wide = """
        from model import Net


        class Wide(Net):
            def __init__(self):
                super().__init__(flag=3)


        WIDE = Wide()
    """
    assert _unbuilt(tmp_path, "not self.given", {"wide.py": wide}) == []


# -- a class a package exports: its users build it, in their default configuration -------------

_EXPORTED = {"__init__.py": "from .model import Net\n"}


def test_an_exported_class_takes_the_defaults_that_leave_an_option_off(tmp_path: Path) -> None:
    """imagen-pytorch's `ImagenTrainer(checkpoint_path=None)`: a user who checkpoints opts in."""
    assert _unbuilt(tmp_path, "self.shorten", _EXPORTED) == []
    assert _unbuilt(tmp_path, "self.steps < 10", _EXPORTED) == [28]  # a setting, not an option


@pytest.mark.parametrize(
    "caller",
    [
        "def make():\n        return Net(cond_steps=4)",  # the project passes it itself
        "def make(**kwargs):\n        return Net(**kwargs)",  # its callers' keywords, not known
        "def make(path):\n        kw = json.load(open(path))\n        kw['cond_steps'] = 4\n"
        "        return Net(**kw)",  # a config the code adds to
    ],
)
def test_an_exported_class_keeps_an_option_its_project_may_pass(tmp_path: Path, caller: str) -> None:
    main = f"\n    import json\n    from model import Net\n\n\n    {caller}\n"
    assert _unbuilt(tmp_path, "self.shorten", {**_EXPORTED, "main.py": main}) == [28]


@pytest.mark.parametrize(
    "caller",
    [
        "def make(path):\n        config = json.load(open(path))\n        return Net(**config['net'])",
        "def make(config):\n        kwargs = config.dict()\n        return Net(**kwargs)",  # pydantic
    ],
)
def test_an_exported_class_built_from_a_configuration_takes_what_no_config_names(
    tmp_path: Path, caller: str
) -> None:
    """`ImagenTrainer(imagen, **config_data["trainer"])` with `config_data = json.loads(...)`:
    a key no shipped config sets is off; one a shipped config names is not known."""
    main = f"\n    import json\n    from model import Net\n\n\n    {caller}\n"
    assert _unbuilt(tmp_path, "self.shorten", {**_EXPORTED, "main.py": main}) == []
    named = {**_EXPORTED, "main.py": main, "configs/net.yaml": "net:\n  cond_steps: 4\n"}
    assert _unbuilt(tmp_path, "self.shorten", named) == [28]


def test_a_class_variable_read_hands_the_class_on_to_no_one(tmp_path: Path) -> None:
    """`ImagenTrainer.locked` in the class's own module reads a class variable; `Net.build`, a
    method, may build one (in another module, where the class's methods are not known, any read
    hands it on)."""
    model = _MODEL.replace("{test}", "self.shorten").replace(
        "class Net(Base):\n", "class Net(Base):\n        locked = False\n\n"
    )
    assert _unbuilt(tmp_path, "self.shorten", {"model.py": model + "\n\n    LOCKED = Net.locked\n"}) == []
    factory = (
        model + "\n        @classmethod\n        def build(cls):\n            return cls(cond_steps=4)\n"
    )
    assert _unbuilt(tmp_path, "self.shorten", {"model.py": factory + "\n\n    NET = Net.build\n"}) == [30]


@pytest.mark.parametrize(
    ("test", "reported"),
    [
        ("self.every > 0 and self.flag_on", []),  # `every=0` leaves the option off
        ("exists(self.path)", []),  # a helper that tests against None decides it
        ("exists(self.path) or self.every", []),
        ("not exists(self.path)", [31]),  # decided, and taken
        ("present(self.path)", [31]),  # a helper of another shape decides nothing
    ],
)
def test_an_option_left_off_by_zero_or_tested_by_a_helper_is_cold(
    tmp_path: Path, test: str, reported: list[int]
) -> None:
    model = (
        _MODEL.replace("{test}", test)
        .replace("from util import default", "from util import default, exists, present")
        .replace(
            "def __init__(self, cond_steps=None, flag=None, *args, **kwargs):\n",
            "def __init__(self, cond_steps=None, flag=None, every=0, path=None, *args, **kwargs):\n"
            "            self.every = every\n            self.path = path\n            self.flag_on = True\n",
        )
    )
    util = _UTIL + "\n\n    def present(x):\n        return bool(x)\n"
    assert _unbuilt(tmp_path, test, {"model.py": model, "util.py": util}) == reported

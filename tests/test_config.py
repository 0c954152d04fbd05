"""Settings from `[tool.torchperf-lint]` in pyproject.toml, else `[torchperf-lint]` in setup.cfg or
tox.ini, each file's nearest (found by walking up from it); every key validated; flake8's own options."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests import probes
from torchperf_lint.cli import main
from torchperf_lint.config import ConfigError, Settings, load_settings
from torchperf_lint.engine.runner import EXCLUDE_HINT
from torchperf_lint.flake8_plugin import TorchPerfPlugin

pytestmark = pytest.mark.usefixtures("precision_off_rules_on")  # conftest.PRECISION_OFF

HOT = b"""\
import torch
import torch.nn as nn


def weighted_nll(pred, target):
    return -pred[range(target.shape[0]), target].mean()


class Loss(nn.Module):
    def forward(self, pred, target):
        noise = torch.zeros(3).cuda()
        slow_probe()
        return weighted_nll(pred + noise.sum(), target)
"""


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, str):
        path.write_text(textwrap.dedent(text))
    else:
        path.write_bytes(text)
    return path


def codes(capsys, *args: object, select: tuple[str, ...] = ()) -> set[str]:
    main([*select, "--format", "json", *map(str, args)])
    return {f["code"] for f in json.loads(capsys.readouterr().out)}


def files(capsys, *args: object) -> set[str]:
    main(["--format", "json", *map(str, args)])
    return {Path(f["path"]).name for f in json.loads(capsys.readouterr().out)}


def usage_error(capsys, *args: object) -> str:
    code = main([*map(str, args)])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    return lines[0]


# -- where the config comes from ----------------------------------------------------------------


def test_pyproject_table_is_read(tmp_path: Path, capsys) -> None:
    write(tmp_path / "pyproject.toml", '[tool.torchperf-lint]\nselect = ["TPL101"]\n')
    assert codes(capsys, write(tmp_path / "loss.py", HOT)) == {"TPL101"}


@pytest.mark.parametrize("name", ["setup.cfg", "tox.ini"])
def test_ini_section_is_read_when_pyproject_has_no_table(tmp_path: Path, capsys, name: str) -> None:
    write(tmp_path / "pyproject.toml", '[build-system]\nrequires = ["setuptools"]\n')
    write(tmp_path / name, "[torchperf-lint]\nselect = TPL103\n")
    assert codes(capsys, write(tmp_path / "loss.py", HOT)) == {"TPL103"}


def test_pyproject_wins_over_setup_cfg_in_the_same_directory(tmp_path: Path, capsys) -> None:
    write(tmp_path / "pyproject.toml", '[tool.torchperf-lint]\nselect = ["TPL101"]\n')
    write(tmp_path / "setup.cfg", "[torchperf-lint]\nselect = TPL103\n")
    assert codes(capsys, write(tmp_path / "loss.py", HOT)) == {"TPL101"}


def test_config_is_found_by_walking_up_from_the_first_path(tmp_path: Path, capsys) -> None:
    write(tmp_path / "setup.cfg", "[torchperf-lint]\nselect = TPL103\n")
    deep = write(tmp_path / "src" / "pkg" / "models" / "loss.py", HOT)
    assert codes(capsys, deep) == {"TPL103"}
    assert codes(capsys, tmp_path / "src") == {"TPL103"}


def test_the_nearest_config_wins(tmp_path: Path, capsys) -> None:
    write(tmp_path / "pyproject.toml", '[tool.torchperf-lint]\nselect = ["TPL103"]\n')
    write(tmp_path / "sub" / "setup.cfg", "[torchperf-lint]\nselect = TPL101\n")
    assert codes(capsys, write(tmp_path / "sub" / "loss.py", HOT)) == {"TPL101"}


def monorepo(root: Path) -> tuple[Path, Path]:
    """Two packages, each with its own config: a selects TPL10 but ignores TPL101 in models/,
    b selects TPL101 only and targets torch 1.13."""
    write(
        root / "a" / "pyproject.toml",
        '[tool.torchperf-lint]\nselect = ["TPL10"]\nper-file-ignores = {"models/*" = ["TPL101"]}\n',
    )
    write(
        root / "b" / "pyproject.toml", '[tool.torchperf-lint]\nselect = ["TPL101"]\ntorch-version = "1.13"\n'
    )
    for package in ("a", "b"):
        write(root / package / "models" / "loss.py", HOT)
        write(root / package / "train.py", HOT)
    return root / "a", root / "b"


@pytest.mark.parametrize("jobs", [["--jobs", "1"], []], ids=["one-process", "pool"])
def test_each_file_is_checked_under_its_nearest_config_whatever_the_path_order(
    tmp_path: Path, capsys, jobs: list[str]
) -> None:
    a, b = monorepo(tmp_path)
    expected = {
        ("a/models/loss.py", "TPL103"),
        ("a/train.py", "TPL101"),
        ("a/train.py", "TPL103"),
        ("b/models/loss.py", "TPL101"),
        ("b/train.py", "TPL101"),
    }
    outputs = []
    for paths in ([a, b], [b, a], [tmp_path]):
        main(["--format", "json", *jobs, *map(str, paths)])
        out = capsys.readouterr().out
        found = {(Path(f["path"]).relative_to(tmp_path).as_posix(), f["code"]) for f in json.loads(out)}
        assert found == expected, paths
        outputs.append(out)
    assert outputs[0] == outputs[1]


def test_the_command_line_applies_over_each_files_config(tmp_path: Path, capsys) -> None:
    a, b = monorepo(tmp_path)
    main(["--format", "json", "--extend-select", "TPL103", str(b), str(a)])
    found = {
        (Path(f["path"]).relative_to(tmp_path).as_posix(), f["code"])
        for f in json.loads(capsys.readouterr().out)
    }
    assert {code for path, code in found if path.startswith("b/")} == {"TPL101", "TPL103"}
    assert ("a/models/loss.py", "TPL101") not in found  # a's per-file-ignores still apply


def test_an_explicit_config_applies_to_every_file(tmp_path: Path, capsys) -> None:
    a, b = monorepo(tmp_path)
    other = write(tmp_path / "lint.ini", "[torchperf-lint]\nselect = TPL103\n")
    assert codes(capsys, "--config", other, a, b) == {"TPL103"}


def test_a_walk_skips_what_each_directorys_nearest_config_excludes(tmp_path: Path, capsys) -> None:
    a, b = monorepo(tmp_path)
    with open(b / "pyproject.toml", "a") as config:
        config.write('extend-exclude = ["models"]\n')
    for paths in ([tmp_path], [b, a]):
        main(["--show-files", *map(str, paths)])
        listed = {
            Path(line).relative_to(tmp_path).as_posix() for line in capsys.readouterr().out.splitlines()
        }
        assert listed == {"a/models/loss.py", "a/train.py", "b/train.py"}


def test_each_configs_files_are_cached_under_its_package(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.delenv("TORCHPERF_LINT_NO_CACHE")
    a, b = monorepo(tmp_path)
    main(["--jobs", "1", str(b), str(a)])
    cold = capsys.readouterr().out
    assert (a / ".torchperf_lint_cache").is_dir() and (b / ".torchperf_lint_cache").is_dir()
    main(["--jobs", "1", str(a), str(b)])
    assert capsys.readouterr().out == cold


def test_explicit_config_file_is_used_instead_of_searching(tmp_path: Path, capsys) -> None:
    write(tmp_path / "pyproject.toml", '[tool.torchperf-lint]\nselect = ["TPL103"]\n')
    other = write(tmp_path / "elsewhere" / "lint.ini", "[torchperf-lint]\nselect = TPL101\n")
    assert codes(capsys, "--config", other, write(tmp_path / "loss.py", HOT)) == {"TPL101"}


def test_command_line_select_replaces_the_configs_selection_ignores_included(tmp_path: Path, capsys) -> None:
    # ruff's rule: the command line is a layer over the config; a --select there starts afresh
    write(tmp_path / "pyproject.toml", '[tool.torchperf-lint]\nselect = ["TPL101"]\nignore = ["TPL103"]\n')
    loss = write(tmp_path / "loss.py", HOT)
    assert codes(capsys, "--select", "TPL101,TPL103", loss) == {"TPL101", "TPL103"}
    assert codes(capsys, "--select", "TPL1", "--ignore", "TPL101", loss) == {"TPL103"}


def test_command_line_ignore_and_extend_select_work_on_the_configs_selection(tmp_path: Path, capsys) -> None:
    write(tmp_path / "pyproject.toml", '[tool.torchperf-lint]\nselect = ["TPL10"]\nignore = ["TPL103"]\n')
    loss = write(tmp_path / "loss.py", HOT)
    assert codes(capsys, loss) == {"TPL101"}
    assert codes(capsys, "--ignore", "TPL101", loss) == set()
    assert codes(capsys, "--extend-ignore", "TPL101", loss) == set()
    assert codes(capsys, "--extend-select", "TPL103", loss) == {"TPL101", "TPL103"}  # re-enabled


# -- --show-settings ------------------------------------------------------------------------------


def show_settings(capsys, *args: object) -> dict[str, list[tuple[object, str]]]:
    assert main(["--show-settings", "--format", "json", *map(str, args)]) == 0
    rows: dict[str, list[tuple[object, str]]] = {}
    for row in json.loads(capsys.readouterr().out):
        rows.setdefault(row["key"], []).append((row["value"], row["source"]))
    return rows


def test_show_settings_says_where_each_value_came_from(tmp_path: Path, capsys) -> None:
    config = write(
        tmp_path / "pyproject.toml",
        '[tool.torchperf-lint]\nselect = ["TPL1"]\nignore = ["TPL103"]\nextend-exclude = ["legacy"]\n'
        'torch-version = "1.13"\n',
    )
    loss = write(tmp_path / "loss.py", HOT)
    rows = show_settings(
        capsys, "--extend-ignore", "TPL106", "--extend-exclude", "gen", "--no-respect-gitignore", loss
    )
    assert rows["config-file"] == [(str(config), "found from the first path")]
    assert rows["select"] == [(["TPL1"], str(config))]
    assert rows["ignore"] == [
        (["TPL103"], str(config)),
        (["TPL106"], "command line (--ignore, --extend-ignore)"),
    ]
    assert rows["extend-select"] == [([], "default")]
    assert rows["rules"] == [
        (["TPL101", "TPL102", "TPL104", "TPL105"], "the selection above, over the default rules")
    ]
    assert rows["extend-exclude"] == [
        (["legacy", "gen"], f"{config}, then the command line (--extend-exclude)")
    ]
    assert rows["respect-gitignore"] == [(False, "command line (--no-respect-gitignore)")]
    assert rows["lint-all-files"] == [(False, "default")]
    assert rows["library"] == [(False, "default")]
    assert rows["torch-version"] == [("1.13", f"torch-version 1.13 from {config}")]
    assert show_settings(capsys, "--library", loss)["library"] == [(True, "command line (--library)")]
    assert main(["--show-settings", "--no-respect-gitignore", str(loss)]) == 0  # and checks nothing
    text = capsys.readouterr().out.splitlines()
    assert f'select = ["TPL1"]  # {config}' in text
    assert "respect-gitignore = false  # command line (--no-respect-gitignore)" in text


def test_show_settings_without_a_config_shows_defaults_and_the_declared_torch(tmp_path: Path, capsys) -> None:
    write(tmp_path / "requirements.txt", "torch>=1.12,<2\n")
    rows = show_settings(capsys, "--select", "TPL101", write(tmp_path / "loss.py", HOT))
    assert rows["config-file"] == [(None, "none found from the first path")]
    assert rows["select"] == [
        (None, "default"),
        (["TPL101"], "command line (--select): replaces the selection above"),
    ]
    assert rows["rules"][0][0] == ["TPL101"]
    version, source = rows["torch-version"][0]
    assert version == "1.12" and "requirements.txt" in source


def test_show_settings_with_several_configs_shows_the_first_paths_and_names_the_others(
    tmp_path: Path, capsys
) -> None:
    a, b = monorepo(tmp_path)
    rows = show_settings(capsys, b, a)
    assert rows["config-file"] == [(str(b / "pyproject.toml"), "found from the first path")]
    assert rows["select"] == [(["TPL101"], str(b / "pyproject.toml"))]
    [(others, source)] = rows["other-config-files"]
    assert others == [str(a / "pyproject.toml")] and "each checked under its own" in source
    assert "other-config-files" not in show_settings(capsys, a)


# -- every key ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "table, expected",
    [
        ('select = ["TPL10"]', {"TPL101", "TPL103"}),
        ('select = ["cpu-factory-in-hot-path"]', {"TPL101"}),
        ('select = "TPL101, TPL103"', {"TPL101", "TPL103"}),
        ('select = ["TPL1"]\nignore = ["TPL103"]', {"TPL101"}),
        ('select = ["TPL103"]\nignore = ["TPL1"]', {"TPL103"}),  # the more specific selector wins
        ('ignore = ["TPL1"]\nextend-select = ["python-range-indexing"]', {"TPL103"}),
        ('select = ["TPL101"]\nextend-select = ["TPL199"]', {"TPL101", "TPL199"}),
        ('select = ["TPL101"]\nextend_select = ["off-by-default-probe"]', {"TPL101", "TPL199"}),
        ('select = ["TPL101"]\nextend-select = ["TPL19"]', {"TPL101"}),
        ('select = ["TPL10"]\nper-file-ignores = {"loss.py" = ["TPL101"]}', {"TPL103"}),
        ('select = ["TPL10"]\nper-file-ignores = {"other.py" = ["TPL101"]}', {"TPL101", "TPL103"}),
    ],
)
def test_rule_keys_in_pyproject(tmp_path: Path, capsys, monkeypatch, table: str, expected: set[str]) -> None:
    probes.install(monkeypatch)
    write(tmp_path / "pyproject.toml", f"[tool.torchperf-lint]\n{table}\n")
    assert codes(capsys, write(tmp_path / "loss.py", HOT)) == expected


def test_per_file_ignores_in_flake8_form_in_setup_cfg(tmp_path: Path, capsys) -> None:
    write(
        tmp_path / "setup.cfg",
        """\
        [torchperf-lint]
        select = TPL10
        per-file-ignores =
            loss.py: TPL101
            tests/*.py:TPL1
        """,
    )
    assert codes(capsys, write(tmp_path / "loss.py", HOT)) == {"TPL103"}
    assert codes(capsys, write(tmp_path / "tests" / "test_loss.py", HOT)) == set()


def test_exclude_and_extend_exclude_keys(tmp_path: Path, capsys) -> None:
    for name in ("keep/a.py", "generated/b.py", "build/c.py", "legacy/d.py"):
        write(tmp_path / name, HOT)
    write(
        tmp_path / "pyproject.toml",
        '[tool.torchperf-lint]\nselect = ["TPL101"]\nextend-exclude = ["legacy"]\n',
    )
    assert files(capsys, tmp_path) == {"a.py", "b.py"}
    write(
        tmp_path / "pyproject.toml", '[tool.torchperf-lint]\nselect = ["TPL101"]\nexclude = ["generated/"]\n'
    )
    assert files(capsys, tmp_path) == {"a.py", "c.py", "d.py"}


def test_lint_all_files_key(tmp_path: Path, capsys) -> None:
    no_torch = write(tmp_path / "plain.py", b"def f(:\n    pass\n")
    assert main([str(no_torch)]) == 0  # never mentions torch: not parsed
    write(tmp_path / "setup.cfg", "[torchperf-lint]\nlint-all-files = true\n")
    assert main([str(no_torch)]) == 2
    assert f"{no_torch}:1:7: TPL000 could not parse: invalid syntax{EXCLUDE_HINT}" in capsys.readouterr().out


def test_torch_version_and_test_file_patterns_keys(tmp_path: Path) -> None:
    write(
        tmp_path / "pyproject.toml",
        '[tool.torchperf-lint]\ntorch-version = "1.13"\ntest-file-patterns = ["checks/", "*_check.py"]\n',
    )
    settings = load_settings(tmp_path / "loss.py")
    assert settings.torch_version == (1, 13)
    assert str(tmp_path / "pyproject.toml") in settings.torch_version_source
    assert settings.test_file_patterns == ("checks/", "*_check.py")
    assert settings.config_file == tmp_path / "pyproject.toml"


def test_no_config_gives_the_defaults(tmp_path: Path) -> None:
    assert load_settings(tmp_path / "loss.py") == Settings()


# -- errors: one line naming the file, exit 2 ---------------------------------------------------


@pytest.mark.parametrize(
    "table, message",
    [
        ("selct = []", "unknown key 'selct' in [tool.torchperf-lint] (did you mean 'select'?)"),
        ("colour = true", "unknown key 'colour' in [tool.torchperf-lint]; known keys: select, "),
        ("select = 5", "select must be a list of strings, got 5"),
        ('select = ["TPL999"]', "select: unknown rule code or name 'TPL999'"),
        ('ignore = ["no-such-rule"]', "ignore: unknown rule code or name 'no-such-rule'"),
        ('extend-select = ["TPL9"]', "extend-select: unknown rule code or name 'TPL9'"),
        ("exclude = [1]", "exclude must be a list of strings, got [1]"),
        ('per-file-ignores = {"a.py" = ["TPL999"]}', "per-file-ignores: unknown rule code or name 'TPL999'"),
        ("per-file-ignores = 3", "per-file-ignores must be a table of pattern = [codes]"),
        ("torch-version = 2.1", 'torch-version must be a string like "2.1", got 2.1'),
        ('torch-version = "two"', "torch-version must look like 2.1, got 'two'"),
        ('lint-all-files = "maybe"', "lint-all-files must be true or false, got 'maybe'"),
        ("test-file-patterns = true", "test-file-patterns must be a list of strings, got True"),
        ("select = [", "invalid TOML: "),
    ],
)
def test_invalid_pyproject_values_are_one_line_errors_naming_the_file(
    tmp_path: Path, capsys, table: str, message: str
) -> None:
    config = write(tmp_path / "pyproject.toml", f"[tool.torchperf-lint]\n{table}\n")
    error = usage_error(capsys, write(tmp_path / "loss.py", HOT))
    assert error.startswith(f"torchperf-lint: error: {config}: {message}")


@pytest.mark.parametrize(
    "body, message",
    [
        ("select = TPL101\nfoo = 1", "unknown key 'foo' in [torchperf-lint]"),
        ("lint-all-files = sometimes", "lint-all-files must be true or false, got 'sometimes'"),
        ("per-file-ignores = a.py TPL101", "per-file-ignores must be lines of PATTERN:CODES"),
        ("torch-version = 2", "torch-version must look like 2.1, got '2'"),
    ],
)
def test_invalid_ini_values_are_one_line_errors_naming_the_file(
    tmp_path: Path, capsys, body: str, message: str
) -> None:
    config = write(tmp_path / "tox.ini", f"[torchperf-lint]\n{body}\n")
    error = usage_error(capsys, write(tmp_path / "loss.py", HOT))
    assert error.startswith(f"torchperf-lint: error: {config}: {message}")


def test_an_explicit_config_without_the_section_is_an_error(tmp_path: Path, capsys) -> None:
    config = write(tmp_path / "lint.cfg", "[flake8]\nmax-line-length = 100\n")
    error = usage_error(capsys, "--config", config, write(tmp_path / "loss.py", HOT))
    assert error == f"torchperf-lint: error: {config}: no [torchperf-lint] section"


def test_a_missing_explicit_config_is_an_error(tmp_path: Path, capsys) -> None:
    error = usage_error(capsys, "--config", tmp_path / "nope.toml", write(tmp_path / "loss.py", HOT))
    assert error == f"torchperf-lint: error: {tmp_path / 'nope.toml'}: config file not found"


def test_invalid_torch_version_option_is_an_error(tmp_path: Path, capsys) -> None:
    error = usage_error(capsys, "--torch-version", "latest", write(tmp_path / "loss.py", HOT))
    assert error == "torchperf-lint: error: --torch-version: torch-version must look like 2.1, got 'latest'"


def test_load_settings_raises_config_error_for_bad_values(tmp_path: Path) -> None:
    write(tmp_path / "setup.cfg", "[torchperf-lint]\nselect = TPL999\n")
    with pytest.raises(ConfigError, match="setup.cfg: select: unknown rule"):
        load_settings(tmp_path)


# -- flake8 ---------------------------------------------------------------------------------------


@pytest.fixture
def plugin_state(monkeypatch):
    """Restore the plugin's class-level settings after a test changes them."""
    monkeypatch.setattr(TorchPerfPlugin, "_settings", TorchPerfPlugin._settings)
    monkeypatch.setattr(TorchPerfPlugin, "_rules", TorchPerfPlugin._rules)


def test_flake8_options_set_torch_version_and_test_patterns(tmp_path: Path, plugin_state) -> None:
    from flake8.main.application import Application

    config = write(
        tmp_path / "setup.cfg",
        "[flake8]\ntorchperf-torch-version = 1.13\ntorchperf-test-file-patterns = checks/,*_check.py\n",
    )
    Application().initialize(["--config", str(config), str(tmp_path)])
    assert TorchPerfPlugin._settings.torch_version == (1, 13)
    assert TorchPerfPlugin._settings.test_file_patterns == ("checks/", "*_check.py")


def test_flake8_rejects_an_invalid_torch_version(plugin_state) -> None:
    options = argparse.Namespace(torchperf_torch_version="one", torchperf_test_file_patterns=None)
    with pytest.raises(
        SystemExit, match="flake8: --torchperf-torch-version: torch-version must look like 2.1"
    ):
        TorchPerfPlugin.parse_options(options)


@pytest.mark.parametrize(
    "option, value, enabled",
    [
        ("extend_select", ["TPL199"], True),
        ("select", ["TPL199"], True),
        ("enable_extensions", ["TPL199"], True),
        ("extend_select", ["TPL19"], False),
        ("select", ["TPL"], False),
    ],
)
def test_flake8_enables_off_by_default_rules_only_by_exact_code(
    monkeypatch, plugin_state, option: str, value: list[str], enabled: bool
) -> None:
    probes.install(monkeypatch)
    options = argparse.Namespace(
        torchperf_torch_version=None, torchperf_test_file_patterns=None, **{option: value}
    )
    TorchPerfPlugin.parse_options(options)
    assert ("TPL199" in {rule.code for rule in TorchPerfPlugin._rules}) is enabled


ROOT = Path(__file__).resolve().parents[1]


def flake8(cwd: Path, *args: object) -> str:
    """flake8's TPL lines, with this checkout's plugin (the installed entry point imports
    `torchperf_lint` from PYTHONPATH first)."""
    result = subprocess.run(
        [sys.executable, "-m", "flake8", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
        timeout=120,
    )
    assert result.returncode in (0, 1), result.stderr
    return "".join(line for line in result.stdout.splitlines(keepends=True) if ": TPL" in line)


def test_flake8_torch_version_from_its_config_reaches_the_rules(tmp_path: Path) -> None:
    source = b"""\
import torch


def train(model, loader, optimizer):
    for x, y in loader:
        optimizer.zero_grad()
        model(x.cuda()).sum().backward()
        optimizer.step()
"""
    path = write(tmp_path / "train.py", source)
    reports = {}
    for version in ("1.13", "2.1"):
        write(tmp_path / "setup.cfg", f"[flake8]\ntorchperf-torch-version = {version}\n")
        reports[version] = flake8(tmp_path, "--select", "TPL301", path)
    assert f"{path}:6:9: TPL301 " in reports["1.13"] and "torch 1.13" in reports["1.13"]
    assert reports["2.1"] == ""


TRAIN = b"""\
import torch


def train(model, loader, optimizer):
    for x, y in loader:
        optimizer.zero_grad()
        model(x.cuda()).sum().backward()
        optimizer.step()
"""


def flake8_codes(report: str) -> set[str]:
    return {line.split(": ")[1].split()[0] for line in report.splitlines()}


def test_flake8_reads_the_projects_torchperf_lint_table(tmp_path: Path) -> None:
    write(
        tmp_path / "pyproject.toml",
        """\
        [tool.torchperf-lint]
        extend-select = ["TPL101", "TPL103", "TPL301"]
        ignore = ["TPL103"]
        torch-version = "1.13"
        per-file-ignores = {"scripts/*.py" = ["TPL101"]}
        test-file-patterns = ["checks/"]
        library = true
        """,
    )
    loss = write(tmp_path / "loss.py", HOT)  # no step loop runs it: the table's `library` shows it
    train = write(tmp_path / "train.py", TRAIN)
    script = write(tmp_path / "scripts" / "loss.py", HOT)
    checked = write(
        tmp_path / "checks" / "anomaly.py", b"import torch\n\ntorch.autograd.set_detect_anomaly(True)\n"
    )
    assert flake8_codes(flake8(tmp_path, loss)) == {"TPL101"}  # TPL103 ignored, as by the CLI
    assert "TPL301" in flake8_codes(flake8(tmp_path, train))  # torch 1.13 from the table
    assert flake8(tmp_path, script) == ""
    assert flake8(tmp_path, checked) == ""  # a test file by the table's patterns: TPL601 is silent


def test_flake8_and_the_cli_report_the_same_under_the_projects_table(tmp_path: Path, capsys) -> None:
    write(tmp_path / "setup.cfg", "[torchperf-lint]\nselect = TPL101,TPL103,TPL104\nignore = TPL101\n")
    loss = write(tmp_path / "loss.py", HOT)
    main(["--format", "json", str(loss)])
    cli = {(f["line"], f["col"], f["code"]) for f in json.loads(capsys.readouterr().out)}
    report = flake8(tmp_path, loss)
    flake = {
        (int(line.split(":")[1]), int(line.split(":")[2]), line.split(": ")[1].split()[0])
        for line in report.splitlines()
    }
    assert cli == flake == {(6, 13, "TPL103")}


def test_flake8_options_win_over_the_projects_table(tmp_path: Path) -> None:
    table = '[tool.torchperf-lint]\nextend-select = ["TPL101", "TPL301"]\nignore = ["TPL103"]\ntorch-version = "1.13"\n'
    write(tmp_path / "pyproject.toml", table)
    loss = write(tmp_path / "loss.py", HOT)
    train = write(tmp_path / "train.py", TRAIN)
    assert flake8_codes(flake8(tmp_path, "--select", "TPL103", loss)) == {"TPL103"}  # named exactly
    assert flake8_codes(flake8(tmp_path, "--extend-ignore", "TPL101", loss)) == set()
    assert "TPL301" in flake8_codes(flake8(tmp_path, train))
    assert "TPL301" not in flake8_codes(flake8(tmp_path, "--torchperf-torch-version", "2.1", train))


def test_flake8_stops_on_an_invalid_table(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", '[tool.torchperf-lint]\nselect = ["TPL999"]\n')
    loss = write(tmp_path / "loss.py", HOT)
    result = subprocess.run(
        [sys.executable, "-m", "flake8", str(loss)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
        timeout=120,
    )
    assert result.returncode != 0
    assert "unknown rule code or name 'TPL999'" in result.stderr

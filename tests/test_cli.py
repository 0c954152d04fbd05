"""The command line contract (issue 3): output formats, exit codes, rule selection, information
commands, stdin, output file, and which files a directory run lints."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests import probes
from torchperf_lint import __version__
from torchperf_lint.cli import main
from torchperf_lint.engine.runner import EXCLUDE_HINT
from torchperf_lint.evidence import LIBRARY, precision_of
from torchperf_lint.rules import ALL_RULES

SELECT = ("--select", "TPL101,TPL103")

# TPL101 in forward, TPL103 in a helper called from forward (the call graph).
HOT = b"""\
import torch
import torch.nn as nn


def weighted_nll(pred, target):
    return -pred[range(target.shape[0]), target].mean()


class Loss(nn.Module):
    def forward(self, pred, target):
        noise = torch.zeros(3).cuda()
        return weighted_nll(pred + noise.sum(), target)
"""
CLEAN = b"import torch\n\n\ndef double(x):\n    return x * 2\n"
BROKEN = b"import torch\ndef f(:\n    pass\n"


def position(source: bytes, needle: bytes) -> tuple[int, int]:
    """1-based line and column of the first occurrence of `needle`."""
    offset = source.index(needle)
    line = source.count(b"\n", 0, offset) + 1
    return line, offset - (source.rfind(b"\n", 0, offset) + 1) + 1


def write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def run(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def finding_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if ": TPL" in line and not line.startswith(" ")]


# -- output ---------------------------------------------------------------------------------


def test_text_lines_are_path_line_col_code_message_with_1_based_positions(tmp_path: Path, capsys) -> None:
    path = write(tmp_path / "loss.py", HOT)
    code, out, _ = run(capsys, *SELECT, path)
    assert code == 1
    line101, col101 = position(HOT, b"torch.zeros")
    line103, col103 = position(HOT, b"pred[range")
    assert finding_lines(out) == [
        (
            f"{path}:{line103}:{col103}: TPL103 range() index is copied to the device at every call, a full "
            "sync (the host waits for all queued GPU work), not a small copy; use torch.arange(..., device=...)"
        ),
        (
            f"{path}:{line101}:{col101}: TPL101 [*] torch.zeros() creates its tensor on the CPU inside "
            'forward(); pass device="cuda"'
        ),
    ]
    assert "Found 2 findings (1 fixable with --fix)." in out.splitlines()


def test_json_is_a_list_of_objects_with_the_documented_keys(tmp_path: Path, capsys, monkeypatch) -> None:
    probes.install(monkeypatch)
    path = write(tmp_path / "loss.py", HOT + b"FILE_PROBE = 1\n")
    code, out, _ = run(capsys, "--select", "TPL101,TPL103,TPL198", "--format", "json", path)
    assert code == 1
    findings = json.loads(out)
    assert isinstance(findings, list)
    keys = {"path", "cell", "line", "col", "end_line", "end_col", "code", "name", "message", "context", "fix"}
    assert all(set(f) == keys for f in findings)
    by_code = {f["code"]: f for f in findings}
    assert set(by_code) == {"TPL101", "TPL103", "TPL198"}
    tpl101 = by_code["TPL101"]
    line, col = position(HOT, b"torch.zeros")
    assert (tpl101["path"], tpl101["line"], tpl101["col"]) == (str(path), line, col)
    assert (tpl101["end_line"], tpl101["end_col"]) == (line, col + len("torch.zeros(3).cuda()"))
    assert tpl101["name"] == "cpu-factory-in-hot-path"
    assert not tpl101["message"].startswith("TPL") and "TPL101" not in tpl101["message"]
    assert tpl101["context"] == "in Loss.forward"
    assert tpl101["fix"] == {"safety": "safe", "description": tpl101["fix"]["description"]}
    assert by_code["TPL103"]["context"] == "in weighted_nll, called from Loss.forward"
    # a file-scope rule has no hot region and no fix
    assert by_code["TPL198"]["context"] is None and by_code["TPL198"]["fix"] is None
    assert (by_code["TPL198"]["line"], by_code["TPL198"]["col"]) == (1, 1)


def test_json_of_a_clean_run_is_an_empty_list(tmp_path: Path, capsys) -> None:
    code, out, _ = run(capsys, "--format", "json", write(tmp_path / "ok.py", CLEAN))
    assert (code, json.loads(out)) == (0, [])


def test_show_context_explains_every_hot_finding(tmp_path: Path, capsys) -> None:
    path = write(tmp_path / "loss.py", HOT)
    code, out, _ = run(capsys, *SELECT, "--show-context", path)
    assert code == 1
    lines = out.splitlines()
    findings = [i for i, line in enumerate(lines) if line.startswith(str(path))]
    assert len(findings) == 2
    for index in findings:
        assert lines[index + 1].startswith("    hot: in ")
    hot = {lines[i].split(": ")[1].split()[0]: lines[i + 1] for i in findings}
    assert hot == {
        "TPL101": "    hot: in Loss.forward",
        "TPL103": "    hot: in weighted_nll, called from Loss.forward",
    }
    _, out, _ = run(capsys, *SELECT, path)
    assert "hot:" not in out


def test_statistics_counts_findings_per_rule(tmp_path: Path, capsys) -> None:
    one = write(tmp_path / "a.py", HOT)
    two = write(tmp_path / "b.py", HOT)
    code, out, _ = run(capsys, *SELECT, "--statistics", one, two)
    assert code == 1
    # the table alone, as ruff prints it: no finding lines before it, no summary after it
    assert out.splitlines() == ["2     TPL101 cpu-factory-in-hot-path", "2     TPL103 python-range-indexing"]


def test_statistics_still_name_a_file_that_could_not_be_checked(tmp_path: Path, capsys) -> None:
    hot, broken = write(tmp_path / "a.py", HOT), write(tmp_path / "b.py", BROKEN)
    code, out, _ = run(capsys, *SELECT, "--statistics", hot, broken)
    assert code == 2
    assert out.splitlines() == [
        f"{broken}:2:7: TPL000 could not parse: invalid syntax{EXCLUDE_HINT}",
        "1     TPL101 cpu-factory-in-hot-path",
        "1     TPL103 python-range-indexing",
    ]


def test_help_describes_every_output_format(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    start = text.rindex("--format {github,json,sarif,text}")  # the option, after the usage line
    described = text[start : text.index("--show-context", start)]
    for said in (
        "text: path:line:col: CODE message",
        "json: a list of findings",
        "sarif: SARIF 2.1.0",
        "github:",
    ):
        assert said in described


def test_a_file_that_cannot_be_parsed_says_how_to_skip_it(tmp_path: Path, capsys) -> None:
    write(tmp_path / "template.py", b"import torch\n{% if cookiecutter.gpu %}x = 1{% endif %}\n")
    hot = write(tmp_path / "hot.py", HOT)
    code, out, _ = run(capsys, *SELECT, tmp_path)
    assert code == 2 and "add it to extend-exclude" in out
    code, out, _ = run(capsys, *SELECT, "--extend-exclude", "template.py", tmp_path)
    assert code == 1 and "TPL000" not in out and str(hot) in out


def test_statistics_as_json_counts_per_rule_instead_of_listing(tmp_path: Path, capsys) -> None:
    one = write(tmp_path / "a.py", HOT)
    two = write(tmp_path / "b.py", HOT)
    code, out, _ = run(capsys, *SELECT, "--statistics", "--format", "json", one, two)
    assert code == 1
    assert json.loads(out) == [
        {"code": "TPL101", "name": "cpu-factory-in-hot-path", "count": 2, "fixable": 2},
        {"code": "TPL103", "name": "python-range-indexing", "count": 2, "fixable": 0},
    ]
    _, out, _ = run(capsys, *SELECT, "--statistics", "--format", "json", "--unsafe-fixes", one)
    assert [row["fixable"] for row in json.loads(out)] == [1, 1]


@pytest.mark.parametrize("output", ["sarif", "github"])
def test_statistics_in_a_format_without_room_for_them_is_a_usage_error(
    tmp_path: Path, capsys, output: str
) -> None:
    code, out, err = run(capsys, "--statistics", "--format", output, write(tmp_path / "a.py", HOT))
    assert (code, out) == (2, "")
    assert err == f"torchperf-lint: error: --statistics prints text or json, not {output}\n"


# -- exit codes -----------------------------------------------------------------------------


def test_exit_code_is_0_without_findings_1_with_findings_2_when_a_file_could_not_be_checked(
    tmp_path: Path, capsys
) -> None:
    clean = write(tmp_path / "clean.py", CLEAN)
    hot = write(tmp_path / "hot.py", HOT)
    broken = write(tmp_path / "broken.py", BROKEN)
    assert run(capsys, *SELECT, clean)[0] == 0
    assert run(capsys, *SELECT, hot)[0] == 1
    assert run(capsys, *SELECT, broken)[0] == 2
    code, out, _ = run(capsys, *SELECT, hot, broken, clean)
    assert code == 2  # 2 wins over 1
    assert f"{broken}:2:7: TPL000 could not parse: " in out
    assert len(finding_lines(out)) == 3  # the other files were still checked


def test_the_summary_says_apart_the_files_that_could_not_be_checked(tmp_path: Path, capsys) -> None:
    hot = write(tmp_path / "hot.py", HOT)
    broken = write(tmp_path / "broken.py", BROKEN)
    other = write(tmp_path / "other.py", BROKEN)
    write(tmp_path / "requirements.txt", b"torch>=2.3\n")  # no line about the torch fixes assume
    _, out, _ = run(capsys, *SELECT, hot, broken)
    assert len(finding_lines(out)) == 3  # two findings and one TPL000 line
    assert out.splitlines()[-3:] == [
        "Found 2 findings (1 fixable with --fix).",
        "1 more fixable with --fix --unsafe-fixes.",
        "1 file could not be checked.",
    ]
    _, out, _ = run(capsys, broken, other)
    assert out.splitlines()[-1] == "2 files could not be checked."
    assert "Found" not in out


def test_exit_zero_turns_1_into_0_but_never_hides_2(tmp_path: Path, capsys) -> None:
    hot = write(tmp_path / "hot.py", HOT)
    broken = write(tmp_path / "broken.py", BROKEN)
    code, out, _ = run(capsys, *SELECT, "--exit-zero", hot)
    assert code == 0 and len(finding_lines(out)) == 2
    assert run(capsys, *SELECT, "--exit-zero", hot, broken)[0] == 2


# -- rule selection -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, expected",
    [
        (("--select", "TPL101"), {"TPL101"}),
        (("--select", "cpu-factory-in-hot-path"), {"TPL101"}),
        (("--select", "TPL10"), {"TPL101", "TPL103"}),
        (("--select", "TPL101,python-range-indexing"), {"TPL101", "TPL103"}),
        (("--select", "TPL10", "--ignore", "TPL103"), {"TPL101"}),
        (("--select", "TPL10", "--ignore", "python-range-indexing"), {"TPL101"}),
        # the more specific selector wins; ignore wins a tie (ruff's and flake8's rule)
        (("--select", "TPL101,TPL103", "--ignore", "TPL1"), {"TPL101", "TPL103"}),
        (("--select", "TPL103", "--ignore", "TPL1"), {"TPL103"}),
        (("--select", "TPL10", "--ignore", "TPL1"), {"TPL101", "TPL103"}),
        (("--select", "TPL1", "--ignore", "TPL10"), set()),
        (("--select", "TPL10", "--ignore", "TPL10"), set()),
        (("--select", "TPL101", "--ignore", "cpu-factory-in-hot-path"), set()),
        (("--ignore", "TPL1", "--extend-select", "TPL103"), {"TPL103"}),
        (("--select", "ALL", "--ignore", "TPL103"), {"TPL101"}),
        (("--select", "TPL10", "--extend-ignore", "TPL103"), {"TPL101"}),
        (("--select", "TPL10", "--ignore", "TPL101", "--extend-ignore", "TPL103"), set()),
        (("--select", "TPL101", "--extend-select", "TPL103"), {"TPL101", "TPL103"}),
        (("--select", "TPL101", "--extend-select", "python-range-indexing"), {"TPL101", "TPL103"}),
    ],
)
@pytest.mark.usefixtures("hot_rules_on")
def test_select_ignore_and_extend_select_take_codes_prefixes_and_names(
    tmp_path: Path, capsys, args: tuple[str, ...], expected: set[str]
) -> None:
    path = write(tmp_path / "loss.py", HOT)
    code, out, _ = run(capsys, *args, "--format", "json", path)
    assert {f["code"] for f in json.loads(out)} == expected
    assert code == (1 if expected else 0)


@pytest.mark.usefixtures("hot_rules_on")
def test_ignore_removes_a_default_rule_from_the_default_set(tmp_path: Path, capsys) -> None:
    path = write(tmp_path / "loss.py", HOT)
    _, out, _ = run(capsys, "--ignore", "TPL101", "--format", "json", path)
    codes = {f["code"] for f in json.loads(out)}
    assert "TPL103" in codes and "TPL101" not in codes


def test_an_unknown_rule_in_a_selection_is_a_one_line_usage_error(tmp_path: Path, capsys) -> None:
    path = write(tmp_path / "loss.py", HOT)
    code, out, err = run(capsys, "--select", "TPL999", path)
    assert code == 2 and out == ""
    assert err.splitlines() == ["torchperf-lint: error: rule selection: unknown rule code or name 'TPL999'"]


PROBE_SOURCE = b"import torch\n\n\ndef step(x):\n    slow_probe()\n    return x\n"


@pytest.mark.parametrize(
    "args, enabled",
    [
        ((), False),
        (("--extend-select", "TPL199"), True),
        (("--extend-select", "off-by-default-probe"), True),
        (("--extend-select", "tpl199"), True),
        (("--select", "TPL199"), True),
        (("--extend-select", "TPL19"), False),
        (("--extend-select", "TPL1"), False),
        (("--extend-select", "TPL"), False),
        (("--select", "TPL1"), False),
        (("--select", "ALL"), True),  # ruff's ALL: every rule
        (("--select", "ALL", "--ignore", "TPL1"), False),
        (("--extend-select", "TPL199", "--ignore", "TPL1"), True),  # the exact code is more specific
        (("--extend-select", "TPL199", "--ignore", "TPL199"), False),
    ],
)
def test_off_by_default_rules_are_enabled_only_by_their_exact_code_name_or_all(
    tmp_path: Path, capsys, monkeypatch, args: tuple[str, ...], enabled: bool
) -> None:
    probes.install(monkeypatch)
    path = write(tmp_path / "probe.py", PROBE_SOURCE)
    _, out, _ = run(capsys, *args, "--format", "json", path)
    assert ("TPL199" in {f["code"] for f in json.loads(out)}) is enabled


@pytest.mark.parametrize(
    "args",
    [("--select", "TPL101"), ("--ignore", "TPL"), ("--select", "TPL103", "--ignore", "TPL101")],
)
def test_selection_never_hides_tpl000(tmp_path: Path, capsys, args: tuple[str, ...]) -> None:
    broken = write(tmp_path / "broken.py", BROKEN)
    code, out, _ = run(capsys, *args, broken)
    assert code == 2
    assert finding_lines(out) == [f"{broken}:2:7: TPL000 could not parse: invalid syntax{EXCLUDE_HINT}"]


def test_per_file_ignores_and_noqa_never_hide_tpl000(tmp_path: Path, capsys) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.torchperf-lint]\nper-file-ignores = {"*.py" = ["TPL"]}\n')
    broken = write(tmp_path / "broken.py", b"import torch  # noqa\ndef f(:  # noqa\n    pass\n")
    hot = write(tmp_path / "hot.py", HOT)
    code, out, _ = run(capsys, broken, hot)
    assert code == 2
    assert finding_lines(out) == [f"{broken}:2:7: TPL000 could not parse: invalid syntax{EXCLUDE_HINT}"]


# -- information ----------------------------------------------------------------------------


@pytest.mark.parametrize("rule", ["TPL101", "tpl101", "cpu-factory-in-hot-path"])
def test_explain_prints_the_rule_page_by_code_or_name(capsys, rule: str) -> None:
    code, out, _ = run(capsys, "--explain", rule)
    assert code == 0
    assert "TPL101" in out and "cpu-factory-in-hot-path" in out
    for heading in ("## What it does", "## Why it is slow", "## Fix safety", "## When it stays silent"):
        assert heading in out


def test_explain_of_an_unknown_rule_is_a_usage_error(capsys) -> None:
    code, out, err = run(capsys, "--explain", "TPL999")
    assert (code, out) == (2, "")
    assert err == "torchperf-lint: error: unknown rule 'TPL999'; see --list-rules\n"


def test_list_rules_lists_every_rule_with_its_default(capsys, monkeypatch) -> None:
    probes.install(monkeypatch)
    code, out, _ = run(capsys, "--list-rules")
    assert code == 0
    rows = {line.split()[0]: line.split() for line in out.splitlines()[1:]}
    assert set(rows) == {rule.code for rule in ALL_RULES} | {"TPL198", "TPL199"}
    assert rows["TPL701"][1:3] == ["fp32-training", "on"]
    assert rows["TPL102"][1:3] == ["constant-copied-per-step", "off"]
    assert rows["TPL199"][1:3] == ["off-by-default-probe", "off"]
    assert out.splitlines()[0].split()[4:6] == ["training", "library"]


def test_list_rules_gives_each_share_with_its_sample_size(capsys, monkeypatch) -> None:
    probes.install(monkeypatch)
    _, out, _ = run(capsys, "--list-rules")
    line = next(line for line in out.splitlines() if line.startswith("TPL101 "))
    share = r"(\d+)%/(\d+)% of (\d+)|-"
    cells = re.search(rf"(?:safe|unsafe|none)\s+({share})\s+({share})\s", line)
    assert cells is not None, line
    library = precision_of("TPL101", LIBRARY)
    assert library is not None and library.labelled
    right, false, labelled = (int(cells.group(i)) for i in (6, 7, 8))
    assert labelled == library.labelled
    assert (right, false) == (round(100 * library.good_share), round(100 * library.false_share))


def test_list_rules_as_json(capsys, monkeypatch) -> None:
    probes.install(monkeypatch)
    code, out, _ = run(capsys, "--list-rules", "--format", "json")
    assert code == 0
    rows = {row["code"]: row for row in json.loads(out)}
    assert set(rows) == {rule.code for rule in ALL_RULES} | {"TPL198", "TPL199"}
    unfused = next(rule for rule in ALL_RULES if rule.code == "TPL702")
    assert rows["TPL702"] == {
        "code": "TPL702",
        "name": "unfused-optimizer",
        "default_on": unfused.default_on,
        "fix": "unsafe",
        "summary": rows["TPL702"]["summary"],
        "precision": rows["TPL702"]["precision"],
    }
    assert set(rows["TPL702"]["precision"]) == {"training", "library"}
    assert set(rows["TPL702"]["precision"]["library"]) == {
        "findings",
        "labelled",
        "true",
        "small",
        "debatable",
        "false",
    }
    assert rows["TPL199"]["default_on"] is False and rows["TPL199"]["fix"] == "none"


def test_version_prints_the_package_version(capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"torchperf-lint {__version__}"


# -- stdin and output file ------------------------------------------------------------------


def feed_stdin(monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))


def test_stdin_is_reported_under_the_stdin_filename(tmp_path: Path, capsys, monkeypatch) -> None:
    feed_stdin(monkeypatch, HOT)
    shown = tmp_path / "pkg" / "loss.py"
    code, out, _ = run(capsys, *SELECT, "--stdin-filename", shown, "-")
    assert code == 1
    line, col = position(HOT, b"torch.zeros")
    assert f"{shown}:{line}:{col}: TPL101 " in out
    assert not shown.exists()


def test_stdin_finds_the_config_of_the_stdin_filename(tmp_path: Path, capsys, monkeypatch) -> None:
    write(tmp_path / "pkg" / "pyproject.toml", b'[tool.torchperf-lint]\nselect = ["TPL103"]\n')
    feed_stdin(monkeypatch, HOT)
    _, out, _ = run(capsys, "--stdin-filename", tmp_path / "pkg" / "loss.py", "--format", "json", "-")
    assert {f["code"] for f in json.loads(out)} == {"TPL103"}


def test_stdin_fix_prints_the_fixed_source_and_reports_on_stderr(tmp_path: Path, capsys, monkeypatch) -> None:
    feed_stdin(monkeypatch, HOT)
    code = main(["--select", "TPL101", "--fix", "--stdin-filename", str(tmp_path / "loss.py"), "-"])
    captured = capsys.readouterr()
    assert code == 0
    assert captured.out == HOT.decode().replace("torch.zeros(3).cuda()", 'torch.zeros(3, device="cuda")')


def test_output_file_receives_the_report(tmp_path: Path, capsys) -> None:
    path = write(tmp_path / "loss.py", HOT)
    report = tmp_path / "report.json"
    code, out, _ = run(capsys, *SELECT, "--format", "json", "--output-file", report, path)
    assert (code, out) == (1, "")
    assert {f["code"] for f in json.loads(report.read_text())} == {"TPL101", "TPL103"}


# -- paths ----------------------------------------------------------------------------------


def test_a_nonexistent_path_is_a_usage_error_naming_it(tmp_path: Path, capsys) -> None:
    hot = write(tmp_path / "hot.py", HOT)
    missing = tmp_path / "missing.py"
    code, out, err = run(capsys, hot, missing)
    assert (code, out) == (2, "")
    assert err == f"torchperf-lint: error: path not found: {missing}\n"


def make_tree(root: Path) -> None:
    for name in (
        "a.py",
        "pkg/b.py",
        "pkg/deep/c.py",
        ".git/hooks/x.py",
        "__pycache__/y.py",
        ".venv/lib/z.py",
        "venv/lib/z.py",
        "my-env/lib/site.py",  # a virtualenv whatever its name: it holds pyvenv.cfg
        "conda/lib/site.py",  # a conda environment: it holds conda-meta/
        "build/gen.py",
        "env/agent.py",  # an ordinary package that happens to be called env
        "examples/skip_me.py",
    ):
        write(root / name, HOT)
    write(root / "my-env" / "pyvenv.cfg", b"home = /usr/bin\n")
    (root / "conda" / "conda-meta").mkdir()
    write(root / "pkg" / "notes.txt", HOT)
    write(root / "pkg" / "script.pyi", HOT)


def linted(out: str, root: Path) -> set[str]:
    return {Path(f["path"]).relative_to(root).as_posix() for f in json.loads(out)}


def test_directories_recurse_into_py_files_and_skip_vcs_virtualenvs_and_caches(
    tmp_path: Path, capsys
) -> None:
    make_tree(tmp_path)
    _, out, _ = run(capsys, *SELECT, "--format", "json", tmp_path)
    assert linted(out, tmp_path) == {
        "a.py",
        "pkg/b.py",
        "pkg/deep/c.py",
        "env/agent.py",
        "examples/skip_me.py",
    }


def test_extend_exclude_adds_to_the_default_excludes(tmp_path: Path, capsys) -> None:
    make_tree(tmp_path)
    _, out, _ = run(capsys, *SELECT, "--format", "json", "--extend-exclude", "examples,deep", tmp_path)
    assert linted(out, tmp_path) == {"a.py", "pkg/b.py", "env/agent.py"}


def test_exclude_replaces_the_default_excludes(tmp_path: Path, capsys) -> None:
    make_tree(tmp_path)
    _, out, _ = run(capsys, *SELECT, "--format", "json", "--exclude", "pkg/,*.pyc", tmp_path)
    found = linted(out, tmp_path)
    assert "pkg/b.py" not in found and "pkg/deep/c.py" not in found
    assert {"build/gen.py", "__pycache__/y.py", ".git/hooks/x.py"} <= found
    assert "my-env/lib/site.py" not in found  # environments are recognised, not excluded by name


def test_exclude_takes_globs_on_file_names_and_paths(tmp_path: Path, capsys) -> None:
    make_tree(tmp_path)
    _, out, _ = run(capsys, *SELECT, "--format", "json", "--extend-exclude", "b.py,*/deep/*", tmp_path)
    assert linted(out, tmp_path) == {"a.py", "env/agent.py", "examples/skip_me.py"}


def test_show_files_lists_what_a_run_would_check_and_checks_nothing(tmp_path: Path, capsys) -> None:
    make_tree(tmp_path)
    broken = write(tmp_path / "pkg" / "broken.py", BROKEN)
    code, out, _ = run(capsys, "--show-files", "--extend-exclude", "examples", tmp_path)
    assert code == 0
    assert out.splitlines() == [
        str(tmp_path / name)
        for name in ("a.py", "env/agent.py", "pkg/b.py", "pkg/broken.py", "pkg/deep/c.py")
    ]
    code, out, _ = run(capsys, "--show-files", "--format", "json", tmp_path / "pkg", broken)
    assert code == 0  # nothing was checked: the broken file is only listed (once)
    assert json.loads(out) == [str(tmp_path / "pkg" / name) for name in ("b.py", "broken.py", "deep/c.py")]


def test_a_run_that_finds_no_python_file_says_so_on_stderr(tmp_path: Path, capsys) -> None:
    write(tmp_path / "docs" / "notes.txt", HOT)
    code, out, err = run(capsys, tmp_path)
    assert (code, out) == (0, "")
    assert err == "torchperf-lint: warning: no Python files or notebooks found under the given paths\n"
    write(tmp_path / "a.py", CLEAN)
    assert run(capsys, tmp_path) == (0, "", "")


def test_an_explicit_file_is_linted_even_if_excluded_or_not_named_py(tmp_path: Path, capsys) -> None:
    script = write(tmp_path / "build" / "train_script", HOT)
    code, out, _ = run(capsys, *SELECT, script)
    assert code == 1 and len(finding_lines(out)) == 2


def test_a_file_named_twice_is_reported_once(tmp_path: Path, capsys) -> None:
    hot = write(tmp_path / "hot.py", HOT)
    _, out, _ = run(capsys, *SELECT, "--format", "json", hot, tmp_path, hot)
    assert len(json.loads(out)) == 2


def test_python_dash_m_runs_the_cli(tmp_path: Path) -> None:
    hot = write(tmp_path / "hot.py", HOT)
    result = subprocess.run(
        [sys.executable, "-m", "torchperf_lint", *SELECT, "--library", str(hot)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
        check=False,
    )
    assert result.returncode == 1, result.stderr
    assert len(finding_lines(result.stdout)) == 2


def test_a_file_name_the_terminal_cannot_encode_is_escaped_not_a_crash(tmp_path: Path, monkeypatch) -> None:
    odd = os.fsdecode(bytes(tmp_path) + b"/\xff_model.py")  # undecodable bytes come back as surrogates
    write(Path(odd), HOT)
    stdout = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict")
    monkeypatch.setattr(sys, "stdout", stdout)
    assert main([*SELECT, str(tmp_path)]) == 1
    stdout.flush()
    out = stdout.buffer.getvalue().decode("utf-8")
    assert out.count("\\udcff_model.py:") == 2


# -- a reader that stops early ----------------------------------------------------------------


@pytest.mark.parametrize(
    "args, stdin, status",
    [
        (("--list-rules",), b"", 141),
        (("--explain", "TPL101"), b"", 141),
        (("--help",), b"", 0),  # argparse drops a failed write of its help itself and exits 0
        (("--version",), b"", 0),
        (("{hot}",), b"", 141),
        (("--format", "json", "--statistics", "{hot}"), b"", 141),
        (("--format", "sarif", "{hot}"), b"", 141),
        (("--diff", "{hot}"), b"", 141),
        (("--fix", "--stdin-filename", "loss.py", "-"), HOT, 141),
    ],
    ids=["list-rules", "explain", "help", "version", "findings", "statistics", "sarif", "diff", "stdin-fix"],
)
def test_a_closed_stdout_ends_the_run_quietly(
    tmp_path: Path, args: tuple[str, ...], stdin: bytes, status: int
) -> None:
    hot = write(tmp_path / "hot.py", HOT)
    write(tmp_path / "pyproject.toml", b'[tool.torchperf-lint]\nextend-select = ["TPL101", "TPL103"]\n')
    read_end, write_end = os.pipe()
    os.close(read_end)  # closed before the command writes a byte: every write to stdout fails
    try:
        result = subprocess.run(
            [sys.executable, "-m", "torchperf_lint", *(a.format(hot=hot) for a in args)],
            input=stdin,
            stdout=write_end,
            stderr=subprocess.PIPE,
            cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
            check=False,
            timeout=120,
        )
    finally:
        os.close(write_end)
    assert result.stderr == b""
    assert result.returncode == status  # 141: what a shell reports for a tool ended by SIGPIPE

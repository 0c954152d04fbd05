"""Bad input (issue 9): every file that cannot be checked gets one line
`path[:line:col]: TPL000 <what is wrong>`, the run goes on with the other files, the exit code is 2,
and no file is ever modified, `--fix` included. A bug in a rule or in the engine is reported the
same way, under the CLI and under flake8."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from torchperf_lint import cli, command
from torchperf_lint.config import Settings
from torchperf_lint.engine import errors, fixer, runner
from torchperf_lint.engine.errors import REPORT_IT
from torchperf_lint.engine.runner import EXCLUDE_HINT, lint_bytes
from torchperf_lint.flake8_plugin import TorchPerfPlugin
from torchperf_lint.rules import select_rules
from torchperf_lint.rules.transfer.tpl101_cpu_factory_in_hot_path import CpuFactoryInHotPath

SELECT = ("--select", "TPL101,TPL103")

# The good file every run also holds: one safely fixable TPL101, fixed by --fix.
GOOD = b"""\
import torch
import torch.nn as nn


class Net(nn.Module):
    def forward(self, x):
        return x + torch.zeros(3).cuda()
"""
GOOD_FIXED = GOOD.replace(b"torch.zeros(3).cuda()", b'torch.zeros(3, device="cuda")')
GOOD_LINE = "7:20: TPL101 [*] torch.zeros() creates its tensor on the CPU"


def write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def run(capsys, *args: object) -> tuple[int, list[str]]:
    code = cli.main([str(a) for a in args])
    return code, capsys.readouterr().out.splitlines()


def tpl000(lines: list[str]) -> list[str]:
    return [line for line in lines if " TPL000 " in line]


BAD_FILES = {
    "syntax-error": (
        b"import torch\n\ndef f(x:\n    return x\n",
        f"3:6: TPL000 could not parse: '(' was never closed{EXCLUDE_HINT}",
    ),
    "python-2-print": (
        b'import torch\nprint "tensor"\n',
        f"2:1: TPL000 could not parse: Missing parentheses in call to 'print'. Did you mean print(...)?{EXCLUDE_HINT}",
    ),
    "python-2-octal": (
        b"import torch\nmode = 0755\n",
        (
            "2:8: TPL000 could not parse: leading zeros in decimal integer literals are not permitted; "
            f"use an 0o prefix for octal integers{EXCLUDE_HINT}"
        ),
    ),
    "python-2-raise": (
        b"import torch\nraise ValueError, 'x'\n",
        f"2:17: TPL000 could not parse: invalid syntax{EXCLUDE_HINT}",
    ),
    "unknown-encoding": (
        b"# -*- coding: klingon -*-\nimport torch\n",
        "1:1: TPL000 could not decode: unknown encoding 'klingon' declared",
    ),
    "mismatched-encoding": (
        b"# coding: ascii\nimport torch\nname = 'caf\xc3\xa9'\n",
        "3:12: TPL000 could not decode: byte 0xc3 is not valid in the declared encoding 'ascii'",
    ),
    "bom-against-declaration": (
        b"\xef\xbb\xbf# coding: latin-1\nimport torch\n",
        "1:1: TPL000 could not decode: a UTF-8 byte order mark and a 'latin-1' declaration disagree",
    ),
    "undecodable-bytes": (
        b"import torch\nx = torch.zeros(3)\ny = '\xff\xfe'\n",
        "3:6: TPL000 could not decode: byte 0xff is not valid in utf-8 (no encoding declared)",
    ),
    "nul-byte": (
        b"import torch\nx = 1\x00\n",
        f"2:6: TPL000 could not parse: contains a NUL byte (a binary file?){EXCLUDE_HINT}",
    ),
    "binary-file": (
        b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR torch \xff\xd8",
        f"3:1: TPL000 could not parse: contains a NUL byte (a binary file?){EXCLUDE_HINT}",
    ),
}


@pytest.mark.parametrize("fix", [False, True], ids=["lint", "fix"])
@pytest.mark.parametrize("label", list(BAD_FILES))
def test_a_file_that_cannot_be_checked_gets_one_line_and_the_run_goes_on(
    tmp_path: Path, capsys, label: str, fix: bool
) -> None:
    data, expected = BAD_FILES[label]
    bad = write(tmp_path / "a_bad.py", data)
    good = write(tmp_path / "b_good.py", GOOD)
    code, lines = run(capsys, *SELECT, *(["--fix"] if fix else []), bad, good)
    assert code == 2
    assert tpl000(lines) == [f"{bad}:{expected}"]
    assert bad.read_bytes() == data
    if fix:
        assert good.read_bytes() == GOOD_FIXED
    else:
        assert any(line.startswith(f"{good}:{GOOD_LINE}") for line in lines)


@pytest.mark.parametrize(
    "data, expected",
    [
        (
            b"\x7fELF\x02\x01\x01\x00\x00\x00\xff\xfe",
            f"1:8: TPL000 could not parse: contains a NUL byte (a binary file?){EXCLUDE_HINT}",
        ),
        (
            b"x = 1\nname = 'caf\xe9'\n",
            "2:12: TPL000 could not decode: byte 0xe9 is not valid in utf-8 (no encoding declared)",
        ),
        (
            b"# -*- coding: klingon -*-\nx = 1\n",
            "1:1: TPL000 could not decode: unknown encoding 'klingon' declared",
        ),
    ],
    ids=["binary", "latin-1-bytes-without-declaration", "unknown-encoding"],
)
def test_a_file_that_is_not_text_is_named_even_when_it_never_mentions_torch(
    tmp_path: Path, capsys, data: bytes, expected: str
) -> None:
    # The torch prefilter skips the parse, not the check that the file is text: a NUL byte or an
    # undecodable byte costs nothing to find, and a file that cannot be read must never pass.
    path = write(tmp_path / "blob.py", data)
    for args in ((), ("--fix",), ("--lint-all-files", "--fix")):
        code, lines = run(capsys, *args, path)
        assert code == 2
        assert lines == [f"{path}:{expected}", "1 file could not be checked."]
        assert path.read_bytes() == data


def test_a_text_file_that_never_mentions_torch_is_not_parsed(tmp_path: Path, capsys, monkeypatch) -> None:
    def no_parse(*args: object) -> None:
        raise AssertionError("parsed a file that never mentions torch")

    monkeypatch.setattr(runner, "parse", no_parse)
    path = write(tmp_path / "plain.py", "def f(:\n    return 'caf\u00e9'\n".encode())
    assert run(capsys, path) == (0, [])
    latin = write(tmp_path / "latin.py", b"# -*- coding: latin-1 -*-\nname = 'caf\xe9'\n")
    assert run(capsys, latin) == (0, [])


@pytest.mark.parametrize(
    "data",
    [b"", b"# torch training helpers\n# nothing here yet\n", b"\n\n", b"\xef\xbb\xbf"],
    ids=["empty", "only-comments", "blank-lines", "only-bom"],
)
def test_empty_and_comment_only_files_are_fine(tmp_path: Path, capsys, data: bytes) -> None:
    path = write(tmp_path / "empty.py", data)
    assert run(capsys, "--lint-all-files", path) == (0, [])
    assert run(capsys, "--lint-all-files", "--fix", path) == (0, [])
    assert path.read_bytes() == data


def test_a_directory_that_cannot_be_read_is_reported_and_the_rest_is_checked(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    locked = tmp_path / "locked"
    write(locked / "hidden.py", GOOD)
    good = write(tmp_path / "good.py", GOOD)
    real_scandir = os.scandir

    def scandir(path=None):  # we run as root, where chmod 000 does not stop a read
        if Path(path) == locked:
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    code, lines = run(capsys, *SELECT, tmp_path)
    assert code == 2
    assert tpl000(lines) == [f"{locked}:1:1: TPL000 could not read directory: Permission denied"]
    assert any(line.startswith(f"{good}:{GOOD_LINE}") for line in lines)


def test_a_symlink_loop_is_reported_and_a_directory_loop_is_not_followed(tmp_path: Path, capsys) -> None:
    loop = tmp_path / "loop.py"
    os.symlink("loop.py", loop)
    good = write(tmp_path / "pkg" / "good.py", GOOD)
    os.symlink("..", tmp_path / "pkg" / "up")  # a directory loop: pkg/up/pkg/up/...
    code, lines = run(capsys, *SELECT, tmp_path)
    assert code == 2
    assert tpl000(lines) == [f"{loop}:1:1: TPL000 could not read: Too many levels of symbolic links"]
    assert [line.split(" TPL101 ")[0] for line in lines if " TPL101 " in line] == [f"{good}:7:20:"]
    code, lines = run(capsys, *SELECT, loop)  # named explicitly
    assert (code, lines) == (
        2,
        [
            f"{loop}:1:1: TPL000 could not read: Too many levels of symbolic links",
            "1 file could not be checked.",
        ],
    )


def test_a_file_that_vanishes_between_listing_and_reading_is_reported(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    vanishing = write(tmp_path / "a_vanishing.py", GOOD)
    good = write(tmp_path / "b_good.py", GOOD)
    real_discover = command.discover

    def discover(*args, **kwargs):
        for path in real_discover(*args, **kwargs):
            if path == str(vanishing):
                vanishing.unlink()  # listed, then gone before it is read
            yield path

    monkeypatch.setattr(command, "discover", discover)
    code, lines = run(capsys, *SELECT, "--fix", tmp_path)
    assert code == 2
    assert tpl000(lines) == [f"{vanishing}:1:1: TPL000 could not read: No such file or directory"]
    assert not vanishing.exists()
    assert good.read_bytes() == GOOD_FIXED


def test_a_fifo_named_py_is_reported_instead_of_blocking_the_run(tmp_path: Path, capsys) -> None:
    fifo = tmp_path / "a_pipe.py"
    os.mkfifo(fifo)
    write(tmp_path / "b_good.py", GOOD)
    code, lines = run(capsys, *SELECT, tmp_path)
    assert code == 2
    assert tpl000(lines) == [f"{fifo}:1:1: TPL000 could not read: not a regular file"]


def test_a_50000_line_file_is_checked(tmp_path: Path, capsys) -> None:
    filler = b"".join(b"# padding line %d: a long file of comments and code\n" % n for n in range(49_987))
    code_lines = b"x = torch.ones(2) * 3\n" * 8
    data = b"import torch\nimport torch.nn as nn\n" + filler + code_lines + GOOD[GOOD.index(b"class") :]
    assert data.count(b"\n") == 50_000
    path = write(tmp_path / "long.py", data)
    code, lines = run(capsys, *SELECT, path)
    assert code == 1
    assert lines[0].startswith(f"{path}:50000:20: TPL101 ")


def nested(depth: int) -> bytes:
    """A forward whose return value is an expression nested `depth` levels deep."""
    expression = "-" * depth + "x"
    return GOOD.replace(b"return x + torch", b"return (" + expression.encode() + b") + torch")


def test_an_expression_nested_1000_levels_deep_is_checked_and_fixed(tmp_path: Path, capsys) -> None:
    data = nested(1000)
    path = write(tmp_path / "deep.py", data)
    code, lines = run(capsys, *SELECT, path)
    assert code == 1
    assert lines[0].startswith(f"{path}:7:") and " TPL101 " in lines[0]
    assert run(capsys, *SELECT, "--fix", path)[0] == 0
    assert path.read_bytes() == data.replace(b"torch.zeros(3).cuda()", b'torch.zeros(3, device="cuda")')


def test_nesting_beyond_the_recursion_limit_is_a_tpl000_line_not_a_traceback(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    monkeypatch.setattr(errors, "RECURSION_LIMIT", 1500)
    data = nested(1000)
    path = write(tmp_path / "a_deep.py", data)
    good = write(tmp_path / "b_good.py", GOOD)
    for fix in ([], ["--fix"]):
        code, lines = run(capsys, *SELECT, *fix, path, good)
        assert code == 2
        assert tpl000(lines) == [f"{path}:1:1: TPL000 could not analyse: nesting too deep"]
        assert path.read_bytes() == data
    assert good.read_bytes() == GOOD_FIXED


def test_read_only_and_broken_files_under_fix_are_reported_and_left_alone(tmp_path: Path, capsys) -> None:
    read_only = write(tmp_path / "a_read_only.py", GOOD)
    read_only.chmod(0o444)
    broken_data = b"import torch\nprint 'x'\n"
    broken = write(tmp_path / "b_broken.py", broken_data)
    good = write(tmp_path / "c_good.py", GOOD)
    code, lines = run(capsys, *SELECT, "--fix", tmp_path)
    assert code == 2
    assert tpl000(lines) == [
        f"{read_only}:1:1: TPL000 file is read-only; not written",
        f"{broken}:2:1: TPL000 could not parse: Missing parentheses in call to 'print'. Did you mean print(...)?{EXCLUDE_HINT}",
    ]
    assert read_only.read_bytes() == GOOD and broken.read_bytes() == broken_data
    assert good.read_bytes() == GOOD_FIXED


# -- internal errors ----------------------------------------------------------------------------

BOTH = b"""\
import torch  # noqa
import torch.nn as nn


def nll(pred, target):
    return pred[range(target.shape[0]), target]


class Loss(nn.Module):
    def forward(self, pred, target):
        return nll(pred, target) + torch.zeros(3).cuda()
"""


def broken_check(self, node, ctx):
    raise ValueError("boom\nsecond line")


INTERNAL = (
    f"1:1: TPL000 internal error in TPL101 (ValueError: boom); {REPORT_IT} "
    "(the rule: `torchperf-lint --explain TPL101`)"
)


def test_a_rule_that_raises_is_reported_once_and_the_other_findings_stand(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    monkeypatch.setattr(CpuFactoryInHotPath, "check", broken_check)
    path = write(tmp_path / "a_loss.py", BOTH)
    other = write(tmp_path / "b_other.py", BOTH)
    code, lines = run(capsys, *SELECT, path, other)
    assert code == 2
    # once per file, even though the rule raised on every call it saw; the noqa on line 1 and
    # selection do not hide it
    assert tpl000(lines) == [f"{path}:{INTERNAL}", f"{other}:{INTERNAL}"]
    assert any(line.startswith(f"{path}:6:12: TPL103 ") for line in lines)
    assert any(line.startswith(f"{other}:6:12: TPL103 ") for line in lines)


def test_a_rule_that_raises_under_fix_leaves_the_file_alone(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setattr(CpuFactoryInHotPath, "check", broken_check)
    path = write(tmp_path / "loss.py", BOTH)
    code, lines = run(capsys, *SELECT, "--fix", path)
    assert code == 2 and tpl000(lines) == [f"{path}:{INTERNAL}"]
    assert path.read_bytes() == BOTH


def test_an_engine_failure_costs_one_file_not_the_run(tmp_path: Path, capsys, monkeypatch) -> None:
    real_walk = runner.walk

    def walk(module, interest):
        if "a_victim" in module.code:
            raise KeyError("lost node")
        return real_walk(module, interest)

    monkeypatch.setattr(runner, "walk", walk)
    victim = write(tmp_path / "a.py", GOOD + b"a_victim = 1\n")
    good = write(tmp_path / "b.py", GOOD)
    code, lines = run(capsys, *SELECT, victim, good)
    assert code == 2
    assert tpl000(lines) == [
        f"{victim}:1:1: TPL000 internal error in the engine (KeyError: 'lost node'); {REPORT_IT}"
    ]
    assert any(line.startswith(f"{good}:{GOOD_LINE}") for line in lines)


def test_a_fixer_failure_leaves_the_file_and_the_run_goes_on(tmp_path: Path, capsys, monkeypatch) -> None:
    real_fix = fixer.fix_bytes

    def fix_bytes(data, path, *args, **kwargs):
        if path.endswith("a.py"):
            raise RuntimeError("transform failed")
        return real_fix(data, path, *args, **kwargs)

    monkeypatch.setattr(fixer, "fix_bytes", fix_bytes)
    first = write(tmp_path / "a.py", GOOD)
    second = write(tmp_path / "b.py", GOOD)
    code, lines = run(capsys, *SELECT, "--fix", first, second)
    assert code == 2
    assert tpl000(lines) == [
        (
            f"{first}:1:1: TPL000 internal error in torchperf-lint (RuntimeError: transform failed); "
            f"{REPORT_IT}"
        )
    ]
    assert first.read_bytes() == GOOD and second.read_bytes() == GOOD_FIXED


def test_lint_bytes_never_raises_even_on_a_rust_panic(monkeypatch) -> None:
    class PanicException(BaseException):  # what pyo3 raises when libcst's native parser panics
        pass

    def parse_module(data):
        raise PanicException("index out of bounds")

    monkeypatch.setattr(runner.cst, "parse_module", parse_module)
    result = lint_bytes(GOOD, "m.py", select_rules(None, ()), Settings())
    assert [(f.code, f.message.split(";")[0]) for f in result.findings] == [
        ("TPL000", "internal error in the engine (PanicException: index out of bounds)")
    ]


# -- the same under flake8 ----------------------------------------------------------------------


def plugin_results(source: bytes, filename: str = "loss.py") -> list[tuple[int, int, str]]:
    lines = source.decode().splitlines(keepends=True)
    plugin = TorchPerfPlugin(None, filename, lines)
    return [(line, col, text) for line, col, text, kind in plugin.run() if kind is TorchPerfPlugin]


@pytest.mark.usefixtures("hot_rules_on")
def test_flake8_plugin_reports_a_rule_exception_and_goes_on(monkeypatch) -> None:
    monkeypatch.setattr(CpuFactoryInHotPath, "check", broken_check)
    results = plugin_results(BOTH)
    assert (0 + 1, 0, f"TPL000 {INTERNAL.split(' TPL000 ')[1]}") in results
    assert any(line == 6 and col == 11 and text.startswith("TPL103 ") for line, col, text in results)
    assert sum(text.startswith("TPL000") for _, _, text in results) == 1


def test_flake8_plugin_survives_an_engine_failure(monkeypatch) -> None:
    def lint_bytes(*args, **kwargs):
        raise MemoryError("out of memory")

    monkeypatch.setattr("torchperf_lint.flake8_plugin.lint_bytes", lint_bytes)
    assert plugin_results(GOOD) == [
        (1, 0, f"TPL000 internal error in the flake8 plugin (MemoryError: out of memory); {REPORT_IT}")
    ]


@pytest.mark.usefixtures("hot_rules_on")
def test_flake8_plugin_reports_nesting_too_deep_for_the_analysis(monkeypatch) -> None:
    monkeypatch.setattr(errors, "RECURSION_LIMIT", 1500)
    results = plugin_results(nested(1000))
    assert results == [(1, 0, "TPL000 could not analyse: nesting too deep")]


@pytest.mark.usefixtures("hot_rules_on")
def test_flake8_plugin_handles_deep_nesting(monkeypatch) -> None:
    results = plugin_results(nested(1000))
    assert [(line, text.split()[0]) for line, _, text in results] == [(7, "TPL101")]

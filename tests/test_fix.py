"""The guarantees of `--fix` / `--diff`: fixed code parses, fixing is idempotent, every byte no
fix touched is kept, files are written atomically with their mode, and nothing is written that
should not be (unparsable or read-only files, failed writes)."""

from __future__ import annotations

import io
import os
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import libcst as cst
import pytest

from torchperf_lint import writer
from torchperf_lint.cli import main
from torchperf_lint.config import Settings
from torchperf_lint.engine import fixer
from torchperf_lint.engine.fixer import fix_bytes
from torchperf_lint.rules import select_rules

SELECT = ["--select", "TPL101,TPL103"]

# TPL101 with a safe fix: `torch.zeros(n).cuda()` -> `torch.zeros(n, device="cuda")`
SAFE = b"""import torch
from torch import nn


class Net(nn.Module):
    def forward(self, x, n):
        noise = torch.zeros(n).cuda()
        return x + noise
"""
SAFE_FIXED = SAFE.replace(b"torch.zeros(n).cuda()", b'torch.zeros(n, device="cuda")')

# TPL103 with an unsafe fix: `pred` is a parameter, only assumed to be a tensor
UNSAFE = b"""import torch
from torch import nn


class Loss(nn.Module):
    def forward(self, pred, t, n):
        return pred[range(n), t].mean()
"""
UNSAFE_FIXED = UNSAFE.replace(b"range(n)", b"torch.arange(n, device=pred.device)")


def cli(*args: object) -> int:
    return main([*SELECT, *map(str, args)])


def write(path: Path, data: bytes, mode: int | None = None) -> Path:
    path.write_bytes(data)
    if mode is not None:
        path.chmod(mode)
    return path


def parses(data: bytes) -> bool:
    try:
        cst.parse_module(data)
        compile(data, "<fixed>", "exec")
    except (cst.ParserSyntaxError, SyntaxError):
        return False
    return True


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith(writer.TEMP_PREFIX))


# -- fixed code parses; fixing twice changes nothing ------------------------------------------


def test_fixed_code_parses_and_a_second_fix_changes_nothing(tmp_path: Path, capsys) -> None:
    path = write(tmp_path / "net.py", SAFE + UNSAFE.split(b"\n\n\n", 1)[1])
    assert cli("--fix", "--unsafe-fixes", path) == 0
    first = path.read_bytes()
    assert parses(first)
    assert b'torch.zeros(n, device="cuda")' in first
    assert b"torch.arange(n, device=pred.device)" in first
    assert capsys.readouterr().err == "Fixed 2 findings in 1 file; no findings remain.\n"

    assert cli("--fix", "--unsafe-fixes", path) == 0
    assert path.read_bytes() == first
    captured = capsys.readouterr()
    assert captured.err == "Fixed 0 findings; no findings remain.\n"
    assert captured.out == ""


# -- bytes outside the fixed ranges are kept ---------------------------------------------------

_TEXT = (
    "import torch   \n"  # trailing whitespace
    "from torch import nn  # a comment\n"
    "\n"
    "\n"
    "class Net(nn.Module):\n"
    "\tdef forward(self, x, n):\t\n"  # tabs, trailing tab
    "\t\t# keep this comment   \n"
    "\t\tnoise = torch.zeros(n).cuda()  # after the fix too\t\n"
    "\t\treturn x + noise  \n"
)


def _variants() -> dict[str, bytes]:
    latin = "# -*- coding: latin-1 -*-\n" + _TEXT.replace("# a comment", "# caf\xe9 \xa9 \xb5")
    return {
        "lf-tabs-comments-trailing-space": _TEXT.encode(),
        "crlf": _TEXT.replace("\n", "\r\n").encode(),
        "utf8-bom": b"\xef\xbb\xbf" + _TEXT.replace("# a comment", "# na\u00efve \u2713").encode(),
        "latin-1-coding-cookie": latin.encode("latin-1"),
        "no-final-newline": _TEXT.rstrip("\n").encode(),
        "mixed-newlines": _TEXT.replace("\n", "\r\n", 3).encode(),
    }


@pytest.mark.parametrize("label", sorted(_variants()))
def test_fix_keeps_every_byte_outside_the_fixed_range(tmp_path: Path, capsys, label: str) -> None:
    original = _variants()[label]
    expected = original.replace(b"torch.zeros(n).cuda()", b'torch.zeros(n, device="cuda")')
    assert expected != original
    path = write(tmp_path / "net.py", original)
    assert cli("--fix", path) == 0
    assert path.read_bytes() == expected


def test_added_import_uses_the_files_newline_style(tmp_path: Path, capsys) -> None:
    original = UNSAFE.replace(b"import torch\n", b"").replace(b"\n", b"\r\n")
    path = write(tmp_path / "loss.py", original)
    assert cli("--fix", "--unsafe-fixes", path) == 0
    assert path.read_bytes() == b"import torch\r\n" + original.replace(
        b"range(n)", b"torch.arange(n, device=pred.device)"
    )


# -- atomic writes, mode bits ------------------------------------------------------------------


def test_fix_writes_through_a_temp_file_in_the_same_directory(tmp_path: Path, monkeypatch, capsys) -> None:
    path = write(tmp_path / "net.py", SAFE)
    calls: list[tuple[str, str]] = []
    real_replace = os.replace

    def spy(src, dst, *args, **kwargs):
        calls.append((os.fspath(src), os.fspath(dst)))
        assert Path(src).read_bytes() == SAFE_FIXED  # complete before it takes the file's place
        assert path.read_bytes() == SAFE
        return real_replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", spy)
    assert cli("--fix", path) == 0
    assert len(calls) == 1
    src, dst = calls[0]
    assert os.path.dirname(src) == str(tmp_path)
    assert Path(dst).resolve() == path.resolve()
    assert path.read_bytes() == SAFE_FIXED
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("mode", [0o644, 0o755, 0o600, 0o664])
def test_fix_keeps_the_files_mode_bits(tmp_path: Path, capsys, mode: int) -> None:
    path = write(tmp_path / "net.py", SAFE, mode)
    assert cli("--fix", path) == 0
    assert path.read_bytes() == SAFE_FIXED
    assert stat.S_IMODE(path.stat().st_mode) == mode


def test_fix_through_a_symlink_keeps_the_link(tmp_path: Path, capsys) -> None:
    target = write(tmp_path / "real.py", SAFE, 0o640)
    link = tmp_path / "link.py"
    link.symlink_to(target.name)
    assert cli("--fix", link) == 0
    assert link.is_symlink()
    assert target.read_bytes() == SAFE_FIXED
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert leftovers(tmp_path) == []


# -- nothing written that should not be --------------------------------------------------------


def test_a_file_that_does_not_parse_is_never_written(tmp_path: Path, monkeypatch, capsys) -> None:
    broken = SAFE + b"    def broken(self:\n"
    path = write(tmp_path / "broken.py", broken)
    monkeypatch.setattr(os, "replace", lambda *a, **k: pytest.fail("os.replace called"))
    assert cli("--fix", "--unsafe-fixes", path) == 2
    assert path.read_bytes() == broken
    out = capsys.readouterr().out
    assert f"{path}:9:" in out and "TPL000" in out and "could not parse" in out
    assert leftovers(tmp_path) == []


def test_a_read_only_file_is_reported_not_written_and_the_run_goes_on(tmp_path: Path, capsys) -> None:
    read_only = write(tmp_path / "a_read_only.py", SAFE, 0o444)
    other = write(tmp_path / "b_other.py", SAFE)
    assert cli("--fix", read_only, other) == 2
    out = capsys.readouterr().out
    error = [line for line in out.splitlines() if "TPL000" in line]
    assert len(error) == 1
    assert error[0].startswith(f"{read_only}:1:1: TPL000 ") and "read-only" in error[0]
    # its findings still stand, with their fix mark: nothing was fixed
    assert any(line.startswith(f"{read_only}:7:") and "TPL101 [*]" in line for line in out.splitlines())
    assert read_only.read_bytes() == SAFE
    assert stat.S_IMODE(read_only.stat().st_mode) == 0o444
    assert other.read_bytes() == SAFE_FIXED
    assert str(other) not in out
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize(
    "target, error",
    [
        ("os.replace", PermissionError(13, "Permission denied")),
        ("os.replace", OSError(28, "No space left on device")),
        ("tempfile.mkstemp", PermissionError(13, "Permission denied")),
        ("os.fsync", OSError(5, "Input/output error")),
    ],
)
def test_a_failed_write_leaves_the_file_and_no_temp_file(
    tmp_path: Path, monkeypatch, capsys, target: str, error: OSError
) -> None:
    first = write(tmp_path / "a_first.py", SAFE, 0o640)
    second = write(tmp_path / "b_second.py", SAFE)
    module, name = target.split(".")
    real = getattr({"os": os, "tempfile": tempfile}[module], name)
    failed: list[str] = []

    def failing(*args, **kwargs):
        if not failed:  # only the first file's write fails
            failed.append(target)
            raise error
        return real(*args, **kwargs)

    monkeypatch.setattr(f"{target}", failing)
    # one process: the injected failure counts calls, and each worker would count its own
    assert cli("--fix", "--jobs", "1", first, second) == 2
    out = capsys.readouterr().out
    errors = [line for line in out.splitlines() if "TPL000" in line]
    assert errors == [f"{first}:1:1: TPL000 could not write: {error.strerror}; file left unchanged"]
    assert any(line.startswith(f"{first}:7:") and "TPL101" in line for line in out.splitlines())
    assert first.read_bytes() == SAFE
    assert stat.S_IMODE(first.stat().st_mode) == 0o640
    assert second.read_bytes() == SAFE_FIXED
    assert leftovers(tmp_path) == []


def test_writer_refuses_a_read_only_file_even_as_root(tmp_path: Path) -> None:
    path = write(tmp_path / "x.py", b"old\n", 0o444)
    with pytest.raises(writer.NotWritable, match="read-only"):
        writer.write_atomic(str(path), b"new\n")
    assert path.read_bytes() == b"old\n"


# -- removing a statement keeps the layout around it ------------------------------------------

FUNCTION = "import torch\n\n\ndef main():\n"


@pytest.mark.parametrize(
    "source, expected",
    [
        (
            # isort wants the blank line after the imports; it must not go with the statement
            "import torch\n\ntorch.autograd.set_detect_anomaly(True)\nmodel = build()\n",
            "import torch\n\nmodel = build()\n",
        ),
        (
            "import torch\n\n# while the loss is unstable\ntorch.autograd.set_detect_anomaly(True)\nx = 1\n",
            "import torch\n\n# while the loss is unstable\nx = 1\n",
        ),
        (
            # two one-line gaps become one, not two
            "import torch\n\ntorch.autograd.set_detect_anomaly(True)\n\nx = 1\n",
            "import torch\n\nx = 1\n",
        ),
        (
            "import torch\n\ntorch.autograd.set_detect_anomaly(True)\n\n\ndef train():\n    pass\n",
            "import torch\n\n\ndef train():\n    pass\n",
        ),
        (
            # the new first statement of a block gets no blank line above it
            f"{FUNCTION}    torch.autograd.set_detect_anomaly(True)\n\n    # then train\n    train()\n",
            f"{FUNCTION}    # then train\n    train()\n",
        ),
        (
            f"{FUNCTION}    model = build()\n\n    # on\n    torch.autograd.set_detect_anomaly(True)\nx = 1\n",
            f"{FUNCTION}    model = build()\n\n    # on\nx = 1\n",
        ),
        (
            # at the end of the file the blank lines go, so no trailing blank line is left
            "import torch\n\ntorch.autograd.set_detect_anomaly(True)\n",
            "import torch\n",
        ),
    ],
    ids=[
        "blank-line-after-imports",
        "comment-above",
        "gaps-on-both-sides",
        "two-blank-lines-before-def",
        "first-in-function",
        "last-in-function",
        "end-of-file",
    ],
)
def test_removing_a_statement_keeps_the_blank_lines_and_comments_above_it(source: str, expected: str) -> None:
    outcome = fix_bytes(source.encode(), "train.py", select_rules(["TPL601"], ()), Settings())
    assert outcome.fixed.decode() == expected


# -- overlapping fixes go in successive passes -------------------------------------------------

NESTED_SAME_RULE = b"""import torch
from torch import nn


class Net(nn.Module):
    def forward(self, x, n):
        return torch.zeros(torch.ones(n).cuda().shape[0]).cuda()
"""

NESTED_TWO_RULES = b"""import torch
from torch import nn


class Net(nn.Module):
    def forward(self, x, n):
        s = torch.randn(n, 4, device="cuda")
        return torch.zeros(s[range(len(s)), 0].shape[0]).cuda()
"""


def _fix(data: bytes, unsafe: bool = False) -> fixer.FixOutcome:
    settings = Settings()
    return fix_bytes(data, "net.py", select_rules(["TPL101", "TPL103"], (), ()), settings, unsafe=unsafe)


@pytest.mark.parametrize(
    "source, expected",
    [
        (
            NESTED_SAME_RULE,
            b'return torch.zeros(torch.ones(n, device="cuda").shape[0], device="cuda")',
        ),
        (
            NESTED_TWO_RULES,
            b'return torch.zeros(s[torch.arange(len(s), device=s.device), 0].shape[0], device="cuda")',
        ),
    ],
    ids=["tpl101-inside-tpl101", "tpl103-inside-tpl101"],
)
def test_nested_fixes_are_applied_over_successive_passes(monkeypatch, source: bytes, expected: bytes) -> None:
    before = source.splitlines()[-1].strip()
    # one pass applies the outer fix only: the inner one is neither merged nor lost
    monkeypatch.setattr(fixer, "MAX_PASSES", 1)
    one = _fix(source)
    assert one.applied == 1
    assert parses(one.fixed)
    assert [f.code for f in one.result.findings if f.fix is not None]  # the inner fix is still due
    assert one.fixed.splitlines()[-1].strip() not in (before, expected)
    # with the normal passes both land
    monkeypatch.setattr(fixer, "MAX_PASSES", 10)
    full = _fix(source)
    assert full.applied == 2
    assert full.fixed.splitlines()[-1].strip() == expected
    assert full.result.findings == []


def test_nested_fixes_through_the_cli_reach_a_fixed_point(tmp_path: Path, capsys) -> None:
    path = write(tmp_path / "net.py", NESTED_TWO_RULES)
    assert cli("--fix", path) == 0
    fixed = path.read_bytes()
    assert b"[range(" not in fixed and b".cuda()" not in fixed
    assert cli("--fix", path) == 0
    assert path.read_bytes() == fixed


def test_a_fix_that_would_not_parse_is_dropped_and_the_others_still_apply(monkeypatch) -> None:
    real_choose = fixer._choose

    def with_a_broken_fix(findings, parents, unsafe):
        chosen = real_choose(findings, parents, unsafe)
        bad = [f for f in chosen if f.description.startswith("pass device")]
        for fix in bad:  # make the TPL101 fix render code that does not parse
            old, new = fix.replacements[0]
            broken = new.with_changes(func=cst.Name("class"))  # a keyword: renders, does not parse
            object.__setattr__(fix, "replacements", ((old, broken),))
        return chosen

    monkeypatch.setattr(fixer, "_choose", with_a_broken_fix)
    source = SAFE.replace(b"return x + noise", b"return x + noise + x[range(n)]")
    source = source.replace(
        b"def forward(self, x, n):", b"def forward(self, x, n):\n        x = torch.relu(x)"
    )
    outcome = _fix(source, unsafe=True)
    assert parses(outcome.fixed)
    assert b"x[torch.arange(n, device=x.device)]" in outcome.fixed
    assert b"torch.zeros(n).cuda()" in outcome.fixed


# -- --diff, exit codes, fix marks ---------------------------------------------------------------


def test_diff_prints_a_unified_diff_writes_nothing_and_exits_1(tmp_path: Path, capsys) -> None:
    path = write(tmp_path / "net.py", SAFE)
    assert cli("--diff", path) == 1
    out = capsys.readouterr().out
    assert f"--- a/{path}\n+++ b/{path}\n@@ " in out
    assert "-        noise = torch.zeros(n).cuda()\n" in out
    assert '+        noise = torch.zeros(n, device="cuda")\n' in out
    assert path.read_bytes() == SAFE
    assert leftovers(tmp_path) == []


# TPL601's safe fix removes line 4, above a TPL103 whose fix is unsafe and stays
REMOVAL_ABOVE = b"""import torch
from torch import nn

torch.autograd.set_detect_anomaly(True)


class Loss(nn.Module):
    def forward(self, pred, t, n):
        return pred[range(n), t].mean()
"""


def test_diff_reports_what_remains_at_its_place_in_the_file_on_disk(tmp_path: Path, capsys) -> None:
    path = write(tmp_path / "loss.py", REMOVAL_ABOVE)
    select = ["--select", "TPL601,TPL103", "--show-context"]
    assert main([*select, str(path)]) == 1
    lint = [line for line in capsys.readouterr().out.splitlines() if " TPL103 " in line or "hot:" in line]
    assert lint[0].startswith(f"{path}:9:16: TPL103 ")
    assert main([*select, "--diff", str(path)]) == 1
    out = capsys.readouterr().out
    assert "-torch.autograd.set_detect_anomaly(True)\n" in out
    # the file still has its line 4, so TPL103 is still on line 9, with the same context
    assert [line for line in out.splitlines() if " TPL103 " in line or "hot:" in line] == lint
    assert " TPL601 " not in out  # fixed by the diff
    assert path.read_bytes() == REMOVAL_ABOVE


TWO_ON_A_LINE = b"""import torch
from torch import nn


class Detect(nn.Module):
    def forward(self, x):
        boxes = torch.sigmoid(x)
        boxes[..., [0, 2]] = boxes[..., [0, 2]] * 2
        return boxes
"""


def test_diff_reports_the_unfixed_one_of_two_findings_on_a_changed_line(tmp_path: Path, capsys) -> None:
    # the target's fix is safe; the read beside it keeps its list (its view could alias the target)
    path = write(tmp_path / "detect.py", TWO_ON_A_LINE)
    assert main(["--select", "TPL103", "--diff", str(path)]) == 1
    remaining = [line for line in capsys.readouterr().out.splitlines() if " TPL103 " in line]
    assert len(remaining) == 1
    assert remaining[0].startswith(f"{path}:8:30: TPL103 ")


def test_diff_marks_a_last_line_without_a_newline(tmp_path: Path, capsys) -> None:
    path = write(tmp_path / "a_net.py", SAFE.rstrip(b"\n"))
    other = write(tmp_path / "b_net.py", SAFE)
    assert cli("--diff", path, other) == 1
    out = capsys.readouterr().out
    assert "\n         return x + noise\n\\ No newline at end of file\n" in out
    assert f"\n--- a/{other}\n" in out  # the next file's diff starts on its own line


def test_diff_without_anything_to_fix_prints_nothing_and_exits_0(tmp_path: Path, capsys) -> None:
    path = write(tmp_path / "net.py", SAFE_FIXED)
    assert cli("--diff", path) == 0
    assert capsys.readouterr().out == ""


def test_diff_shows_unsafe_fixes_only_when_asked(tmp_path: Path, capsys) -> None:
    path = write(tmp_path / "loss.py", UNSAFE)
    assert cli("--diff", path) == 0
    assert "+++" not in capsys.readouterr().out
    assert cli("--diff", "--unsafe-fixes", path) == 1
    assert "+        return pred[torch.arange(n, device=pred.device), t].mean()" in capsys.readouterr().out
    assert path.read_bytes() == UNSAFE


def test_fix_exits_0_when_everything_was_fixed_and_1_when_findings_remain(tmp_path: Path, capsys) -> None:
    safe = write(tmp_path / "net.py", SAFE)
    unsafe = write(tmp_path / "loss.py", UNSAFE)
    assert cli("--fix", safe) == 0
    capsys.readouterr()
    assert cli("--fix", unsafe) == 1  # the unsafe fix is not applied without --unsafe-fixes
    out = capsys.readouterr().out
    assert unsafe.read_bytes() == UNSAFE
    assert f"{unsafe}:7:16: TPL103 " in out
    assert "1 more fixable with --fix --unsafe-fixes." in out
    assert cli("--fix", "--unsafe-fixes", unsafe) == 0
    assert unsafe.read_bytes() == UNSAFE_FIXED


def test_the_fix_summary_counts_fixes_files_and_what_remains(tmp_path: Path, capsys) -> None:
    safe = write(tmp_path / "a_net.py", SAFE)
    both = write(tmp_path / "b_both.py", SAFE + UNSAFE.split(b"\n\n\n", 1)[1])
    assert cli("--diff", safe, both) == 1
    assert capsys.readouterr().err == "Would fix 2 findings in 2 files; 1 finding would remain.\n"
    assert cli("--fix", safe, both) == 1
    captured = capsys.readouterr()
    assert captured.err == "Fixed 2 findings in 2 files; 1 finding remains.\n"
    assert "Found 1 finding." in captured.out.splitlines()
    assert cli("--fix", "--format", "json", safe, both) == 1
    assert capsys.readouterr().err == ""  # machine formats get no prose


def test_text_output_marks_fixable_findings_and_counts_them(tmp_path: Path, capsys) -> None:
    safe = write(tmp_path / "a_net.py", SAFE)
    unsafe = write(tmp_path / "b_loss.py", UNSAFE)
    write(tmp_path / "requirements.txt", b"torch>=2.3\n")  # no line about the torch fixes assume
    assert cli(safe, unsafe) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"{safe}:7:17: TPL101 [*] ")
    assert lines[1].startswith(f"{unsafe}:7:16: TPL103 ") and "[*]" not in lines[1]
    assert lines[2:] == [
        "Found 2 findings (1 fixable with --fix).",
        "1 more fixable with --fix --unsafe-fixes.",
    ]

    assert cli("--unsafe-fixes", safe, unsafe) == 1
    lines = capsys.readouterr().out.splitlines()
    assert "TPL101 [*] " in lines[0] and "TPL103 [*] " in lines[1]
    assert lines[2:] == ["Found 2 findings (2 fixable with --fix --unsafe-fixes)."]


# -- torch spelled with the file's alias; `import torch` added only when needed -----------------


def test_fix_spells_torch_with_the_files_alias(tmp_path: Path, capsys) -> None:
    source = UNSAFE.replace(b"import torch\n", b"import torch as th\n")
    path = write(tmp_path / "loss.py", source)
    assert cli("--fix", "--unsafe-fixes", path) == 0
    assert path.read_bytes() == source.replace(b"range(n)", b"th.arange(n, device=pred.device)")


def test_fix_adds_import_torch_after_the_docstring_and_future_imports(tmp_path: Path, capsys) -> None:
    body = UNSAFE.replace(b"import torch\n", b"")
    header = b'#!/usr/bin/env python\n"""The loss."""\nfrom __future__ import annotations\n'
    path = write(tmp_path / "loss.py", header + body)
    assert cli("--fix", "--unsafe-fixes", path) == 0
    assert path.read_bytes() == header + b"import torch\n" + body.replace(
        b"range(n)", b"torch.arange(n, device=pred.device)"
    )


def test_fix_adds_no_import_when_torch_is_already_imported(tmp_path: Path, capsys) -> None:
    path = write(tmp_path / "loss.py", UNSAFE)
    assert cli("--fix", "--unsafe-fixes", path) == 0
    assert path.read_bytes().count(b"import torch\n") == 1


def test_fix_on_stdin_writes_the_fixed_code_to_stdout(monkeypatch, capsys) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(SAFE)))
    assert cli("-", "--stdin-filename", "pkg/net.py", "--fix") == 0
    captured = capsys.readouterr()
    assert captured.out.encode() == SAFE_FIXED
    assert "pkg/net.py" not in captured.out


def test_fix_on_stdin_with_nothing_to_fix_echoes_the_input(monkeypatch, capsys) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(UNSAFE)))
    assert cli("-", "--stdin-filename", "loss.py", "--fix") == 1
    captured = capsys.readouterr()
    assert captured.out.encode() == UNSAFE
    assert "loss.py:7:16: TPL103" in captured.err


# -- the real entry point ----------------------------------------------------------------------


def test_python_dash_m_fixes_files_in_place(tmp_path: Path) -> None:
    path = write(tmp_path / "net.py", SAFE, 0o750)
    run = subprocess.run(
        [sys.executable, "-m", "torchperf_lint", *SELECT, "--library", "--fix", str(path)],
        capture_output=True,
        check=False,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stderr == "Fixed 1 finding in 1 file; no findings remain.\n"
    assert path.read_bytes() == SAFE_FIXED
    assert stat.S_IMODE(path.stat().st_mode) == 0o750
    again = subprocess.run(
        [sys.executable, "-m", "torchperf_lint", *SELECT, "--library", "--diff", str(path)],
        capture_output=True,
        check=False,
        text=True,
        timeout=120,
    )
    assert (again.returncode, again.stdout) == (0, "")

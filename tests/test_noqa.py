"""`# noqa` with flake8's semantics, and parity with flake8 itself: the same TPL findings at the
same positions, with and without noqa comments."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import PRECISION_OFF
from torchperf_lint.api import lint_source
from torchperf_lint.cli import main
from torchperf_lint.engine.noqa import NoqaIndex

pytestmark = pytest.mark.usefixtures("precision_off_rules_on")  # conftest.PRECISION_OFF

REPO = Path(__file__).resolve().parents[1]

# Every `name = torch.<factory>(...).cuda()` line in forward is a TPL101 finding; the comment on
# it (or on the line flake8 maps it to) decides whether it is reported.
FIXTURE = '''\
import torch
import torch.nn as nn


def helper(pred, target):
    return pred[range(target.shape[0]), target]  # noqa: TPL101


class Net(nn.Module):
    def forward(self, x, t):
        blanket = torch.zeros(3).cuda()  # noqa
        listed = torch.ones(3).cuda()  # noqa: TPL101,TPL103
        tight = torch.rand(3).cuda()  # noqa:TPL101
        prefix = torch.randn(3).cuda()  # NOQA: TPL1
        other = torch.empty(3).cuda()  # noqa: TPL103
        foreign = torch.full((3,), 1.0).cuda()  # noqa: E501
        backslash = torch.arange(3).cuda() + \\
            x  # noqa: TPL101
        string = torch.eye(3).cuda() if x.any() else """
        a multi-line string
        """  # noqa
        parens = (torch.zeros(4).cuda(),
                  x)  # noqa
        \x0c
        plain = torch.ones(4).cuda()
        after_form_feed = torch.ones(5).cuda()  # noqa: TPL101
        return helper(x + blanket + listed + tight + prefix + other + foreign + backslash + string
                      + parens[0] + plain + after_form_feed, t)
'''

REPORTED = {"helper-TPL103", "other", "foreign", "parens", "plain"}


def reported(source: str) -> set[str]:
    lines = source.split("\n")  # not splitlines(): it would split at the form feed
    names = set()
    for finding in lint_source(source, "net.py", select=["TPL101", "TPL103"]):
        text = lines[finding.line - 1].strip()
        if text.startswith("return pred["):
            names.add(f"helper-{finding.code}")
        else:
            assert finding.code == "TPL101", text
            names.add(text.lstrip("(").split(" = ")[0])
    return names


def test_noqa_comments_suppress_as_flake8_would() -> None:
    assert reported(FIXTURE) == REPORTED


def test_without_the_comments_every_line_is_reported() -> None:
    bare = re.sub(r"  # (noqa|NOQA)[^\n]*", "", FIXTURE)
    assert reported(bare) == REPORTED | {
        "blanket",
        "listed",
        "tight",
        "prefix",
        "backslash",
        "string",
        "after_form_feed",
    }


@pytest.mark.parametrize(
    "comment, suppressed",
    [
        ("# noqa", True),
        ("# noqa: TPL101", True),
        ("# noqa:TPL101", True),
        ("# NoQA: TPL101", True),
        ("# noqa: TPL103, TPL101", True),
        ("# noqa: TPL103 TPL101", True),
        ("# noqa: TPL1", True),
        ("# noqa: TPL", True),
        ("# noqa: TPL103", False),
        ("# noqa: TPL1011", False),
        ("# noqa: tpl101", False),  # flake8 compares codes case-sensitively
        ("# noqa:", True),  # no codes: a blanket noqa
        ("# no qa", False),
    ],
)
def test_noqa_comment_forms(comment: str, suppressed: bool) -> None:
    index = NoqaIndex(f"x = torch.zeros(3).cuda()  {comment}\n")
    assert index.suppresses(1, "TPL101") is suppressed


@pytest.mark.parametrize(
    "line, exempt",
    [
        ("# flake8: noqa", True),
        ("# flake8: NOQA", True),
        ("#flake8:noqa", False),  # flake8 wants `# flake8`
        ("    # flake8= noqa", True),
        ("# flake8: noqa: TPL101", True),  # flake8 7 exempts the whole file all the same
        ("x = 1  # flake8: noqa", False),  # after code it means nothing
    ],
)
def test_flake8_noqa_exempts_the_file_as_flake8_does(line: str, exempt: bool) -> None:
    source = FIXTURE.replace("import torch.nn as nn\n", f"import torch.nn as nn\n{line}\n")
    assert (reported(source) == set()) is exempt


def test_noqa_index_keeps_line_numbers_across_form_feeds_and_carriage_returns() -> None:
    index = NoqaIndex("a = 1\x0c\r\nb = 2\rc = 3  # noqa\nd = 4\n")
    assert [index.suppresses(n, "TPL101") for n in (1, 2, 3, 4)] == [False, False, True, False]


def flake8_findings(paths: list[Path], *options: str) -> set[tuple[str, int, int, str]]:
    result = subprocess.run(
        # --torchperf-library: the fixtures have no step loop (the CLI, in process, runs every rule's
        # broad form: tests/conftest.py)
        [sys.executable, "-m", "flake8", "--isolated", "--select", "TPL", "--torchperf-library", *options]
        + list(map(str, paths)),
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    assert result.returncode in (0, 1), result.stderr
    found = set()
    for line in result.stdout.splitlines():
        match = re.fullmatch(r"(.+?):(\d+):(\d+): (TPL\d+) (.*)", line)
        assert match, line
        found.add(
            (match.group(1), int(match.group(2)), int(match.group(3)), f"{match.group(4)} {match.group(5)}")
        )
    return found


def cli_findings(paths: list[Path], capsys) -> set[tuple[str, int, int, str]]:
    main(["--format", "json", *map(str, paths)])
    return {
        (f["path"], f["line"], f["col"], f"{f['code']} {f['message']}")
        for f in json.loads(capsys.readouterr().out)
    }


def test_flake8_and_the_cli_report_the_same_findings_at_the_same_positions(tmp_path: Path, capsys) -> None:
    fixture = tmp_path / "noqa_fixture.py"
    fixture.write_text(FIXTURE)
    exempt = tmp_path / "exempt.py"
    exempt.write_text("# flake8: noqa: TPL101\n" + FIXTURE)
    paths = [Path("examples/slow_training.py"), fixture, exempt]
    from_flake8 = flake8_findings(paths)
    from_cli = cli_findings([REPO / "examples/slow_training.py", fixture, exempt], capsys)
    from_cli = {(p.replace(f"{REPO}/", ""), *rest) for p, *rest in from_cli}
    assert from_flake8 == from_cli
    assert {p for p, *_ in from_cli} == {"examples/slow_training.py", str(fixture)}
    assert {(line, code.split()[0]) for p, line, _, code in from_cli if p == str(fixture)} >= {
        (number, "TPL101")
        for number, line in enumerate(FIXTURE.split("\n"), start=1)
        if line.strip().startswith(("other =", "foreign =", "plain ="))
    }


def test_flake8_disable_noqa_reports_what_the_comments_would_hide(tmp_path: Path, capsys) -> None:
    # the plugin leaves noqa comments to flake8, so flake8's --disable-noqa works for TPL codes
    fixture = tmp_path / "noqa_fixture.py"
    fixture.write_text(FIXTURE)
    bare = tmp_path / "bare" / "noqa_fixture.py"
    bare.parent.mkdir()
    bare.write_text(re.sub(r"  # (noqa|NOQA)[^\n]*", "", FIXTURE))
    # the CLI runs with the precision-off rules on (conftest): name them to flake8 too
    on = ",".join(sorted(PRECISION_OFF))
    from_flake8 = {
        (line, col, text)
        for _, line, col, text in flake8_findings([fixture], "--disable-noqa", "--extend-select", on)
    }
    from_cli = {(line, col, text) for _, line, col, text in cli_findings([bare], capsys)}
    assert from_flake8 == from_cli
    assert len(from_cli) > len(REPORTED)


def test_flake8_version_lists_the_plugin() -> None:
    from torchperf_lint import __version__

    result = subprocess.run(
        [sys.executable, "-m", "flake8", "--version"], capture_output=True, text=True, check=True
    )
    assert f"torchperf-lint: {__version__}" in " ".join(result.stdout.split())  # argparse wraps it

"""Notes: a rule says why it stays silent on a candidate (issue 25, item 6). TPL401 keeps the bias of
a conv whose model's weights are published; `--show-context` prints a note there, and nothing else
changes: not the default output, the exit status, --statistics, --fix, noqa baselines, SARIF or
GitHub annotations, flake8 or the language server."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from tests.conftest import turn_on
from tests.test_cli import run, write
from torchperf_lint.api import lint_source
from torchperf_lint.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = json.loads((ROOT / "docs" / "json-output.schema.json").read_text(encoding="utf-8"))
SELECT = ("--select", "TPL401")

# Net downloads its weights: the Stem it builds keeps its conv's bias. Scratch is trained from scratch.
PUBLISHED = b"""\
import torch.nn as nn
from torch.hub import load_state_dict_from_url


class Stem(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 32, 3)
        self.bn = nn.BatchNorm2d(32)
        self.kept = nn.Conv2d(32, 32, 3, bias=False)
        self.kept_bn = nn.BatchNorm2d(32)

    def forward(self, x):
        return self.kept_bn(self.kept(self.bn(self.conv(x))))


class Net(nn.Module):
    def __init__(self, pretrained=True):
        super().__init__()
        self.stem = Stem()
        if pretrained:
            self.load_state_dict(load_state_dict_from_url("https://example.com/net.pth"))

    def forward(self, x):
        return self.stem(x)
"""
SCRATCH = b"""

class Scratch(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.bn = nn.BatchNorm2d(8)

    def forward(self, x):
        return self.bn(self.conv(x))
"""
NOTE = (
    "TPL401 note: nn.Conv2d keeps its bias before nn.BatchNorm2d: the weights are published "
    "(Net.__init__ (net.py:18) names a weights URL)"
)


def _net(tmp_path: Path, extra: bytes = b"") -> Path:
    return write(tmp_path / "net.py", PUBLISHED + extra)


def test_default_output_says_nothing_of_a_published_model(tmp_path: Path, capsys) -> None:
    path = _net(tmp_path)
    assert run(capsys, *SELECT, path) == (0, "", "")
    code, out, _ = run(capsys, *SELECT, "--format", "json", path)
    assert (code, json.loads(out)) == (0, [])


def test_show_context_says_why_the_bias_is_kept(tmp_path: Path, capsys) -> None:
    path = _net(tmp_path)
    code, out, _ = run(capsys, *SELECT, "--show-context", path)
    # only a note: the run is clean, and no "Found" line counts it
    assert (code, out) == (0, f"{path}:8:21: {NOTE}\n")


def test_a_note_sits_among_findings_without_counting(tmp_path: Path, capsys) -> None:
    path = _net(tmp_path, SCRATCH)
    code, out, _ = run(capsys, *SELECT, "--show-context", path)
    assert code == 1
    assert out.splitlines()[:4] == [
        f"{path}:8:21: {NOTE}",
        f"{path}:31:21: TPL401 nn.Conv2d adds a bias that the nn.BatchNorm2d after it subtracts again; "
        "pass bias=False",
        "Found 1 finding.",
        "1 more fixable with --fix --unsafe-fixes.",
    ]
    # --statistics prints the table alone, which counts the finding and not the note
    code, out, _ = run(capsys, *SELECT, "--show-context", "--statistics", path)
    assert (code, out.splitlines()) == (1, ["1     TPL401 conv-bias-before-batchnorm"])


def test_json_carries_notes_only_when_asked(tmp_path: Path, capsys) -> None:
    path = _net(tmp_path, SCRATCH)
    _, out, _ = run(capsys, *SELECT, "--format", "json", path)
    assert [f.get("kind") for f in json.loads(out)] == [None]
    _, out, _ = run(capsys, *SELECT, "--format", "json", "--show-context", path)
    findings = json.loads(out)
    jsonschema.validate(findings, SCHEMA)
    note, finding = findings
    assert "kind" not in finding and finding["line"] == 31
    assert note == {
        "path": str(path),
        "cell": None,
        "line": 8,
        "col": 21,
        "end_line": 8,
        "end_col": 40,
        "code": "TPL401",
        "name": "conv-bias-before-batchnorm",
        "message": NOTE.removeprefix("TPL401 note: "),
        "context": None,
        "fix": None,
        "kind": "note",
    }
    _, out, _ = run(capsys, *SELECT, "--format", "json", "--statistics", "--show-context", path)
    assert json.loads(out) == [
        {"code": "TPL401", "name": "conv-bias-before-batchnorm", "count": 1, "fixable": 0}
    ]


def test_fix_leaves_a_published_model_untouched(tmp_path: Path, capsys) -> None:
    path = _net(tmp_path)
    code, out, err = run(capsys, *SELECT, "--fix", "--unsafe-fixes", "--show-context", path)
    assert path.read_bytes() == PUBLISHED
    assert code == 0 and out == f"{path}:8:21: {NOTE}\n"
    assert err == "Fixed 0 findings; no findings remain.\n"


def test_add_noqa_writes_no_comment_for_a_note(tmp_path: Path, capsys) -> None:
    path = _net(tmp_path)
    assert run(capsys, *SELECT, "--add-noqa", "--show-context", path)[0] == 0
    assert path.read_bytes() == PUBLISHED


@pytest.mark.parametrize("output", ["sarif", "github"])
def test_annotations_never_carry_notes(tmp_path: Path, capsys, output: str) -> None:
    path = _net(tmp_path)
    code, out, _ = run(capsys, *SELECT, "--format", output, "--show-context", path)
    assert code == 0
    assert (json.loads(out)["runs"][0]["results"] if output == "sarif" else out) in ([], "")


def test_a_rule_off_by_default_shows_no_note_and_counts_none(
    tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    turn_on(monkeypatch, frozenset({"TPL401"}), on=False)  # the only rule with notes, made off
    path = _net(tmp_path)  # off by default, TPL401 runs only to be counted
    assert run(capsys, "--show-context", path) == (0, "", "")


def test_noqa_on_the_line_silences_the_note_too(tmp_path: Path, capsys) -> None:
    source = PUBLISHED.replace(b"nn.Conv2d(3, 32, 3)", b"nn.Conv2d(3, 32, 3)  # noqa: TPL401")
    path = write(tmp_path / "net.py", source)
    assert run(capsys, *SELECT, "--show-context", path) == (0, "", "")


def test_the_cache_keeps_runs_with_and_without_notes_apart(
    tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TORCHPERF_LINT_NO_CACHE")
    path = _net(tmp_path / "project")
    cache = ("--cache-dir", tmp_path / "cache")
    assert run(capsys, *SELECT, *cache, path) == (0, "", "")
    assert run(capsys, *SELECT, *cache, "--show-context", path)[1] == f"{path}:8:21: {NOTE}\n"
    assert run(capsys, *SELECT, *cache, path) == (0, "", "")


def test_library_callers_get_notes_only_when_their_settings_ask() -> None:
    source = PUBLISHED.decode()
    assert lint_source(source, "net.py", select=["TPL401"]) == []
    (note,) = lint_source(source, "net.py", Settings(notes=True), select=["TPL401"])
    assert note.note and note.fix is None and (note.line, note.col) == (8, 21)


def test_flake8_never_shows_a_note(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from torchperf_lint.flake8_plugin import TorchPerfPlugin
    from torchperf_lint.rules import select_rules

    monkeypatch.setattr(TorchPerfPlugin, "_rules", select_rules(["TPL401"], ()))
    path = _net(tmp_path, SCRATCH)
    plugin = TorchPerfPlugin(None, str(path), path.read_text().splitlines(keepends=True))
    assert [(line, text.split()[0]) for line, _, text, _ in plugin.run()] == [(31, "TPL401")]

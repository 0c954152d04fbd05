"""The language server (issue 18), driven as an editor drives it: `python -m torchperf_lint server`
in a subprocess, JSON-RPC with Content-Length framing on its stdin and stdout. What it reports and
the edits it offers must be what the engine, `--fix` and the CLI give for the same text."""

from __future__ import annotations

import json
import os
import queue
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, Callable, Optional

import pytest

from tests.helpers import example_source
from torchperf_lint import api
from torchperf_lint.cli import SERVER_INSTALL
from torchperf_lint.config import load_settings
from torchperf_lint.engine.findings import Finding, Safety
from torchperf_lint.rules import ALL_RULES, BY_CODE

pytest.importorskip("pygls")

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "slow_training.py"
TIMEOUT = 20.0  # seconds to wait for any one answer; a server that hangs fails the test
_LINE_ENDS = re.compile(r"(?<=\n)|(?<=\r)(?!\n)")

Message = dict[str, Any]


class Client:
    """A minimal LSP client: requests wait for their response; notifications are kept in order;
    requests from the server (registerCapability) are answered with null."""

    def __init__(self, cwd: Path, log: IO[bytes]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "torchperf_lint", "server"],
            cwd=cwd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            env={**os.environ, "PYTHONPATH": str(ROOT)},  # this checkout, whatever the directory
        )
        self.inbox: queue.Queue[Optional[Message]] = queue.Queue()
        self.notifications: list[Message] = []
        self.server_requests: list[Message] = []
        self._id = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        stream = self.process.stdout
        assert stream is not None
        while True:
            length = None
            while True:
                header = stream.readline()
                if not header:
                    self.inbox.put(None)
                    return
                if header in (b"\r\n", b"\n"):
                    break
                name, _, value = header.decode("ascii").partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            assert length is not None
            self.inbox.put(json.loads(stream.read(length)))

    def send(self, message: Message) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode("utf-8")
        stdin = self.process.stdin
        assert stdin is not None
        stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        stdin.flush()

    def _next(self, deadline: float) -> Message:
        try:
            message = self.inbox.get(timeout=max(deadline - time.monotonic(), 0.01))
        except queue.Empty:
            raise AssertionError(f"no message from the server within {TIMEOUT} s") from None
        if message is None:
            raise AssertionError("the server closed its output")
        if "method" in message and "id" in message:  # a request from the server
            self.server_requests.append(message)
            self.send({"id": message["id"], "result": None})
        elif "method" in message:
            self.notifications.append(message)
        return message

    def request(self, method: str, params: Any) -> Any:
        self._id += 1
        self.send({"id": self._id, "method": method, "params": params})
        deadline = time.monotonic() + TIMEOUT
        while True:
            message = self._next(deadline)
            if message.get("id") == self._id and "method" not in message:
                assert "error" not in message, message["error"]
                return message.get("result")

    def notify(self, method: str, params: Any) -> None:
        self.send({"method": method, "params": params})

    def wait_for(self, accept: Callable[[Message], bool], after: int = 0) -> Message:
        """The first notification (from index `after` on) that `accept` takes."""
        deadline = time.monotonic() + TIMEOUT
        seen = after
        while True:
            for message in self.notifications[seen:]:
                if accept(message):
                    return message
            seen = len(self.notifications)
            self._next(deadline)

    def diagnostics(self, uri: str, version: int, after: int = 0) -> list[Message]:
        message = self.wait_for(
            lambda m: (
                m["method"] == "textDocument/publishDiagnostics"
                and m["params"]["uri"] == uri
                and m["params"].get("version") == version
            ),
            after,
        )
        return list(message["params"]["diagnostics"])

    # -- what an editor does --------------------------------------------------------------
    def open(self, uri: str, text: str) -> list[Message]:
        mark = len(self.notifications)
        self.notify(
            "textDocument/didOpen",
            {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}},
        )
        return self.diagnostics(uri, 1, mark)

    def change(self, uri: str, version: int, text: str) -> list[Message]:
        mark = len(self.notifications)
        self.notify(
            "textDocument/didChange",
            {"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": text}]},
        )
        return self.diagnostics(uri, version, mark)

    def actions(
        self, uri: str, where: Message, only: Optional[list[str]] = None, trigger: int = 1
    ) -> list[Message]:
        context: Message = {"diagnostics": [], "triggerKind": trigger}  # 1 invoked, 2 automatic
        if only is not None:
            context["only"] = only
        params = {"textDocument": {"uri": uri}, "range": where, "context": context}
        return list(self.request("textDocument/codeAction", params) or [])

    def close(self) -> int:
        self.request("shutdown", None)
        self.notify("exit", None)
        return self.process.wait(timeout=TIMEOUT)


def start(cwd: Path, log: IO[bytes], options: Optional[Message] = None, watches: bool = True) -> Client:
    """A client that initializes the server; `watches`: it can watch files the server asks for
    (Neovim on Linux cannot)."""
    client = Client(cwd, log)
    capabilities = {
        "general": {"positionEncodings": ["utf-16"]},
        "workspace": {
            "workspaceEdit": {"documentChanges": True},
            "didChangeWatchedFiles": {"dynamicRegistration": watches},
        },
        "textDocument": {"publishDiagnostics": {"relatedInformation": True, "versionSupport": True}},
    }
    params: Message = {"processId": None, "rootUri": cwd.as_uri(), "capabilities": capabilities}
    if options is not None:
        params["initializationOptions"] = options
    client.request("initialize", params)
    client.notify("initialized", {})
    return client


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Client]:
    log_path = tmp_path_factory.mktemp("server") / "stderr.log"
    with open(log_path, "wb") as log:
        client = start(ROOT, log)
        try:
            yield client
        finally:
            if client.process.poll() is None:
                assert client.close() == 0, log_path.read_text(errors="replace")


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory without config: buffers named here lint with the defaults."""
    return tmp_path_factory.mktemp("buffers")


# the projects have no step loop: linted as libraries, their forwards are hot by assumption
EVERY_RULE = '[tool.torchperf-lint]\nextend-select = ["ALL"]\nlibrary = true\n'


@pytest.fixture(scope="module")
def every_rule(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory whose config turns every rule on, as a training project would."""
    directory = tmp_path_factory.mktemp("training")
    (directory / "pyproject.toml").write_text(EVERY_RULE, encoding="utf-8")
    return directory


# -- helpers --------------------------------------------------------------------------------


def offset(text: str, position: Message) -> int:
    """A UTF-16 LSP position as an index into `text`."""
    lines = _LINE_ENDS.split(text)
    before = sum(len(line) for line in lines[: position["line"]])
    line = lines[position["line"]] if position["line"] < len(lines) else ""
    units = 0
    for index, char in enumerate(line):
        if units >= position["character"]:
            return before + index
        units += 2 if ord(char) > 0xFFFF else 1
    return before + len(line.rstrip("\r\n"))


def apply(text: str, action: Message) -> str:
    """The text after the action's workspace edit (one document, non-overlapping edits)."""
    (change,) = action["edit"]["documentChanges"]
    edits = sorted(change["edits"], key=lambda e: offset(text, e["range"]["start"]), reverse=True)
    for edit in edits:
        start, end = offset(text, edit["range"]["start"]), offset(text, edit["range"]["end"])
        text = text[:start] + edit["newText"] + text[end:]
    return text


def spans(diagnostics: list[Message]) -> list[tuple[str, int, int, int, int]]:
    return sorted(
        (
            d["code"],
            d["range"]["start"]["line"],
            d["range"]["start"]["character"],
            d["range"]["end"]["line"],
            d["range"]["end"]["character"],
        )
        for d in diagnostics
    )


def engine_spans(findings: list[Finding]) -> list[tuple[str, int, int, int, int]]:
    return sorted((f.code, f.line - 1, f.col - 1, f.end_line - 1, f.end_col - 1) for f in findings)


def of_code(diagnostics: list[Message], code: str) -> Message:
    (found,) = [d for d in diagnostics if d["code"] == code]
    return found


# -- diagnostics ----------------------------------------------------------------------------


def test_diagnostics_match_the_cli_json_on_the_example(server: Client) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "torchperf_lint", "--format", "json", "--no-cache", str(EXAMPLE)],
        cwd=ROOT,
        capture_output=True,
        check=False,
    ).stdout
    cli = json.loads(out)
    diagnostics = server.open(EXAMPLE.as_uri(), EXAMPLE.read_text(encoding="utf-8"))
    assert spans(diagnostics) == sorted(
        (f["code"], f["line"] - 1, f["col"] - 1, f["end_line"] - 1, f["end_col"] - 1) for f in cli
    )
    for diagnostic in diagnostics:
        assert diagnostic["severity"] == 2  # Warning
        assert diagnostic["source"] == "torchperf-lint"
        # the page in this checkout: the project has no published home to link to
        href = diagnostic["codeDescription"]["href"]
        assert href == (ROOT / "docs" / "rules" / f"{diagnostic['code']}.md").as_uri()
    contexts = {(f["code"], f["line"] - 1, f["col"] - 1): f["context"] for f in cli}
    for diagnostic in diagnostics:
        start = diagnostic["range"]["start"]
        context = contexts[(diagnostic["code"], start["line"], start["character"])]
        related = diagnostic.get("relatedInformation")
        if context is None:
            assert not related
        else:
            assert related[0]["message"] == f"hot: {context}"
            assert related[0]["location"]["uri"] == EXAMPLE.as_uri()


def test_syntax_error_gives_one_error_then_the_findings_once_fixed(server: Client, scratch: Path) -> None:
    path = scratch / "broken.py"
    uri = path.as_uri()
    diagnostics = server.open(uri, "import torch\ndef f(:\n    pass\n")
    assert [(d["code"], d["severity"]) for d in diagnostics] == [("TPL000", 1)]
    assert diagnostics[0]["range"]["start"]["line"] == 1
    good = "import torch\n\nfor x, y in loader:\n    x = x[range(4)]\n    loss(x).backward()\n"
    assert spans(server.change(uri, 2, good)) == engine_spans(api.lint_source(good, str(path)))
    assert server.process.poll() is None


def test_the_last_of_quick_changes_is_linted(server: Client, scratch: Path) -> None:
    path = scratch / "typing.py"
    uri = path.as_uri()
    server.open(uri, "import torch\n")
    text = "import torch\n"
    for version, line in enumerate(["for x, y in loader:\n", "    x = x[range(4)]\n"], start=2):
        text += line
        server.notify(
            "textDocument/didChange",
            {"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": text}]},
        )
    text += "    loss(x).backward()\n"
    assert spans(server.change(uri, 4, text)) == engine_spans(api.lint_source(text, str(path)))


# -- code actions ---------------------------------------------------------------------------


def _single_fix_examples() -> list[tuple[str, str, str]]:
    """(id, source, code) for each rule example with exactly one fixable finding."""
    cases = []
    for rule in ALL_RULES:
        for label, code in rule.BAD.items():
            source = example_source(code)
            fixable = [f for f in api.lint_source(source, "example.py") if f.fix is not None]
            if len(fixable) == 1:
                cases.append((f"{rule.code}-{label}", source, fixable[0].code))
    return cases


SINGLE_FIX = _single_fix_examples()


@pytest.mark.parametrize(("source", "code"), [c[1:] for c in SINGLE_FIX], ids=[c[0] for c in SINGLE_FIX])
def test_quick_fix_writes_what_fix_writes_for_that_finding(
    server: Client, scratch: Path, source: str, code: str
) -> None:
    path = scratch / f"single_{code}.py"
    uri = path.as_uri()
    (finding,) = [f for f in api.lint_source(source, str(path)) if f.fix is not None]
    unsafe = finding.fix is not None and finding.fix.safety is Safety.UNSAFE
    diagnostics = server.open(uri, source)
    start = {"line": finding.line - 1, "character": finding.col - 1}
    target = of_code([d for d in diagnostics if d["range"]["start"] == start], code)
    actions = server.actions(uri, target["range"], only=["quickfix"])
    (fix,) = [a for a in actions if "noqa" not in a["title"]]
    assert ("(unsafe)" in fix["title"]) == unsafe
    assert fix["diagnostics"][0]["code"] == code
    edits = fix["edit"]["documentChanges"][0]["edits"]
    assert len(edits) == 1 and edits[0]["newText"] != source  # only the changed span
    assert apply(source, fix) == api.fix_source(source, str(path), unsafe=unsafe)
    server.notify("textDocument/didClose", {"textDocument": {"uri": uri}})


def test_fix_all_applies_the_safe_fixes_only(server: Client, every_rule: Path) -> None:
    text = EXAMPLE.read_text(encoding="utf-8")
    path = every_rule / "train.py"
    uri = path.as_uri()
    server.open(uri, text)
    whole = {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}
    actions = server.actions(uri, whole, only=["source.fixAll"])
    (fix_all,) = actions
    assert fix_all["kind"] == "source.fixAll.torchperf-lint"
    fixed = apply(text, fix_all)
    settings = load_settings(path)
    assert fixed == api.fix_source(text, str(path), unsafe=False, settings=settings)
    assert fixed != api.fix_source(text, str(path), unsafe=True, settings=settings)  # unsafe fixes too
    invoked = server.actions(uri, whole)
    assert [a["kind"] for a in invoked if a["kind"].startswith("source")] == [fix_all["kind"]]
    automatic = server.actions(uri, whole, trigger=2)  # the light bulb, on every cursor move
    assert not [a for a in automatic if a["kind"].startswith("source")]


def test_noqa_action_silences_the_finding_and_merges_codes(server: Client, every_rule: Path) -> None:
    text = (
        "import torch\nfrom torch import nn\n\n\nclass Net(nn.Module):\n    def forward(self, x):\n"
        "        return x[[0, 2, 1]] + torch.ones(3).cuda()\n"
    )
    path = every_rule / "noqa_train.py"
    uri = path.as_uri()
    before = server.open(uri, text)

    def noqa(diagnostics: list[Message], code: str) -> str:
        target = of_code(diagnostics, code)
        actions = server.actions(uri, target["range"])
        (action,) = [a for a in actions if a["title"].endswith(f"add `# noqa: {code}`")]
        return apply(text, action)

    text = noqa(before, "TPL103")  # the return line holds TPL103 and TPL101
    line = of_code(before, "TPL103")["range"]["start"]["line"]
    assert text.splitlines()[line].endswith("  # noqa: TPL103")
    middle = server.change(uri, 2, text)
    assert spans(middle) == [s for s in spans(before) if s[0] != "TPL103"]
    text = noqa(middle, "TPL101")
    assert text.splitlines()[line].endswith("  # noqa: TPL103,TPL101")
    after = server.change(uri, 3, text)
    assert spans(after) == [s for s in spans(before) if s[0] not in ("TPL101", "TPL103")]


def test_noqa_merges_into_the_comment_after_a_multiline_string(server: Client, every_rule: Path) -> None:
    text = (
        'import torch\ndevice = torch.device("cuda")\nfor x, y in loader:\n'
        '    x = x[range(4)] + len("""\n    text\n    """)  # noqa: E501\n'
        "    loss(x).backward()\n"
    )
    path = every_rule / "noqa_string.py"
    uri = path.as_uri()
    (finding,) = server.open(uri, text)
    (action,) = [a for a in server.actions(uri, finding["range"]) if "noqa" in a["title"]]
    fixed = apply(text, action)
    assert fixed.splitlines()[5] == '    """)  # noqa: E501,TPL103'
    assert server.change(uri, 2, fixed) == []


# -- hover ----------------------------------------------------------------------------------


def test_hover_explains_the_rule(server: Client) -> None:
    diagnostics = server.open(EXAMPLE.as_uri(), EXAMPLE.read_text(encoding="utf-8"))
    target = of_code(diagnostics, "TPL103")
    hover = server.request(
        "textDocument/hover",
        {"textDocument": {"uri": EXAMPLE.as_uri()}, "position": target["range"]["start"]},
    )
    value = hover["contents"]["value"]
    rule = BY_CODE["TPL103"]
    assert rule.summary in value
    assert "Why it is slow" in value
    assert "Measured" in value and "x on " in value
    assert "unsafe" in value
    assert hover["range"] == target["range"]
    nothing = server.request(
        "textDocument/hover",
        {"textDocument": {"uri": EXAMPLE.as_uri()}, "position": {"line": 0, "character": 0}},
    )
    assert nothing is None


# -- projects and config --------------------------------------------------------------------

MODEL = """\
import torch
import torch.nn as nn

from losses import weighted_nll


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.bn = nn.BatchNorm2d(8)

    def forward(self, x, target):
        noise = torch.randn(8).cuda()
        return weighted_nll(self.bn(self.conv(x)) + noise, target)
"""
LOSSES = """\
import torch


def weighted_nll(pred, target):
    return -pred[range(target.shape[0]), target].mean()
"""


def test_project_file_gets_the_engines_findings_under_its_config(server: Client, tmp_path: Path) -> None:
    config = tmp_path / "pyproject.toml"
    config.write_text(EVERY_RULE + 'ignore = ["TPL401"]\n', encoding="utf-8")
    (tmp_path / "losses.py").write_text(LOSSES, encoding="utf-8")
    model = tmp_path / "model.py"
    model.write_text(MODEL, encoding="utf-8")
    uri = model.as_uri()
    diagnostics = server.open(uri, MODEL)
    expected = api.lint_source(MODEL, str(model), settings=load_settings(model))
    assert spans(diagnostics) == engine_spans(expected)
    assert "TPL101" in {d["code"] for d in diagnostics}
    assert "TPL401" not in {d["code"] for d in diagnostics}

    config.write_text(EVERY_RULE, encoding="utf-8")
    mark = len(server.notifications)
    server.notify("workspace/didChangeWatchedFiles", {"changes": [{"uri": config.as_uri(), "type": 2}]})
    again = server.diagnostics(uri, 1, after=mark)
    assert "TPL401" in {d["code"] for d in again}
    assert spans(again) == engine_spans(api.lint_source(MODEL, str(model), settings=load_settings(model)))


def test_server_asks_the_client_to_watch_config_files(server: Client) -> None:
    (watch,) = [r for r in _registrations(server) if r["method"] == "workspace/didChangeWatchedFiles"]
    globs = {w["globPattern"] for w in watch["registerOptions"]["watchers"]}
    assert "**/pyproject.toml" in globs


def test_a_broken_config_is_one_error_diagnostic(server: Client, tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.torchperf-lint]\nselcet = ["TPL1"]\n', encoding="utf-8")
    path = tmp_path / "train.py"
    (diagnostic,) = server.open(path.as_uri(), MODEL)
    assert diagnostic["code"] == "TPL000" and diagnostic["severity"] == 1
    assert "selcet" in diagnostic["message"]


def test_initialization_options_name_the_config(tmp_path: Path) -> None:
    (tmp_path / "settings").mkdir()
    (tmp_path / "settings" / "lint.toml").write_text(EVERY_RULE + 'ignore = ["TPL101"]\n', encoding="utf-8")
    with open(tmp_path / "stderr.log", "wb") as log:
        client = start(tmp_path, log, {"config": "settings/lint.toml"})
        try:
            diagnostics = client.open((tmp_path / "model.py").as_uri(), MODEL)
        finally:
            assert client.close() == 0
    codes = {d["code"] for d in diagnostics}
    assert "TPL401" in codes and "TPL101" not in codes


def _registrations(client: Client) -> list[Message]:
    return [
        r
        for m in client.server_requests
        if m["method"] == "client/registerCapability"
        for r in m["params"]["registrations"]
    ]


def test_a_config_named_at_start_is_watched_too(tmp_path: Path) -> None:
    (tmp_path / "settings").mkdir()
    config = tmp_path / "settings" / "lint.toml"
    config.write_text(EVERY_RULE + 'ignore = ["TPL401"]\n', encoding="utf-8")
    uri = (tmp_path / "model.py").as_uri()
    with open(tmp_path / "stderr.log", "wb") as log:
        client = start(tmp_path, log, {"config": "settings/lint.toml"})
        try:
            assert "TPL401" not in {d["code"] for d in client.open(uri, MODEL)}
            (watch,) = [r for r in _registrations(client) if r["method"] == "workspace/didChangeWatchedFiles"]
            assert "**/lint.toml" in {w["globPattern"] for w in watch["registerOptions"]["watchers"]}
            config.write_text(EVERY_RULE, encoding="utf-8")
            mark = len(client.notifications)
            client.notify(
                "workspace/didChangeWatchedFiles", {"changes": [{"uri": config.as_uri(), "type": 2}]}
            )
            assert "TPL401" in {d["code"] for d in client.diagnostics(uri, 1, after=mark)}
        finally:
            assert client.close() == 0


def test_a_client_that_cannot_watch_files_gets_config_edits_all_the_same(tmp_path: Path) -> None:
    config = tmp_path / "pyproject.toml"
    config.write_text(EVERY_RULE + 'ignore = ["TPL401"]\n', encoding="utf-8")
    (tmp_path / "losses.py").write_text(LOSSES, encoding="utf-8")
    uri = (tmp_path / "model.py").as_uri()
    with open(tmp_path / "stderr.log", "wb") as log:
        client = start(tmp_path, log, watches=False)
        try:
            assert "TPL401" not in {d["code"] for d in client.open(uri, MODEL)}
            mark = len(client.notifications)
            config.write_text(EVERY_RULE, encoding="utf-8")  # in another editor, or on the command line
            again = client.diagnostics(uri, 1, after=mark)  # the buffer itself never changed
            assert "TPL401" in {d["code"] for d in again}
            assert _registrations(client) == []  # LSP: no dynamic registration the client cannot take
        finally:
            assert client.close() == 0


# -- the command ----------------------------------------------------------------------------


def test_server_without_pygls_says_how_to_install_it() -> None:
    code = "import sys; sys.modules['pygls'] = None; from torchperf_lint.cli import main; sys.exit(main(['server']))"
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False, timeout=TIMEOUT
    )
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert SERVER_INSTALL in result.stderr
    assert result.stdout == ""


def test_input_that_ends_without_shutdown_exits_1() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "torchperf_lint", "server"],
        cwd=ROOT,
        input=b"",
        capture_output=True,
        check=False,
        timeout=TIMEOUT,
    )
    assert result.returncode == 1
    assert result.stdout == b""


# -- in process -----------------------------------------------------------------------------


def test_positions_count_utf16_units() -> None:
    from torchperf_lint.server import Text

    text = Text('x = "\U0001f60b" + y\n', "utf-16")
    assert text.position(0, 8).character == 9  # after the emoji: two UTF-16 units
    assert Text('x = "\U0001f60b" + y\n', "utf-32").position(0, 8).character == 8


def test_a_rule_that_raises_is_reported_not_fatal(monkeypatch: pytest.MonkeyPatch) -> None:
    from torchperf_lint.server import lint

    def explode(self: object, node: object, ctx: object) -> Iterator[object]:
        raise RuntimeError("boom")

    monkeypatch.setattr(BY_CODE["TPL103"], "check", explode)
    text = EXAMPLE.read_text(encoding="utf-8")
    result = lint(EXAMPLE.as_uri(), str(EXAMPLE), text, 1, "utf-16", None)
    errors = [d for d in result.diagnostics if d.code == "TPL000"]
    assert len(errors) == 1 and "TPL103" in errors[0].message
    assert {d.code for d in result.diagnostics} >= {"TPL101", "TPL104"}

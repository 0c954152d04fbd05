"""The language server (LSP over stdio, on pygls): diagnostics while typing, quick fixes, fix-all,
`# noqa` actions and hover. It lints the editor's buffer as it is, under the path of its file, so
the project's config and test-file patterns apply; it never writes a file."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import re
import sys
import tokenize
from bisect import bisect_right
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from . import __version__, api
from .config import ConfigError, Settings, load_settings
from .engine.findings import Finding, Safety
from .evidence import measured
from .rules import lookup

SOURCE = "torchperf-lint"
ERROR_CODE = "TPL000"
FIX_ALL_KIND = f"{types.CodeActionKind.SourceFixAll.value}.{SOURCE}"
DEBOUNCE_SECONDS = 0.3
WATCHED_FILES = (
    "**/pyproject.toml",
    "**/setup.cfg",
    "**/tox.ini",
    "**/requirements*.txt",
    "**/environment*.y*ml",
    "**/conda.y*ml",
)
# A client that cannot watch files for the server (Neovim on Linux) gets these polled instead: the
# config files (config.py) and the requirements (pip, conda) that declare a torch version, beside each open
# document and above it
POLLED_NAMES = (
    "pyproject.toml",
    "setup.cfg",
    "tox.ini",
    "requirements.txt",
    "environment.yml",
    "environment.yaml",
)
POLL_SECONDS = 1.0
_LINE_ENDS = re.compile(r"(?<=\n)|(?<=\r)(?!\n)")  # LSP and Python end lines at \n, \r\n and \r
# flake8's noqa comment; `codes` ends where the last code does
_NOQA = re.compile(r"# noqa(?::[\s]?(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?", re.IGNORECASE)


class Text:
    """A buffer's lines as LSP counts them, and positions in the client's units."""

    def __init__(self, source: str, encoding: str) -> None:
        self.source = source
        self.lines = _LINE_ENDS.split(source)
        self.starts = [0]
        for line in self.lines[:-1]:
            self.starts.append(self.starts[-1] + len(line))
        self.encoding = encoding

    def _units(self, text: str) -> int:
        if self.encoding == types.PositionEncodingKind.Utf8:
            return len(text.encode("utf-8", "surrogatepass"))
        if self.encoding == types.PositionEncodingKind.Utf32:
            return len(text)
        return len(text) + sum(1 for char in text if ord(char) > 0xFFFF)

    def content(self, line: int) -> str:
        """Line `line` (0-based) without its line end."""
        return self.lines[line].rstrip("\r\n")

    def position(self, line: int, column: int) -> types.Position:
        """The client position of a 0-based line and a column counted in characters."""
        line = min(max(line, 0), len(self.lines) - 1)
        content = self.content(line)
        return types.Position(line, self._units(content[: max(column, 0)]))

    def at_offset(self, offset: int) -> types.Position:
        line = bisect_right(self.starts, offset) - 1
        return self.position(line, offset - self.starts[line])

    def finding_range(self, finding: Finding) -> types.Range:
        """1-based line and column (the CLI's 11:12) to LSP's 0-based positions."""
        start = self.position(finding.line - 1, finding.col - 1)
        if finding.end_line < finding.line or (
            finding.end_line == finding.line and finding.end_col < finding.col
        ):
            return types.Range(start, start)
        return types.Range(start, self.position(finding.end_line - 1, finding.end_col - 1))

    def edit_to(self, fixed: str) -> types.TextEdit:
        """One edit that turns this text into `fixed`: only the span between their common
        prefix and common suffix."""
        old = self.source
        start = 0
        limit = min(len(old), len(fixed))
        while start < limit and old[start] == fixed[start]:
            start += 1
        end_old, end_new = len(old), len(fixed)
        while end_old > start and end_new > start and old[end_old - 1] == fixed[end_new - 1]:
            end_old, end_new = end_old - 1, end_new - 1
        return types.TextEdit(
            types.Range(self.at_offset(start), self.at_offset(end_old)), fixed[start:end_new]
        )


@dataclasses.dataclass
class Lint:
    """The findings of one version of a document, their diagnostics, and what fixes them."""

    uri: str
    version: Optional[int]
    path: str
    text: Text
    settings: Optional[Settings]  # None: the config could not be read
    linted: Optional[api.Linted]
    findings: list[Finding]
    ranges: list[types.Range]
    diagnostics: list[types.Diagnostic]
    fixed_all: Optional[str] = None  # computed when first asked for


RULE_PAGES = Path(__file__).resolve().parent.parent / "docs" / "rules"


def rule_page_uri(code: str) -> Optional[str]:
    """The rule's page in the checkout the server runs from (an editable install of a clone), or
    None: the project has no published home to link to, and the hover carries the page's gist."""
    page = RULE_PAGES / f"{code}.md"
    return page.as_uri() if code != ERROR_CODE and page.is_file() else None


def diagnostic(finding: Finding, where: types.Range, uri: str) -> types.Diagnostic:
    href = rule_page_uri(finding.code)
    related = None
    if finding.context:
        location = types.Location(uri, where)
        related = [types.DiagnosticRelatedInformation(location, f"hot: {finding.context}")]
    return types.Diagnostic(
        range=where,
        message=finding.message,
        severity=types.DiagnosticSeverity.Error
        if finding.code == ERROR_CODE
        else types.DiagnosticSeverity.Warning,
        code=finding.code,
        code_description=None if href is None else types.CodeDescription(href=href),
        source=SOURCE,
        related_information=related,
        data={"name": finding.name},
    )


def lint(
    uri: str, path: str, source: str, version: Optional[int], encoding: str, config: Optional[Path]
) -> Lint:
    """Lint a buffer under its file's path with the project's settings (re-read every time, so an
    edited config applies at once). Never raises: what cannot be checked is a TPL000 finding."""
    text = Text(source, encoding)
    settings: Optional[Settings] = None
    linted: Optional[api.Linted] = None
    try:
        settings = load_settings(Path(path), config)
        linted = api.lint_for_fixes(source, path, settings)
        findings = linted.findings
    except ConfigError as error:
        findings = [Finding(ERROR_CODE, "error", str(error), path, 1, 1, 1, 1)]
    except Exception as error:  # noqa: BLE001 - the server must outlive any bug in a lint
        message = f"internal error in torchperf-lint ({type(error).__name__}: {error})"
        findings = [Finding(ERROR_CODE, "error", message, path, 1, 1, 1, 1)]
        settings, linted = None, None
    ranges = [text.finding_range(finding) for finding in findings]
    diagnostics = [diagnostic(f, r, uri) for f, r in zip(findings, ranges, strict=True)]
    return Lint(uri, version, path, text, settings, linted, findings, ranges, diagnostics)


def config_stamps(documents: Iterable[str], named: Optional[Path]) -> dict[str, Optional[tuple[int, int]]]:
    """The size and mtime (None: absent) of each file an open document's settings can come from:
    POLLED_NAMES in its directory and every directory above it, and the config named at start."""
    candidates = {named} if named is not None else set()
    for document in documents:
        folder = Path(os.path.abspath(document)).parent
        candidates.update(
            directory / name for directory in (folder, *folder.parents) for name in POLLED_NAMES
        )
    stamps: dict[str, Optional[tuple[int, int]]] = {}
    for candidate in candidates:
        try:
            status = os.stat(candidate)
        except OSError:
            stamps[str(candidate)] = None
        else:
            stamps[str(candidate)] = (status.st_size, status.st_mtime_ns)
    return stamps


def _before(a: types.Position, b: types.Position) -> bool:
    return (a.line, a.character) <= (b.line, b.character)


def _touches(where: types.Range, start: types.Position, end: types.Position) -> bool:
    return _before(where.start, end) and _before(start, where.end)


def _noqa_place(text: Text, line: int) -> tuple[int, Optional[int]]:
    """Where a noqa comment for a finding on `line` (0-based) goes: the last line of the tokens
    that flake8 joins with it (a triple-quoted string, a backslash continuation), the only one of
    them that can end in a comment, and the column of the comment already there (None: none)."""
    lines = iter(text.lines)
    low, high = len(text.lines) + 1, -1
    comment: Optional[tuple[int, int]] = None
    try:
        for token in tokenize.generate_tokens(lambda: next(lines, "")):
            if token.type in (tokenize.ENDMARKER, tokenize.DEDENT):
                continue
            low, high = min(low, token.start[0] - 1), max(high, token.end[0] - 1)
            if token.type == tokenize.COMMENT:
                comment = (token.start[0] - 1, token.start[1])
            elif token.type in (tokenize.NL, tokenize.NEWLINE):
                if low <= line <= high:
                    return high, comment[1] if comment is not None and comment[0] == high else None
                low, high, comment = len(text.lines) + 1, -1, None
    except (tokenize.TokenError, SyntaxError):
        pass
    return line, None


def noqa_edit(text: Text, finding: Finding) -> types.TextEdit:
    """Add `# noqa: CODE` for the finding, or add the code to the noqa comment already there."""
    line, comment = _noqa_place(text, finding.line - 1)
    content = text.content(line)
    match = _NOQA.search(content, comment) if comment is not None else None
    if match is not None and match.group("codes"):
        end = text.position(line, match.end("codes"))
        return types.TextEdit(types.Range(end, end), f",{finding.code}")
    code_end = len(content.rstrip())
    where = types.Range(text.position(line, code_end), text.position(line, len(content)))
    return types.TextEdit(where, f"  # noqa: {finding.code}")


def _section(explanation: str, heading: str) -> str:
    marker = f"## {heading}"
    start = explanation.find(marker)
    if start < 0:
        return ""
    body = explanation[start + len(marker) :]
    end = body.find("\n## ")
    return (body if end < 0 else body[:end]).strip()


def hover_text(finding: Finding) -> str:
    """Markdown: the rule's summary, why it is slow, its measured speedup and the fix safety."""
    rule = lookup(finding.code)
    if rule is None:
        return finding.message
    parts = [
        f"**{rule.code} {rule.name}**: {rule.summary}",
        finding.message,
    ]
    if finding.context:
        parts.append(f"Hot: {finding.context}")
    why = _section(rule.explanation(), "Why it is slow")
    if why:
        parts.append(f"**Why it is slow.** {why}")
    rows = measured().get(rule.code)
    if rows:
        best = max(rows, key=lambda row: row["speedup"])
        parts.append(
            f"**Measured:** {best['speedup']:.3g}x on {best['device']} "
            f"(torch {str(best['torch']).split('+')[0]}): {best['case']}"
        )
    else:
        parts.append("**Measured:** no GPU measurement recorded for this rule.")
    fix = finding.fix
    if fix is None:
        parts.append("**Fix:** none for this finding.")
    elif fix.safety is Safety.SAFE:
        parts.append(f"**Fix (safe):** {fix.description}; `--fix` and fix-all apply it.")
    else:
        parts.append(
            f"**Fix (unsafe):** {fix.description}; only its quick fix and `--unsafe-fixes` apply it."
        )
    safety = _section(rule.explanation(), "Fix safety")
    if safety:
        parts.append(safety)
    href = rule_page_uri(rule.code)
    explain = f"`torchperf-lint --explain {rule.code}` prints the rule's page"
    parts.append(f"[{rule.code} documentation]({href}); {explain}" if href else f"{explain}.")
    return "\n\n".join(parts)


def _function(handler: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """A plain function calling a bound method: pygls marks what it registers with attributes,
    which a bound method cannot carry."""

    def call(params: Any) -> Any:
        return handler(params)

    return call


class TorchPerfServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(SOURCE, __version__, text_document_sync_kind=types.TextDocumentSyncKind.Full)
        self.config: Optional[Path] = None  # initializationOptions {"config": "path/to/pyproject.toml"}
        self.lints: dict[str, Lint] = {}
        self.pending: dict[str, asyncio.Task[None]] = {}
        self.polling: Optional[asyncio.Task[None]] = None
        self.config_stamps: dict[str, Optional[tuple[int, int]]] = {}  # what the lints read, when polled
        self.shut_down = False
        for method, handler, options in (
            (types.INITIALIZE, self.on_initialize, None),
            (types.INITIALIZED, self.on_initialized, None),
            (types.SHUTDOWN, self.on_shutdown, None),
            (types.TEXT_DOCUMENT_DID_OPEN, self.on_open, None),
            (types.TEXT_DOCUMENT_DID_CHANGE, self.on_change, None),
            (types.TEXT_DOCUMENT_DID_SAVE, self.on_save, None),
            (types.TEXT_DOCUMENT_DID_CLOSE, self.on_close, None),
            (types.WORKSPACE_DID_CHANGE_WATCHED_FILES, self.on_watched_files, None),
            (
                types.TEXT_DOCUMENT_CODE_ACTION,
                self.on_code_action,
                types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix, FIX_ALL_KIND]),
            ),
            (types.TEXT_DOCUMENT_HOVER, self.on_hover, None),
        ):
            self.feature(method, options)(_function(handler))

    # -- lifecycle ------------------------------------------------------------------------
    def on_initialize(self, params: types.InitializeParams) -> None:
        options = params.initialization_options
        given = options.get("config") if isinstance(options, dict) else None
        if isinstance(given, str) and given:
            config = Path(given).expanduser()
            root = to_fs_path(params.root_uri) if params.root_uri else params.root_path
            if not config.is_absolute() and root:
                config = Path(root) / config
            self.config = config

    def on_initialized(self, params: types.InitializedParams) -> None:
        watched = self.client_capabilities.workspace
        changes = watched.did_change_watched_files if watched else None
        if changes is not None and changes.dynamic_registration:
            globs = list(WATCHED_FILES)
            if self.config is not None:
                globs.append(f"**/{self.config.name}")  # a config named at start: any name
            watchers = [types.FileSystemWatcher(glob_pattern=glob) for glob in dict.fromkeys(globs)]
            registration = types.Registration(
                id=f"{SOURCE}-config",
                method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                register_options=types.DidChangeWatchedFilesRegistrationOptions(watchers=watchers),
            )
            self.client_register_capability(types.RegistrationParams([registration]))
        else:
            # LSP lets a server register watchers only where the client says it can
            self.polling = asyncio.get_running_loop().create_task(self._poll_configs())

    def on_shutdown(self, params: None) -> None:
        self.shut_down = True
        for uri in list(self.pending):
            self._cancel(uri)
        if self.polling is not None:
            self.polling.cancel()

    # -- documents ------------------------------------------------------------------------
    def on_open(self, params: types.DidOpenTextDocumentParams) -> None:
        self.lint_now(params.text_document.uri)

    def on_change(self, params: types.DidChangeTextDocumentParams) -> None:
        uri = params.text_document.uri
        self._cancel(uri)
        self.pending[uri] = asyncio.get_running_loop().create_task(self._lint_later(uri))

    def on_save(self, params: types.DidSaveTextDocumentParams) -> None:
        self.lint_now(params.text_document.uri)

    def on_close(self, params: types.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        self._cancel(uri)
        self.lints.pop(uri, None)
        self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri, []))

    def on_watched_files(self, params: types.DidChangeWatchedFilesParams) -> None:
        """A config or requirements file changed: every open document is linted again."""
        self.lint_open_documents()

    def lint_open_documents(self) -> None:
        api.forget_project_files()
        for uri in list(self.lints):
            self.lint_now(uri)

    async def _poll_configs(self) -> None:
        """Without the client's watchers: lint the open documents again when a file their settings
        can come from changes, is created or is deleted since they were linted (a few stats a
        second)."""
        while True:
            await asyncio.sleep(POLL_SECONDS)
            stamps = config_stamps((lint.path for lint in self.lints.values() if lint.path), self.config)
            known = self.config_stamps
            if any(path in known and known[path] != stamp for path, stamp in stamps.items()):
                known.clear()  # the lints below take their own
                self.lint_open_documents()

    async def _lint_later(self, uri: str) -> None:
        await asyncio.sleep(DEBOUNCE_SECONDS)  # a newer change cancels this task
        self.pending.pop(uri, None)
        self.lint_now(uri)

    def _cancel(self, uri: str) -> None:
        task = self.pending.pop(uri, None)
        if task is not None:
            task.cancel()

    def lint_now(self, uri: str) -> Lint:
        self._cancel(uri)
        document = self.workspace.get_text_document(uri)
        encoding = str(self.workspace.position_encoding or types.PositionEncodingKind.Utf16)
        if self.polling is not None and document.path:
            for path, stamp in config_stamps([document.path], self.config).items():
                self.config_stamps.setdefault(path, stamp)  # read before the lint: an edit during it counts
        result = lint(uri, document.path, document.source, document.version, encoding, self.config)
        self.lints[uri] = result
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri, result.diagnostics, version=document.version)
        )
        return result

    def current(self, uri: str) -> Lint:
        """The lint of the document as the client has it now (a pending lint runs at once)."""
        document = self.workspace.get_text_document(uri)
        known = self.lints.get(uri)
        if known is not None and known.version == document.version and known.text.source == document.source:
            return known
        return self.lint_now(uri)

    # -- requests -------------------------------------------------------------------------
    def _workspace_edit(self, uri: str, version: Optional[int], edit: types.TextEdit) -> types.WorkspaceEdit:
        capabilities = self.client_capabilities.workspace
        edits = capabilities.workspace_edit if capabilities else None
        if edits is not None and edits.document_changes:
            document = types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version)
            return types.WorkspaceEdit(document_changes=[types.TextDocumentEdit(document, [edit])])
        return types.WorkspaceEdit(changes={uri: [edit]})

    def on_code_action(self, params: types.CodeActionParams) -> list[types.CodeAction]:
        uri = params.text_document.uri
        state = self.current(uri)
        only = params.context.only

        def wanted(kind: str) -> bool:
            return only is None or any(kind == k or kind.startswith(f"{k}.") for k in only)

        actions: list[types.CodeAction] = []
        quick = wanted(types.CodeActionKind.QuickFix)
        for finding, where, diag in zip(state.findings, state.ranges, state.diagnostics, strict=True):
            if not quick or finding.code == ERROR_CODE:
                continue
            if not _touches(where, params.range.start, params.range.end):
                continue
            fixed = state.linted.fixed(finding, unsafe=True) if state.linted else None
            if fixed is not None and fixed != state.text.source and finding.fix is not None:
                unsafe = finding.fix.safety is not Safety.SAFE
                actions.append(
                    types.CodeAction(
                        title=f"{finding.code}: {finding.fix.description}{' (unsafe)' if unsafe else ''}",
                        kind=types.CodeActionKind.QuickFix,
                        diagnostics=[diag],
                        is_preferred=not unsafe,
                        edit=self._workspace_edit(uri, state.version, state.text.edit_to(fixed)),
                    )
                )
            actions.append(
                types.CodeAction(
                    title=f"{finding.code}: add `# noqa: {finding.code}`",
                    kind=types.CodeActionKind.QuickFix,
                    diagnostics=[diag],
                    edit=self._workspace_edit(uri, state.version, noqa_edit(state.text, finding)),
                )
            )
        # The light bulb asks on every cursor move; fix-all is offered when asked for by kind or by hand.
        automatic = params.context.trigger_kind == types.CodeActionTriggerKind.Automatic
        fix_all = self._fix_all(state) if wanted(FIX_ALL_KIND) and not (automatic and only is None) else None
        if fix_all is not None:
            actions.append(fix_all)
        return actions

    def _fix_all(self, state: Lint) -> Optional[types.CodeAction]:
        """`--fix` on the buffer: every safe fix, never an unsafe one."""
        if state.settings is None or not any(
            f.fix is not None and f.fix.safety is Safety.SAFE for f in state.findings
        ):
            return None
        if state.fixed_all is None:
            state.fixed_all = api.fix_source(state.text.source, state.path, settings=state.settings)
        if state.fixed_all == state.text.source:
            return None
        return types.CodeAction(
            title="torchperf-lint: fix all safe findings in this file",
            kind=FIX_ALL_KIND,
            edit=self._workspace_edit(state.uri, state.version, state.text.edit_to(state.fixed_all)),
        )

    def on_hover(self, params: types.HoverParams) -> Optional[types.Hover]:
        state = self.current(params.text_document.uri)
        position = params.position
        for finding, where in zip(state.findings, state.ranges, strict=True):
            if finding.code != ERROR_CODE and _before(where.start, position) and _before(position, where.end):
                content = types.MarkupContent(kind=types.MarkupKind.Markdown, value=hover_text(finding))
                return types.Hover(contents=content, range=where)
        return None


def serve() -> int:
    """Speak LSP on stdin and stdout (nothing else may write to stdout meanwhile). The exit status
    is 0 after a `shutdown` request, as LSP asks, and 1 when the input ended without one (as in
    `torchperf-lint server` run by mistake for a directory named `server`)."""
    stdout = sys.stdout.buffer
    sys.stdout = sys.stderr
    server = TorchPerfServer()
    server.start_io(sys.stdin.buffer, stdout)
    return 0 if server.shut_down else 1

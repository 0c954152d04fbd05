"""Every `pip install` line the README and the command's messages show must work: no release of
torchperf-lint is on a package index and the project has no published home, so it installs from a
clone or a path, and each extra it names exists. Nor does the project name an address it does not
own, in the README, the package or its messages."""

from __future__ import annotations

import configparser
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import InvalidRequirement, Requirement

from torchperf_lint.cli import SERVER_INSTALL
from torchperf_lint.reporting import ReportOptions
from torchperf_lint.reporting.sarif import render_sarif

ROOT = Path(__file__).resolve().parents[1]
OPTIONS_WITH_VALUE = {"--index-url", "--extra-index-url", "-i", "-r", "--requirement", "-c"}


def _extras() -> set[str]:
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg", encoding="utf-8")
    return set(config["options.extras_require"])


def _install_commands(text: str) -> list[str]:
    """Each `pip install ...` command in the text, up to the end of its line, code span, shell
    comment, `&&` or the words that follow it in prose."""
    found = []
    for match in re.finditer(r"pip install ((?:(?!pip install)[^`\n])+)", text):
        command = re.split(r"\s+#|\s+&&|\s+in a clone", match.group(1))[0]
        found.append(re.sub(r"(?<=\S)[.,]$", "", command.strip()))  # the sentence's stop
    return found


def problems_of(command: str) -> list[str]:
    """Why a `pip install` command's arguments cannot install what they name: this package from an
    index, or an extra it does not have."""
    problems = []
    words = iter(shlex.split(command))
    for word in words:
        if word in OPTIONS_WITH_VALUE:
            next(words)
            continue
        if word.startswith("-"):
            continue
        local = re.fullmatch(r"(\.|\.{0,2}/[\w/.-]+)(\[([\w,]+)\])?", word)
        if local:
            unknown = set((local.group(3) or "").split(",")) - {""} - _extras()
            problems += [f"{word}: no extra {extra!r}" for extra in sorted(unknown)]
            continue
        if "://" in word:
            problems.append(f"{word}: the project has no published home; install from a clone")
            continue
        try:
            requirement = Requirement(word)
        except InvalidRequirement:
            problems.append(f"{word}: not a requirement")
            continue
        if requirement.name != "torchperf-lint":
            continue  # a dependency from its index (torch, ruff)
        problems.append(f"{word}: no release is on a package index; install from a clone")
        unknown = requirement.extras - _extras()
        problems += [f"{word}: no extra {extra!r}" for extra in sorted(unknown)]
    return problems


def test_the_checker_rejects_an_install_from_the_index() -> None:
    assert problems_of("'torchperf-lint[server]'")
    assert problems_of("-e '.[servers]'")
    assert problems_of('"torchperf-lint[server] @ git+https://example.org/torchperf-lint"')
    assert not problems_of("-e '.[server]'")


# an address that claims a home for the project: any URL naming it
PROJECT_ADDRESS = re.compile(r"[a-z+]+://\S*torchperf", re.IGNORECASE)


def _shipped_texts() -> dict[str, str]:
    paths = [ROOT / "README.md", ROOT / ".pre-commit-hooks.yaml", ROOT / "setup.cfg"]
    paths += sorted((ROOT / "torchperf_lint").rglob("*.py")) + sorted((ROOT / "docs").rglob("*"))
    return {str(path.relative_to(ROOT)): path.read_text(encoding="utf-8") for path in paths if path.is_file()}


def test_no_address_the_project_does_not_own() -> None:
    found = {name: PROJECT_ADDRESS.findall(text) for name, text in _shipped_texts().items()}
    assert {name: urls for name, urls in found.items() if urls} == {}


def test_the_address_check_sees_one() -> None:
    assert PROJECT_ADDRESS.findall('pip install "git+https://github.com/someone/torchperf-lint"')


def test_sarif_output_names_no_address() -> None:
    sarif = render_sarif([], ReportOptions())
    assert "Uri" not in sarif and not PROJECT_ADDRESS.findall(sarif)


def test_every_install_line_of_the_readme_works() -> None:
    commands = _install_commands((ROOT / "README.md").read_text(encoding="utf-8"))
    assert any("[server]" in command for command in commands)
    assert {command: problems_of(command) for command in commands} == {command: [] for command in commands}


@pytest.mark.parametrize("command", _install_commands(SERVER_INSTALL))
def test_the_server_install_hint_names_commands_that_work(command: str) -> None:
    assert "[server]" in command
    assert problems_of(command) == []


def test_server_without_pygls_names_commands_that_work() -> None:
    code = "import sys; sys.modules['pygls'] = None; from torchperf_lint.cli import main; sys.exit(main(['server']))"
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False, timeout=60
    )
    assert result.returncode == 2
    commands = _install_commands(result.stderr)
    assert len(commands) == 1
    assert all(problems_of(command) == [] for command in commands)

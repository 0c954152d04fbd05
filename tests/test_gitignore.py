"""Walking a directory skips what git ignores, inside a git work tree (ruff's default); git itself
is the oracle for which files that is."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from torchperf_lint.cli import main
from torchperf_lint.files import discover
from torchperf_lint.gitignore import for_directory

GITIGNORE = """\
# generated code
/generated/
*_pb2.py
!keep_pb2.py
data/**/cache
notebooks/*.ipynb
\\#weird.py
trailing.py
**/fixtures/*.py
logs/**
[Ss]cratch*.py
""".replace("trailing.py", "trailing.py   ")  # trailing spaces are not part of a pattern
FILES = (
    "a.py",
    "generated/x.py",
    "sub/generated/y.py",
    "proto_pb2.py",
    "keep_pb2.py",
    "sub/local.py",
    "local.py",
    "data/a/b/cache/z.py",
    "data/cache/w.py",
    "notebooks/n.ipynb",
    "notebooks/deep/m.ipynb",
    "#weird.py",
    "trailing.py",
    "tests/fixtures/f.py",
    "fixtures/g.py",
    "logs/old/run.py",
    "Scratch1.py",
    "scratch_2.py",
    "other/again.py",
    "nested/inner.py",
    "nested/proto_pb2.py",
)
HOT = b"import torch\n\n\ndef f(x):\n    return x\n"


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout


def make_tree(root: Path, repository: bool = True) -> None:
    for name in FILES:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(HOT)
    (root / ".gitignore").write_text(GITIGNORE)
    (root / "sub" / ".gitignore").write_text("local.py\n")
    (root / "other" / ".gitignore").write_text(
        "# a deeper file can take back what a higher one ignores\n!*_pb2.py\n"
    )
    (root / "other" / "proto_pb2.py").write_bytes(HOT)
    if repository:
        git("init", "-q", cwd=root)
        git("init", "-q", cwd=root / "nested")  # a nested repository: its own rules, not ours
        (root / "nested" / ".gitignore").write_text("inner.py\n")


def relative(paths: list[str], root: Path) -> set[str]:
    return {Path(p).relative_to(root).as_posix() for p in paths}


def gits_view(root: Path) -> set[str]:
    """The untracked files git does not ignore, nested repository included."""
    listed = set(git("ls-files", "--others", "--exclude-standard", cwd=root).splitlines())
    listed = {p for p in listed if not p.startswith("nested/")}
    listed |= {
        f"nested/{p}"
        for p in git("ls-files", "--others", "--exclude-standard", cwd=root / "nested").splitlines()
    }
    return {p for p in listed if p.endswith((".py", ".ipynb"))}


def test_a_walk_finds_what_git_does_not_ignore(tmp_path: Path) -> None:
    make_tree(tmp_path)
    found = relative(list(discover([str(tmp_path)], (), [])), tmp_path)
    assert found == gits_view(tmp_path)
    assert {"a.py", "keep_pb2.py", "local.py", "other/proto_pb2.py", "nested/proto_pb2.py"} <= found
    assert not found & {"generated/x.py", "sub/local.py", "trailing.py", "#weird.py", "nested/inner.py"}


def test_a_walk_from_a_subdirectory_reads_the_ignore_files_above_it(tmp_path: Path) -> None:
    make_tree(tmp_path)
    found = relative(list(discover([str(tmp_path / "sub")], (), [])), tmp_path)
    assert found == {p for p in gits_view(tmp_path) if p.startswith("sub/")} == {"sub/generated/y.py"}


def test_outside_a_git_work_tree_gitignore_files_mean_nothing(tmp_path: Path) -> None:
    make_tree(tmp_path, repository=False)
    found = relative(list(discover([str(tmp_path)], (), [])), tmp_path)
    assert found == {*FILES, "other/proto_pb2.py"}


def test_no_respect_gitignore_walks_everything(tmp_path: Path) -> None:
    make_tree(tmp_path)
    found = relative(list(discover([str(tmp_path)], (), [], respect_gitignore=False)), tmp_path)
    assert found == {*FILES, "other/proto_pb2.py"}


@pytest.mark.parametrize(
    "args, config, ignored_file_linted",
    [((), "", False), (("--no-respect-gitignore",), "", True), ((), "respect-gitignore = false\n", True)],
)
def test_the_command_line_and_the_config_turn_it_off(
    tmp_path: Path, capsys, args: tuple[str, ...], config: str, ignored_file_linted: bool
) -> None:
    make_tree(tmp_path)
    (tmp_path / "generated" / "x.py").write_bytes(
        b"import torch\n\ntorch.autograd.set_detect_anomaly(True)\n"
    )
    (tmp_path / "pyproject.toml").write_text(f"[tool.torchperf-lint]\n{config}")
    main(["--select", "TPL601", "--format", "json", *args, str(tmp_path)])
    paths = {Path(f["path"]).relative_to(tmp_path).as_posix() for f in json.loads(capsys.readouterr().out)}
    assert ("generated/x.py" in paths) is ignored_file_linted


def test_a_file_named_explicitly_is_linted_even_when_git_ignores_it(tmp_path: Path, capsys) -> None:
    make_tree(tmp_path)
    ignored = tmp_path / "generated" / "x.py"
    ignored.write_bytes(b"import torch\n\ntorch.autograd.set_detect_anomaly(True)\n")
    assert main(["--select", "TPL601", str(ignored)]) == 1
    assert f"{ignored}:3:1: TPL601 " in capsys.readouterr().out


def test_info_exclude_is_read(tmp_path: Path) -> None:
    make_tree(tmp_path)
    (tmp_path / ".git" / "info").mkdir(exist_ok=True)
    (tmp_path / ".git" / "info" / "exclude").write_text("a.py\n")
    found = relative(list(discover([str(tmp_path)], (), [])), tmp_path)
    assert "a.py" not in found and found == gits_view(tmp_path)


PATTERNS = [
    "a/**/b.py",
    "**/deep.py",
    "top/**",
    "/anchored.py",
    "mid/name.py",
    "dironly/",
    "[!x]ab.py",
    "q?.py",
    "*.ipynb",
    "!keep.ipynb",
    "star*/in.py",
    "lit\\*.py",
]
PATHS = [
    "a/b.py",
    "a/x/y/b.py",
    "b.py",
    "x/a/b.py",
    "deep.py",
    "p/q/deep.py",
    "top/t.py",
    "top/u/v.py",
    "anchored.py",
    "s/anchored.py",
    "mid/name.py",
    "s/mid/name.py",
    "dironly/f.py",
    "s/dironly/g.py",
    "yab.py",
    "xab.py",
    "q1.py",
    "q12.py",
    "n.ipynb",
    "keep.ipynb",
    "starry/in.py",
    "star/x/in.py",
    "lit*.py",
    "litx.py",
]


def test_each_pattern_matches_what_git_matches(tmp_path: Path) -> None:
    for name in PATHS:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(b"")
    (tmp_path / ".gitignore").write_text("\n".join(PATTERNS) + "\n")
    git("init", "-q", cwd=tmp_path)
    checked = subprocess.run(
        ["git", "check-ignore", "--stdin"],
        cwd=tmp_path,
        input="\n".join(PATHS),
        capture_output=True,
        text=True,
    )
    by_git = set(checked.stdout.splitlines())
    rules = for_directory(str(tmp_path))
    assert rules is not None

    def ignored(name: str) -> bool:
        # as a walk asks: a file is ignored when it or a directory above it is
        parts = name.split("/")
        directories = ["/".join(parts[:i]) for i in range(1, len(parts))]
        return any(rules.ignored(str(tmp_path / d), is_directory=True) for d in directories) or rules.ignored(
            str(tmp_path / name), is_directory=False
        )

    assert {name for name in PATHS if ignored(name)} == by_git

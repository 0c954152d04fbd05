"""Imports point down (DESIGN.md, "Imports point down"): syntax <- analysis <- engine <- rules <- the
routes, with project beside analysis. Read from the sources with `ast`, nothing imported: every import
counts, those inside functions and under TYPE_CHECKING as well, and a package's `__init__` is a module
like any other (its re-exports are imports)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

PACKAGE = "torchperf_lint"
ROOT = Path(__file__).resolve().parent.parent / PACKAGE

# Bottom to top. A name ending in `.` is a package prefix (every module under it), any other name one
# module. A module named nowhere belongs to "the run", the machinery the routes share.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "base",  # the version, settings and rule selection, path patterns, file discovery, cache files
        (
            PACKAGE,
            f"{PACKAGE}.settings",
            f"{PACKAGE}.catalog",
            f"{PACKAGE}.selection",
            f"{PACKAGE}.paths",
            f"{PACKAGE}.gitignore",
            f"{PACKAGE}.files",
            f"{PACKAGE}.cache_files",
        ),
    ),
    ("syntax", (f"{PACKAGE}.syntax.",)),
    ("analysis", (f"{PACKAGE}.analysis.", f"{PACKAGE}.project.")),
    ("engine", (f"{PACKAGE}.engine.",)),
    ("rules", (f"{PACKAGE}.rules.",)),
    ("the run", ()),
    (
        "routes",
        (
            f"{PACKAGE}.cli",
            f"{PACKAGE}.__main__",
            f"{PACKAGE}.flake8_plugin",
            f"{PACKAGE}.api",
            f"{PACKAGE}.server",
        ),
    ),
)
DEFAULT_LAYER = "the run"
RANK = {name: rank for rank, (name, _) in enumerate(LAYERS)}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(ROOT.rglob("*.py"))}


def layer_of(module: str) -> str:
    best, length = DEFAULT_LAYER, -1
    for name, members in LAYERS:
        for member in members:
            package = member.rstrip(".")
            inside = module == package or (member.endswith(".") and module.startswith(member))
            if inside and len(package) > length:
                best, length = name, len(package)
    return best


def imported_modules(module: str, path: Path) -> set[str]:
    """The package's modules that `module` imports; `from . import x` names module x where x is one."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = module.split(".")
                keep = len(parts) - node.level + (1 if is_package else 0)
                base = ".".join(parts[:keep] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                found.add(submodule if submodule in MODULES else base)
    return {name for name in found if name == PACKAGE or name.startswith(f"{PACKAGE}.")}


def upward_imports() -> list[str]:
    problems = []
    for module, path in MODULES.items():
        rank = RANK[layer_of(module)]
        for target in sorted(imported_modules(module, path)):
            if RANK[layer_of(target)] > rank:
                problems.append(f"{module} ({layer_of(module)}) imports {target} ({layer_of(target)})")
    return problems


def test_no_module_imports_one_from_a_layer_above_it() -> None:
    assert upward_imports() == []


def test_every_layer_named_here_exists() -> None:
    """A renamed module must not leave its layer empty and the check silently weaker."""
    for name, members in LAYERS:
        for member in members:
            package = member.rstrip(".")
            assert package in MODULES, f"{name}: {member} is not a module of the package"


@pytest.mark.parametrize(
    ("module", "source", "target"),
    [
        ("analysis.names", "from ..engine.context import Context", "torchperf_lint.engine.context"),
        ("syntax.walker", "from ..analysis import names", "torchperf_lint.analysis.names"),
        ("engine.runner", "from ..rules.base import Rule", "torchperf_lint.rules.base"),
        ("command", "from .cli import main", "torchperf_lint.cli"),
        ("settings", "from .engine import findings", "torchperf_lint.engine.findings"),
    ],
)
def test_the_check_sees_an_upward_import(tmp_path: Path, module: str, source: str, target: str) -> None:
    """The check itself: each of these lines, added to its module, is one upward import."""
    name = f"{PACKAGE}.{module}"
    path = tmp_path / "module.py"
    path.write_text(source + "\n", encoding="utf-8")
    assert target in imported_modules(name, path)
    assert RANK[layer_of(target)] > RANK[layer_of(name)]


def test_a_package_init_resolves_relative_imports_from_itself() -> None:
    assert imported_modules(f"{PACKAGE}.rules", ROOT / "rules" / "__init__.py") >= {f"{PACKAGE}.rules.base"}


def import_circles(prefix: str) -> list[list[str]]:
    """The import circles among the package's modules under `prefix` (every import counts, those
    inside functions and under TYPE_CHECKING too), each as the path that closes it."""
    graph = {
        module: sorted(t for t in imported_modules(module, path) if t.startswith(prefix) and t != module)
        for module, path in MODULES.items()
        if module.startswith(prefix)
    }
    circles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in graph.get(module, ()):
            if state.get(target) == 1:
                circles.append([*path[path.index(target) :], target])
            elif target not in state:
                visit(target, [*path, target])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    return circles


def test_the_project_pass_imports_no_circle() -> None:
    """graph.py imports the modules that work out one fact each; they ask the project through
    project/refs.py's ProjectView and never import graph.py back."""
    assert import_circles(f"{PACKAGE}.project.") == []


def test_the_circle_check_sees_a_circle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = tmp_path / "first.py", tmp_path / "second.py"
    first.write_text("from . import second\n", encoding="utf-8")
    second.write_text("def f():\n    from .first import g\n", encoding="utf-8")
    names = {f"{PACKAGE}.project.first": first, f"{PACKAGE}.project.second": second}
    monkeypatch.setattr(sys.modules[__name__], "MODULES", names)
    assert import_circles(f"{PACKAGE}.project.") == [
        [f"{PACKAGE}.project.first", f"{PACKAGE}.project.second", f"{PACKAGE}.project.first"]
    ]

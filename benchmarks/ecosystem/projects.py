"""The pinned project list, and getting each project's Python files from PyPI into the cache."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

# Each project belongs to one of the two populations of the default policy: training code or libraries.
from torchperf_lint.evidence import LIBRARY, TRAINING

# Written at the top of every unpacked project: it makes that directory the project root (the nearest
# pyproject.toml) and stops the config search there, so each project is linted alone, with the
# linter's defaults, wherever the cache lives.
ROOT_MARKER = "pyproject.toml"
ROOT_MARKER_TEXT = "# written by the ecosystem check: the project root, linted with the default settings\n[tool.torchperf-lint]\n"


PINS = "PINS.tsv"


class FetchError(Exception):
    """A project that could not be downloaded or unpacked; the message is one line."""


@dataclasses.dataclass(frozen=True)
class Project:
    name: str
    version: str
    paths: tuple[str, ...]  # directories or files inside the distribution, relative to its top
    exclude: tuple[str, ...] = ()
    population: str = LIBRARY
    origin: str = ""  # training code: the folder of the training corpus it is copied from
    repo: str = ""  # training code the check adds (training.toml): owner/name on GitHub
    commit: str = ""  # and its pinned commit

    @property
    def label(self) -> str:
        return f"{self.name} {self.version}"

    def wanted(self, member: str) -> bool:
        """Whether a file of the distribution (a relative path with '/') is linted."""
        if not member.endswith(".py"):
            return False

        def under(prefixes: tuple[str, ...]) -> bool:
            return any(member == p or member.startswith(p.rstrip("/") + "/") for p in prefixes)

        return under(self.paths) and not under(self.exclude)


def _strings(value: Any, key: str, where: str, required: bool) -> tuple[str, ...]:
    if (
        not isinstance(value, list)
        or (required and not value)
        or not all(isinstance(v, str) and v for v in value)
    ):
        what = "a non-empty list" if required else "a list"
        raise ValueError(f"{where}: {key} must be {what} of non-empty strings, got {value!r}")
    return tuple(value)


def parse_projects(text: str, where: str = "projects.toml") -> list[Project]:
    data = tomllib.loads(text)
    projects: list[Project] = []
    for number, entry in enumerate(data.get("project", []), start=1):
        at = f"{where}: project {number}"
        unknown = set(entry) - {"name", "version", "paths", "exclude"}
        if unknown:
            raise ValueError(f"{at}: unknown keys {sorted(unknown)}")
        name, version = entry.get("name"), entry.get("version")
        if not isinstance(name, str) or not isinstance(version, str) or not name or not version:
            raise ValueError(f"{at}: name and version must be strings")
        paths = _strings(entry.get("paths"), "paths", at, required=True)
        exclude = _strings(entry.get("exclude", []), "exclude", at, required=False)
        projects.append(Project(name, version, paths, exclude))
    names = [p.name for p in projects]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"{where}: listed twice: {', '.join(duplicates)}")
    return projects


def load_projects(path: Path) -> list[Project]:
    return parse_projects(path.read_text(encoding="utf-8"), str(path))


def parse_pins(text: str, where: str = PINS) -> list[Project]:
    """The training corpus's pinned repositories (a TSV with `repo` and `commit` columns) as projects of
    the training population: named after the repository, versioned by the commit's first 12 digits, read
    from the folder `owner+name`."""
    rows = [line.split("\t") for line in text.splitlines() if line.strip()]
    if not rows or rows[0][:2] != ["repo", "commit"]:
        raise ValueError(f"{where}: the first line must start with the columns repo and commit")
    projects = []
    for number, row in enumerate(rows[1:], start=2):
        repo, commit = (row + ["", ""])[:2]
        if repo.count("/") != 1 or len(commit) != 40:
            raise ValueError(f"{where}:{number}: expected owner/name and a 40-digit commit, got {row[:2]!r}")
        name = repo.split("/")[1].lower()
        projects.append(
            Project(name, commit[:12], (".",), population=TRAINING, origin=repo.replace("/", "+"))
        )
    return projects


def load_training(corpus: Path) -> list[Project]:
    pins = corpus / PINS
    if not pins.is_file():
        raise ValueError(f"{pins}: not found; pass --training-corpus DIR (the shared training corpus)")
    return parse_pins(pins.read_text(encoding="utf-8"), str(pins))


def parse_added_training(text: str, where: str = "training.toml") -> list[Project]:
    """The training repositories the check adds (training.toml), as projects of the training
    population read from the sources folder (`owner+name`)."""
    projects = []
    for number, entry in enumerate(tomllib.loads(text).get("repository", []), start=1):
        repo, commit = entry.get("repo"), entry.get("commit")
        if (
            not isinstance(repo, str)
            or repo.count("/") != 1
            or not isinstance(commit, str)
            or len(commit) != 40
        ):
            raise ValueError(
                f"{where}: repository {number}: repo must be owner/name and commit 40 hex digits"
            )
        name = entry.get("name", repo.split("/")[1].lower())
        origin = repo.replace("/", "+")
        projects.append(
            Project(name, commit[:12], (".",), population=TRAINING, origin=origin, repo=repo, commit=commit)
        )
    return projects


def load_added_training(path: Path) -> list[Project]:
    return parse_added_training(path.read_text(encoding="utf-8"), str(path)) if path.exists() else []


def bring_back(project: Project, sources: Path) -> str:
    """The commands that put an added training repository where the check reads it."""
    where = sources / project.origin
    return f"git clone https://github.com/{project.repo} {where} && git -C {where} checkout {project.commit}"


def _source_commit(folder: Path) -> str:
    """The commit a sources folder holds: a clone's HEAD, or an export's COMMIT file."""
    if (folder / ".git").exists():
        done = subprocess.run(["git", "-C", str(folder), "rev-parse", "HEAD"], capture_output=True, text=True)
        return done.stdout.strip()
    marker = folder / "COMMIT"
    return marker.read_text(encoding="utf-8").strip() if marker.exists() else ""


def choose(projects: list[Project], only: str | None) -> list[Project]:
    """The projects named in `--only NAME[,NAME]` (all when it is not given)."""
    if not only:
        return projects
    wanted = {n.strip().lower() for n in only.split(",") if n.strip()}
    unknown = wanted - {p.name.lower() for p in projects}
    if unknown:
        raise ValueError(f"--only: not in the project list: {', '.join(sorted(unknown))}")
    return [p for p in projects if p.name.lower() in wanted]


def _members(archive: Path) -> Iterator[tuple[str, bytes]]:
    """(relative path, bytes) of every file in a wheel or an sdist, relative to the distribution's
    top: an sdist's single leading directory (`name-version/`) is dropped."""
    if archive.suffix in (".whl", ".zip"):
        with zipfile.ZipFile(archive) as zipped:
            names = [i.filename for i in zipped.infolist() if not i.is_dir()]
            strip = archive.suffix == ".zip"
            for name in names:
                yield (name.split("/", 1)[1] if strip and "/" in name else name), zipped.read(name)
    elif archive.name.endswith((".tar.gz", ".tgz", ".tar.bz2", ".tar")):
        with tarfile.open(archive) as tarred:
            for member in tarred.getmembers():
                if member.isfile() and "/" in member.name:
                    handle = tarred.extractfile(member)
                    if handle is not None:
                        yield member.name.split("/", 1)[1], handle.read()
    else:
        raise FetchError(f"unknown archive type: {archive.name}")


def unpack(project: Project, archive: Path, destination: Path) -> int:
    """Write the project's wanted `.py` files under `destination`, and the root marker; returns how
    many files were written."""
    count = 0
    for name, data in _members(archive):
        parts = Path(name).parts
        if not project.wanted(name) or Path(name).is_absolute() or ".." in parts:
            continue
        target = destination.joinpath(*parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        count += 1
    (destination / ROOT_MARKER).write_text(ROOT_MARKER_TEXT, encoding="utf-8")
    return count


def project_dir(cache_dir: Path, project: Project) -> Path:
    return cache_dir / "projects" / f"{project.name}-{project.version}"


def training_dir(cache_dir: Path, project: Project) -> Path:
    return cache_dir / "training" / f"{project.name}-{project.version}"


_KEPT = ("requirements", "setup.py", "setup.cfg", "pyproject.toml", "environment", "license", "copying")


def _not_sources(folder: str, names: list[str]) -> set[str]:
    """What a copy leaves out: version control, data, notebooks, anything but Python files,
    requirement and setup files, and licences."""
    skipped = set()
    for name in names:
        if (
            name == ".git"
            or (Path(folder) / name).is_file()
            and not (name.endswith(".py") or name.lower().startswith(_KEPT))
        ):
            skipped.add(name)
    return skipped


def mark_root(root: Path) -> None:
    """Make `root` the project root, linted with the default settings: a repository's own
    pyproject.toml is kept (its build and dependency tables matter: which torch it needs) and given an
    empty config table."""
    marker = root / ROOT_MARKER
    if not marker.exists():
        marker.write_text(ROOT_MARKER_TEXT, encoding="utf-8")
        return
    text = marker.read_text(encoding="utf-8")
    if "[tool.torchperf-lint]" not in text:
        marker.write_text(text.rstrip("\n") + "\n\n" + ROOT_MARKER_TEXT, encoding="utf-8")


def copy_training(project: Project, corpus: Path, cache_dir: Path) -> Path:
    """A writable copy of a training repository in the cache (the shared corpus is read-only; an
    added repository's folder is a clone someone edits), with the root marker, made once. The
    Python files, requirement files and licences are copied, nothing else."""
    root = training_dir(cache_dir, project)
    if root.is_dir():
        return root
    source = corpus / project.origin
    if project.repo:
        if not source.is_dir():
            raise FetchError(f"{source}: not there; bring it back with: {bring_back(project, corpus)}")
        found = _source_commit(source)
        if found != project.commit:
            raise FetchError(
                f"{source} holds commit {found or 'unknown'}, training.toml pins {project.commit}: "
                f"git -C {source} checkout {project.commit}"
            )
    elif not source.is_dir():
        raise FetchError(f"{source}: not found in the training corpus (PINS.tsv lists it)")
    root.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=root.parent, prefix=".copy-") as scratch:
        staging = Path(scratch) / "project"
        shutil.copytree(  # not the corpus's read-only modes
            source, staging, copy_function=shutil.copyfile, ignore=_not_sources
        )
        for folder in [staging, *(p for p in staging.rglob("*") if p.is_dir())]:
            folder.chmod(0o755)
        mark_root(staging)
        os.replace(staging, root)
    return root


def fetch(project: Project, cache_dir: Path, corpus: Path | None = None, sources: Path | None = None) -> Path:
    """The project's root in the cache: a PyPI project is downloaded and unpacked, a training
    repository copied from the shared corpus or, for one training.toml adds, from `sources`, when
    it is not there yet."""
    if project.population == TRAINING:
        folder = sources if project.repo else corpus
        if folder is None:
            raise FetchError("no training corpus given")
        return copy_training(project, folder, cache_dir)
    root = project_dir(cache_dir, project)
    if root.is_dir():
        return root
    root.parent.mkdir(parents=True, exist_ok=True)
    ignore = cache_dir / ".gitignore"
    if not ignore.exists():
        ignore.write_text("*\n", encoding="utf-8")
    with tempfile.TemporaryDirectory(dir=root.parent, prefix=".download-") as scratch:
        download = Path(scratch) / "download"
        command = [
            sys.executable, "-m", "pip", "download", "--no-deps", "--prefer-binary",
            "--disable-pip-version-check", "--quiet", "--dest", str(download),
            f"{project.name}=={project.version}",
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            lines = [line.strip() for line in done.stderr.splitlines() if line.strip()]
            reason = lines[-1] if lines else f"pip exited with {done.returncode}"
            raise FetchError(f"pip download {project.name}=={project.version} failed: {reason}")
        archives = sorted(download.iterdir())
        if len(archives) != 1:
            raise FetchError(f"pip download {project.name}=={project.version} gave {len(archives)} files")
        staging = Path(scratch) / "project"
        staging.mkdir()
        try:
            written = unpack(project, archives[0], staging)
        except (OSError, zipfile.BadZipFile, tarfile.TarError) as error:
            raise FetchError(f"cannot unpack {archives[0].name}: {error}") from None
        if written == 0:
            raise FetchError(f"{archives[0].name} has no .py file under {', '.join(project.paths)}")
        os.replace(staging, root)  # whole or not at all: a killed run leaves no half project
    return root


def python_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if p.is_file())


def count_lines(root: Path) -> tuple[int, int]:
    """(files, lines) of the project's Python files."""
    files = python_files(root)
    return len(files), sum(p.read_bytes().count(b"\n") for p in files)

"""`python -m benchmarks.ecosystem [--only NAME,...] [--population training|library] [--update-snapshot]
[--no-fix-check] [--markdown FILE] [--labels-template FILE] [--cache-dir DIR] [--training-corpus DIR]`."""

from __future__ import annotations

import argparse
import functools
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from torchperf_lint.evidence import LIBRARY, POPULATIONS

from . import labels as labels_module
from . import snapshot
from .fixcheck import FixCheck, check_fixes, run_fixer
from .lint import (
    PRECISION,
    REPO_ROOT,
    describe_checkout,
    lint_project,
    listed_rules,
    selection,
    tracked_rules,
)
from .misses import load_problems
from .projects import (
    FetchError,
    Project,
    choose,
    count_lines,
    fetch,
    load_added_training,
    load_projects,
    load_training,
)
from .report import ProjectRun, Report, render

HERE = Path(__file__).resolve().parent
PROJECTS = HERE / "projects.toml"
SNAPSHOT = HERE / "snapshot.jsonl"
LABELS = HERE / "labels.csv"
MISSES = HERE / "misses.csv"  # the reading set: per-step problems read by hand, for recall
DEFAULT_CACHE = REPO_ROOT / ".ecosystem_cache"
# The training-code population: the shared corpus beside the checkout (../shared/training-corpus).
DEFAULT_TRAINING_CORPUS = REPO_ROOT.parent / "shared" / "training-corpus"
ADDED_TRAINING = HERE / "training.toml"  # training repositories the check adds, sources kept outside


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.ecosystem",
        description="Lint pinned real projects with this checkout's linter, every rule on: training "
        "repositories (the training corpus) and libraries (PyPI), each population with its own tables: "
        "findings per rule, changes since the snapshot, precision over the labels, and a check of every fix.",
        epilog="Exit status: 0 fine, 1 the fix check failed, 2 a project could not be fetched or linted.",
    )
    parser.add_argument(
        "--only",
        metavar="NAME[,NAME]",
        help="only these projects (names in projects.toml or the training corpus)",
    )
    parser.add_argument("--population", choices=POPULATIONS, help="only the projects of one population")
    parser.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE, help="where projects are unpacked")
    parser.add_argument(
        "--training-corpus",
        type=Path,
        default=DEFAULT_TRAINING_CORPUS,
        metavar="DIR",
        help="the training repositories, one folder each, pinned in DIR/PINS.tsv (default: %(default)s); "
        "read from there, never from the network",
    )
    parser.add_argument(
        "--training-sources",
        type=Path,
        metavar="DIR",
        help=f"where the training repositories {ADDED_TRAINING.name} adds are checked out, one folder "
        "each (default: CACHE_DIR/training-sources); a missing one is reported with the commands that "
        "bring it back",
    )
    parser.add_argument(
        "--update-snapshot", action="store_true", help=f"write the findings to {SNAPSHOT.name}"
    )
    parser.add_argument("--no-fix-check", action="store_true", help="skip the fix check")
    parser.add_argument("--markdown", type=Path, metavar="FILE", help="also write the report as markdown")
    parser.add_argument(
        "--labels-template", type=Path, metavar="FILE", help="write the unlabelled findings as CSV to label"
    )
    parser.add_argument(
        "--publish-precision",
        action="store_true",
        help=f"write the precision per rule to torchperf_lint/{PRECISION.name}, which the rule pages quote "
        "and the default selection answers to (only from a run over every project)",
    )
    return parser


def _all_listed(only: str, projects: Sequence[Project]) -> bool:
    names = {p.name.lower() for p in projects}
    return all(n.strip().lower() in names for n in only.split(",") if n.strip())


def progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    start = time.perf_counter()
    try:
        listed_projects = load_projects(PROJECTS)
        if args.population != LIBRARY:
            try:
                training = load_training(args.training_corpus) + load_added_training(ADDED_TRAINING)
                listed_projects = training + listed_projects
            except ValueError:  # needed unless --only names library projects alone
                if not args.only or not _all_listed(args.only, listed_projects):
                    raise
        if args.population:
            listed_projects = [p for p in listed_projects if p.population == args.population]
        projects = choose(listed_projects, args.only)
        labels = labels_module.load_labels(LABELS)
        problems = load_problems(MISSES)
        old = snapshot.read(SNAPSHOT)
    except ValueError as error:
        print(f"ecosystem: error: {error}", file=sys.stderr)
        return 2
    listed = listed_rules()  # one linter process answers both questions
    rules = tracked_rules(listed=listed)
    runs: list[ProjectRun] = []
    not_fetched: list[tuple[Project, str]] = []
    fix_checks: list[FixCheck] | None = None if args.no_fix_check else []
    for project in projects:
        try:
            sources = args.training_sources or args.cache_dir / "training-sources"
            root = fetch(project, args.cache_dir.resolve(), args.training_corpus.resolve(), sources.resolve())
        except FetchError as error:
            print(f"ecosystem: error: {project.label}: {error}", file=sys.stderr)
            not_fetched.append((project, str(error)))
            continue
        files, lines = count_lines(root)
        lint = lint_project(project, root, rules)
        runs.append(ProjectRun(project, files, lines, lint.seconds, lint.findings, lint.failure))
        progress(
            f"{project.label}: {files} files, {lines} lines, {len(lint.findings)} findings, {lint.seconds:.1f} s"
        )
        if fix_checks is not None and lint.failure is None:
            check = check_fixes(project, root, functools.partial(run_fixer, select=selection(rules)))
            fix_checks.append(check)
            progress(
                f"{project.label}: fix check: {check.changed} files fixed, {len(check.failures)} failures"
            )
    linted = {run.project.name for run in runs if run.failure is None}
    report = Report(
        runs,
        not_fetched,
        rules,
        None if old is None else [f for f in old if f.project in linted],
        [label for label in labels if label.project in linted],
        fix_checks,
        time.perf_counter() - start,
        describe_checkout(),
        frozenset(code for code, _, on in listed if on),
        problems=problems,
    )
    sys.stdout.write(render(report))
    if args.markdown:
        args.markdown.write_text(render(report, markdown=True), encoding="utf-8")
    if args.labels_template:
        args.labels_template.write_text(labels_module.template(report.findings, labels), encoding="utf-8")
    if args.update_snapshot:
        SNAPSHOT.write_text(snapshot.dumps(snapshot.updated(old, report.findings, linted)), encoding="utf-8")
    if not_fetched or any(run.failure for run in runs):
        return 2
    if args.publish_precision:
        if args.only or args.population:
            print(
                "ecosystem: error: --publish-precision needs every project (drop --only and --population)",
                file=sys.stderr,
            )
            return 2
        PRECISION.write_text(
            labels_module.published(report.findings, labels, rules, projects), encoding="utf-8"
        )
    return 1 if report.fix_failures else 0


if __name__ == "__main__":
    sys.exit(main())

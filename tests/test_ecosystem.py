"""The ecosystem check's offline parts (benchmarks/ecosystem): the project list, unpacking, labels
and precision, the snapshot diff, the pyflakes comparison, the fix check on a small local project, the
report, and a whole run over a project already in the cache. Nothing here downloads."""

from __future__ import annotations

import dataclasses
import io
import re
import subprocess
import tarfile
import textwrap
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from benchmarks.ecosystem import __main__ as ecosystem_main
from benchmarks.ecosystem import labels, snapshot
from benchmarks.ecosystem.fixcheck import (
    FixCheck,
    FixFailure,
    check_fixes,
    problems_in_fixed_file,
    pyflakes_messages,
)
from benchmarks.ecosystem.lint import Finding, lint_project
from benchmarks.ecosystem.projects import (
    ROOT_MARKER,
    FetchError,
    Project,
    choose,
    fetch,
    load_projects,
    load_training,
    parse_added_training,
    parse_pins,
    parse_projects,
    project_dir,
    unpack,
)
from benchmarks.ecosystem.report import ProjectRun, Report, render

PROJECT = Project("tiny", "1.0", ("tiny",))

# A loader loop that copies batches to CUDA: TPL106's safe fix adds non_blocking=True, and
# TPL701's unsafe fix inserts torch.set_float32_matmul_precision("high") after the imports.
TRAIN = """\
import torch
from torch.utils.data import DataLoader


def train(model, dataset, optimizer):
    loader = DataLoader(dataset, batch_size=32, num_workers=4)
    for x, y in loader:
        x = x.cuda()
        loss = model(x).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""


def finding(path: str, line: int, code: str, project: str = "tiny", source: str = "x") -> Finding:
    return Finding(project, "1.0", path, line, code, source)


def tiny_project(root: Path) -> Path:
    (root / "tiny").mkdir(parents=True)
    (root / "tiny" / "train.py").write_text(TRAIN, encoding="utf-8")
    (root / ROOT_MARKER).write_text("[tool.torchperf-lint]\n", encoding="utf-8")
    return root


# -- the project list -------------------------------------------------------------------


def test_pinned_list_names_each_project_once_at_an_exact_version() -> None:
    projects = load_projects(ecosystem_main.PROJECTS)
    assert 18 <= len(projects) <= 22
    assert len({p.name for p in projects}) == len(projects)
    for project in projects:
        assert re.fullmatch(r"\d+(\.\d+)*", project.version), project
        assert project.paths


def test_project_list_reads_paths_and_exclude() -> None:
    text = textwrap.dedent("""
        [[project]]
        name = "diffusers"
        version = "0.42.1"
        paths = ["diffusers"]
        exclude = ["diffusers/pipelines"]
    """)
    assert parse_projects(text) == [Project("diffusers", "0.42.1", ("diffusers",), ("diffusers/pipelines",))]


@pytest.mark.parametrize(
    "entry, error",
    [
        ('name = "a"\nversion = "1"\npaths = ["a"]\nurl = "x"', "unknown keys"),
        ('name = "a"\nversion = "1"\npaths = []', "paths must be"),
        ('name = "a"\npaths = ["a"]', "name and version"),
    ],
)
def test_project_list_rejects_a_malformed_entry(entry: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        parse_projects(f"[[project]]\n{entry}\n")


def test_project_list_rejects_a_project_listed_twice() -> None:
    entry = '[[project]]\nname = "a"\nversion = "1"\npaths = ["a"]\n'
    with pytest.raises(ValueError, match="listed twice: a"):
        parse_projects(entry * 2)


def test_only_picks_projects_by_name_and_rejects_unknown_names() -> None:
    projects = [Project("timm", "1", ("timm",)), Project("kornia", "1", ("kornia",))]
    assert choose(projects, "Kornia") == [projects[1]]
    assert choose(projects, None) == projects
    with pytest.raises(ValueError, match="not in the project list: nope"):
        choose(projects, "timm,nope")


def test_a_project_keeps_python_files_under_its_paths_minus_exclude() -> None:
    project = Project("d", "1", ("diffusers", "train.py"), ("diffusers/pipelines",))
    assert project.wanted("diffusers/models/unet.py")
    assert project.wanted("train.py")
    assert not project.wanted("diffusers/pipelines/sd/pipe.py")
    assert not project.wanted("diffusers/models/config.json")
    assert not project.wanted("diffusers_extra/x.py")
    assert not project.wanted("diffusers-0.1.dist-info/x.py")


def test_unpack_wheel_writes_only_wanted_python_files_and_the_root_marker(tmp_path: Path) -> None:
    wheel = tmp_path / "tiny-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zipped:
        zipped.writestr("tiny/__init__.py", "import torch\n")
        zipped.writestr("tiny/data.json", "{}")
        zipped.writestr("tiny-1.0.dist-info/METADATA", "Name: tiny\n")
        zipped.writestr("other/x.py", "x = 1\n")
    out = tmp_path / "out"
    out.mkdir()
    assert unpack(PROJECT, wheel, out) == 1
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == [
        ROOT_MARKER,
        "tiny/__init__.py",
    ]
    assert "[tool.torchperf-lint]" in (out / ROOT_MARKER).read_text(encoding="utf-8")


def test_unpack_sdist_drops_the_leading_directory_and_refuses_escaping_paths(tmp_path: Path) -> None:
    sdist = tmp_path / "tiny-1.0.tar.gz"
    with tarfile.open(sdist, "w:gz") as tarred:
        for name, text in [
            ("tiny-1.0/tiny/model.py", "import torch\n"),
            ("tiny-1.0/setup.py", "setup()\n"),
            ("tiny-1.0/tiny/../../escape.py", "x = 1\n"),
        ]:
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tarred.addfile(info, io.BytesIO(data))
    out = tmp_path / "out"
    out.mkdir()
    assert unpack(PROJECT, sdist, out) == 1
    assert (out / "tiny" / "model.py").read_text(encoding="utf-8") == "import torch\n"
    assert not (tmp_path / "escape.py").exists()


# -- labels and precision -------------------------------------------------------------------

LABELS = """\
project,version,path,line,code,verdict,reason
tiny,1.0,a.py,3,TPL101,TRUE,factory in forward
tiny,1.0,a.py,9,TPL101,debatable,runs once per epoch
tiny,1.0,b.py,4,TPL101,FALSE,cpu-only script
tiny,1.0,b.py,7,TPL103,FALSE,numpy array
tiny,1.0,c.py,1,TPL501,TRUE,was fixed upstream
"""


def test_labels_load_with_verdicts_in_upper_case() -> None:
    loaded = labels.parse_labels(LABELS)
    assert [label.verdict for label in loaded] == ["TRUE", "DEBATABLE", "FALSE", "FALSE", "TRUE"]
    assert loaded[2].key == ("tiny", "1.0", "b.py", 4, "TPL101")
    assert loaded[2].reason == "cpu-only script"


@pytest.mark.parametrize(
    "row, error",
    [
        ("tiny,1.0,a.py,3,TPL101,MAYBE,x", "verdict must be one of"),
        ("tiny,1.0,a.py,three,TPL101,TRUE,x", "line must be a number"),
        ("tiny,1.0,a.py,3,TPL101,TRUE,x\ntiny,1.0,a.py,3,TPL101,FALSE,y", "a second label"),
    ],
)
def test_labels_reject_a_bad_row_naming_its_line(row: str, error: str) -> None:
    with pytest.raises(ValueError, match=f"labels.csv:\\d+: {error}"):
        labels.parse_labels("project,version,path,line,code,verdict,reason\n" + row + "\n")


def test_labels_need_every_column() -> None:
    with pytest.raises(ValueError, match="missing columns: verdict, reason"):
        labels.parse_labels("project,version,path,line,code\n")


def test_precision_counts_labelled_findings_and_gone_labels_per_rule() -> None:
    findings = [
        finding("a.py", 3, "TPL101"),
        finding("a.py", 3, "TPL101"),  # two findings on one line: one label covers both
        finding("a.py", 9, "TPL101"),
        finding("b.py", 4, "TPL101"),
        finding("d.py", 2, "TPL101"),  # unlabelled
        finding("b.py", 8, "TPL103"),  # the FALSE label on line 7 no longer fires
    ]
    rows = {
        row.code: row for row in labels.precision_per_rule(findings, labels.parse_labels(LABELS), ["TPL202"])
    }
    assert sorted(rows) == ["TPL101", "TPL103", "TPL202", "TPL501"]
    tpl101 = rows["TPL101"]
    assert (tpl101.findings, tpl101.labelled, tpl101.true, tpl101.debatable, tpl101.false) == (5, 3, 1, 1, 1)
    assert (tpl101.false_total, tpl101.gone) == (1, 0)
    assert tpl101.evidence().good_share == pytest.approx(1 / 3)
    tpl103 = rows["TPL103"]
    assert (tpl103.findings, tpl103.labelled, tpl103.false, tpl103.false_total, tpl103.gone) == (
        1,
        0,
        0,
        1,
        1,
    )
    assert tpl103.evidence().good_share is None
    assert (rows["TPL501"].findings, rows["TPL501"].gone, rows["TPL501"].true) == (0, 1, 0)
    assert rows["TPL202"].findings == 0


def test_labels_template_lists_unlabelled_findings_once_and_loads_once_filled_in() -> None:
    findings = [
        Finding("tiny", "1.0", "a.py", 3, "TPL101", "x = torch.zeros(3)", "msg", "in Net.forward"),
        Finding("tiny", "1.0", "d.py", 2, "TPL101", "y = torch.ones(2)", "msg", "in Net.forward"),
        Finding("tiny", "1.0", "d.py", 2, "TPL101", "y = torch.ones(2)", "msg", "in Net.forward"),
    ]
    text = labels.template(findings, labels.parse_labels(LABELS))
    lines = text.splitlines()
    assert lines[0] == ",".join(labels.TEMPLATE_COLUMNS)
    assert lines[1:] == ["tiny,1.0,d.py,2,TPL101,,,y = torch.ones(2),in Net.forward,msg"]
    filled = text.replace(",,,y =", ",FALSE,cpu tensor on purpose,y =")
    (label,) = labels.parse_labels(filled)
    assert (label.key, label.verdict) == (findings[1].key, "FALSE")


# -- the snapshot ---------------------------------------------------------------------------


def test_snapshot_round_trips_sorted_one_finding_a_line() -> None:
    findings = [finding("b.py", 1, "TPL103", source='x[range(n)]  # "q"'), finding("a.py", 9, "TPL101")]
    text = snapshot.dumps(findings)
    assert len(text.splitlines()) == 2
    assert snapshot.loads(text) == sorted(findings, key=lambda f: f.key)


def test_snapshot_line_that_is_not_a_finding_is_an_error() -> None:
    with pytest.raises(ValueError, match="snapshot line 2"):
        snapshot.loads(snapshot.dumps([finding("a.py", 1, "TPL101")]) + '{"project": "x"}\n')


def test_snapshot_diff_matches_findings_by_key_as_a_multiset() -> None:
    old = [finding("a.py", 3, "TPL101"), finding("a.py", 3, "TPL101"), finding("b.py", 5, "TPL103")]
    new = [finding("a.py", 3, "TPL101"), finding("b.py", 5, "TPL103"), finding("c.py", 1, "TPL502")]
    added, removed = snapshot.diff(old, new)
    assert added == [finding("c.py", 1, "TPL502")]
    assert removed == [finding("a.py", 3, "TPL101")]
    assert snapshot.diff(new, new) == ([], [])


def test_snapshot_update_replaces_only_the_projects_that_ran() -> None:
    old = [finding("a.py", 1, "TPL101", project="timm"), finding("a.py", 1, "TPL101", project="tiny")]
    new = [finding("z.py", 2, "TPL103", project="tiny")]
    assert snapshot.updated(old, new, {"tiny"}) == [old[0], new[0]]
    assert snapshot.updated(None, new, {"tiny"}) == new


# -- the pyflakes comparison and the fix check --------------------------------------------------------


def test_pyflakes_comparison_ignores_line_numbers_of_old_messages() -> None:
    before = "import os\nimport os\n"
    after = "import os\n\nprint(1)\n\nimport os\n"
    assert pyflakes_messages(before, "m.py") == pyflakes_messages(after, "m.py")
    assert problems_in_fixed_file(before, after, "m.py") == []


def test_pyflakes_comparison_reports_a_message_the_fix_added() -> None:
    before = "import os\nos.getcwd()\n"
    after = "import os\ntorch.set_float32_matmul_precision('high')\nos.getcwd()\n"
    assert problems_in_fixed_file(before, after, "m.py") == ["new pyflakes message: UndefinedName('torch')"]


def test_a_second_copy_of_an_existing_message_is_new() -> None:
    before = "import os\n"
    after = "import os\nimport sys\nimport os\n"
    problems = problems_in_fixed_file(before, after, "m.py")
    assert problems == [
        "new pyflakes message: RedefinedWhileUnused('os')",
        "new pyflakes message: UnusedImport('sys')",
    ]


def test_fixed_file_that_does_not_compile_is_reported() -> None:
    before = "f(a, b=1)\n"
    after = "f(a, b=1, b=1)\n"  # parses, but compile() refuses the repeated keyword
    (problem,) = problems_in_fixed_file(before, after, "m.py")
    assert problem.startswith("does not compile after fixing: keyword argument repeated")


def test_fix_check_fixes_a_copy_and_passes_on_the_linters_own_fixes(tmp_path: Path) -> None:
    root = tiny_project(tmp_path / "tiny-1.0")
    check = check_fixes(PROJECT, root)
    assert (check.project, check.changed, check.failures) == ("tiny", 1, [])
    assert (root / "tiny" / "train.py").read_text(encoding="utf-8") == TRAIN


def test_fix_check_reports_a_broken_file_and_a_fix_that_is_not_idempotent(tmp_path: Path) -> None:
    root = tiny_project(tmp_path / "tiny-1.0")
    (root / "tiny" / "ok.py").write_text("import torch\n", encoding="utf-8")
    runs: list[list[str]] = []

    def fixer(copy: Path, paths: Sequence[Path]) -> list[str]:
        runs.append([p.relative_to(copy).as_posix() for p in paths])
        train = copy / "tiny" / "train.py"
        train.write_text(train.read_text(encoding="utf-8") + "x = (\n", encoding="utf-8")
        return ["linter exited with 3: boom"] if len(runs) == 1 else []

    check = check_fixes(PROJECT, root, fixer)
    assert runs == [["."], ["tiny/train.py"]]  # the second run fixes only the files the first changed
    assert check.changed == 1
    assert [(f.path, f.problem.split(":")[0]) for f in check.failures] == [
        ("", "linter exited with 3"),
        ("tiny/train.py", "does not compile after fixing"),
        ("tiny/train.py", "a second --fix run changed it again"),
    ]


def test_lint_project_reports_paths_relative_to_the_root_with_their_line(tmp_path: Path) -> None:
    root = tiny_project(tmp_path / "tiny-1.0")
    run = lint_project(PROJECT, root)
    assert run.failure is None
    assert [(f.path, f.line, f.code, f.source) for f in run.findings] == [
        ("tiny/train.py", 6, "TPL502", "loader = DataLoader(dataset, batch_size=32, num_workers=4)"),
        ("tiny/train.py", 8, "TPL106", "x = x.cuda()"),
        ("tiny/train.py", 11, "TPL701", "loss.backward()"),
        ("tiny/train.py", 11, "TPL703", "loss.backward()"),  # every rule on: the step is never compiled
    ]


# -- the report -----------------------------------------------------------------------------


def sample_report(snapshot_findings: list[Finding] | None) -> Report:
    findings = [
        finding("tiny/a.py", 3, "TPL101", source="torch.zeros(3).cuda()"),
        finding("tiny/b.py", 7, "TPL502"),
    ]
    failure = FixFailure("tiny", "tiny/a.py", "new pyflakes message: UndefinedName('torch')")
    return Report(
        runs=[ProjectRun(PROJECT, files=2, lines=40, seconds=0.5, findings=findings)],
        not_fetched=[(Project("gone", "9.9", ("gone",)), "pip download gone==9.9 failed: no such version")],
        rules=[
            ("TPL101", "cpu-factory-in-hot-path"),
            ("TPL502", "dataloader-pin-memory"),
            ("TPL202", "cat-in-loop"),
        ],
        snapshot=snapshot_findings,
        labels=labels.parse_labels(LABELS),
        fix_checks=[FixCheck("tiny", changed=1, seconds=1.25, failures=[failure])],
        seconds=3.0,
        default_on=frozenset({"TPL101", "TPL202"}),
    )


def test_report_prints_each_part_as_text() -> None:
    text = render(
        sample_report(
            [finding("tiny/a.py", 3, "TPL101"), finding("tiny/c.py", 1, "TPL103", source="x[[0, 1]]")]
        )
    )
    assert "1 projects, 2 files, 40 lines; 2 findings; wall time 3 s" in text
    assert "gone 9.9: not fetched: pip download gone==9.9 failed: no such version" in text
    assert re.search(r"TPL101\s+cpu-factory-in-hot-path\s+1\s+1\s+1", text)
    assert re.search(r"TPL202\s+cat-in-loop\s+0\s+0\s+0", text)
    assert "1 added, 1 removed." in text
    assert "+ TPL502 tiny:tiny/b.py:7  x" in text
    assert "- TPL103 tiny:tiny/c.py:1  x[[0, 1]]" in text
    # no label matches these findings: every label of the sample is gone
    assert re.search(r"TPL101\s+on\s+1\s+0\s+0\s+0\s+0\s+0\s+-\s+-\s+-\s+-\s+0/1\s+3", text)
    assert re.search(r"TPL502\s+off\s+1\s+0", text)
    assert "FALSE-labelled findings a default run still reports: 0 of 2 (0 of the 0 labelled" in text
    assert re.search(r"tiny\s+1\s+1\s+1.2", text)  # the fix check's row: files fixed, failures, seconds
    assert "FAILED: 1 problems." in text
    assert "tiny:tiny/a.py: new pyflakes message: UndefinedName('torch')" in text


def test_report_as_markdown_has_headings_tables_and_fenced_entries() -> None:
    text = render(sample_report(None), markdown=True)
    assert text.startswith("# Ecosystem check\n")
    assert "## Findings per rule" in text
    assert "| TPL101 | cpu-factory-in-hot-path | 1 | 1 | 1 |" in text
    assert "No snapshot yet" in text
    assert "```\ntiny:tiny/a.py: new pyflakes message: UndefinedName('torch')\n```" in text


def test_report_says_when_nothing_changed_and_the_fix_check_was_skipped() -> None:
    report = sample_report(None)
    report.snapshot = list(report.findings)
    report.fix_checks = None
    text = render(report)
    assert "No change." in text
    assert "Skipped (--no-fix-check)." in text


# -- a whole run ----------------------------------------------------------------------------


def test_whole_run_over_a_cached_project_writes_markdown_and_template(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    listed = next(p for p in load_projects(ecosystem_main.PROJECTS) if p.name == "x-transformers")
    tiny_project(project_dir(tmp_path / "cache", listed))  # already in the cache: nothing is downloaded
    markdown, template = tmp_path / "report.md", tmp_path / "unlabelled.csv"
    args = ["--only", "x-transformers", "--cache-dir", str(tmp_path / "cache")]
    status = ecosystem_main.main([*args, "--markdown", str(markdown), "--labels-template", str(template)])
    assert status == 0
    out = capsys.readouterr().out
    assert "1 projects, 1 files, 12 lines; 4 findings" in out
    assert "Linter: this checkout at " in out
    assert "Passed: every fixed file compiles" in out
    assert "## Fix check" in markdown.read_text(encoding="utf-8")
    rows = template.read_text(encoding="utf-8").splitlines()[1:]
    assert [row.split(",")[:5] for row in rows] == [
        ["x-transformers", listed.version, "tiny/train.py", "6", "TPL502"],
        ["x-transformers", listed.version, "tiny/train.py", "8", "TPL106"],
        ["x-transformers", listed.version, "tiny/train.py", "11", "TPL701"],
        ["x-transformers", listed.version, "tiny/train.py", "11", "TPL703"],
    ]


def test_a_failed_download_is_one_line_and_the_other_projects_still_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    listed = {p.name: p for p in load_projects(ecosystem_main.PROJECTS)}
    tiny_project(project_dir(tmp_path / "cache", listed["x-transformers"]))
    real_run = subprocess.run

    def no_index(command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        if command[1:4] == ["-m", "pip", "download"]:
            stderr = "Looking in indexes: ...\nERROR: No matching distribution found for timm\n"
            return subprocess.CompletedProcess(command, 1, "", stderr)
        return real_run(command, **kwargs)

    monkeypatch.setattr(subprocess, "run", no_index)
    args = ["--only", "timm,x-transformers", "--cache-dir", str(tmp_path / "cache"), "--no-fix-check"]
    assert ecosystem_main.main(args) == 2
    captured = capsys.readouterr()
    timm = listed["timm"].version
    error = f"ecosystem: error: timm {timm}: pip download timm=={timm} failed: ERROR: No matching distribution found for timm"
    assert error in captured.err.splitlines()
    assert f"timm {timm}: not fetched: pip download" in captured.out
    assert "1 projects, 1 files, 12 lines; 4 findings" in captured.out
    assert not (tmp_path / "cache" / "projects" / f"timm-{timm}").exists()


def test_tracked_rules_are_every_rule_on_or_off() -> None:
    from benchmarks.ecosystem.lint import listed_rules, tracked_rules

    listed = listed_rules()
    assert {code for code, _, on in listed if not on}  # some rule is off by default, and is tracked
    assert tracked_rules(listed) == [(code, name) for code, name, _ in listed]


def test_published_precision_has_one_row_per_tracked_rule_and_population() -> None:
    import json

    train = Project("trainer", "abc", (".",), population="training")
    found = [
        finding("a.py", 1, "TPL101"),
        finding("a.py", 2, "TPL101"),
        finding("b.py", 3, "TPL103"),
        dataclasses.replace(finding("t.py", 4, "TPL101"), project="trainer", version="abc"),
    ]
    labelled = labels.parse_labels(
        "project,version,path,line,code,verdict,reason\n"
        "tiny,1.0,a.py,1,TPL101,TRUE,r\n"
        "tiny,1.0,a.py,2,TPL101,DEBATABLE,r\n"
        "tiny,1.0,gone.py,9,TPL101,FALSE,r\n"
        "trainer,abc,t.py,4,TPL101,SMALL,[tiny] r\n"
    )
    rules = [("TPL101", "a"), ("TPL702", "b")]
    table = json.loads(labels.published(found, labelled, rules, [PROJECT, train]))["populations"]
    assert table["library"]["rules"] == {
        "TPL101": {"findings": 2, "labelled": 2, "true": 1, "small": 0, "debatable": 1, "false": 0},
        "TPL702": {"findings": 0, "labelled": 0, "true": 0, "small": 0, "debatable": 0, "false": 0},
    }
    assert table["training"]["rules"]["TPL101"] == {
        "findings": 1, "labelled": 1, "true": 0, "small": 1, "debatable": 0, "false": 0,
    }  # fmt: skip
    assert table["library"]["corpus"].startswith("1 libraries")
    assert table["training"]["corpus"].startswith("1 training repositories")


# -- the training population ------------------------------------------------------------------

PINS = "repo\tcommit\tpy_files\tpy_lines\nowner/Some-Repo\t" + "a" * 40 + "\t2\t10\n"


def test_training_pins_become_projects_of_the_training_population() -> None:
    (project,) = parse_pins(PINS)
    assert (project.name, project.version, project.population, project.origin) == (
        "some-repo",
        "a" * 12,
        "training",
        "owner+Some-Repo",
    )


@pytest.mark.parametrize("text", ["repo\tcommit\nowner/x\tabc\n", "name\tsha\n"])
def test_malformed_pins_are_an_error(text: str) -> None:
    with pytest.raises(ValueError, match="PINS.tsv"):
        parse_pins(text)


def test_a_training_repository_is_copied_writable_with_its_own_pyproject_kept(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    source = corpus / "owner+Some-Repo"
    (source / "pkg").mkdir(parents=True)
    (source / "pkg" / "train.py").write_text("import torch\n", encoding="utf-8")
    (source / "pyproject.toml").write_text('[project]\ndependencies = ["torch>=1.8"]\n', encoding="utf-8")
    (corpus / "PINS.tsv").write_text(PINS, encoding="utf-8")
    for path in [source / "pkg", source]:
        path.chmod(0o555)  # the shared corpus is read-only
    try:
        (project,) = load_training(corpus)
        root = fetch(project, tmp_path / "cache", corpus)
    finally:
        for path in [source, source / "pkg"]:
            path.chmod(0o755)
    assert root == tmp_path / "cache" / "training" / f"some-repo-{'a' * 12}"
    assert (root / "pkg" / "train.py").read_text(encoding="utf-8") == "import torch\n"
    config = (root / "pyproject.toml").read_text(encoding="utf-8")
    assert (
        config.startswith('[project]\ndependencies = ["torch>=1.8"]\n') and "[tool.torchperf-lint]" in config
    )
    (root / "pkg" / "new.py").write_text("", encoding="utf-8")  # writable, for the fix check


def test_a_missing_training_corpus_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = ecosystem_main.main(["--training-corpus", str(tmp_path / "nowhere"), "--no-fix-check"])
    assert status == 2
    assert "PINS.tsv: not found; pass --training-corpus DIR" in capsys.readouterr().err


def test_report_shows_each_population_in_its_own_tables() -> None:
    report = sample_report(None)
    train = Project("trainer", "abc", (".",), population="training")
    report.runs.append(
        ProjectRun(train, 1, 10, 0.1, [dataclasses.replace(finding("t.py", 4, "TPL101"), project="trainer")])
    )
    report.fix_checks = None
    text = render(report)
    for title in (
        "Projects",
        "Findings per rule",
        "Changes since the snapshot",
        "Precision per rule (labels.csv)",
    ):
        assert text.index(f"{title}: training code") < text.index(f"{title}: libraries")
    training = text[text.index("Projects: training code") : text.index("Projects: libraries")]
    assert "trainer" in training and "tiny" not in training
    assert "1 projects, 1 files, 10 lines; 1 findings" in training


ADDED = """
[[repository]]
repo = "owner/Trainer"
commit = "%s"
""" % ("b" * 40)


def test_an_added_training_repository_is_read_from_its_clone_at_the_pinned_commit(tmp_path: Path) -> None:
    (project,) = parse_added_training(ADDED)
    assert (project.name, project.version, project.population, project.repo) == (
        "trainer", "b" * 12, "training", "owner/Trainer",
    )  # fmt: skip
    sources = tmp_path / "sources"
    with pytest.raises(FetchError) as missing:
        fetch(project, tmp_path / "cache", None, sources)
    assert f"git clone https://github.com/owner/Trainer {sources / 'owner+Trainer'}" in str(missing.value)
    assert f"checkout {'b' * 40}" in str(missing.value)
    clone = sources / "owner+Trainer"
    (clone / "data").mkdir(parents=True)
    (clone / "train.py").write_text("import torch\n", encoding="utf-8")
    (clone / "data" / "big.bin").write_bytes(b"x")
    (clone / "COMMIT").write_text("c" * 40, encoding="utf-8")
    with pytest.raises(FetchError, match="holds commit c+, training.toml pins b+"):
        fetch(project, tmp_path / "cache", None, sources)
    (clone / "COMMIT").write_text("b" * 40 + "\n", encoding="utf-8")
    root = fetch(project, tmp_path / "cache", None, sources)
    assert (root / "train.py").exists() and not (root / "data" / "big.bin").exists()
    assert (root / ROOT_MARKER).exists()


def test_the_added_training_list_rejects_a_short_commit() -> None:
    with pytest.raises(ValueError, match="commit 40 hex digits"):
        parse_added_training('[[repository]]\nrepo = "a/b"\ncommit = "abc"\n')


def test_reading_set_recall_counts_a_problem_reported_by_its_rule_on_its_line(tmp_path: Path) -> None:
    from benchmarks.ecosystem.misses import load_problems

    reading = tmp_path / "misses.csv"
    reading.write_text(
        "project,path,line,code,problem,reader\n"
        "tiny,tiny/a.py,3,TPL101,a CPU factory in forward,me\n"
        "tiny,tiny/a.py,3,TPL102,the same line under another rule,me\n"
        "tiny,tiny/b.py,7,TPL502,the loader without pin_memory,me\n"
        "elsewhere,x.py,1,TPL101,a project this run did not lint,me\n",
        encoding="utf-8",
    )
    report = dataclasses.replace(sample_report(None), problems=load_problems(reading))
    text = render(report)
    assert "Every rule on: 2 of 3 problems reported (67%)." in text
    # TPL502 is off by default in the sample: the default run reports only the TPL101 line
    assert "Default run: 1 of 3 reported (33%)." in text
    assert "- TPL102 tiny:tiny/a.py:3  the same line under another rule" in text
    assert "elsewhere" not in text.split("Recall over the reading set")[1]


def test_reading_set_rejects_a_row_without_a_line_number(tmp_path: Path) -> None:
    from benchmarks.ecosystem.misses import load_problems

    reading = tmp_path / "misses.csv"
    reading.write_text(
        "project,path,line,code,problem,reader\ntiny,a.py,three,TPL101,x,me\n", encoding="utf-8"
    )
    with pytest.raises(ValueError, match=r"misses.csv:2:"):
        load_problems(reading)


def test_committed_reading_set_names_known_rules_and_training_projects() -> None:
    from benchmarks.ecosystem.__main__ import MISSES
    from benchmarks.ecosystem.misses import load_problems
    from torchperf_lint.rules import ALL_RULES

    problems = load_problems(MISSES)
    codes = {rule.code for rule in ALL_RULES}
    assert len(problems) >= 40
    assert {p.code for p in problems} <= codes
    assert len({p.place for p in problems}) == len(problems)

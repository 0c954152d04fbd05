"""Rule pages and the rule catalog, generated from the rule classes (and the measured speedups)
and never edited by hand. `python -m torchperf_lint.docs` rewrites docs/rules/, the README's
generated parts (the speedup table, the list of rules on by default, the console transcripts) and
torchperf_lint/catalog.py."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

from .evidence import POPULATION_NAMES, POPULATIONS, corpus, measured, precision_of, why_off
from .rules import ALL_RULES
from .rules.base import Rule

EXPECT_MARK = "  # expect: "


def strip_expectations(code: str) -> str:
    return "\n".join(line.split(EXPECT_MARK)[0] for line in code.splitlines()) + "\n"


def example(code: str) -> str:
    return textwrap.dedent(code).strip("\n")


def _measured_section(rule: type[Rule]) -> str:
    rows = measured().get(rule.code)
    if not rows:
        return "No GPU measurement recorded yet for this rule."
    lines = [
        "| case | regime | device | torch | bad | good | speedup (95% CI) |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        ci = row.get("ci") or [row["speedup"], row["speedup"]]
        lines.append(
            f"| {row['case']} | {row.get('regime', '')} | {row['device']} | {row['torch']} | {row['bad']} "
            f"| {row['good']} | {row['speedup']:.2f}x ({ci[0]:.2f}-{ci[1]:.2f}) |"
        )
    notes = [row["note"] for row in rows if row.get("note")]
    if notes:
        lines.append("")
        lines.extend(f"- {note}" for note in notes)
    return "\n".join(lines)


def _precision_section(rule: type[Rule]) -> str:
    rows = [(population, precision_of(rule.code, population)) for population in POPULATIONS]
    if all(row is None for _, row in rows):
        return "Not tracked by the ecosystem check yet."
    form = "Default form, on " if rule.stepping_evidence else ""
    lines = [
        f"- {form}{POPULATION_NAMES[population] if form else POPULATION_NAMES[population].capitalize()} "
        f"({corpus(population)}): " + ("not tracked" if row is None else row.describe()) + "."
        for population, row in rows
    ]
    if rule.stepping_evidence:
        for population in POPULATIONS:
            extra = precision_of(rule.code, population, library=True)
            if extra is not None:
                lines.append(
                    f"- What only `--library` adds on {POPULATION_NAMES[population]} (code no step loop of "
                    f"the project runs): {extra.describe()}."
                )
    return "\n".join(lines) + (
        "\n\nTRUE: a performance engineer would make the change in that code; SMALL: right, and the fix is "
        "free and safe, but the gain there is small; DEBATABLE: a real cost nobody can or should remove "
        "there; FALSE: wrong. The labels are in benchmarks/ecosystem/labels.csv."
    )


def _default_line(rule: type[Rule]) -> str:
    if rule.default_on:
        return "on"
    why = why_off(rule.code, rule.benchmark is not None)
    enable = f"off (enable with `--extend-select {rule.code}`)"
    return f"{enable}: {why}" if why else enable


def _where(rule: type[Rule]) -> str:
    if not rule.stepping_evidence:
        return rule.where
    return (
        f"{rule.where}, where a step or inference loop of the project runs it (evidence of stepping); with "
        "`--library`, also code hot only by assumption, such as a forward no step loop of the project "
        "runs. The examples below are shown as `--library` reports them"
    )


def render_rule_page(rule: type[Rule]) -> str:
    default = _default_line(rule)
    parts = [
        f"# {rule.code} {rule.name}",
        "",
        f"{rule.summary}.",
        "",
        f"- Default: {default}",
        f"- Fix: {rule.fix_safety.value}",
        f"- Looks at: {_where(rule)}",
        "",
    ]
    body = rule.explanation()
    marker = "## Fix safety"
    why_end = body.find(marker)
    head, tail = (body[:why_end], body[why_end:]) if why_end >= 0 else (body, "")
    parts += [head.rstrip(), "", "## Measured", "", _measured_section(rule), ""]
    parts += ["## Precision on real code", "", _precision_section(rule), ""]
    for label, code in rule.BAD.items():
        parts += [f"## Example: {label}", "", "```python", example(strip_expectations(code)), "```", ""]
        if label in rule.FIXED:
            parts += [
                "Use instead (what `--fix` produces):",
                "",
                "```python",
                example(rule.FIXED[label]),
                "```",
                "",
            ]
    parts += [tail.rstrip(), ""]
    for label, code in rule.GOOD.items():
        parts += [f"### Stays silent: {label}", "", "```python", example(code), "```", ""]
    return "\n".join(parts).rstrip() + "\n"


def _precision_cells(code: str) -> str:
    """The rule's precision on each population, as table cells (`training | libraries`)."""
    rows = [precision_of(code, population) for population in POPULATIONS]
    return " | ".join("-" if row is None else row.cell() for row in rows)


def render_index() -> str:
    lines = [
        "# Rules",
        "",
        "| code | name | default | fix | training code | libraries | summary |",
        "|---|---|---|---|---|---|---|",
    ]
    for rule in ALL_RULES:
        lines.append(
            f"| [{rule.code}]({rule.code}.md) | {rule.name} | {'on' if rule.default_on else 'off'} "
            f"| {rule.fix_safety.value} | {_precision_cells(rule.code)} | {rule.summary} |"
        )
    return "\n".join(lines) + "\n"


README_START = "<!-- measured-speedups:start (generated by python -m torchperf_lint.docs) -->"
README_END = "<!-- measured-speedups:end -->"


def render_speedup_summary() -> str:
    """One line per rule for the README: its largest measured speedup and the regime of that
    case, and a regime where it does not matter (the low end of the 95% interval under 1.05x)."""
    lines = [
        "| rule | name | default | training code | libraries | largest measured speedup | where it pays "
        "| where it does not matter |",
        "|---|---|---|---|---|---|---|---|",
    ]
    table = measured()
    for rule in ALL_RULES:
        rows = table.get(rule.code)
        link = (
            f"| [{rule.code}](docs/rules/{rule.code}.md) | {rule.name} | {'on' if rule.default_on else 'off'} "
            f"| {_precision_cells(rule.code)}"
        )
        if not rows:
            reason = "not measured on a GPU yet" if rule.benchmark else "nothing to time"
            lines.append(f"{link} | - | {reason} | - |")
            continue
        best = max(rows, key=lambda row: row["speedup"])
        flat = [row for row in rows if (row.get("ci") or [row["speedup"]])[0] < 1.05]
        worst = min(flat, key=lambda row: row["speedup"]).get("regime", "-") if flat else "-"
        lines.append(
            f"{link} | {best['speedup']:.3g}x ({best['device']}, torch {best['torch'].split('+')[0]}) "
            f"| {best.get('regime') or best['case']} | {worst} |"
        )
    return "\n".join(lines) + "\n"


def readme_with_summary(readme: str) -> str:
    start, end = readme.find(README_START), readme.find(README_END)
    if start < 0 or end < start:
        return readme
    return readme[: start + len(README_START)] + "\n" + render_speedup_summary() + readme[end:]


DEFAULT_ON_START = "<!-- default-on:start (generated by python -m torchperf_lint.docs) -->"
DEFAULT_ON_END = "<!-- default-on:end -->"


# proper nouns a summary may start with: they keep their capital inside a sentence
_PROPER_NOUNS = frozenset({"Python", "PyTorch"})


def _lower_first_word(text: str) -> str:
    """'Tensor indexed ...' reads 'tensor indexed ...' inside a sentence; 'DataLoader', 'CUDA',
    'nn.Module' and 'Python' keep their case."""
    word = text.split(" ", 1)[0]
    if word in _PROPER_NOUNS:
        return text
    return text[0].lower() + text[1:] if word[1:].replace("-", "").islower() else text


def render_default_on() -> str:
    """The README's sentence naming every rule on by default, with its summary."""
    named = [f"{rule.code} ({_lower_first_word(rule.summary)})" for rule in ALL_RULES if rule.default_on]
    listed = ", ".join(named[:-1]) + f" and {named[-1]}" if len(named) > 1 else "".join(named)
    return f"On by default today: {listed}."


def _between(text: str, start: str, end: str, generated: str) -> str:
    first, last = text.find(start), text.find(end)
    if first < 0 or last < first:
        return text
    return text[: first + len(start)] + generated + text[last:]


# a console block of the README that shows a run of the tool: its command, then what it prints
TRANSCRIPT = re.compile(r"^```console\n\$ (torchperf-lint [^\n]*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
ROOT = Path(__file__).resolve().parent.parent


def run_for_transcript(command: str) -> str:
    """What `command` prints on stdout when run at the repository root with this checkout's linter:
    the cache off (a transcript shows a cold run and must not leave one behind) and one process."""
    argv = shlex.split(command)[1:]
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    )
    env["TORCHPERF_LINT_NO_CACHE"] = "1"
    done = subprocess.run(
        [sys.executable, "-m", "torchperf_lint", *argv, "--jobs", "1"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout


def readme_with_transcripts(readme: str, run: Callable[[str], str] = run_for_transcript) -> str:
    """Each console block that starts with `$ torchperf-lint ...` shows what that command prints."""
    return TRANSCRIPT.sub(lambda match: f"```console\n$ {match[1]}\n{run(match[1])}```", readme)


def readme_generated(readme: str) -> str:
    """The README with every generated part current."""
    readme = readme_with_summary(readme)
    readme = _between(readme, DEFAULT_ON_START, DEFAULT_ON_END, f"\n{render_default_on()}\n")
    return readme_with_transcripts(readme)


def expected_pages() -> dict[str, str]:
    pages = {f"{rule.code}.md": render_rule_page(rule) for rule in ALL_RULES}
    pages["README.md"] = render_index()
    return pages


CATALOG = Path(__file__).with_name("catalog.py")


def render_catalog() -> str:
    """catalog.py: each rule's code, name and default, for what must not import the rules."""
    rows = "".join(f'    ("{rule.code}", "{rule.name}", {rule.default_on}),\n' for rule in ALL_RULES)
    return (
        '"""Every rule\'s code, name and default, generated from the rule classes by\n'
        "`python -m torchperf_lint.docs` (a test fails when it is stale). Rule selection reads this\n"
        "table instead of the rule classes, so a run whose files are all cached imports neither the\n"
        'rules nor libcst."""\n\n'
        "RULES: tuple[tuple[str, str, bool], ...] = (\n"
        f"{rows})\n"
    )


def write_catalog(path: Path) -> bool:
    text = render_catalog()
    if path.is_file() and path.read_text(encoding="utf-8") == text:
        return False
    path.write_text(text, encoding="utf-8")
    return True


def write(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    wanted = expected_pages()
    for stale in directory.glob("*.md"):
        if stale.name not in wanted:
            stale.unlink()
    for name, text in wanted.items():
        path = directory / name
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            written.append(path)
    return written


def write_readme(path: Path) -> bool:
    text = path.read_text(encoding="utf-8")
    updated = readme_generated(text)
    if updated != text:
        path.write_text(updated, encoding="utf-8")
    return updated != text


if __name__ == "__main__":
    asks_help = sys.argv[1:2] in (["-h"], ["--help"])
    if len(sys.argv) > 2 or asks_help or sys.argv[1:2] and sys.argv[1].startswith("-"):
        print(
            "usage: python -m torchperf_lint.docs [DIR]  (default docs/rules): write the rule pages, "
            "the README's generated parts and the catalog"
        )
        sys.exit(0 if asks_help else 2)
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("docs/rules")
    for path in write(target):
        print(f"wrote {path}")
    # first: the README's transcripts run the CLI, whose default selection the catalog holds
    if write_catalog(CATALOG):
        print(f"wrote {CATALOG}")
    readme = target.parent.parent / "README.md"
    if readme.is_file() and write_readme(readme):
        print(f"wrote {readme}")

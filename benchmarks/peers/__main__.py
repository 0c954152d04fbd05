"""`python -m benchmarks.peers [--cache-dir DIR] [--cases]`: run the peers' own rule tests through this
checkout's linter, every rule on, and print per peer rule how many of their positives we report and
how many of their negatives we keep silent (README.md there says how to fill the cache)."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from .cases import NEGATIVE, Case, kept, preflight_cases, torchfix_cases
from .compare import CUDA_SIGN, OURS, Found, Verdict, agrees, render

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_CACHE = REPO_ROOT / ".peer_cache"
TORCHFIX_FIXTURES = Path("torchfix", "tests", "fixtures")
PREFLIGHT_TESTS = Path("torch-preflight", "tests", "test_rules.py")


class MissingPeer(Exception):
    """A peer's tests are not in the cache; the message is one line."""


def load_cases(cache: Path) -> list[Case]:
    fixtures, tests = cache / TORCHFIX_FIXTURES, cache / PREFLIGHT_TESTS
    for needed in (fixtures, tests):
        if not needed.exists():
            raise MissingPeer(f"{needed} is missing: fill the cache as benchmarks/peers/README.md says")
    cases = torchfix_cases(fixtures) + preflight_cases(tests.read_text(encoding="utf-8"))
    return list(kept(cases, OURS))


def lint(source: str) -> list[Found]:
    """Our findings on `source` as a training script alone in its project, every rule on."""
    # Imported here so that the reading and tallying above stay importable without the linter.
    from torchperf_lint.api import lint_source
    from torchperf_lint.rules import ALL_RULES

    with tempfile.TemporaryDirectory(prefix="peer-case-") as folder:
        path = Path(folder, "train.py")
        path.write_text(source, encoding="utf-8")
        findings = lint_source(source, str(path), select=[rule.code for rule in ALL_RULES])
    return [Found(finding.code, finding.line) for finding in findings]


def judge(case: Case) -> Verdict:
    as_written = agrees(case, lint(case.source))
    if case.expect == NEGATIVE or as_written:
        return Verdict(case, as_written, as_written)
    with_cuda = case.source if case.source.endswith("\n") else case.source + "\n"
    return Verdict(case, as_written, agrees(case, lint(with_cuda + CUDA_SIGN)))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.peers", description=__doc__)
    parser.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE, help=f"default: {DEFAULT_CACHE}")
    parser.add_argument("--cases", action="store_true", help="also list every case with its verdict")
    args = parser.parse_args(argv)
    os.environ.setdefault("TORCHPERF_LINT_NO_CACHE", "1")
    try:
        cases = load_cases(args.cache_dir)
    except MissingPeer as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    verdicts = [judge(case) for case in cases]
    print(render(verdicts), end="")
    if args.cases:
        for verdict in verdicts:
            case = verdict.case
            print(
                f"{case.peer} {case.rule} {case.expect} {case.name}: {verdict.as_written} {verdict.with_cuda}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())

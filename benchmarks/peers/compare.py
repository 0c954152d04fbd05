"""Which of our rules answer each peer rule, a case's verdict from our findings, and the table."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

from .cases import ANY_RULE, NEGATIVE, POSITIVE, Case

# The peer rules both sides cover, and the rules of ours that report the same cost. A peer's rule can be
# broader than ours (TG004 is two of our DataLoader rules) or name a cost we split (TG013's redundant
# transfer is a constant copied per step, a CPU factory moved, or the model moved every step: TPL307).
OURS: dict[str, tuple[str, ...]] = {
    "TOR401": ("TPL501",),
    "TOR402": ("TPL301",),
    "TG001": ("TPL304",),
    "TG002": ("TPL305",),
    "TG004": ("TPL501", "TPL502"),
    "TG007": ("TPL105", "TPL107", "TPL604"),
    "TG013": ("TPL101", "TPL102", "TPL307"),
}
PEER_RULES = {
    "torchfix": ("TOR401", "TOR402"),
    "torch-preflight": ("TG001", "TG002", "TG004", "TG007", "TG013"),
}

# What makes a snippet show CUDA use (RULES.md) without touching its other lines: the peers' snippets
# mostly leave the device unsaid, and several of our rules look only at code that runs on CUDA.
CUDA_SIGN = '\n_DEVICE = "cuda"  # added by the peer-suite check\n'


def our_rules(case: Case) -> tuple[str, ...]:
    if case.rule == ANY_RULE:
        codes = {code for peer in PEER_RULES[case.peer] for code in OURS[peer]}
        return tuple(sorted(codes))
    return OURS[case.rule]


@dataclasses.dataclass(frozen=True)
class Found:
    """One of our findings: what a verdict needs."""

    code: str
    line: int


def reported(case: Case, findings: Iterable[Found]) -> bool:
    """Whether our rules for the case's peer rule report it: anywhere in the snippet, or on the
    fixture's line."""
    wanted = our_rules(case)
    return any(found.code in wanted and (case.line is None or found.line == case.line) for found in findings)


def agrees(case: Case, findings: Iterable[Found]) -> bool:
    """A positive is caught, a negative is kept silent."""
    return reported(case, findings) == (case.expect == POSITIVE)


@dataclasses.dataclass
class Tally:
    peer: str
    rule: str
    positives: int = 0
    caught: int = 0
    caught_with_cuda: int = 0
    negatives: int = 0
    silent: int = 0


@dataclasses.dataclass(frozen=True)
class Verdict:
    case: Case
    as_written: bool  # agrees() on the snippet as the peer wrote it
    # A positive: agrees() once the snippet shows CUDA use. A negative is judged as written only: a CUDA
    # sign is what some of them (a DataLoader with no GPU in sight) are about.
    with_cuda: bool


def tally(verdicts: Sequence[Verdict]) -> list[Tally]:
    rows: dict[tuple[str, str], Tally] = {}
    for verdict in verdicts:
        case = verdict.case
        row = rows.setdefault((case.peer, case.rule), Tally(case.peer, case.rule))
        if case.expect == POSITIVE:
            row.positives += 1
            row.caught += verdict.as_written
            row.caught_with_cuda += verdict.with_cuda
        else:
            row.negatives += 1
            row.silent += verdict.as_written
    order = {rule: index for index, rule in enumerate([*OURS, ANY_RULE])}
    return sorted(rows.values(), key=lambda row: (row.peer, order.get(row.rule, len(order))))


def render(verdicts: Sequence[Verdict]) -> str:
    """The table per peer rule, totals per peer, and each case we disagree with."""
    lines = [
        "| peer | rule | ours | positives caught | with a CUDA sign | negatives silent |",
        "|---|---|---|---|---|---|",
    ]
    rows = tally(verdicts)
    for peer in sorted({row.peer for row in rows}):
        total = Tally(peer, "total")
        for row in (row for row in rows if row.peer == peer):
            ours = ", ".join(OURS.get(row.rule, ("any of the above",)))
            lines.append(_row(row, ours))
            for field in ("positives", "caught", "caught_with_cuda", "negatives", "silent"):
                setattr(total, field, getattr(total, field) + getattr(row, field))
        lines.append(_row(total, ""))
    missed = [v for v in verdicts if not v.with_cuda or not v.as_written]
    if missed:
        lines += ["", "Cases we disagree with:", ""]
        for verdict in missed:
            case = verdict.case
            if case.expect == NEGATIVE:
                lines.append(f"- {case.peer} {case.rule} negative {case.name}: reported")
            else:
                how = "missed" if not verdict.with_cuda else "caught only with a CUDA sign"
                lines.append(f"- {case.peer} {case.rule} positive {case.name}: {how}")
    return "\n".join(lines) + "\n"


def _row(row: Tally, ours: str) -> str:
    return (
        f"| {row.peer} | {row.rule} | {ours} | {row.caught}/{row.positives} | {row.caught_with_cuda}/{row.positives}"
        f" | {row.silent}/{row.negatives} |"
    )

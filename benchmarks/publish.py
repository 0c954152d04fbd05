"""`python -m benchmarks.publish benchmarks/results/<run>.json [...]`: turn GPU results into
torchperf_lint/measured.json, the table each rule's documentation quotes (see torchperf_lint/docs.py).

Each measured comparison becomes a row {"case", "regime", "device", "torch", "bad", "good", "speedup", "ci",
"note"} under every rule code the case is published for. `regime` says what the step was bound by ("launch-bound
MLP 256x4 b=64", "JPEG epoch, 2048 images, 8 workers"), so a page can show where a rule matters and where it
does not. A speedup whose 95% interval contains 1.0 is labelled as no gain; memory cases quote both peaks;
compiled cases quote their first calls (compilation included). Smoke runs carry no timing claims and are refused.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .report import comparison_label, first_calls, format_bytes, format_ms, regime_of

MEASURED = Path(__file__).resolve().parent.parent / "torchperf_lint" / "measured.json"
NO_GAIN = "no gain measured at these sizes (within noise)"
SLOWER = "slower after the change at these sizes"


class NotPublishable(Exception):
    pass


def measured_rows(results: dict) -> dict[str, list[dict[str, Any]]]:
    """Rule code -> rows, in the order of the run."""
    if results.get("smoke"):
        raise NotPublishable("a smoke run on the CPU makes no timing claims: publish a GPU run")
    rows: dict[str, list[dict[str, Any]]] = {}
    for row in results["results"]:
        if row["status"] != "ok":
            continue
        for comparison in row["comparisons"]:
            baseline = row["variants"][comparison["baseline"]]
            variant = row["variants"][comparison["variant"]]
            low, high = comparison["ci"]
            case = f"{row['title']} [{comparison_label(row, comparison)}]"
            notes = []
            if low <= 1.0 <= high:
                notes.append(f"{case}: {NO_GAIN}")
            elif high < 1.0:
                notes.append(f"{case}: {SLOWER}")
            if row["memory"] and "peak_memory_bytes" in baseline and "peak_memory_bytes" in variant:
                notes.append(
                    f"{case}: peak memory {format_bytes(baseline['peak_memory_bytes'])} before, "
                    f"{format_bytes(variant['peak_memory_bytes'])} after"
                )
            if first_calls(row, comparison):
                notes.append(f"{case}: first call (compilation included) {first_calls(row, comparison)}")
            entry = {
                "case": case,
                "regime": regime_of(row, comparison),
                "device": results["device"],
                "torch": results["torch"],
                "bad": format_ms(baseline["median_ms"]),
                "good": format_ms(variant["median_ms"]),
                "speedup": comparison["speedup"],
                "ci": [low, high],
                "note": "; ".join(notes),
            }
            for code in row["publish"]:
                rows.setdefault(code, []).append(entry)
    return rows


def _case_title(row: dict[str, Any]) -> str:
    """`title [size]` -> `title`: the case a published row belongs to."""
    return str(row["case"]).split(" [", 1)[0]


def publish(paths: Sequence[Path], out: Path = MEASURED) -> dict[str, list[dict[str, Any]]]:
    """Write the rows of the runs in `paths` to `out`. A case measured in these runs gets exactly
    their rows; every other case keeps the rows `out` already has, so a run of a few cases
    (`--only TPL204`, `--only tpl102_diffusion_schedule`) publishes them without dropping the rest
    of the table, other cases of the same rule included."""
    merged: dict[str, list[dict[str, Any]]] = {}
    for path in paths:
        results = json.loads(path.read_text(encoding="utf-8"))
        if results.get("complete") is False:
            print(
                f"warning: {path} is from a run that did not finish; publishing the rows it has",
                file=sys.stderr,
            )
        for code, entries in measured_rows(results).items():
            merged.setdefault(code, []).extend(entries)
    kept = json.loads(out.read_text(encoding="utf-8")) if out.exists() else {}
    measured = {_case_title(row) for rows in merged.values() for row in rows}
    for code, rows in kept.items():
        earlier = [row for row in rows if _case_title(row) not in measured]
        merged[code] = earlier + merged.get(code, [])
    ordered = {code: merged[code] for code in sorted(merged)}
    out.write_text(json.dumps(ordered, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return ordered


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.publish", description=__doc__)
    parser.add_argument(
        "results", type=Path, nargs="+", help="results JSON files from `python -m benchmarks`"
    )
    parser.add_argument("--out", type=Path, default=MEASURED, help=f"default {MEASURED}")
    args = parser.parse_args(argv)
    try:
        rows = publish(args.results, args.out)
    except NotPublishable as refusal:
        print(f"{refusal}", file=sys.stderr)
        return 1
    print(f"wrote {args.out}: {sum(map(len, rows.values()))} rows for {len(rows)} rules")
    print("now run `python -m torchperf_lint.docs` to regenerate docs/rules/")
    return 0


if __name__ == "__main__":
    sys.exit(main())

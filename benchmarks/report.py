"""The run's outputs: results JSON, a markdown table and a PNG chart, named <device>-<torch>-<date>."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-")


def file_stem(results: dict) -> str:
    return f"{slug(results['device'])}-{slug(results['torch'])}-{results['date']}"


def format_ms(ms: float) -> str:
    """A short human duration: '850 us', '12.3 ms', '1.52 s'."""
    if ms >= 1000:
        return f"{ms / 1000:.3g} s"
    if ms >= 1:
        return f"{ms:.3g} ms"
    return f"{ms * 1000:.3g} us"


def format_bytes(count: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= scale:
            return f"{count / scale:.3g} {unit}"
    return f"{count} B"


def spread(timing: dict) -> str:
    """'12.3 ms [12.1-13.0]': median and the range of the samples."""
    return f"{format_ms(timing['median_ms'])} [{format_ms(timing['min_ms'])}-{format_ms(timing['max_ms'])}]"


def regime_of(row: dict, comparison: dict) -> str:
    """The regime a comparison measured (results written before regimes were recorded: the size)."""
    return str(comparison.get("regime") or row.get("regime") or row["size"])


def first_calls(row: dict, comparison: dict) -> str:
    """'9 s -> 5.8 s' for cases whose first call is a metric of its own (compilation), else ''."""
    if not row.get("first_call"):
        return ""
    base = row["variants"][comparison["baseline"]].get("first_call_ms")
    new = row["variants"][comparison["variant"]].get("first_call_ms")
    return f"{format_ms(base)} -> {format_ms(new)}" if base is not None and new is not None else ""


MATTERS = 1.05  # RULES.md, "Defaults follow evidence": at least 5%, the interval's low end included


def where_it_matters(results: dict) -> list[str]:
    """Markdown lines: per rule, the regime of its best comparison, and the regimes where it gained less
    than 5% (95% interval's low end under 1.05)."""
    by_code: dict[str, list[tuple[dict, dict]]] = {}
    for row in results["results"]:
        for comparison in row.get("comparisons", []):
            by_code.setdefault(row["code"], []).append((row, comparison))
    if not by_code:
        return []
    lines = [
        "## Where each rule matters",
        "",
        f"Best comparison per rule, and the regimes where the change gained under {MATTERS:g}x (low end of "
        "the 95% interval).",
        "",
        "| rule | best regime | speedup (95% CI) | no gain in |",
        "|---|---|---|---|",
    ]
    for code, pairs in by_code.items():
        row, best = max(pairs, key=lambda pair: pair[1]["speedup"])
        lo, hi = best["ci"]
        flat = sorted(
            {
                f"{regime_of(r, c)} ({c['speedup']:.2g}x)"
                for r, c in pairs
                if c["ci"][0] < MATTERS and c["baseline"] == "bad"
            }
        )
        lines.append(
            f"| {code} | {regime_of(row, best)} ({best['variant']} vs {best['baseline']}) "
            f"| {best['speedup']:.3g}x ({lo:.3g}-{hi:.3g}) | {'; '.join(flat) or '-'} |"
        )
    return ["", *lines]


def comparison_label(row: dict, comparison: dict) -> str:
    """'n=4096' for the headline pair, 'n=4096, bf16 vs bad' for the others."""
    if (comparison["baseline"], comparison["variant"]) == ("bad", "good"):
        return row["size"]
    return f"{row['size']}, {comparison['variant']} vs {comparison['baseline']}"


def write_json(results: dict, path: Path) -> None:
    path.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")


def markdown(results: dict) -> str:
    lines = [
        f"# Benchmarks on {results['device']}, torch {results['torch']}, {results['date']}",
        "",
        "Median time per call [min-max over the samples]; speedup = median(baseline) / median(variant) with a "
        "bootstrap 95% interval." + (" Smoke run on the CPU: no timing claims." if results["smoke"] else ""),
        "",
        "| rule | case | size | regime | baseline | variant | speedup (95% CI) | first call | peak memory | check |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in results["results"]:
        if row["status"] != "ok":
            lines.append(
                f"| {row['code']} | {row['title']} | {row['size']} | {row.get('regime', '')} | | | "
                f"{row['status']} | | | {row.get('detail', '').splitlines()[-1] if row.get('detail') else ''} |"
            )
            continue
        for comparison in row["comparisons"]:
            base = row["variants"][comparison["baseline"]]
            new = row["variants"][comparison["variant"]]
            memory = ""
            if row["memory"] and "peak_memory_bytes" in base:
                memory = (
                    f"{format_bytes(base['peak_memory_bytes'])} -> {format_bytes(new['peak_memory_bytes'])}"
                )
            lo, hi = comparison["ci"]
            tolerance = row.get("tolerance", {}).get(comparison["variant"], {})
            check = (
                f"rtol {tolerance.get('rtol', 0):g}, atol {tolerance.get('atol', 0):g}" if tolerance else ""
            )
            lines.append(
                f"| {row['code']} | {row['title']} | {comparison_label(row, comparison)} "
                f"| {regime_of(row, comparison)} "
                f"| {comparison['baseline']} {spread(base)} | {comparison['variant']} {spread(new)} "
                f"| {comparison['speedup']:.3g}x ({lo:.3g}-{hi:.3g}) | {first_calls(row, comparison)} "
                f"| {memory} | {check} |"
            )
    lines += where_it_matters(results)
    return "\n".join(lines) + "\n"


def write_chart(results: dict, path: Path) -> bool:
    """A log-scale bar per measured comparison, grouped by rule; False when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    bars: list[tuple[str, float, float, float]] = []
    for row in results["results"]:
        for comparison in row.get("comparisons", []):
            lo, hi = comparison["ci"]
            label = f"{row['code']} {row['case'].split('_', 1)[-1]} {comparison_label(row, comparison)}"
            bars.append((label, comparison["speedup"], lo, hi))
    if not bars:
        return False
    figure, axes = plt.subplots(figsize=(10, 0.28 * len(bars) + 1.5))
    positions = list(range(len(bars)))[::-1]
    speedups = [b[1] for b in bars]
    errors = [[b[1] - b[2] for b in bars], [b[3] - b[1] for b in bars]]
    colors = ["tab:green" if b[2] > 1 else ("tab:red" if b[3] < 1 else "tab:gray") for b in bars]
    axes.barh(positions, [s - 1.0 for s in speedups], left=1.0, xerr=errors, color=colors, capsize=2)
    axes.set_yticks(positions, [b[0] for b in bars], fontsize=7)
    axes.set_xscale("log")
    axes.axvline(1.0, color="black", linewidth=0.8)
    axes.set_xlabel("speedup of the fix (median bad / median good, log scale; whiskers: 95% CI)")
    axes.set_title(
        f"torchperf-lint benchmarks: {results['device']}, torch {results['torch']}, {results['date']}"
    )
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return True


def write_all(results: dict, directory: Path, chart: bool = True) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    stem = file_stem(results)
    written = [directory / f"{stem}.json", directory / f"{stem}.md"]
    write_json(results, written[0])
    written[1].write_text(markdown(results), encoding="utf-8")
    if chart and write_chart(results, directory / f"{stem}.png"):
        written.append(directory / f"{stem}.png")
    return written


def summary_line(row: dict[str, Any]) -> str:
    head = f"{row['code']} {row['case']} [{row['size']}]"
    if row["status"] != "ok":
        detail = (row.get("detail") or "").strip().splitlines()
        return f"{head}: {row['status'].upper()} {detail[-1] if detail else ''}"
    parts = [f"{name} {format_ms(v['median_ms'])}" for name, v in row["variants"].items()]
    for comparison in row["comparisons"]:
        lo, hi = comparison["ci"]
        parts.append(
            f"{comparison['baseline']}->{comparison['variant']} {comparison['speedup']:.3g}x ({lo:.3g}-{hi:.3g})"
        )
    if row["memory"] and "peak_memory_bytes" in row["variants"].get("bad", {}):
        parts.append(
            "peak " + " / ".join(format_bytes(v["peak_memory_bytes"]) for v in row["variants"].values())
        )
    if row.get("first_call"):
        parts.append(
            "first call " + " / ".join(format_ms(v["first_call_ms"]) for v in row["variants"].values())
        )
    return f"{head}: " + ", ".join(parts)

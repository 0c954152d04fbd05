"""The confirm report: text in the linter's `path:line:col: CODE` form with what the run saw, or JSON."""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from typing import Any

KIND_NAMES = {
    "factory": "tensor factory",
    "copy": "host-to-device copy",
    "host-index": "index built on the host",
    "module": "module construction",
    "sync": "CUDA sync",
    "synchronize": "torch.cuda.synchronize()",
    "empty-cache": "torch.cuda.empty_cache()",
    "torch-call": "torch call",
}


def _kind(kind: str) -> str:
    return KIND_NAMES.get(
        kind, f".{kind}()" if kind in ("item", "tolist", "cpu", "numpy") else f"{kind}(tensor)"
    )


def _cost(entry: dict[str, Any]) -> str:
    seconds = entry.get("seconds_per_step")
    return f", {seconds * 1e3:.3g} ms/step" if seconds is not None and entry["status"] != "not-seen" else ""


def _seen(entry: dict[str, Any], steps: int) -> str:
    status = entry["status"]
    if status == "not-checked":
        return "not checked: a setting"
    if status == "not-seen":
        ran = entry.get("line_ran_steps")
        outside = entry.get("outside_steps")
        if ran:
            return f"not seen; the line ran at {ran} of {steps} steps"
        return f"not seen at a step, only {_count(outside, 'time')} outside them" if outside else "not seen"
    where = "every step" if status == "every-step" else f"at {entry['steps_seen']} of {steps} steps"
    return f"seen {where}, {entry['per_step']:.3g}/step{_cost(entry)}"


def _summary(
    ended: dict[str, Any], confirmed: Sequence[dict[str, Any]], unreported: Sequence[dict[str, Any]]
) -> str:
    steps = ended["steps"]
    command = shlex.join(ended["command"])
    if steps == 0:
        return f"`{command}` ended without a step: no {ended['step_kind']} ran, so nothing can be confirmed."
    run = _count(ended["steps_run"], "step")
    how = {
        "stopped": f"{run}, stopped there",
        "by itself": f"{run} of the {ended['asked_steps'] + 1} asked for, ended by itself",
        "failed": f"{run}, then failed",
    }[ended["ended"]]
    counts = {
        status: sum(1 for e in confirmed if e["status"] == status)
        for status in ("every-step", "some-steps", "not-seen")
    }
    device = "on CUDA" if ended["cuda"] else "on the CPU"
    return (
        f"Ran `{command}` {device}, a step being {ended['step_kind']}: {how}; {_count(steps, 'step')} "
        "measured after the first (a warm-up, with the setup). "
        f"{_count(counts['every-step'], 'finding')} seen every step, {counts['some-steps']} at some steps, "
        f"{counts['not-seen']} not seen; {_count(len(unreported), 'per-step event')} no finding names."
    )


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def render_text(
    ended: dict[str, Any], confirmed: Sequence[dict[str, Any]], unreported: Sequence[dict[str, Any]]
) -> str:
    lines = []
    steps = ended["steps"]
    if steps:
        for entry in confirmed:
            where = f"{entry['path']}:{entry['line']}:{entry['col']}"
            lines.append(f"{where}: {entry['code']} [{_seen(entry, steps)}] {entry['message']}")
        if unreported:
            lines.append("Seen at run time at lines no finding names:")
        for event in unreported:
            details = f" ({', '.join(event['details'])})" if event["details"] else ""
            seen = _seen(event, steps)
            lines.append(f"{event['path']}:{event['line']}: {_kind(event['kind'])}{details} [{seen}]")
    lines.append(_summary(ended, confirmed, unreported))
    return "\n".join(lines) + "\n"


def render_json(
    ended: dict[str, Any], confirmed: Sequence[dict[str, Any]], unreported: Sequence[dict[str, Any]]
) -> str:
    return json.dumps({**ended, "findings": list(confirmed), "unreported": list(unreported)}, indent=2) + "\n"

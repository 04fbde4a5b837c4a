"""Memory numbers as text: bytes in binary units, the comparison and the fit table."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from campaign.core.defaults import train_key
from campaign.memory.shape import GIB


def format_bytes(n: int | float) -> str:
    for unit, size in (("GiB", GIB), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= size:
            return f"{n / size:.2f} {unit}"
    return f"{int(n)} B"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], left: Sequence[int] = (0,)) -> str:
    """Aligned columns: those in `left` flush left, the others (numbers) flush right."""
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=True)]
    lines = [header, ["-" * w for w in widths], *rows]
    return "\n".join(
        "  ".join(
            str(x).ljust(w) if j in left else str(x).rjust(w)
            for j, (x, w) in enumerate(zip(r, widths, strict=True))
        ).rstrip()
        for r in lines
    )


def format_comparison(rows: Sequence[dict[str, Any]]) -> str:
    body = [
        [
            r["component"],
            format_bytes(r["estimated"]),
            format_bytes(r["measured"]),
            "-" if r["ratio"] is None else f"{r['ratio']:.3f}",
        ]
        for r in rows
    ]
    return _table(["component", "estimated", "measured", "est/meas"], body)


def format_fit_table(rows: Sequence[dict[str, Any]]) -> str:
    """The fit table as aligned text, one line per card (need and margin per card; a run takes
    `cards/run` of them)."""
    body = [
        [
            r["card"],
            format_bytes(r["memory_bytes"]),
            f"{format_bytes(r['need_bytes'])} ({r['phase']})",
            format_bytes(r["margin_bytes"]),
            f"{r['margin_pct']:.1f}%",
            f"{r['required_margin_pct']:.0f}%",
            "yes" if r["fits"] else "NO",
            str(train_key(r, "devices")),
            str(r["micro_batch"]),
            "any" if r["max_micro_batch"] is None else str(r["max_micro_batch"]),
            r.get("source", "estimated"),
        ]
        for r in rows
    ]
    header = [
        "card",
        "memory",
        "need (phase)",
        "margin",
        "margin %",
        "required",
        "fits",
        "cards/run",
        "micro_batch",
        "max micro_batch",
        "source",
    ]
    return _table(header, body)


def _measured(lever: dict[str, Any], ratios: dict[str, float | None]) -> str:
    """The preflight's measurement of the lever's key on real steps (levers.with_costs, and
    the step time ratio from the lever_costs rows)."""
    saves, ratio = lever.get("measured_saves_bytes"), ratios.get(lever["lever"])
    if saves is None:
        return "-"
    return format_bytes(saves) + ("" if ratio is None else f", x{ratio:.2f}")


def format_lever_costs(costs: Sequence[dict[str, Any]]) -> str:
    """The levers that are train keys, measured on real steps of the recipe (lever_costs)."""
    body = [
        [
            c["lever"],
            ", ".join(f"{k}: {v}" for k, v in c["setting"].items()),
            "yes" if c["enabled"] else "no",
            "-" if c["saves_bytes"] is None else format_bytes(c["saves_bytes"]),
            "-" if c["step_time_ratio"] is None else f"x{c['step_time_ratio']:.2f}",
            c["note"] or "",
        ]
        for c in costs
    ]
    header = ["lever", "setting", "in recipe", "saves", "step time", "note"]
    return _table(header, body, left=(0, 1, 2, 5))


def format_levers(
    rows: Sequence[dict[str, Any]], costs: Sequence[dict[str, Any]] | None = None
) -> str:
    """For each card the run does not fit: every lever, the memory it gives, and its source;
    with `costs` (lever_costs rows), what the preflight measured the key to save and cost."""
    ratios = {c["lever"]: c["step_time_ratio"] for c in costs or ()}
    blocks = []
    for r in rows:
        if not r.get("levers"):
            continue
        body = [
            [
                lever["lever"],
                lever["change"],
                "-"
                if lever["need_bytes"] is None
                else f"{format_bytes(lever['need_bytes'])} ({lever['phase']})",
                "-" if lever["saves_bytes"] is None else format_bytes(lever["saves_bytes"]),
                "-" if lever["fits"] is None else ("yes" if lever["fits"] else "no"),
                lever["source"],
                _measured(lever, ratios),
                lever["note"] or "",
            ]
            for lever in r["levers"]
        ]
        header = [
            "lever",
            "change",
            "need (phase)",
            "saves",
            "fits",
            "source",
            "measured: saves, step time",
            "note",
        ]
        title = (
            f"levers for {r['card']} (needs {format_bytes(r['need_bytes'])}, "
            f"{format_bytes(r['usable_bytes'])} usable):"
        )
        blocks.append(title + "\n" + _table(header, body, left=(0, 1, 5, 7)))
    return "\n".join(blocks)

"""Retention windows for `campaign gc --retention` (params ``retention``).

Without ``--retention`` gc drops everything the current plan does not reference at once. With
it, what gc found is held back while it is inside its window:

- ``checkpoints_days``: a completed run's work folder (its resume checkpoints) stays this many
  days after the run's entry was committed (null: kept until gc runs without --retention);
- ``unreferenced_days``: a store entry the plan no longer references stays this many days
  after it was made, for a quick way back (null: kept);
- ``raw_data: referenced``: entries of the data phase's stages (the manifest and the splits:
  copies of the raw text) are never held: they go as soon as no plan references them, whatever
  ``unreferenced_days`` says. ``keep`` holds them like any other entry.

Ages come from the modification time of the entry's folder (set when it is committed) and of
the entry's ``meta.json``; held items are listed by gc with the day they fall due.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

DAY = 86400.0


def _data_stages() -> set[str]:
    from campaign.core.registry import phases

    return {s.name for p in phases() if p.name == "data" for s in p.stages}


def _age_days(path: Path, now: float) -> float:
    return (now - path.stat().st_mtime) / DAY


def _due(path: Path, days: float) -> str:
    when = path.stat().st_mtime + days * DAY
    return datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%d")


def held_keys(store, garbage, retention: dict, now: float) -> dict[str, str]:
    """key -> why it is held back (with the day it falls due), for the entries and committed
    entries' work folders in ``garbage`` that are inside their retention window."""
    held: dict[str, str] = {}
    data = _data_stages()
    days = retention["unreferenced_days"]
    for key in garbage.entries:
        entry = store.read_entry(key)
        path = store.entry_path(key)
        if entry is None or not path.exists():
            continue
        if entry.meta.get("stage") in data and retention["raw_data"] == "referenced":
            continue
        if days is None:
            held[key] = "retention.unreferenced_days is null"
        elif _age_days(path, now) < days:
            held[key] = f"unreferenced; kept until {_due(path, days)} (retention)"
    cdays = retention["checkpoints_days"]
    for key, why in garbage.work.items():
        if why != "its entry is committed" or key in held:
            continue
        path = store.entry_path(key)
        if cdays is None:
            held[key] = "checkpoints kept: retention.checkpoints_days is null"
        elif path.exists() and _age_days(path, now) < cdays:
            held[key] = f"checkpoints kept until {_due(path, cdays)} (retention)"
    return held

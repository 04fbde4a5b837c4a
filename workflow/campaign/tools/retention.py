"""Retention windows for `campaign gc --retention` (params ``retention``).

Without ``--retention`` gc drops everything the current plan does not reference at once, and the
work folders of committed entries. With it, what gc found is held back while it is inside its
window:

- ``checkpoints_days``: a completed run's work folder (its resume checkpoints) stays this many
  days after the run's job record says it completed (state ``done``, its ``ended`` time; the
  first completion: later store hits do not extend it). A work folder no job record says is
  complete is kept: its age cannot be told (plain gc drops it). null: kept until gc runs without
  --retention;
- the work folder of an unfinished job (its latest record ``interrupted`` or ``failed``, no
  entry committed) is kept: its checkpoints let the job resume. One the plan no longer
  references stays ``unreferenced_days`` after the job ended (null: kept). Running jobs' keys
  are never touched (gc's busy check);
- ``unreferenced_days``: a store entry the plan no longer references stays this many days
  after it was made (the entry folder's modification time, set at commit), for a quick way back
  (null: kept);
- ``raw_data: referenced``: entries of the data phase's stages (the manifest and the splits:
  copies of the raw text) are never held: they go as soon as no plan references them, whatever
  ``unreferenced_days`` says. ``keep`` holds them like any other entry.

Held items are listed by gc with the reason and the day they fall due.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

DAY = 86400.0
# A job record left "running" by a process that is gone (SIGKILL, the OOM killer, a node lost, a
# scheduler's time limit) is unfinished too; a live job's folder is held by its lock anyway.
UNFINISHED = ("interrupted", "preempted", "failed", "running")


def _data_stages() -> set[str]:
    from campaign.core.registry import phases

    return {s.name for p in phases() if p.name == "data" for s in p.stages}


def _age_days(path: Path, now: float) -> float:
    return (now - path.stat().st_mtime) / DAY


def _day(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d")


def _due(path: Path, days: float) -> str:
    return _day(path.stat().st_mtime + days * DAY)


@dataclass
class JobTimes:
    """What the job records say about each key: when it first completed, and the latest state
    with the time it ended (seconds since the epoch)."""

    completed: dict[str, float] = field(default_factory=dict)
    latest: dict[str, tuple[str, float]] = field(default_factory=dict)


def job_times(records: list[dict]) -> JobTimes:
    out = JobTimes()
    for r in records:
        key, state = r.get("key"), r.get("state")
        if not key or not state:
            continue
        when = r.get("ended", r.get("started"))
        when = float(when) if isinstance(when, int | float) else -math.inf
        if state == "done" and math.isfinite(when):
            out.completed[key] = min(out.completed.get(key, math.inf), when)
        if key not in out.latest or when >= out.latest[key][1]:
            out.latest[key] = (state, when)
    return out


def _committed_at(store, key: str) -> float:
    """When the key's entry was committed (its entry.json, never rewritten by a store hit)."""
    try:
        return (store.entry_path(key) / "entry.json").stat().st_mtime
    except OSError:
        return math.inf


def _checkpoints(
    key: str, times: JobTimes, days: float | None, now: float, committed: float = math.inf
) -> str | None:
    """Why a completed run's work folder is held, or None when it is due. The run completed
    when its first job record said so, or when its entry was committed, whichever is earlier:
    a job record is rewritten by every later store hit of the same job."""
    if days is None:
        return "checkpoints kept: retention.checkpoints_days is null"
    done = min(times.completed.get(key, math.inf), committed)
    if not math.isfinite(done):
        return "checkpoints kept: no job record says when the run completed"
    if now - done < days * DAY:
        return f"checkpoints kept until {_day(done + days * DAY)} (completed {_day(done)})"
    return None


def _unfinished(
    key: str, times: JobTimes, days: float | None, now: float, folder_mtime: float = -math.inf
) -> str | None:
    """Why the work folder of an unfinished, unreferenced job is held, or None. A folder no job
    record names (records removed, another checkout's) counts from its own mtime."""
    state, ended = times.latest.get(key, (None, -math.inf))
    if state is None:
        state, ended = "no job record", folder_mtime
    elif state not in UNFINISHED:
        return None
    if days is None:
        return f"unfinished job ({state}); retention.unreferenced_days is null"
    if math.isfinite(ended) and now - ended >= days * DAY:
        return None
    due = f" until {_day(ended + days * DAY)}" if math.isfinite(ended) else ""
    return f"unfinished job ({state}): checkpoints to resume from, kept{due} (retention)"


def held_keys(store, garbage, retention: dict, now: float) -> dict[str, str]:
    """key -> why it is held back (with the day it falls due), for the entries and work folders
    in ``garbage`` that are inside their retention window."""
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
    times = job_times(store.job_records())
    for key, why in garbage.work.items():
        if key in held:
            continue
        if why == "its entry is committed":
            committed = _committed_at(store, key)
            reason = _checkpoints(key, times, retention["checkpoints_days"], now, committed)
        else:
            try:
                mtime = (store.work_root / key).stat().st_mtime
            except OSError:
                mtime = -math.inf
            reason = _unfinished(key, times, days, now, mtime)
        if reason is not None:
            held[key] = reason
    return held

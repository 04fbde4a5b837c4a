"""Progress a user can see while a long job runs: step/total, elapsed time and an ETA.

On a terminal a tqdm bar; elsewhere (a job's log, a scheduler) one line every
CAMPAIGN_PROGRESS_SECONDS seconds (default 30). A running job also keeps a small JSON progress
file in its work folder (`progress.json`: stage, run, step, total, elapsed, eta, pid, host,
updated_at), which `campaign status` reads; the file goes when the job's loop ends.

Nothing here touches a random generator or a keyed output: progress never changes a result.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import socket
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TextIO

from campaign.core.errors import CampaignError
from campaign.core.fsutil import atomic_write_text

INTERVAL_ENV = "CAMPAIGN_PROGRESS_SECONDS"
DEFAULT_INTERVAL_S = 30.0
PROGRESS_FILE = "progress.json"
# Steps after which the measured rate alone gives the ETA; before, it is blended with the prior.
MEASURED_AFTER_STEPS = 5
# The progress file is rewritten at most this often (seconds), whatever the log interval.
FILE_INTERVAL_S = 2.0


def interval_from_env(env: Mapping[str, str] | None = None) -> float:
    """Seconds between log lines, from CAMPAIGN_PROGRESS_SECONDS (default 30)."""
    raw = (os.environ if env is None else env).get(INTERVAL_ENV, "").strip()
    if not raw:
        return DEFAULT_INTERVAL_S
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise CampaignError(f"{INTERVAL_ENV}: expected a number of seconds >= 0; got {raw!r}")
    return value


def eta_seconds(
    done: int,
    remaining: int,
    elapsed_s: float,
    prior_step_s: float | None = None,
    measured_after: int = MEASURED_AFTER_STEPS,
) -> float | None:
    """Seconds left for `remaining` steps after `done` steps took `elapsed_s` (this process).

    prior_step_s: seconds a step is expected to take before any is measured (the plan's
    projected hours per step, corrected by the budget's calibration). The measured rate gets
    weight done/measured_after (1 from `measured_after` steps on), the prior the rest. None when
    there is neither a measured step nor a prior.
    """
    if remaining <= 0:
        return 0.0
    measured = elapsed_s / done if done > 0 else None
    if measured is None and prior_step_s is None:
        return None
    if prior_step_s is None:
        per_step = measured
    elif measured is None:
        per_step = prior_step_s
    else:
        weight = min(1.0, done / measured_after) if measured_after > 0 else 1.0
        per_step = weight * measured + (1 - weight) * prior_step_s
    return remaining * per_step


def format_seconds(seconds: float | None) -> str:
    """12 -> "12 s", 125 -> "2 min 5 s", 7260 -> "2 h 1 min"; None -> "unknown"."""
    if seconds is None or not math.isfinite(seconds):
        return "unknown"
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    return f"{s // 3600} h {s % 3600 // 60} min"


def progress_line(desc: str, step: int, total: int, elapsed_s: float, eta_s: float | None) -> str:
    """`train run-1a2b: step 120/200 (60%), 41 s elapsed, ETA 27 s`."""
    share = f"{100 * step / total:.0f}%" if total else "-"
    return (
        f"{desc}: step {step}/{total} ({share}), {format_seconds(elapsed_s)} elapsed, "
        f"ETA {format_seconds(eta_s)}"
    )


class Progress:
    """Step progress of one job: a tqdm bar on a terminal, else a log line every `interval_s`;
    a progress file (when `path` is given) for `campaign status`.

    clock: seconds (time.monotonic by default; tests inject a fake one). Elapsed time and the
    measured rate count from this object's creation, so a resumed job's ETA uses only the steps
    it ran itself.
    """

    def __init__(
        self,
        total: int,
        initial: int = 0,
        desc: str = "train",
        stream: TextIO | None = None,
        interval_s: float | None = None,
        path: Path | None = None,
        info: Mapping[str, object] | None = None,
        prior_step_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.total, self.initial, self.desc = int(total), int(initial), desc
        self.stream = sys.stderr if stream is None else stream
        self.interval_s = interval_from_env() if interval_s is None else float(interval_s)
        self.path = None if path is None else Path(path)
        self.info = dict(info or {})
        self.prior_step_s = prior_step_s
        self.clock = clock
        self.started = clock()
        self.step = self.initial
        self._last_line = self.started
        self._last_file: float | None = None
        self._bar = None
        isatty = getattr(self.stream, "isatty", None)
        if isatty is not None and isatty():
            from tqdm import tqdm

            self._bar = tqdm(
                total=self.total,
                initial=self.initial,
                desc=desc,
                file=self.stream,
                dynamic_ncols=True,
            )
        self._write_file(self.started)

    def elapsed(self, now: float | None = None) -> float:
        return (self.clock() if now is None else now) - self.started

    def eta(self, now: float | None = None) -> float | None:
        return eta_seconds(
            self.step - self.initial, self.total - self.step, self.elapsed(now), self.prior_step_s
        )

    def record(self, now: float | None = None) -> dict:
        """What the progress file holds (times in seconds; updated_at is wall-clock epoch)."""
        eta = self.eta(now)
        return {
            **self.info,
            "step": self.step,
            "total": self.total,
            "elapsed_s": round(self.elapsed(now), 3),
            "eta_s": None if eta is None else round(eta, 3),
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "updated_at": round(time.time(), 3),
            "state": "running",
        }

    def _write_file(self, now: float) -> None:
        if self.path is None:
            return
        self._last_file = now
        with contextlib.suppress(OSError):  # progress is a courtesy: never fail the job for it
            atomic_write_text(self.path, json.dumps(self.record(now), sort_keys=True) + "\n")

    def update(self, step: int, **fields: float) -> None:
        now = self.clock()
        self.step = int(step)
        if self._last_file is None or now - self._last_file >= min(
            FILE_INTERVAL_S, self.interval_s
        ):
            self._write_file(now)
        if self._bar is not None:
            self._bar.update(self.step - self._bar.n)
            self._bar.set_postfix({k: f"{v:.4g}" for k, v in fields.items()}, refresh=False)
            return
        if now - self._last_line >= self.interval_s or self.step >= self.total:
            self._last_line = now
            shown = "".join(f", {k} {v:.4g}" for k, v in fields.items())
            line = progress_line(self.desc, self.step, self.total, self.elapsed(now), self.eta(now))
            print(line + shown, file=self.stream, flush=True)

    def close(self) -> None:
        """End of the loop (finished, failed or interrupted): the progress file goes."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        if self.path is not None:
            with contextlib.suppress(OSError):
                self.path.unlink(missing_ok=True)


def job_progress(
    stage: str,
    work_dir: Path,
    total: int,
    initial: int = 0,
    run: str | None = None,
    stream: TextIO | None = None,
) -> Progress:
    """The Progress of a store job whose private work folder is `work_dir` (.../work/<key>)."""
    key = Path(work_dir).name
    label = run or f"{key[:8]}…"
    return Progress(
        total,
        initial=initial,
        desc=f"{stage} {label}",
        stream=stream,
        path=Path(work_dir) / PROGRESS_FILE,
        info={"stage": stage, "run": run, "key": key},
    )


def read_progress(path: Path) -> dict | None:
    """A progress file's record; None when it is gone or unreadable (being replaced)."""
    try:
        record = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def find_progress(work_root: Path) -> list[tuple[Path, dict]]:
    """Every progress file under a store's work folders, with its record, by path."""
    found = []
    if not Path(work_root).is_dir():
        return found
    for path in sorted(Path(work_root).glob(f"*/{PROGRESS_FILE}")):
        record = read_progress(path)
        if record is not None:
            found.append((path, record))
    return found

"""command: an outside trainer (train.command, and each of train.commands) keeps its contract on
the preflight's sample before any training job runs it.

Each command is run as a training job runs it (campaign.train.command: the run spec, the job's
signals passed on, the contract's outputs checked), on the overfit sample for a few steps: it is
signalled after `resume.steps_before` steps and must checkpoint and exit 75, then, started
again, resume from that checkpoint (not from step 0) and finish. The check passes when the
contract's outputs appear (the model, a progress line per step up to the last), the loss falls
on the overfit sample, and the command resumed. Its throughput (steps/s after the resume) and
the peak memory of its process tree are recorded beside the built-in loop's, for the plan and
the budget. A run without a command passes as "not used".
"""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path
from typing import Any

from campaign.core.errors import CampaignError, Preempted
from campaign.core.progress import PROGRESS_FILE
from campaign.preflight.bench import Bench, Result, fmt_bytes, tree_bytes
from campaign.train import (
    CHECKPOINTS,
    PROGRESS_LINES,
    WORK_FILES,
    Command,
    check_adapter,
    check_outputs,
    commands_of,
    last_per_step,
    prepare,
    read_progress_lines,
    run_command,
)

ORDER = 75  # place in the report: after throughput, which times the built-in loop
VOLATILE = ("runs",)  # where the signal landed, losses, throughput, memory: measurements
# It times the command's steps: nothing else runs beside it.
ALONE = True
# How often the watcher reads the progress file and the memory: a small model runs the sample's
# few steps in well under a second, and a signal landing after the last step cannot test the
# checkpoint, nor steps seen in one reading time them.
WATCH_SECONDS = 0.005


class _Watch:
    """While a command runs: when each step's progress line first appeared, the peak resident
    memory of the job's child processes, and (optionally) the signal sent once a step is
    reached. The signal goes to this process, as the scheduler's reaches a job: the job's
    relay passes it on to the command."""

    def __init__(self, progress: Path, signal_at: int | None = None):
        self.progress, self.signal_at = progress, signal_at
        self.seen: dict[int, float] = {}
        self.peak_rss = 0
        self.signalled = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _rss(self) -> int:
        import psutil

        total = 0
        for child in psutil.Process().children(recursive=True):
            try:
                total += child.memory_info().rss
            except psutil.Error:  # ended between the listing and the reading
                continue
        return total

    def _run(self) -> None:
        while not self._stop.is_set():
            now = time.perf_counter()
            for row in read_progress_lines(self.progress):
                self.seen.setdefault(row["step"], now)
            self.peak_rss = max(self.peak_rss, self._rss())
            if self.signal_at is not None and not self.signalled and self.signal_at in self.seen:
                self.signalled = True
                signal.raise_signal(signal.SIGUSR1)
            self._stop.wait(WATCH_SECONDS)


def _write_sample(bench: Bench, folder: Path, examples: int) -> dict[str, list[Path]]:
    """The sample as split files: train is the overfit sample (its first `examples`), the
    validation sample as validation and test (the test split stays unseen)."""
    import pandas as pd

    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for name, split, n in (("train", bench.sample.train, examples),
                           ("validation", bench.sample.validation, None),
                           ("test", bench.sample.validation, None)):  # fmt: skip
        columns = {"id": split.ids[:n], "text": split.texts[:n], "label": split.labels[:n]}
        if split.messages is not None:
            columns["messages"] = split.messages[:n]
        path = folder / f"{name}.parquet"
        pd.DataFrame(columns).to_parquet(path, index=False)
        out[name] = [path]
    return out


def _spec(bench: Bench, command: dict, steps: int) -> dict:
    """The baseline's recipe for `steps` steps, trained by `command`; checkpoints only when
    signalled, so a resume from step > 0 is the signal's checkpoint."""
    recipe = bench.spec["train"]
    train = {
        **recipe,
        "command": command,
        "max_steps": steps,
        "checkpoint_every": steps,
        "warmup_steps": min(recipe["warmup_steps"], steps // 4),
        "devices": 1,
    }
    return {**bench.spec, "train": train}


# What the check itself puts in a command's folder (its sample; in the work folder, what the run
# spec names and the campaign writes): the rest is what the command wrote.
SAMPLE = "splits"


def written(folder: Path, work: Path, model: Path) -> dict:
    """What a command wrote on the sample, all of it: its checkpoints (one checkpoint's bytes:
    the largest), its model, and every file it was not asked for (in its work folder or beside
    its model folder, where a training job's store staging is): {name: bytes}. A job keeps the
    checkpoints and whatever else it writes on the disk while it runs."""
    checkpoints = work / CHECKPOINTS
    parts = [tree_bytes(c) for c in checkpoints.iterdir()] if checkpoints.is_dir() else []
    undeclared = {}
    for place, declared in ((folder, (SAMPLE, work.name, model.name)),
                            (work, (*WORK_FILES, PROGRESS_FILE))):  # fmt: skip
        for child in sorted(place.iterdir()):
            if child.name not in declared:
                undeclared[str(child.relative_to(folder))] = tree_bytes(child)
    return {
        "checkpoint_bytes": max(parts, default=0),
        "checkpoints_bytes": sum(parts),
        "model_bytes": tree_bytes(model) if model.exists() else 0,
        "undeclared": undeclared,
    }


def _ended_before_signal(model: Path, progress_path: Path, before: int) -> None:
    """The command exited 0 before the signal was sent (at step `before`): what it left, in one
    line naming the paths its run spec gave it."""
    rows = read_progress_lines(progress_path)
    if not rows and not (model.is_dir() and any(model.iterdir())):
        raise CampaignError(
            f"exited 0 without writing its output (no model in {model}, no progress line in "
            f"{progress_path})"
        )
    last = rows[-1]["step"] if rows else 0
    if last >= before:  # its steps outran the watcher's reading of the progress file
        raise CampaignError(
            f"exited 0 at step {last} before its signal at step {before} was sent (its steps are "
            "faster than the signal lands: raise preflight.resume.steps_after)"
        )
    raise CampaignError(
        f"exited 0 at step {last}, before its signal at step {before} (the contract: a progress "
        f"line per step in {progress_path} up to max_steps; checkpoint and exit 75 when signalled)"
    )


def check_one(bench: Bench, name: str, command: Command, raw: dict) -> tuple[dict, dict]:
    """One command through the contract on the sample: (what the check decided, what it
    measured: where it stopped and resumed, its losses, steps/s and peak memory)."""
    before, after = bench.cfg["resume"]["steps_before"], bench.cfg["resume"]["steps_after"]
    steps = before + after + bench.cfg["throughput"]["window_steps"]
    folder = bench.scratch(f"command-{name}")
    inputs = _write_sample(bench, folder / "splits", bench.cfg["overfit"]["examples"])
    if bench.base_model is not None:
        inputs["base_model"] = [bench.base_model]
    spec = _spec(bench, raw, steps)
    work = folder / "work"
    outputs = {"model": folder / "model"}
    # The run's labels, not the sample's: the command builds the head the train job builds,
    # and its adapter is checked against the labels that job checks it against.
    spec_path, _, labels = prepare(spec, inputs, outputs, work, bench.root, bench.label_names())
    progress_path = work / PROGRESS_LINES
    stopped_at = None
    with _Watch(progress_path, signal_at=before) as first:
        try:
            run_command(command, spec_path, work, bench.root, spec)
        except Preempted as e:
            stopped_at = e.step
    if stopped_at is None and not first.signalled:
        _ended_before_signal(outputs["model"], progress_path, before)
    if stopped_at is None:
        raise CampaignError(
            f"ran to its end through signal SIGUSR1 at step {before} (the contract: checkpoint "
            f"and exit 75; if its steps are faster than the signal lands, raise "
            f"preflight.resume.steps_after)"
        )
    with _Watch(progress_path) as second:
        resumed_from = run_command(command, spec_path, work, bench.root, spec)
    if resumed_from == 0:
        raise CampaignError("started again after its signal, it trained from step 0 (no resume)")
    progress = last_per_step(read_progress_lines(progress_path))
    check_outputs(outputs["model"], progress, steps)
    # A peft adapter is checked as the training job checks it (its base, a classifier's head).
    check_adapter(outputs["model"], bench.base_model, labels, spec["model"]["task"])
    losses = [r["loss"] for r in progress if r.get("loss") is not None]
    timed = sorted(s for s in second.seen if s > resumed_from + 1)  # the first: a warm-up
    window = second.seen[timed[-1]] - second.seen[timed[0]] if len(timed) > 1 else 0.0
    steps_per_s = (len(timed) - 1) / window if window > 0 else None
    stable = {
        "passed": len(losses) > 1 and losses[-1] < losses[0],
        "steps": steps,
        "signalled_at_step": before,
    }
    # Where a signal lands and what a step takes vary between identical runs: measurements.
    measured = {
        "stopped_at_step": stopped_at,
        "resumed_from_step": resumed_from,
        "first_loss": losses[0] if losses else None,
        "last_loss": losses[-1] if losses else None,
        "steps_per_s": steps_per_s,
        "tokens_per_s": (
            sum(r.get("tokens") or 0 for r in progress if r["step"] in timed[1:]) / window
            if window > 0
            else None
        ),
        "peak_rss_bytes": max(first.peak_rss, second.peak_rss),
        # What it put on the disk (the plan sizes its runs with these): measured, not exact.
        "disk": written(folder, work, outputs["model"]),
    }
    return stable, measured


def _line(name: str, d: dict, m: dict | None) -> str:
    """One command's part of the summary (d: what the check decided; m: what it measured)."""
    if "error" in d:
        return f"{name}: {d['error']}"
    m = m or {}
    losses = f"{m.get('first_loss')} -> {m.get('last_loss')} over {d['steps']} steps"
    if not d["passed"]:
        return f"{name}: the loss did not fall on the overfit sample ({losses})"
    speed = f", {m['steps_per_s']:.2f} steps/s" if m.get("steps_per_s") else ""
    rss = m.get("peak_rss_bytes")
    memory = f", peak {rss / 2**20:.0f} MiB" if rss else ""
    return (
        f"{name}: loss {m['first_loss']:.3g} -> {m['last_loss']:.3g} over {d['steps']} steps, "
        f"signalled at step {d['signalled_at_step']}, stopped at {m['stopped_at_step']} and "
        f"resumed from step {m['resumed_from_step']}{speed}{memory}{_disk_words(m.get('disk'))}"
    )


def _disk_words(disk: dict | None) -> str:
    """What a command's summary says it writes: its checkpoint, model and undeclared files."""
    if not disk:
        return ""
    words = (f", writes a checkpoint of {fmt_bytes(disk['checkpoint_bytes'])} and a model of "
             f"{fmt_bytes(disk['model_bytes'])}")  # fmt: skip
    extra = disk["undeclared"]
    if extra:
        named = ", ".join(f"{n} {fmt_bytes(b)}" for n, b in extra.items())
        words += (f", and {fmt_bytes(sum(extra.values()))} it was not asked for ({named}: "
                  "counted in the plan's disk, not committed)")  # fmt: skip
    return words


def run(bench: Bench) -> Result:
    named = commands_of(bench.spec["train"])
    if not named:
        return Result(True, "not used: every run trains with the built-in loop", {"commands": {}})
    results: dict[str, dict[str, Any]] = {}
    runs: dict[str, dict] = {}
    for name, (command, raw) in named.items():
        try:
            results[name], runs[name] = check_one(bench, name, command, raw)
        except CampaignError as e:
            results[name] = {"passed": False, "error": str(e)}
    passed = all(r["passed"] for r in results.values())
    summary = "; ".join(_line(n, d, runs.get(n)) for n, d in results.items())
    return Result(passed, summary, {"commands": results, "runs": runs})

"""TensorBoard event files: one folder per trained run, its curves as scalars by step, written
with TensorBoard's own event writer (no TensorFlow, no torch)."""

from __future__ import annotations

import time
from pathlib import Path


def write_run(folder: Path, curves: dict[str, list[tuple[int, float]]]) -> None:
    """folder/events.out.tfevents.*: every curve's points (tag = curve name, e.g. train/loss)."""
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    folder.mkdir(parents=True, exist_ok=True)
    writer = EventFileWriter(str(folder))
    try:
        now = time.time()
        for tag, points in curves.items():
            for step, value in points:
                summary = Summary(value=[Summary.Value(tag=tag, simple_value=value)])
                writer.add_event(Event(wall_time=now, step=step, summary=summary))
    finally:
        writer.close()

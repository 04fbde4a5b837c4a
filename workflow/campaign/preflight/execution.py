"""How the preflight job computes: every check on one torch thread, as a training job runs
(the key's execution settings say so), and as many checks at a time as the job holds cores.

The rule's `threads:` (the cores the job holds, `--threads`) is how many checks run at once, each
in its own process: a check builds its own Trainer from the seeded sample, so no result depends
on how many run beside it, and the count stays out of the key (like checkpoint_every).
"""

from __future__ import annotations

import importlib

from campaign.train import EXECUTION as TRAINING  # the module that pins a training job

CHECK_THREADS = 1  # torch threads of each check: a training job's (the train rule has none)
_granted = {"cores": 1}  # what settings() was asked for, in this process


def settings(threads: int) -> dict:
    """The key's execution settings: those of a CHECK_THREADS training job, whatever `threads`
    (the cores the job holds: workers(), recorded here for the stage)."""
    _granted["cores"] = max(1, int(threads))
    return importlib.import_module(TRAINING).settings(CHECK_THREADS)


def pin(settings: dict) -> None:
    importlib.import_module(TRAINING).pin(settings)


def workers() -> int:
    """How many checks may run at once: the cores this job's runner was given (1 when the
    stage runs without one, as `campaign reproduce` runs it)."""
    return _granted["cores"]

"""What a train.command leaves behind: every process it starts is ended with it (a child of a
command killed after its grace, a background child of a command that exited 0), and what it
writes beside its model is named in the job's log and not committed to the store."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import psutil
import pytest
from trainkit import OUTPUTS, context, tiny_spec, write_splits

from campaign.core.errors import CampaignError
from campaign.train.command import PROGRESS_LINES, stage

# Keeps the contract: a from-config model saved with its tokenizer, a progress line per step.
# `HEAD` is inserted at its start, `EXTRA` before it exits.
CONTRACT = """
import json, os, subprocess, sys, signal, time
from pathlib import Path
from campaign.train import models
HEAD
spec = json.load(open(os.environ["CAMPAIGN_RUN_SPEC"]))
tok = models.load_tokenizer(Path(spec["tokenizer"]), spec["task"])
model = models.build_model(spec["model"], tok, spec["labels"], spec["seed"], None)
with open(spec["progress_file"], "a") as f:
    for step in range(1, spec["max_steps"] + 1):
        f.write(json.dumps({"step": step, "loss": 1.0 / step, "tokens": 8}) + "\\n")
model.save_pretrained(spec["output_dir"])
tok.save_pretrained(spec["output_dir"])
EXTRA
"""
# A child that ignores SIGTERM, writes its pid, and writes `late` 4 s after the command ended.
CHILD = (
    "import os, signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "open(sys.argv[1], 'w').write(str(os.getpid())); parent = os.getppid()\n"
    "while os.getppid() == parent: time.sleep(0.05)\n"
    "time.sleep(4); open(sys.argv[2], 'w').write('late')"
)
START_CHILD = """
child = subprocess.Popen([sys.executable, "-c", CHILD_CODE, PID_FILE, LATE_FILE], **OPTIONS)
while not os.path.exists(PID_FILE):
    time.sleep(0.02)
"""
# The command ignores the preemption signals (HEAD) and trains on (EXTRA).
IGNORES_SIGNALS = """
signal.signal(signal.SIGTERM, signal.SIG_IGN)
signal.signal(signal.SIGUSR1, signal.SIG_IGN)
"""


def script(tmp_path: Path, extra: str, options: str = "{}", head: str = "") -> Path:
    start = (
        START_CHILD.replace("CHILD_CODE", repr(CHILD))
        .replace("PID_FILE", repr(str(tmp_path / "child.pid")))
        .replace("LATE_FILE", repr(str(tmp_path / "late.txt")))
        .replace("OPTIONS", options)
    )
    path = tmp_path / "trainer.py"
    path.write_text(CONTRACT.replace("HEAD", head).replace("EXTRA", start + extra))
    return path


def ctx_of(tmp_path: Path, path: Path):
    spec = tiny_spec(command={"argv": ["python", str(path)], "files": [], "grace_seconds": 1},
                     max_steps=3)  # fmt: skip
    return context(spec, write_splits(tmp_path / "splits", n_train=24, n_eval=8), tmp_path)


def assert_child_gone_and_no_late_file(tmp_path: Path) -> None:
    pid = int((tmp_path / "child.pid").read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            gone = psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            gone = True
        if gone:
            break
        time.sleep(0.05)
    assert gone, f"the command's child {pid} still runs"
    time.sleep(4.5)  # past the moment it would have written
    assert not (tmp_path / "late.txt").exists(), "a child of the command wrote after the job"


def signal_when_running(work: Path) -> None:
    import signal

    deadline = time.monotonic() + 60
    while not (work / PROGRESS_LINES).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    signal.raise_signal(signal.SIGUSR1)


def test_a_command_killed_after_its_grace_takes_its_children_with_it(tmp_path):
    ctx = ctx_of(tmp_path, script(tmp_path, "time.sleep(120)", head=IGNORES_SIGNALS))
    threading.Thread(target=signal_when_running, args=(ctx.work_dir,), daemon=True).start()
    with pytest.raises(CampaignError, match="still running 1 s after signal"):
        stage(ctx)
    assert_child_gone_and_no_late_file(tmp_path)


@pytest.mark.parametrize("options", ["{}", "{'start_new_session': True}"],
                         ids=["in_its_group", "in_a_session_of_its_own"])  # fmt: skip
def test_a_command_that_exits_0_leaving_a_child_fails_and_the_child_is_ended(
    tmp_path, capfd, options
):
    ctx = ctx_of(tmp_path, script(tmp_path, "", options))
    with pytest.raises(CampaignError) as failed:
        stage(ctx)
    message = str(failed.value)
    assert "exited 0 while 1 process(es) it started still ran" in message, message
    assert "\n" not in message
    pid = (tmp_path / "child.pid").read_text()
    # The job's log names it, with its command line.
    assert f"pid {pid} (" in capfd.readouterr().out
    assert not ctx.outputs["predictions_test"].exists()  # nothing scored, nothing committed
    assert_child_gone_and_no_late_file(tmp_path)


# Writes 3 MiB beside its model folder (output_dir's parent is the job's staging folder).
WRITES_BESIDE = """
with open(os.path.join(os.path.dirname(spec["output_dir"]), "big.bin"), "wb") as f:
    f.write(b"x" * 3 * 2**20)
"""


def test_what_a_command_writes_beside_its_model_is_named_and_not_committed(tmp_path, capfd):
    from campaign.core.runner import run_stage
    from campaign.core.store import Store

    path = tmp_path / "trainer.py"
    path.write_text(CONTRACT.replace("HEAD", "").replace("EXTRA", WRITES_BESIDE))
    spec = tiny_spec(command={"argv": ["python", str(path)], "files": []}, max_steps=3)
    inputs = write_splits(tmp_path / "splits", n_train=24, n_eval=8)
    outputs = {n: tmp_path / "results" / n for n in OUTPUTS}
    store = Store(tmp_path / "state")
    result = run_stage("train", spec, inputs, outputs, store, root=tmp_path)
    entry = store.entry_path(result.key)
    assert sorted(p.name for p in (entry / "outputs").iterdir()) == sorted(OUTPUTS)
    assert sum(p.stat().st_size for p in entry.rglob("*") if p.is_file()) < 2**20
    log = capfd.readouterr().out
    assert "train: not committed, not an output the stage declares" in log, log
    assert "big.bin (3.00 MiB)" in log, log

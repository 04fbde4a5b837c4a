"""Your own trainer (train.command): the HF Trainer example keeps the contract through a real
`campaign train` job (signalled mid-run, exit 75, resumed from its checkpoint, scored into the
outputs of a built-in run), and commands that break the contract fail in one line naming the
broken part."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from test_preemption import job_env
from trainkit import OUTPUTS, REPO, context, tiny_spec, write_splits

from campaign.core.errors import PREEMPTED_EXIT, CampaignError
from campaign.core.store import Store
from campaign.train import run_training
from campaign.train.command import PROGRESS_LINES, key_view, read_progress_lines, stage
from campaign.train.contract import HOLD_ENV

EXAMPLE = "examples/hf_trainer_classification.py"


def command_spec(argv: list[str], files=(), **train) -> dict:
    return tiny_spec(command={"argv": argv, "files": list(files), **train.pop("command", {})},
                     **train)  # fmt: skip


def train_command(spec: dict, inputs: dict, state: Path, out: Path, log: Path) -> list[str]:
    """`campaign train` as the rule runs it, in the project folder the paths are relative to."""
    out.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "campaign", "train", "--spec", json.dumps(spec)]
    cmd += [a for name, paths in inputs.items() for a in ("--in", f"{name}={paths[0]}")]
    first, *rest = spec["train"]["command"]["files"]
    cmd += ["--in", "base_model=", "--in", f"command_files={first}", *rest]
    cmd += ["--state-dir", str(state), "--log", str(log)]
    return cmd + [a for name in OUTPUTS for a in ("--out", f"{name}={out / name}")]


def wait_for_line(job: subprocess.Popen, work: Path, log: Path, step: int) -> None:
    deadline = time.monotonic() + 240
    while True:
        for path in work.glob(f"*/{PROGRESS_LINES}"):
            rows = read_progress_lines(path)
            if rows and rows[-1]["step"] >= step:
                return
        assert job.poll() is None, log.read_text() if log.exists() else "job died"
        assert time.monotonic() < deadline, "no progress line after 240 s"
        time.sleep(0.1)


@pytest.mark.slow
def test_the_hf_trainer_example_is_signalled_resumes_and_writes_a_builtin_runs_outputs(tmp_path):
    steps = 8
    # A project folder holding the splits and the example (reproduce reads paths inside it).
    (tmp_path / "examples").mkdir()
    shutil.copy(REPO / EXAMPLE, tmp_path / EXAMPLE)
    written = write_splits(tmp_path / "splits", n_train=64, n_eval=16)
    inputs = {name: [p.relative_to(tmp_path)] for name, (p,) in written.items()}
    spec = command_spec([sys.executable, EXAMPLE], [EXAMPLE], max_steps=steps,
                        checkpoint_every=2)  # fmt: skip
    state, out, log = Path("state"), tmp_path / "out", tmp_path / "job.log"
    cmd = train_command(spec, inputs, state, out, log)
    # The command waits at step 3 for the signal (the helper's test hold): it stops at step 4.
    job = subprocess.Popen(cmd, cwd=tmp_path, env={**job_env(), HOLD_ENV: "3"})
    try:
        wait_for_line(job, tmp_path / state / "work", log, 3)
        job.send_signal(signal.SIGUSR1)
        assert job.wait(timeout=120) == PREEMPTED_EXIT, log.read_text()
    finally:
        if job.poll() is None:
            job.kill()
    (record,) = Store(tmp_path / state).job_records()
    stopped = record["step"]
    assert record["state"] == "preempted" and stopped == 4, record
    (work,) = (tmp_path / state / "work").iterdir()
    assert list((work / "checkpoints").glob("checkpoint-*")), "no checkpoint left for the rerun"

    again = subprocess.run(cmd, cwd=tmp_path, env=job_env(), timeout=300)
    assert again.returncode == 0, log.read_text()
    timings = json.loads((out / "timings").read_text())
    # The command restarted from its checkpoint (an even step at most `stopped`), not step 0.
    assert 2 <= timings["resumed_from_step"] <= stopped, timings
    manifest = json.loads((out / "run_manifest").read_text())
    assert manifest["trainer"]["kind"] == "command" and manifest["steps"] == steps
    metrics = pd.read_parquet(out / "metrics")
    assert list(metrics.loc[metrics["split"] == "train", "step"]) == list(range(1, steps + 1))

    # An uninterrupted run of the same command (campaign reproduce) against the resumed one.
    rep = subprocess.run(
        [sys.executable, "-m", "campaign", "reproduce", manifest["store_key"], "--state-dir",
         str(state)], cwd=tmp_path, env=job_env(), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert "reproduced bit for bit" in rep.stdout and rep.returncode == 0, rep.stdout + rep.stderr

    # The same columns, types and items as a built-in run of the same cell.
    builtin = context(tiny_spec(max_steps=2), written, tmp_path / "builtin")
    run_training(builtin.spec, builtin.inputs, builtin.outputs, builtin.work_dir, builtin.root)
    for name in ("predictions_validation", "predictions_test", "metrics"):
        ours, theirs = pd.read_parquet(out / name), pd.read_parquet(builtin.outputs[name])
        assert dict(ours.dtypes) == dict(theirs.dtypes), name
        if name != "metrics":
            assert list(ours["id"]) == list(theirs["id"]), name


@pytest.mark.slow
def test_a_job_killed_after_the_commands_last_checkpoint_recovers_to_the_same_model(tmp_path):
    """A job killed after its command saved the checkpoint at max_steps, before the campaign
    committed (found by the kill soak): the next start resumes from that checkpoint, where the
    Trainer trains one step past max_steps when max_steps is not a whole number of epochs
    (6 steps, 4 an epoch). The rerun must end with max_steps' model, reproduced bit for bit,
    not refuse "its last progress line is step 7"."""
    import psutil

    steps = 6
    (tmp_path / "examples").mkdir()
    shutil.copy(REPO / EXAMPLE, tmp_path / EXAMPLE)
    written = write_splits(tmp_path / "splits", n_train=64, n_eval=16)
    inputs = {name: [p.relative_to(tmp_path)] for name, (p,) in written.items()}
    # One checkpoint kept: a checkpoint saved past max_steps would rotate out the one to restore.
    spec = command_spec([sys.executable, EXAMPLE], [EXAMPLE], max_steps=steps,
                        checkpoint_every=3, keep_checkpoints=1)  # fmt: skip
    state, out, log = Path("state"), tmp_path / "out", tmp_path / "job.log"
    cmd = train_command(spec, inputs, state, out, log)
    job = subprocess.Popen(cmd, cwd=tmp_path, env=job_env())
    work = tmp_path / state / "work"
    deadline = time.monotonic() + 300
    while not list(work.glob(f"*/checkpoints/checkpoint-{steps}/trainer_state.json")):
        assert job.poll() is None, log.read_text() if log.exists() else "job ended"
        assert time.monotonic() < deadline, "no final checkpoint after 300 s"
        time.sleep(0.05)
    job.kill()
    job.wait(timeout=60)
    assert not (out / "model").exists()  # nothing committed

    def command_running() -> bool:
        for p in psutil.process_iter(["cmdline"]):
            try:
                if EXAMPLE in " ".join(p.info["cmdline"] or ()) and str(tmp_path) in p.cwd():
                    return True
            except psutil.Error:
                continue
        return False

    deadline = time.monotonic() + 120
    while command_running():  # the command, told by the job's death, stops on its own
        assert time.monotonic() < deadline, "the command outlived its job by 120 s"
        time.sleep(0.2)
    again = subprocess.run(cmd, cwd=tmp_path, env=job_env(), timeout=300)
    assert again.returncode == 0, log.read_text()
    metrics = pd.read_parquet(out / "metrics")
    assert list(metrics.loc[metrics["split"] == "train", "step"]) == list(range(1, steps + 1))
    manifest = json.loads((out / "run_manifest").read_text())
    rep = subprocess.run(
        [sys.executable, "-m", "campaign", "reproduce", manifest["store_key"], "--state-dir",
         str(state)], cwd=tmp_path, env=job_env(), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert "reproduced bit for bit" in rep.stdout and rep.returncode == 0, rep.stdout + rep.stderr


# Commands that break the contract: (script, grace_seconds, the words of the one-line failure).
WRITES_NOTHING = "import sys; sys.exit(0)"
NO_MODEL = """
import json, os
spec = json.load(open(os.environ["CAMPAIGN_RUN_SPEC"]))
with open(spec["progress_file"], "a") as f:
    for step in range(1, spec["max_steps"] + 1):
        f.write(json.dumps({"step": step, "loss": 1.0, "tokens": 10}) + "\\n")
"""
IGNORES_SIGNAL = """
import json, os, signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
signal.signal(signal.SIGUSR1, signal.SIG_IGN)
spec = json.load(open(os.environ["CAMPAIGN_RUN_SPEC"]))
with open(spec["progress_file"], "a") as f:
    f.write(json.dumps({"step": 1, "loss": 1.0, "tokens": 10}) + "\\n")
time.sleep(120)
"""
FAILS = "import sys; sys.exit(3)"
BROKEN = {
    "writes_nothing": (WRITES_NOTHING, "exited 0 without any output"),
    "no_model": (NO_MODEL, "no model written"),
    "ignores_signal": (IGNORES_SIGNAL, "still running 1 s after signal"),
    "fails": (FAILS, "exited 3"),
}


def warn_when_running(work: Path) -> None:
    """SIGUSR1 to this process (the job) once the command has written its first line."""
    deadline = time.monotonic() + 60
    while not (work / PROGRESS_LINES).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    signal.raise_signal(signal.SIGUSR1)


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_command_that_breaks_the_contract_fails_in_one_line_naming_the_part(tmp_path, case):
    script, words = BROKEN[case]
    path = tmp_path / "trainer.py"
    path.write_text(script)
    # "python": the job's own interpreter, whichever python PATH would give
    spec = command_spec(["python", str(path)], command={"grace_seconds": 1}, max_steps=3)
    ctx = context(spec, write_splits(tmp_path / "splits", n_train=24, n_eval=8), tmp_path)
    if case == "ignores_signal":  # the scheduler's warning, once the command is running
        threading.Thread(target=warn_when_running, args=(ctx.work_dir,), daemon=True).start()
    started = time.monotonic()
    with pytest.raises(CampaignError) as failed:
        stage(ctx)
    message = str(failed.value)
    assert words in message and "\n" not in message, message
    assert not ctx.outputs["predictions_test"].exists()
    assert time.monotonic() - started < 60  # a command ignoring the signal is killed


def test_the_key_covers_the_command_its_files_and_its_packages_versions(tmp_path):
    from campaign.train.command import derive_inputs

    spec = command_spec(["python", EXAMPLE], [EXAMPLE], command={"packages": ["transformers"]})
    view = key_view(spec)
    assert view["train"]["command"]["argv"] == ["python", EXAMPLE]
    assert view["command_packages"]["transformers"] not in ("", "absent")
    assert derive_inputs(spec, tmp_path)["command_files"] == [tmp_path / EXAMPLE]
    # How long the command may take to stop is operational: the same run, the same key.
    slower = command_spec(["python", EXAMPLE], [EXAMPLE],
                          command={"packages": ["transformers"], "grace_seconds": 5})  # fmt: skip
    assert key_view(slower) == view
    assert key_view(command_spec(["python", "other.py"])) != view
    # A built-in run's key has no command part: runs made before the key existed keep theirs.
    assert "command" not in key_view(tiny_spec())["train"]


def test_the_validation_row_is_the_true_labels_mean_log_loss_and_the_accuracy():
    from campaign.train.command import _validation

    frame = pd.DataFrame(
        {
            "label": ["a", "b", "z"],  # z: a label the train split lacks (no loss, wrong)
            "prediction": ["a", "a", "a"],
            "score_a": [0.5, 0.75, 0.5],
            "score_b": [0.5, 0.25, 0.5],
        }
    )
    loss, accuracy = _validation(frame, ["a", "b"])
    assert abs(loss - (-(np.log(0.5) + np.log(0.25)) / 2)) < 1e-12
    assert accuracy == 1 / 3


def _trainer_factor(params: dict, levels: list) -> dict:
    """params with a named HF Trainer command and a factor over the trainer."""
    import copy

    out = copy.deepcopy(params)
    out["train"]["commands"] = {"hf": {"argv": ["python", EXAMPLE], "files": [EXAMPLE]}}
    out["train"]["command"] = "builtin"
    out["ablation"]["factors"] = {"train": {"command": levels}}
    return out


def test_a_trainer_factor_names_commands_and_its_runs_are_the_commands_they_resolve_to():
    import yaml

    from campaign.core.params import validate
    from campaign.plan import plan_runs, resolved_spec, run_id

    params = yaml.safe_load((REPO / "tests" / "fixtures" / "tiny_params.yaml").read_text())
    builtin_run = run_id(resolved_spec(params, {}, 1))
    factored = validate(_trainer_factor(params, ["builtin", "hf"]))
    runs = plan_runs(factored)
    cells = {dict(r.cell)["train.command"]: r.run_id for r in runs if r.seed == 1}
    # The built-in level is the run the campaign made before the factor existed (the named
    # commands are in no run's id); the named one is the command it names, written inline.
    assert cells["builtin"] == builtin_run
    inline = {
        **params,
        "train": {**params["train"], "command": factored["train"]["commands"]["hf"]},
    }
    assert cells["hf"] == run_id(resolved_spec(inline, {}, 1)) != builtin_run
    renamed = _trainer_factor(params, ["builtin", "hf"])
    renamed["train"]["commands"] = {"mine": renamed["train"]["commands"]["hf"]}
    assert run_id(resolved_spec(renamed, {"train.command": "mine"}, 1)) == cells["hf"]
    # The plan names the trainer by its level, so the verdict reads "train.command = hf".
    assert [dict(r.cell)["train.command"] for r in runs] == ["builtin", "hf"] * 2
    # A name that is no command, or a command named builtin: one line before any job.
    with pytest.raises(CampaignError) as wrong:
        validate(_trainer_factor(params, ["builtin", "hff"]))
    assert str(wrong.value) == (
        "params: ablation.factors.train.command: 'hff' is not one of builtin, hf (train.commands)"
    )
    clash = _trainer_factor(params, ["builtin", "hf"])
    clash["train"]["commands"]["builtin"] = {"argv": ["python", "x.py"]}
    with pytest.raises(CampaignError, match=r"^params: train.commands.builtin: the built-in"):
        validate(clash)


# A command that waits for its warning, notes which signal came, and exits 75 (the contract).
NOTES_SIGNAL = """
import json, os, signal, sys, time
spec = json.load(open(os.environ["CAMPAIGN_RUN_SPEC"]))
def stop(signum, _frame):
    open(sys.argv[1], "w").write(signal.Signals(signum).name)
    sys.exit(75)
signal.signal(signal.SIGUSR1, stop)
signal.signal(signal.SIGTERM, stop)
with open(spec["progress_file"], "a") as f:
    f.write(json.dumps({"step": 1, "loss": 1.0, "tokens": 10}) + "\\n")
time.sleep(60)
"""


def test_the_slurm_profiles_warning_reaches_a_command_as_sigusr1_and_requeues_its_job(tmp_path):
    """profiles/slurm sends the train rule's job SIGURG before its time limit (the rule is the
    same for a command run, so are its resources and retries): the job passes it on as the
    contract's SIGUSR1, and the command's exit 75 is the preemption Snakemake retries."""
    import yaml

    from campaign.core.errors import Preempted

    profile = yaml.safe_load((REPO / "profiles" / "slurm" / "config.yaml").read_text())
    assert "--signal=URG@" in profile["set-resources"]["train"]["slurm_extra"]
    assert profile["retries"] >= 1
    path, seen = tmp_path / "trainer.py", tmp_path / "signal.txt"
    path.write_text(NOTES_SIGNAL)
    spec = command_spec(["python", str(path), str(seen)], max_steps=3)
    ctx = context(spec, write_splits(tmp_path / "splits", n_train=24, n_eval=8), tmp_path)

    def warn() -> None:
        deadline = time.monotonic() + 60
        while not (ctx.work_dir / PROGRESS_LINES).exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        signal.raise_signal(signal.SIGURG)

    threading.Thread(target=warn, daemon=True).start()
    with pytest.raises(Preempted) as stopped:
        stage(ctx)
    assert stopped.value.step == 1 and seen.read_text() == "SIGUSR1"
    assert not ctx.outputs["predictions_test"].exists()


def test_a_command_is_its_argv_files_and_packages_not_how_they_are_listed():
    """The same command written two ways is one run: `files: []` as absent, the files and
    packages in any order, another grace period; another file or argv is another run."""
    from campaign.plan.ids import identity

    def run(command):
        return identity(
            {
                "model": {"source": "from_config"},
                "seed": 1,
                "train": {"lr": 1e-3, "command": command},
            }
        )

    argv = ["python", "train.py"]
    plain = run({"argv": argv})
    assert run({"argv": argv, "files": [], "packages": []}) == plain
    assert run({"argv": argv, "grace_seconds": 5}) == plain
    listed = run({"argv": argv, "files": ["a.py", "b.yaml"], "packages": ["trl", "peft"]})
    assert run({"argv": argv, "files": ["b.yaml", "a.py"], "packages": ["peft", "trl"]}) == listed
    assert listed != plain
    assert run({"argv": [*argv, "--fast"]}) != plain


def test_trainer_levels_that_resolve_to_one_command_fail_in_one_line_naming_both():
    """builtin and null, or two names of one argv/files/packages (listed in another order),
    would plan one run per seed under two cell names: refused before the plan."""
    import yaml

    from campaign.core.params import validate

    params = yaml.safe_load((REPO / "tests" / "fixtures" / "tiny_params.yaml").read_text())
    with pytest.raises(CampaignError) as both_builtin:
        validate(_trainer_factor(params, ["builtin", None]))
    assert str(both_builtin.value) == (
        "params: ablation.factors.train.command: levels builtin and null are the same command "
        "(argv, files and packages), so they would train one cell; list one"
    )
    twice = _trainer_factor(params, ["builtin", "hf", "hf2"])
    twice["train"]["commands"]["hf2"] = {"argv": ["python", EXAMPLE], "files": [EXAMPLE, EXAMPLE],
                                         "grace_seconds": 5}  # fmt: skip
    with pytest.raises(CampaignError, match="levels hf and hf2 are the same command"):
        validate(twice)
    # Another file is another command: two cells.
    twice["train"]["commands"]["hf2"]["files"] = [EXAMPLE, "sft.yaml"]
    assert validate(twice)["ablation"]["factors"]["train"]["command"] == ["builtin", "hf", "hf2"]


def test_more_devices_than_one_need_a_launcher_in_argv_which_gets_the_count(tmp_path):
    from campaign.train.command import Command
    from campaign.train.launchers import command_argv

    launched = Command(argv=("torchrun", "--nproc_per_node={devices}", "train.py"))
    # The launcher beside the campaign's interpreter, as "python" is that interpreter.
    own = str(Path(sys.executable).parent / "torchrun")
    assert command_argv(launched, 4) == [own, "--nproc_per_node=4", "train.py"]
    module = Command(argv=("python", "-m", "torch.distributed.run", "--nproc_per_node",
                           "{devices}"))  # fmt: skip
    assert command_argv(module, 2)[1:] == ["-m", "torch.distributed.run", "--nproc_per_node", "2"]
    assert command_argv(Command(argv=("python", "train.py")), 1)[1:] == ["train.py"]
    # A plain script on 2 devices: refused in one line before it starts, no output written.
    path = tmp_path / "trainer.py"
    path.write_text(f"open({str(tmp_path / 'started')!r}, 'w')")
    spec = command_spec(["python", str(path)], max_steps=3, devices=2)
    ctx = context(spec, write_splits(tmp_path / "splits", n_train=24, n_eval=8), tmp_path)
    with pytest.raises(CampaignError) as refused:
        stage(ctx)
    assert str(refused.value).startswith(
        "train.devices 2: train.command's argv (python " + str(path) + ") starts no launcher"
    ), refused.value
    assert not (tmp_path / "started").exists() and not ctx.outputs["predictions_test"].exists()


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["torchrun", "--nproc_per_node", "4", "t.py"], "sets --nproc_per_node 4, a process"),
        (["torchrun", "--nproc-per-node=4", "t.py"], "sets --nproc-per-node 4, a process"),
        (["accelerate", "launch", "--num_processes", "4", "t.py", "{devices}"],
         "sets --num_processes 4"),
        (["deepspeed", "--num_gpus=4", "t.py", "--x={devices}"], "sets --num_gpus 4"),
        (["torchrun", "t.py"], 'starts torchrun without "{devices}"'),
        (["python", "-m", "torch.distributed.run", "--standalone", "t.py"],
         'starts torch.distributed.run without "{devices}"'),
        (["mpirun", "-np", "4", "python", "t.py", "--x", "{devices}"], "sets -np 4"),
        (["srun", "-n", "8", "python", "t.py", "--gpus", "{devices}"], "sets -n 8"),
        (["srun", "torchrun", "--nproc_per_node={devices}", "t.py"],
         "starts srun and then torchrun: srun starts train.devices"),
        (["mpirun", "python", "-m", "torch.distributed.run", "--nproc-per-node={devices}", "t.py"],
         "starts mpirun and then torch.distributed.run"),
        (["srun", "--exclusive", "python", "-u", "-m", "accelerate.commands.launch", "t.py"],
         "starts srun and then accelerate.commands.launch"),
    ],
)  # fmt: skip
@pytest.mark.parametrize("devices", [1, 2])
def test_a_launcher_whose_process_count_is_not_train_devices_is_refused(argv, words, devices):
    """A count written in argv (or none given to the launcher) trains on processes the plan,
    the budget and the key do not count: refused in one line before the command starts."""
    from campaign.train.command import Command
    from campaign.train.launchers import command_argv

    with pytest.raises(CampaignError) as refused:
        command_argv(Command(argv=tuple(argv)), devices)
    message = str(refused.value)
    assert message.startswith(f"train.command: argv ({' '.join(argv)}) "), message
    assert words in message and f"train.devices ({devices})" in message and "\n" not in message
    # The count from "{devices}" is taken, at any count.
    fixed = ["torchrun", "--nproc_per_node", "{devices}", "t.py"]
    assert command_argv(Command(argv=tuple(fixed)), devices)[2] == str(devices)


@pytest.mark.parametrize(
    "argv",
    [
        # srun and mpirun with no count start the rule's allocation: train.devices tasks.
        ["srun", "python", "t.py"],
        ["mpirun", "python3", "t.py"],
        # The script's own --num_processes, after the script, is not the launcher's.
        ["torchrun", "--nproc_per_node={devices}", "t.py", "--num_processes", "8"],
        # What srun or mpirun starts is a launcher only as its program or python -m module:
        # not an option's value, the script's path or the script's own arguments.
        ["srun", "python", "-m", "mypkg.train", "--launcher", "torchrun"],
        ["mpirun", "-x", "NCCL_DEBUG", "python", "-m", "pkg.train", "--backend", "mpirun"],
        ["srun", "-J", "accelerate", "python", "t.py"],
        ["srun", "python", "/opt/torchrun/train.py"],
    ],
)
def test_a_launcher_without_a_count_of_its_own_is_accepted(argv):
    from campaign.train.command import Command
    from campaign.train.launchers import command_argv

    assert command_argv(Command(argv=tuple(argv)), 2)[-1] == argv[-1]


def test_the_contract_helper_refuses_a_world_size_that_is_not_train_devices(monkeypatch):
    """A count the argv check cannot see (a launcher's config file): the helper compares the
    launcher's WORLD_SIZE with the spec's devices as the script starts."""
    from campaign.train.contract import Contract

    spec = {"devices": 2, "recipe": {"max_steps": 10}}
    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGUSR1)}
    try:
        monkeypatch.setenv("WORLD_SIZE", "4")
        with pytest.raises(SystemExit) as refused:
            Contract(spec)
        assert str(refused.value).startswith(
            "CAMPAIGN_RUN_SPEC: WORLD_SIZE 4 (the processes the launcher started) is not "
            "train.devices 2; give the launcher in train.command's argv"
        )
        monkeypatch.setenv("WORLD_SIZE", "2")
        assert Contract(spec).spec is spec
        monkeypatch.setenv("WORLD_SIZE", "1")
        with pytest.raises(SystemExit, match="WORLD_SIZE 1 "):
            Contract(spec)
        monkeypatch.delenv("WORLD_SIZE")  # mpirun announces its own
        monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "8")
        with pytest.raises(SystemExit, match="OMPI_COMM_WORLD_SIZE 8 "):
            Contract(spec)
        # None announced on 2 devices: a process training alone (accelerate launch --cpu).
        monkeypatch.delenv("OMPI_COMM_WORLD_SIZE")
        monkeypatch.delenv("SLURM_PROCID", raising=False)
        with pytest.raises(SystemExit) as alone:
            Contract(spec)
        assert str(alone.value).startswith(
            "CAMPAIGN_RUN_SPEC: train.devices 2, but no launcher announced a process count "
            "(WORLD_SIZE or OMPI_COMM_WORLD_SIZE or PMI_SIZE or MV2_COMM_WORLD_SIZE): this process "
            "would train alone"
        )
        assert Contract({"devices": 1, "recipe": {"max_steps": 10}}).spec["devices"] == 1
        # MPICH's and Intel MPI's mpirun announce theirs in PMI_SIZE (as accelerate reads it)
        monkeypatch.setenv("PMI_SIZE", "2")
        assert Contract(spec).spec is spec
        monkeypatch.setenv("PMI_SIZE", "3")
        with pytest.raises(SystemExit, match="PMI_SIZE 3 "):
            Contract(spec)
        monkeypatch.delenv("PMI_SIZE")
        # srun's tasks announce nothing but SLURM's variables: trusted as the script starts,
        # then the Trainer's own world decides (two srun tasks without a launcher are two
        # independent trainings of one output folder, each a world of 1)
        monkeypatch.setenv("SLURM_PROCID", "0")
        srun = Contract(spec)
        state = SimpleNamespace(num_input_tokens_seen=0, global_step=0)
        with pytest.raises(SystemExit) as alone:
            srun.on_train_begin(SimpleNamespace(world_size=1), state, None)
        assert str(alone.value).startswith(
            "CAMPAIGN_RUN_SPEC: the Trainer trains in a world of 1 process(es), not train.devices 2"
        )
        srun.on_train_begin(SimpleNamespace(world_size=2), state, None)
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler)


def test_the_helpers_test_hold_waits_at_its_step_for_the_signal(tmp_path, monkeypatch):
    """HOLD_ENV (tests only): having written the named step's progress line, the helper waits
    there until a signal comes, so a test's signal lands at that step on any load; at another
    step, or unset, it does not wait."""
    import transformers as tf

    from campaign.train.contract import Contract

    spec = {
        "devices": 1,
        "recipe": {"max_steps": 10},
        "progress_file": str(tmp_path / PROGRESS_LINES),
    }
    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGUSR1)}
    try:
        contract = Contract(spec)
        monkeypatch.setenv(HOLD_ENV, "3")
        started = time.monotonic()
        contract.on_log(None, tf.TrainerState(global_step=2), None, logs={"loss": 1.0})
        assert time.monotonic() - started < 1 and contract.signalled is None
        threading.Timer(0.5, signal.raise_signal, (signal.SIGUSR1,)).start()
        contract.on_log(None, tf.TrainerState(global_step=3), None, logs={"loss": 1.0})
        assert time.monotonic() - started >= 0.5 and contract.signalled == signal.SIGUSR1
        assert [r["step"] for r in read_progress_lines(tmp_path / PROGRESS_LINES)] == [2, 3]
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler)


@pytest.mark.slow(minutes=2)
def test_a_command_with_its_launcher_trains_on_two_processes_and_is_scored(tmp_path):
    """train.devices 2 and the HF example under torch.distributed.run (torchrun), the count in
    argv: two processes train (DDP, gloo on the CPU), each step's tokens are both micro-batches'
    (more than one micro-batch can hold), rank 0 alone writes the progress lines and the model,
    and the campaign scores it. The signal path through the launcher: the test below."""
    steps, micro_batch, max_length = 4, 8, 32
    argv = ["python", "-m", "torch.distributed.run", "--standalone",
            "--nproc_per_node={devices}", EXAMPLE]  # fmt: skip
    spec = command_spec(argv, [EXAMPLE], max_steps=steps, devices=2, grad_accum=1,
                        micro_batch=micro_batch, max_length=max_length)  # fmt: skip
    ctx = context(spec, write_splits(tmp_path / "splits", n_train=32, n_eval=8), tmp_path)
    stage(ctx)
    progress = read_progress_lines(ctx.work_dir / PROGRESS_LINES)
    assert [r["step"] for r in progress] == list(range(1, steps + 1))  # once each: rank 0
    assert all(r["tokens"] > micro_batch * max_length for r in progress), progress
    frame = pd.read_parquet(ctx.outputs["predictions_validation"])
    assert len(frame) == 8 and frame["prediction"].notna().all()
    timings = json.loads(ctx.outputs["timings"].read_text())
    assert timings["processes"] == {"count": 2, "launcher": "command"}


# The launchers a command's argv may start on 2 CPU processes (gloo), the count from
# "{devices}". accelerate's --multi_gpu runs torch.distributed.run's elastic agent in its own
# process (on a machine without CUDA the Trainer trains on the CPU); its --cpu with
# --num_processes starts one process unless mpirun and a hostfile are given.
LAUNCHED = {
    "torch.distributed.run": ["python", "-m", "torch.distributed.run", "--standalone",
                              "--nproc_per_node={devices}"],
    "accelerate": ["accelerate", "launch", "--multi_gpu", "--num_processes={devices}",
                   "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no"],
}  # fmt: skip


@pytest.mark.slow(minutes=2)
@pytest.mark.parametrize("launcher", sorted(LAUNCHED))
def test_a_signal_reaches_a_command_through_its_launcher_which_checkpoints_and_resumes(
    tmp_path, launcher, monkeypatch
):
    """The scheduler's SIGUSR1 to a job whose command is the HF example on 2 processes under a
    launcher: the launcher gets SIGTERM (torchrun dies of SIGUSR1, its processes orphaned),
    passes it on, both processes stop at the same step with a checkpoint, and the job ends
    preempted although the launcher itself exits 1; run again, it resumes and finishes."""
    from campaign.core.errors import Preempted

    steps = 8
    argv = [*LAUNCHED[launcher], EXAMPLE]
    spec = command_spec(argv, [EXAMPLE], max_steps=steps, devices=2, grad_accum=1,
                        micro_batch=4, max_length=32, checkpoint_every=2)  # fmt: skip
    ctx = context(spec, write_splits(tmp_path / "splits", n_train=32, n_eval=8), tmp_path)

    def warn() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            rows = read_progress_lines(ctx.work_dir / PROGRESS_LINES)
            if rows and rows[-1]["step"] >= 3:
                break
            time.sleep(0.05)
        signal.raise_signal(signal.SIGUSR1)

    monkeypatch.setenv(HOLD_ENV, "3")  # rank 0 waits at step 3 for the signal
    threading.Thread(target=warn, daemon=True).start()
    with pytest.raises(Preempted) as stopped:
        stage(ctx)
    monkeypatch.delenv(HOLD_ENV)
    # Both processes stopped at the step after the one held (an all-reduce of the flag).
    assert stopped.value.step == 4, stopped.value.step
    assert list((ctx.work_dir / "checkpoints").glob("checkpoint-*"))
    assert not ctx.outputs["predictions_test"].exists()
    stage(ctx)
    timings = json.loads(ctx.outputs["timings"].read_text())
    assert 2 <= timings["resumed_from_step"] <= stopped.value.step, timings
    progress = read_progress_lines(ctx.work_dir / PROGRESS_LINES)
    assert progress[-1]["step"] == steps
    # Two processes trained: each step's tokens are more than one micro-batch can hold.
    assert all(r["tokens"] > 4 * 32 for r in progress), progress
    assert len(pd.read_parquet(ctx.outputs["predictions_test"])) == 8


@pytest.mark.slow
def test_accelerate_launch_cpu_starts_one_process_and_the_helper_refuses_it(tmp_path, capfd):
    """accelerate launch --cpu --num_processes 2 (no mpirun hostfile) starts one process and
    announces no WORLD_SIZE: under train.devices 2 it would train alone on what the plan and
    the key count as two. The helper stops it in one line before any step; no output kept."""
    argv = ["accelerate", "launch", "--cpu", "--num_processes={devices}", "--num_machines", "1",
            "--mixed_precision", "no", "--dynamo_backend", "no", EXAMPLE]  # fmt: skip
    spec = command_spec(argv, [EXAMPLE], max_steps=4, devices=2)
    ctx = context(spec, write_splits(tmp_path / "splits", n_train=24, n_eval=8), tmp_path)
    with pytest.raises(CampaignError, match="train.command: exited 1"):
        stage(ctx)
    assert "CAMPAIGN_RUN_SPEC: train.devices 2, but no launcher announced" in capfd.readouterr().err
    assert not read_progress_lines(ctx.work_dir / PROGRESS_LINES)
    assert not ctx.outputs["predictions_test"].exists()

"""Your own trainer: one planned run trained by the user's command (train.command), which keeps
the contract of docs/trainer-contract.md, then scored by the campaign's own code.

The campaign hands the command a run spec (a JSON file named by CAMPAIGN_RUN_SPEC), runs it with
the job's log as its stdout and stderr, passes the scheduler's signals on, and checks what it left
behind. A broken contract fails the job with one line naming the broken part. The model it wrote
is scored by `SavedModel`, the code the quantize phase scores with, so the outputs are those of a
built-in run and evaluate, budget and report compare like with like.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from campaign.core.errors import PREEMPTED_EXIT, CampaignError, Preempted
from campaign.core.fsutil import atomic_write_text
from campaign.core.hashing import hash_tree, hash_value
from campaign.core.progress import job_progress
from campaign.core.tasks import module_of
from campaign.core.versions import installed_versions
from campaign.plan import command_of, identity, run_id
from campaign.train.command_adapter import adopt_adapter, is_adapter
from campaign.train.launchers import command_argv, launcher_of
from campaign.train.processes import Group, signals_handled, subreaper

SPEC_FORMAT = 1
# In the job's work folder (.campaign/work/<key>/), which outlives a failed or preempted job.
SPEC_FILE = "run_spec.json"
CHECKPOINTS = "checkpoints"
PROGRESS_LINES = "progress.jsonl"
# What a command under a launcher writes when it checkpointed and stopped for a signal.
PREEMPTED_NOTE = "preempted.json"
TOKENIZER = "tokenizer"
# Everything the run spec names or the campaign writes in the work folder: the rest there is a
# command's own (the preflight's command check counts it).
WORK_FILES = (SPEC_FILE, CHECKPOINTS, PROGRESS_LINES, PREEMPTED_NOTE, TOKENIZER)
# train.command.grace_seconds when absent (the schema's "Absent: 60").
GRACE_SECONDS = 60.0
# The built-in loop's preemption signals (loop.PREEMPT_SIGNALS); SIGURG, the SLURM profile's
# warning, reaches the command as SIGUSR1: the contract names only SIGUSR1 and SIGTERM.
FORWARD = {signal.SIGUSR1: signal.SIGUSR1, signal.SIGTERM: signal.SIGTERM,
           signal.SIGURG: signal.SIGUSR1}  # fmt: skip
POLL_SECONDS = 0.2
# What save_pretrained writes as a model's weights, sharded or not.
WEIGHTS = ("model*.safetensors", "pytorch_model*.bin")


@dataclass(frozen=True)
class Command:
    """train.command, checked: the command line, the files and packages its key covers."""

    argv: tuple[str, ...]
    files: tuple[str, ...] = ()
    packages: tuple[str, ...] = ()
    grace_seconds: float = GRACE_SECONDS

    @classmethod
    def of(cls, train: dict) -> Command | None:
        """The run's command (written in train.command or named there from train.commands), or
        None for the built-in loop."""
        raw = command_of(train)
        if raw is None:
            return None
        if not isinstance(raw, dict) or not raw.get("argv"):
            raise CampaignError("train.command.argv: expected a non-empty list of strings")
        unknown = sorted(set(raw) - set(cls.__dataclass_fields__))
        if unknown:
            raise CampaignError(f"train.command.{unknown[0]}: not a key the command backend knows")
        return cls(
            argv=tuple(str(a) for a in raw["argv"]),
            files=tuple(str(f) for f in raw.get("files", ())),
            packages=tuple(str(p) for p in raw.get("packages", ())),
            grace_seconds=float(raw.get("grace_seconds", GRACE_SECONDS)),
        )

    def package_versions(self) -> dict[str, str]:
        return installed_versions(self.packages)


def commands_of(train: dict) -> dict[str, tuple[Command, dict]]:
    """Every command a campaign's train section can run, by name: train.command written inline
    (named "train.command") and each of train.commands. Values: (checked, as written)."""
    out = {}
    if isinstance(train.get("command"), dict):
        out["train.command"] = train["command"]
    out.update(train.get("commands") or {})
    return {name: (Command.of({"command": raw}), raw) for name, raw in out.items()}


def derive_inputs(spec: dict, root: Path) -> dict[str, list[Path]]:
    """The derived inputs of a training job or the preflight (Stage.derive_inputs): the base
    model folder, and the files the commands declare, so that their content is in the key: a
    run's own command's, or for the preflight ({run, preflight}) every command it checks."""
    from campaign.train.models import derive_inputs as model_inputs

    if "train" in spec:
        command = Command.of(spec["train"])
        commands = [] if command is None else [command]
    else:
        commands = [c for c, _ in commands_of(spec["run"]["train"]).values()]
    files = sorted({f for c in commands for f in c.files})
    return {
        **model_inputs(spec, root),
        "command_files": [Path(root) / f for f in files],
        "metric_code": _judging_metric_code(spec, root),
    }


def _judging_metric_code(spec: dict, root: Path) -> list[Path]:
    """A run that scores its generations while training (the task's eval_items set): the file
    of a user metric's module (TaskModule.metric_code), which decides its curve and, with
    train.select: best_generated, the step it keeps; [] otherwise and for the preflight."""
    if "train" not in spec:
        return []
    task = module_of(spec["model"]["task"])
    if task.eval_items(spec["model"]) is None:
        return []
    return task.metric_code(spec["model"], root)


def key_view(spec: dict) -> dict:
    """What a training job's key holds of its spec: the run's identity, and for a command the
    installed versions of the packages it names (a new TRL trains another model)."""
    view = identity(spec)
    command = Command.of(spec["train"])
    if command is not None and command.packages:
        view = {**view, "command_packages": command.package_versions()}
    task = module_of(spec["model"]["task"])
    if task.eval_items(spec["model"]) is not None:
        # the versions of the libraries that compute the judged scores (as the evaluation's key)
        libraries = task.metric_libraries(spec["model"])
        if libraries:
            view = {**view, "metric_libraries": libraries}
    return view


# ------------------------------------------------------------------ the run spec
def run_spec(spec: dict, inputs: dict, outputs: dict, work_dir: Path, labels: list[str]) -> dict:
    """The JSON the command reads (docs/trainer-contract.md): every path absolute."""
    from campaign.train.recipe import Recipe

    recipe = Recipe.from_spec(spec["train"])
    base = inputs.get("base_model") or []
    tokenizer = Path(base[0]) if base else Path(work_dir) / TOKENIZER
    return {
        "format": SPEC_FORMAT,
        "run": run_id(spec),
        "task": spec["model"]["task"],
        "seed": int(spec["seed"]),
        "recipe": {k: v for k, v in spec["train"].items() if k not in ("command", "commands")},
        "model": {
            **spec["model"],
            "source": str(Path(base[0]).resolve()) if base else "from_config",
        },
        "tokenizer": str(tokenizer.resolve()),
        "labels": list(labels),
        "splits": {
            name: str(Path(inputs[name][0]).resolve()) for name in ("train", "validation", "test")
        },
        "output_dir": str(Path(outputs["model"]).resolve()),
        "checkpoint_dir": str((Path(work_dir) / CHECKPOINTS).resolve()),
        "progress_file": str((Path(work_dir) / PROGRESS_LINES).resolve()),
        "preempted_file": str((Path(work_dir) / PREEMPTED_NOTE).resolve()),
        "devices": recipe.devices,
        "max_steps": recipe.max_steps,
    }


def read_progress_lines(path: Path) -> list[dict]:
    """The command's progress lines ({step, loss, tokens, ...}), oldest first; a half-written
    last line (the command killed mid-write) is left out."""
    if not path.is_file():
        return []
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if not isinstance(row, dict) or not isinstance(row.get("step"), int):
            raise CampaignError(
                f"train.command: broke the contract: progress line {number} of {path.name} has "
                "no whole-number step"
            )
        rows.append(row)
    return rows


# ------------------------------------------------------------------ running the command
def _tied() -> None:
    """In the command's process, before it runs: SIGTERM when the job's process dies (kill -9,
    a node's OOM killer), so that it checkpoints and stops instead of training on, orphaned,
    into the checkpoint folder a requeued job then shares. Linux only; elsewhere a no-op."""
    import ctypes

    if sys.platform.startswith("linux"):
        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


class _Relay:
    """While the command runs, the job's preemption signals are noted and passed on to it. A
    launcher gets SIGTERM for each: torchrun passes SIGTERM on to its processes but dies of
    SIGUSR1, leaving them training on, orphaned."""

    def __init__(self, child: subprocess.Popen, launched: bool = False):
        self.child = child
        self.launched = launched
        self.signum: int | None = None
        self.at: float | None = None

    def __call__(self, signum, _frame) -> None:
        if self.signum is None:
            self.signum, self.at = signum, time.monotonic()
        with contextlib.suppress(ProcessLookupError):
            self.child.send_signal(signal.SIGTERM if self.launched else FORWARD[signum])

    def installed(self):
        return signals_handled(FORWARD, self)


def _child_env(spec_path: Path) -> dict:
    """The command's environment: the run spec's path, and this campaign's package first on
    PYTHONPATH, so a script importing the contract helper gets the one whose code is in the
    run's key (campaign.train.contract, imported here for that reason too)."""
    from campaign.train import contract

    package_root = str(Path(contract.__file__).resolve().parents[2])
    path = os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, contract.SPEC_ENV: str(spec_path), "PYTHONPATH": path}


def _wait(relay: _Relay, group: Group, command: Command, progress_path: Path, bar, start: int):
    """Until the command exits: its signals relayed, its progress shown, its processes noted;
    still running `grace_seconds` after a signal, its whole group is killed."""
    child = relay.child
    shown = start
    with relay.installed(), contextlib.closing(bar):
        while child.poll() is None:
            group.watch()
            if relay.at is not None and time.monotonic() - relay.at > command.grace_seconds:
                group.kill()
                child.wait()
                raise CampaignError(
                    f"train.command: broke the contract: still running "
                    f"{command.grace_seconds:g} s after signal {relay.signum} (it must "
                    f"checkpoint and exit {PREEMPTED_EXIT}); killed with every process it started"
                )
            rows = read_progress_lines(progress_path)
            if rows and rows[-1]["step"] != shown:
                shown = rows[-1]["step"]
                bar.update(shown, loss=rows[-1].get("loss"))
            time.sleep(POLL_SECONDS)


def run_command(command: Command, spec_path: Path, work_dir: Path, root: Path, spec: dict) -> int:
    """Run the command to its end and check the signal part of the contract; returns the step
    it resumed from (0: a fresh start). Raises Preempted for exit 75 (the job is requeued)."""
    progress_path = Path(work_dir) / PROGRESS_LINES
    note = Path(work_dir) / PREEMPTED_NOTE
    note.unlink(missing_ok=True)
    done = read_progress_lines(progress_path)
    start = done[-1]["step"] if done else 0
    bar = job_progress("train", work_dir, int(spec["train"]["max_steps"]), start, run_id(spec))
    env = _child_env(spec_path)
    # torchrun SIGKILLs its processes 30 s after passing SIGTERM on, whatever the contract's
    # grace: give them most of it to finish the step and checkpoint (the user's value wins).
    env.setdefault("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", str(max(1, int(command.grace_seconds * 0.8))))
    argv = command_argv(command, int(spec["train"].get("devices", 1)))
    with subreaper():
        before = Group.own_children()
        try:
            # Its own session: a signal reaches it once, from us, not also from the job's
            # group; and its group is what the job ends when the command is done or killed.
            child = subprocess.Popen(argv, cwd=root, env=env, start_new_session=True,
                                     preexec_fn=_tied)  # fmt: skip
        except OSError as e:
            raise CampaignError(
                f"train.command.argv: cannot start {command.argv[0]!r} ({e})"
            ) from None
        group = Group(child, before)
        relay = _Relay(child, launched=launcher_of(command) is not None)
        try:
            _wait(relay, group, command, progress_path, bar, start)
        finally:
            if child.poll() is None:  # we are failing for another reason: leave nothing running
                group.kill()
                child.wait()
            left = group.end(command.grace_seconds)
    if left:
        print(
            f"train.command: exited {child.returncode} while {len(left)} process(es) it started "
            f"still ran: {'; '.join(left)}; ended them (SIGTERM, then SIGKILL after "
            f"{command.grace_seconds:g} s) before checking or committing anything",
            flush=True,
        )
    rc = child.returncode
    rows = read_progress_lines(progress_path)
    step = rows[-1]["step"] if rows else 0
    if rc == PREEMPTED_EXIT or (rc != 0 and note.is_file()):  # the note: under a launcher
        raise Preempted(relay.signum or signal.SIGTERM, step)
    if rc < 0 and relay.signum is not None:
        raise CampaignError(
            f"train.command: broke the contract: died of signal {-rc} after signal "
            f"{relay.signum} instead of checkpointing and exiting {PREEMPTED_EXIT}"
        )
    if rc == 0 and left:
        raise CampaignError(
            f"train.command: broke the contract: exited 0 while {len(left)} process(es) it "
            f"started still ran ({left[0]}{', ...' if len(left) > 1 else ''}), which could "
            "still write its outputs; ended them; nothing is committed (wait for every process "
            "you start before exiting)"
        )
    if rc != 0:
        raise CampaignError(
            f"train.command: exited {rc} (the contract: 0 when trained, {PREEMPTED_EXIT} after a "
            "signal); see the job's log"
        )
    # Where the command itself started: one step before its first new progress line (0: from
    # scratch, though a checkpoint was there; the test of the contract's resume reads this).
    new = rows[len(done) :]
    return new[0]["step"] - 1 if new else start


# ------------------------------------------------------------------ checking and scoring
def check_outputs(folder: Path, progress: list[dict], max_steps: int) -> None:
    """The contract's outputs after exit 0, each missing part named in one line."""
    weights = [p for pattern in WEIGHTS for p in folder.glob(pattern)]
    model = folder.is_dir() and (folder / "config.json").is_file() and bool(weights)
    model = model or is_adapter(folder)
    if not model and not progress:
        raise CampaignError(
            "train.command: broke the contract: exited 0 without any output (no model in "
            "output_dir, no line in progress_file)"
        )
    if not model:
        raise CampaignError(
            "train.command: broke the contract: no model written (output_dir needs "
            "save_pretrained's config.json and weights, or a peft adapter's)"
        )
    if not progress:
        raise CampaignError(
            "train.command: broke the contract: no progress line appended to progress_file"
        )
    if progress[-1]["step"] != max_steps:
        raise CampaignError(
            f"train.command: broke the contract: its last progress line is step "
            f"{progress[-1]['step']}, not max_steps {max_steps}"
        )


def _load(load, folder: Path):
    """load() of the command's model folder; what transformers says when it cannot, in one
    line naming the contract."""
    try:
        return load()
    except CampaignError:
        raise
    except Exception as e:  # whatever transformers says about a folder it cannot read
        raise CampaignError(
            f"train.command: the model in output_dir does not load ({type(e).__name__}: "
            f"{str(e).splitlines()[0] if str(e) else ''})"
        ) from None


def _check_labels(model, labels: list[str], task: str) -> None:
    """A classifier's id2label (a head of the run's labels) is the run spec's labels."""
    from campaign.core.tasks import module_of

    if not module_of(task).label_head:
        return
    id2label = getattr(model.config, "id2label", None) or {}
    got = [id2label.get(i, id2label.get(str(i))) for i in range(len(id2label))]
    if got != list(labels):
        raise CampaignError(
            f"train.command: broke the contract: the model's id2label {got} is not the run "
            f"spec's labels {list(labels)}"
        )


def metrics_frame(progress: list[dict], validation: tuple[float, float] | None, step: int):
    """metrics.parquet as the built-in loop writes it (loop.METRIC_COLUMNS): the command's
    progress lines as train rows, and the saved model's validation row (the kept one)."""
    from campaign.train.loop import metrics_table

    rows = [
        {
            "step": r["step"],
            "split": "train",
            "loss": r.get("loss"),
            "lr": r.get("lr"),
            "grad_norm": r.get("grad_norm"),
            "tokens": r.get("tokens"),
            "kept": False,
        }
        for r in last_per_step(progress)
    ]
    if validation is not None:
        rows.append({"step": step, "split": "validation", "loss": validation[0],
                     "accuracy": validation[1], "kept": True})  # fmt: skip
    return metrics_table(rows)


def last_per_step(progress: list[dict]) -> list[dict]:
    """One row per step: a resumed command repeats the steps after its checkpoint; the run's
    model went through the last of them."""
    by_step: dict[int, dict] = {}
    for row in progress:
        by_step[row["step"]] = row
    return [by_step[s] for s in sorted(by_step)]


def _validation(frame, labels: list[str]) -> tuple[float, float] | None:
    """(mean loss, accuracy) of a predictions table: the loss is -log of the true label's score
    over the items whose label the model has (as the built-in loop's ignores the others), the
    accuracy counts every item."""
    import numpy as np

    if len(frame) == 0:
        return None
    scores = frame[[f"score_{name}" for name in labels]].to_numpy(dtype=np.float64)
    index = {name: i for i, name in enumerate(labels)}
    truth = np.array([index.get(v, -1) for v in frame["label"]])
    known = truth >= 0
    picked = scores[np.flatnonzero(known), truth[known]]
    loss = float(-np.log(np.clip(picked, 1e-300, None)).mean()) if known.any() else float("nan")
    return loss, float((frame["prediction"] == frame["label"]).mean())


# ------------------------------------------------------------------ the stage body
def stage(ctx) -> None:
    """The train stage's entry: the user's command when train.command is set, else the built-in
    loop (campaign.train.stage). The dispatch lives here so the loop's module knows nothing of
    outside trainers."""
    if Command.of(ctx.spec["train"]) is None:
        from campaign.train.stage import stage as builtin

        builtin(ctx)
        return
    train_with_command(
        ctx.spec, ctx.inputs, ctx.outputs, ctx.work_dir, ctx.root, ctx.execution, ctx.key
    )


def prepare(
    spec: dict,
    inputs: dict,
    outputs: dict,
    work_dir: Path,
    root: Path,
    labels: list[str] | None = None,
):
    """The run spec file and what it names (the tokenizer of a from_config model, trained on
    the train split only, as the built-in loop trains it). `labels`: the run's label names when
    the inputs are a sample of its splits (the preflight's, whose few examples may lack some:
    the command must build, and its adapter be checked against, the head the run's job
    builds); else the train split's. Returns (spec path, data, labels)."""
    from campaign.core.tasks import module_of
    from campaign.train import models
    from campaign.train.loop import read_data

    data = read_data(inputs)
    task = module_of(spec["model"]["task"])
    # A task without labels has no label ids (its items are scored by the task).
    if not task.labeled:
        labels = []
    elif labels is None:
        labels = models.label_names(data.train.labels)
    work_dir = Path(work_dir)
    (work_dir / CHECKPOINTS).mkdir(parents=True, exist_ok=True)
    base = inputs.get("base_model") or []
    if not base and not (work_dir / TOKENIZER).is_dir():
        # Written beside, then renamed: a kill mid-write leaves no half folder to be reused.
        tok = models.make_tokenizer(spec["model"], data.train.texts, None)
        partial = work_dir / f"{TOKENIZER}.tmp"
        shutil.rmtree(partial, ignore_errors=True)
        tok.save_pretrained(str(partial))
        os.replace(partial, work_dir / TOKENIZER)
    path = work_dir / SPEC_FILE
    body = run_spec(spec, inputs, outputs, work_dir, labels)
    body.update(task.command_fields(spec["model"], body["tokenizer"], root))
    atomic_write_text(path, json.dumps(body, indent=2, sort_keys=True) + "\n")
    return path, data, labels


def train_with_command(
    spec: dict,
    inputs: dict[str, list[Path]],
    outputs: dict[str, Path],
    work_dir: Path,
    root: Path = Path("."),
    execution: dict | None = None,
    key: str | None = None,
) -> None:
    """The train stage for a run whose train.command is set: run it, check it, score it, and
    write every output a built-in run writes."""
    from campaign.train import devices
    from campaign.train.loop import EVAL_SPLITS
    from campaign.train.recipe import Recipe
    from campaign.train.stage import write_parquet

    started = time.perf_counter()
    command = Command.of(spec["train"])
    recipe = Recipe.from_spec(spec["train"])
    spec_path, data, labels = prepare(spec, inputs, outputs, work_dir, root)
    t0 = time.perf_counter()
    resumed_from = run_command(command, spec_path, work_dir, root, spec)
    train_seconds = time.perf_counter() - t0
    progress = read_progress_lines(Path(work_dir) / PROGRESS_LINES)
    folder = Path(outputs["model"])
    check_outputs(folder, progress, recipe.max_steps)
    base = inputs.get("base_model") or []
    adopt_adapter(folder, Path(base[0]) if base else None, labels, spec["model"]["task"])
    device = devices.select_device()
    model, tokenizer, frames, validation = score(
        spec, data, labels, folder, Path(base[0]) if base else None, device, root
    )
    for split in EVAL_SPLITS:
        write_parquet(frames[split], outputs[f"predictions_{split}"])
    write_parquet(metrics_frame(progress, validation, recipe.max_steps), outputs["metrics"])
    manifest = _manifest(spec, inputs, execution, device, labels, tokenizer, model, command)
    manifest["final_validation"] = (
        None
        if validation is None
        else {
            "step": recipe.max_steps,
            "split": "validation",
            "loss": validation[0],
            "accuracy": validation[1],
        }  # fmt: skip
    )
    manifest["store_key"] = key
    atomic_write_text(
        outputs["run_manifest"], json.dumps(manifest, indent=2, sort_keys=True) + "\n"
    )
    if "timings" in outputs:
        record = {
            "device": devices.device_info(device),
            "resumed_from_step": resumed_from or None,
            "train_seconds": round(train_seconds, 3),
            "wall_seconds": round(time.perf_counter() - started, 3),
            # the command's process tree is the job's peak on a CPU
            "peak_memory_bytes": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024,
            "processes": {"count": recipe.devices, "launcher": "command"},
            "per_step": {"step": [r["step"] for r in last_per_step(progress)]},
        }
        atomic_write_text(outputs["timings"], json.dumps(record, indent=2, sort_keys=True) + "\n")


def score(spec: dict, data, labels: list[str], folder: Path, base: Path | None, device, root):
    """The saved model scored on validation and test as the built-in loop scores its own runs:
    a label task's by SavedModel's label probabilities (the code the quantize phase scores
    with), another task's through its module (the generation task generates and scores each
    item). Returns (model, tokenizer, {split: predictions}, validation), where validation is
    (mean loss, accuracy or mean per-item score) or None for an empty split."""
    from campaign.core.tasks import module_of
    from campaign.train.loop import EVAL_SPLITS
    from campaign.train.recipe import Recipe

    recipe = Recipe.from_spec(spec["train"])
    task_name = spec["model"]["task"]
    task = module_of(task_name)
    if task.labeled:
        return _score_labels(spec, data, labels, folder, base, device)
    from campaign.train.models import load_run_model, load_tokenizer

    tokenizer = load_tokenizer(folder, task_name)
    run = task.setup(spec["model"], tokenizer, root)
    if base is not None:  # the template the run spec gave the command: the floors' and runs'
        told = task.setup(spec["model"], load_tokenizer(base, task_name), root).template
        if run.template != told:
            raise CampaignError(
                f"{folder}: the command saved a tokenizer whose chat template is not the run "
                "spec's chat_template, which the floors and every other run are prompted with; "
                "save the tokenizer with that template, or name your template's file in "
                "model.chat_template"
            )
    model = _load(lambda: load_run_model(folder, task_name, base), folder).to(device)
    frames, validation = {}, None
    for split in EVAL_SPLITS:
        part = getattr(data, split)
        if not len(part):
            frames[split] = task.predictions(run, part, None)
            continue
        examples = task.encode_split(run, tokenizer, part, recipe.max_length)
        loss, mean_score, scored = task.evaluate(
            model, tokenizer, run, part, examples, micro_batch=recipe.micro_batch,
            pad_id=tokenizer.pad_token_id, device=device, final=True,
        )  # fmt: skip
        frames[split] = task.predictions(run, part, scored)
        if split == "validation":
            validation = (loss, mean_score)
    return model, tokenizer, frames, validation


def _score_labels(spec: dict, data, labels: list[str], folder: Path, base, device):
    """A label task's: SavedModel's probabilities, the code the quantize phase scores with."""
    from campaign.train import devices
    from campaign.train.loop import EVAL_SPLITS
    from campaign.train.recipe import Recipe
    from campaign.train.scoring import SavedModel

    recipe = Recipe.from_spec(spec["train"])
    saved = SavedModel(folder, spec["model"]["task"], labels, recipe.max_length,
                       recipe.micro_batch, base)  # fmt: skip
    model = _load(saved.load, folder)
    _check_labels(model, labels, saved.task)
    model = model.to(device)
    autocast = functools.partial(devices.autocast, device, recipe.precision)
    with _no_grad():
        frames = {
            split: saved.predictions(model, getattr(data, split), device, autocast)
            for split in EVAL_SPLITS
        }
    return model, saved.tokenizer, frames, _validation(frames["validation"], labels)


@contextlib.contextmanager
def _no_grad():
    import torch

    with torch.no_grad():
        yield


def _manifest(spec, inputs, execution, device, labels, tokenizer, model, command: Command) -> dict:
    """The run manifest's fields a built-in run also writes (train/stage.py run_manifest), and
    the trainer that made it."""
    from campaign.core.code import code_version, module_hashes
    from campaign.train import models
    from campaign.train.stage import library_versions, stage_modules

    total, _ = models.count_parameters(model)
    return {
        "spec": identity(spec),
        "spec_hash": hash_value(identity(spec)),
        "inputs": {name: [hash_tree(p) for p in paths] for name, paths in sorted(inputs.items())},
        "code": {
            "version": code_version(*stage_modules()),
            "modules": module_hashes(*stage_modules()),
        },
        "versions": {**library_versions(False), **command.package_versions()},
        "execution": execution,
        "device": device.type,
        "labels": list(labels),
        "tokenizer_vocab_size": len(tokenizer),
        "parameters": {"total": total, "trainable_during_training": None},
        "lora": None,
        "steps": int(spec["train"]["max_steps"]),
        "trainer": {"kind": "command", "argv": list(command.argv), "files": list(command.files)},
    }

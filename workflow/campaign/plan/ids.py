"""A run's resolved spec, its identity and its id: what a training job's key and path hold.

Kept apart from the planner (designs, order, estimability) on purpose: the training stage imports
this module, so its code version holds these few functions and not the planner's, and editing
how the plan is ordered or described retrains nothing.
"""

from __future__ import annotations

from typing import Any

from campaign.core.defaults import DATA_DEFAULTS, MODEL_DEFAULTS, TRAIN_DEFAULTS
from campaign.core.errors import CampaignError
from campaign.core.hashing import hash_value

RUN_ID_PREFIX = "run-"
RUN_ID_HEX = 12
RUN_ID_PATTERN = RUN_ID_PREFIX + f"[0-9a-f]{{{RUN_ID_HEX}}}"

# Train keys that change how a run is executed, not what it computes (resume is exact): they are
# left out of run ids and store keys, so changing them retrains nothing.
# Gradient checkpointing recomputes the same activations (tests/train/test_levers.py shows the
# weights bitwise equal on CPU).
OPERATIONAL_TRAIN_KEYS = ("checkpoint_every", "keep_checkpoints", "gradient_checkpointing")


def task_of(model: dict):
    """The TaskModule of a `model` spec (core/tasks.py module_of); a spec naming no known task
    (a partial one) gets the base TaskModule: no own settings, nothing offered."""
    from campaign.core.tasks import TASKS, TaskModule, module_of

    task = model.get("task")
    return module_of(task) if task in TASKS else TaskModule()


def generating_keys(model: dict) -> dict:
    """model.chat_template and the task's own model settings (model.generation) as a job that
    generates hashes them: a key at its default (core/defaults.py) left out, as absent (an
    absent key and its default are one run), and the scoring-only keys left out (the task's
    settings_in_ids: no job that trains or generates reads them, so changing them rescores and
    retrains nothing)."""
    out = {}
    template = model.get("chat_template", MODEL_DEFAULTS["chat_template"])
    if template != MODEL_DEFAULTS["chat_template"]:
        out["chat_template"] = template
    out.update(task_of(model).settings_in_ids(model))
    if "special_tokens" in model:  # only when not the default (with_special_tokens)
        out["special_tokens"] = model["special_tokens"]
    return out


def with_special_tokens(model: dict, params: dict) -> dict:
    """The `model` spec of a job that formats conversations (a task that generates), with
    data.special_tokens when it is not the default (refuse): the formatting reads it there
    (core/defaults.py special_tokens_policy); a spec at the default keeps its id and store
    entries."""
    policy = (params.get("data") or {}).get("special_tokens", DATA_DEFAULTS["special_tokens"])
    if policy == DATA_DEFAULTS["special_tokens"] or not task_of(model).offers("chat_format"):
        return model
    return {**model, "special_tokens": policy}


def _copy(value: Any) -> Any:
    """A copy of nested dicts and lists of plain values (5x faster than copy.deepcopy, which
    matters at 1,000 runs when the Snakefile builds the plan)."""
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def resolved_spec(params: dict, overrides: dict[str, Any], seed: int) -> dict:
    """The full recipe a run trains with: model and train sections with the cell's levels set."""
    # One copy per spec (the sections are small); levels are then set in place.
    spec = {
        "model": with_special_tokens(_copy(params["model"]), params),
        "train": _copy(params["train"]),
    }
    for key, level in overrides.items():
        node = spec
        *head, last = key.split(".")
        for part in head:
            node = node[part]
        node[last] = level
    # The evaluation reads the scoring-only keys from the params; no job that trains or
    # generates does, so a run's spec (every training job's Snakemake params) leaves them out.
    spec["model"].update(task_of(spec["model"]).own_settings(spec["model"], scoring=False))
    spec["seed"] = seed
    return spec


# train.command's name for the built-in loop (as null): a factor's level reads as a trainer.
BUILTIN_TRAINER = "builtin"


def command_of(train: dict) -> dict | None:
    """train.command resolved: None for the built-in loop (null or builtin), else the command
    as written or the entry of train.commands it names. A run is the command it resolves to,
    so renaming a command, or naming one written inline, keeps its runs."""
    raw = train.get("command")
    if raw is None or raw == BUILTIN_TRAINER:
        return None
    if not isinstance(raw, str):
        return raw
    named = train.get("commands") or {}
    if raw not in named:
        known = ", ".join([BUILTIN_TRAINER, *sorted(named)])
        raise CampaignError(f"train.command: {raw!r} is not one of {known} (train.commands)")
    return named[raw]


def command_identity(command: dict | None) -> dict | None:
    """A resolved command as what it runs (None: the built-in loop): its argv, and the files and
    packages it declares as sets (none listed is the same as the key absent; their order is no
    part of it). How long it may take to stop after a signal is operational, like
    checkpoint_every."""
    if not command:
        return None
    return {"argv": command["argv"]} | {
        k: sorted(set(command[k])) for k in ("files", "packages") if command.get(k)
    }


def identity(spec: dict) -> dict:
    """The part of a run spec that decides its result: what run ids and store keys hash.

    Operational train keys are left out, and so is where a pretrained model lies: its folder
    counts by its content (the base_model input of every job that builds the model). An optional
    train key at its default (TRAIN_DEFAULTS) is left out too: a spec written before
    the key existed trains the same model, and must keep its id and store entries. The same
    for model.chat_template and the task's own settings (generating_keys)."""
    command = command_of(spec["train"])
    train = {
        k: v
        for k, v in spec["train"].items()
        if k not in OPERATIONAL_TRAIN_KEYS
        and k not in ("command", "commands")
        and not (k in TRAIN_DEFAULTS and v == TRAIN_DEFAULTS[k])
    }
    # The effective batch, not its split: N devices x grad_accum k is the run of one device
    # accumulating N x k micro-batches (the same gradients, summed in another order).
    devices = train.pop("devices", 1)
    if command:
        train["command"] = command_identity(command)
    if "grad_accum" in train:
        train["grad_accum"] = train["grad_accum"] * devices
    model = spec["model"]
    generating = ("chat_template", *task_of(model).own_settings(model))
    model = {
        **{k: v for k, v in model.items() if k not in generating},
        **generating_keys(model),
    }
    if model["source"] != "from_config":
        # A pretrained model is its folder's content and its own tokenizer: model.config and
        # the train_split tokenizer's settings are not read, so they do not name the run.
        model = {
            **{k: v for k, v in model.items() if k != "config"},
            "source": "pretrained",
            "tokenizer": {"source": model["tokenizer"]["source"]},
        }
    return {**spec, "model": model, "train": train}


def run_id(spec: dict) -> str:
    return RUN_ID_PREFIX + hash_value(identity(spec))[:RUN_ID_HEX]

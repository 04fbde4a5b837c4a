"""Tasks: the one contract that data, train, evaluate and quantize share about what a record is.

A task says how a record becomes a training example, how a model is scored on an item, which
floors a fine-tuned model must beat, and whether the split balances a label. Phases look the task
up here by `model.task` and call it; they do not branch on its name (DESIGN.md, "Tasks and
trainers"). One module per task: a new task is one module and one line in TASKS.

Light on import (standard library only): params validation reads TASKS while Snakemake builds the
DAG; the task modules import transformers inside their functions.
"""

from __future__ import annotations

from dataclasses import dataclass

from campaign.core.errors import CampaignError


@dataclass(frozen=True)
class Task:
    """What a phase needs to know about a task without importing its module.

    name: the value of model.task. module: the module that formats records and scores items
    (imported when a phase needs it). scoring: "label_probability" (a closed set of labels, the
    probability of each) or "generated_text" (the model generates; a per-item score in [0, 1]).
    floors: the reference candidates the verdict weighs a fine-tuned model against.
    stratify_by_label: whether the split balances label shares by default (a generation task
    has no label; its split balances only a column the user names). packs: whether
    train.packing packs its examples into shared rows (packing_refusal).
    """

    name: str
    module: str
    scoring: str
    floors: tuple[str, ...]
    stratify_by_label: bool
    packs: bool


TASKS: dict[str, Task] = {
    task.name: task
    for task in (
        Task(
            name="generation",
            module="campaign.tasks.generation",
            scoring="generated_text",
            floors=("retrieval", "zero_shot"),
            stratify_by_label=False,
            # Not yet: packed conversations were never shown to train as they do unpacked.
            packs=False,
        ),
    )
}


def trainer_module(name: str):
    """The module whose hooks the training loop calls for this task (setup, encode_split,
    evaluate, predictions), or None for the tasks the loop still handles itself
    (sequence_classification and the label-scoring causal_lm)."""
    from importlib import import_module

    task = TASKS.get(name)
    return None if task is None else import_module(task.module)


# The floors of the label tasks (campaign.evaluate.floor), for the tasks without a module.
LABEL_FLOORS = ("majority", "tfidf_logreg")


def floors_of(name: str) -> tuple[str, ...]:
    """The floors a model of task `name` can be weighed against (evaluation.floor picks)."""
    task = TASKS.get(name)
    return LABEL_FLOORS if task is None else task.floors


def check_floors(name: str, floors) -> None:
    """evaluation.floor must name floors of the task: a TF-IDF classifier is no floor for free
    text, nor a retrieved answer for a label."""
    wrong = [f for f in floors if f not in floors_of(name)]
    if wrong:
        raise CampaignError(
            f"evaluation.floor: {wrong[0]} is not a floor of the {name} task (its floors: "
            f"{', '.join(floors_of(name))})"
        )


# The label tasks whose examples train.packing packs (a classifier's example is one sequence
# with one label: there is nothing to pack it with).
LABEL_TASKS_THAT_PACK = ("causal_lm",)


def packing_refusal(name: str) -> str | None:
    """Why train.packing does not apply to task `name` (None: it packs), as the words after
    "train.packing: ". The one answer the params check, the trainer, the memory check's fit
    table and its measured lever costs read, so that no lever row offers a key the params
    check then refuses."""
    task = TASKS.get(name)
    if (name in LABEL_TASKS_THAT_PACK) if task is None else task.packs:
        return None
    packing = [*LABEL_TASKS_THAT_PACK, *(t.name for t in TASKS.values() if t.packs)]
    return f"packs {', '.join(packing)} examples only (model.task is {name})"


def scoring_of(name: str) -> str:
    """How the evaluation scores a model of task `name`: its Task's scoring, and
    label_probability for the tasks that have no module yet (sequence_classification and the
    label-scoring causal_lm)."""
    task = TASKS.get(name)
    return "label_probability" if task is None else task.scoring


def get(name: str) -> Task:
    """The task named by model.task, or a one-line error listing the known ones."""
    try:
        return TASKS[name]
    except KeyError:
        raise CampaignError(
            f"model.task: {name!r} is not a task module (known: {', '.join(sorted(TASKS))})"
        ) from None


# model.chat_template values that name no file: the tokenizer's own template, or the plain one.
TEMPLATE_SETTINGS = ("model", "none")


def template_files(model: dict, root) -> list:
    """The Jinja file model.chat_template names (relative to the project root), as a derived
    input of every job that formats with it (train, preflight, floor, quantize): its content is
    then in their keys, so editing the template retrains and rescores; [] for model, none or no
    template. A file outside the project (a `..` path, an absolute path elsewhere, a link out)
    or a folder is refused in one line naming the key (check_template_file); a missing one is
    Snakemake's missing input (`campaign validate` refuses it first)."""
    path = check_template_file(model, root, must_exist=False)
    return [] if path is None else [path]


def check_template_file(model: dict, root, must_exist: bool = True):
    """The path of the template file model.chat_template names (None for model, none or no
    template), after refusing one that lies outside the project folder `root` (links followed:
    no file outside the project is ever read as a template), is missing (when `must_exist`),
    or is not a file."""
    from pathlib import Path

    setting = model.get("chat_template")
    if setting is None or setting in TEMPLATE_SETTINGS:
        return None
    path = Path(setting)
    path = path if path.is_absolute() else Path(root) / path
    expected = "model, none or the path of a Jinja template file inside the project"
    if not path.resolve().is_relative_to(Path(root).resolve()):
        raise CampaignError(
            f"model.chat_template: {setting} lies outside the project folder; expected {expected}"
        )
    if not path.exists():
        if not must_exist:
            return path
        raise CampaignError(f"model.chat_template: {setting}: no such file; expected {expected}")
    if not path.is_file():
        raise CampaignError(f"model.chat_template: {setting} is not a file; expected {expected}")
    return path

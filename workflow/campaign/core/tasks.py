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
    has no label; its split balances only a column the user names).
    """

    name: str
    module: str
    scoring: str
    floors: tuple[str, ...]
    stratify_by_label: bool


TASKS: dict[str, Task] = {
    task.name: task
    for task in (
        Task(
            name="generation",
            module="campaign.tasks.generation",
            scoring="generated_text",
            floors=("zero_shot_base", "retrieval"),
            stratify_by_label=False,
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


def get(name: str) -> Task:
    """The task named by model.task, or a one-line error listing the known ones."""
    try:
        return TASKS[name]
    except KeyError:
        raise CampaignError(
            f"model.task: {name!r} is not a task module (known: {', '.join(sorted(TASKS))})"
        ) from None

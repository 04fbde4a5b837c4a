"""The train phase asks a task's module (campaign.core.tasks.module_of) for what differs per task:
its examples, model class and head, loss, scores and predictions. It never names a task."""

from __future__ import annotations

import re

import pytest

from campaign.core.errors import CampaignError
from campaign.core.tasks import TASKS, TaskModule, module_of
from campaign.tools.task_branches import branches
from campaign.train import models


def test_the_train_phase_names_no_task():
    # A new task is a module and a TASKS line: nothing in train/ to edit.
    assert [f"{path}:{line}" for path, line in branches() if "campaign/train/" in path] == []


def test_every_task_gives_the_loop_its_examples_scores_and_predictions():
    for name in TASKS:
        task = type(module_of(name))
        for method in ("setup", "encode_split", "evaluate"):
            # the task's own, not TaskModule's refusal
            assert getattr(task, method) is not getattr(TaskModule, method), (name, method)


@pytest.mark.parametrize(
    ("task", "architecture", "message"),
    [
        ("causal_lm", "bert", "causal_lm needs gpt2 or llama (a decoder)"),
        ("causal_lm", "llama", "causal_lm needs gpt2 (a decoder)"),
        ("generation", "bert", "generation needs gpt2 or llama (a decoder)"),
        ("sequence_classification", "llama", "llama is a decoder for the generation task"),
    ],
)
def test_a_task_refuses_an_architecture_it_cannot_train_naming_the_key(task, architecture, message):
    from trainkit import tiny_spec

    spec = tiny_spec(task, architecture)["model"]
    spec["config"]["num_key_value_heads"] = 1
    with pytest.raises(
        CampaignError, match="^" + re.escape(f"model.config.architecture: {message}")
    ):
        models.check_model_spec(spec)

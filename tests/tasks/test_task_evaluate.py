"""The evaluate section of the task interface (core/tasks.TaskModule): what a task module that
leaves it alone gets, so a new task adds nothing to the evaluation's key and refuses to be scored
in one line naming it, and what each shipped task answers."""

from __future__ import annotations

from pathlib import Path

import pytest

from campaign.core.errors import CampaignError
from campaign.core.tasks import Task, TaskModule, module_of
from campaign.evaluate import LabelScoring


class Toy(TaskModule):
    info = Task("toy", "campaign.tasks.toy", "generated_text", (), False, False)


def test_a_task_without_evaluate_methods_adds_nothing_to_the_key_and_refuses_to_score():
    toy = Toy()
    assert toy.evaluation_model({"task": "toy", "generation": {"metric": "x"}}) == {}
    assert toy.metric_libraries({}) == {}
    assert toy.metric_code({}, Path(".")) == []
    assert toy.check_metric({"task": "toy"}, Path(".")) is None
    with pytest.raises(CampaignError, match=r"^model.task: toy does not support scorer$"):
        toy.scorer({}, {}, Path("train.parquet"), [])
    with pytest.raises(CampaignError, match=r"^model.task: toy does not support check_evaluation"):
        toy.check_evaluation({"model": {"task": "toy"}, "evaluation": {}})


def test_each_task_scores_by_its_own_module(tmp_path):
    classify, causal = module_of("sequence_classification"), module_of("causal_lm")
    assert not classify.scores_responses and causal.scores_responses
    generation = module_of("generation").scorer(
        {"slices": {}}, {"generation": {"metric": "token_f1"}}, tmp_path / "train.parquet", []
    )
    assert not isinstance(generation, LabelScoring)
    assert generation.metric == "token_f1" and "kept_changes" in generation.error_files
    # The generation task's metric settings are the only model keys its evaluation reads.
    model = {"task": "generation", "source": "x", "generation": {"metric": "similarity"}}
    assert module_of("generation").evaluation_model(model) == {"generation": model["generation"]}
    assert module_of("causal_lm").evaluation_model({"task": "causal_lm"}) == {}

"""What a task must decide for itself (core/tasks.TaskModule): the part of a quantize job's key
it reads, the metric the quantize selection ranks by, whether `campaign init` may lowercase its
texts. A new task that leaves one out fails naming the task, its class and the method, instead
of inheriting a label task's answer unawares; the shipped tasks answer as they always have (their
quantize job specs unchanged)."""

from __future__ import annotations

import pytest

from campaign.core.tasks import Task, TaskModule, module_of

UNDECIDED = {
    "quantize_settings": lambda task: task.quantize_settings({"generation": {"prompts": 2}}),
    "selection_metric": lambda task: task.selection_metric("accuracy", {}),
    "init_lowercase": lambda task: task.init_lowercase(),
}


class Ranking(TaskModule):
    info = Task("ranking", "campaign.tasks.ranking", "item_score", (), False, False)


@pytest.mark.parametrize("method", sorted(UNDECIDED))
def test_a_task_that_leaves_a_decision_out_fails_naming_it(method):
    with pytest.raises(NotImplementedError) as caught:
        UNDECIDED[method](Ranking())
    assert str(caught.value) == (
        f"task ranking: Ranking must define {method} (TaskModule.{method} has no default; "
        "see its docstring)"
    )


def test_a_registered_task_that_leaves_a_decision_out_is_refused_when_looked_up(monkeypatch):
    import sys
    import types

    from campaign.core import tasks
    from campaign.core.errors import CampaignError

    module = types.ModuleType("campaign.tasks.ranking")
    module.TASK = Ranking()
    monkeypatch.setitem(sys.modules, "campaign.tasks.ranking", module)
    monkeypatch.setitem(tasks.TASKS, "ranking", Ranking.info)
    with pytest.raises(CampaignError) as caught:
        module_of("ranking")
    assert str(caught.value) == (
        "task ranking: Ranking must define quantize_settings, selection_metric, init_lowercase "
        "(TaskModule has no default for them; see their docstrings)"
    )


def test_the_shipped_tasks_decide_as_before():
    section = {"generation": {"prompts": ["Hello"], "max_new_tokens": 4}}
    classify, causal, generation = (
        module_of(name) for name in ("sequence_classification", "causal_lm", "generation")
    )
    # The quantize job's key: only the label-scoring causal LM shows a sample generation.
    assert classify.quantize_settings(section) == {"generation": None}
    assert causal.quantize_settings(section) == {"generation": section["generation"]}
    assert generation.quantize_settings(section) == {"generation": None}
    # The selection ranks a label task by evaluation.metric, a generation task by its own.
    assert classify.selection_metric("macro_f1", {}) == "macro_f1"
    assert causal.selection_metric("accuracy", {}) == "accuracy"
    model = {"generation": {"metric": "token_f1"}}
    assert generation.selection_metric("accuracy", model) == "token_f1"
    # A generated answer's capitals are part of it; a label's text may be lowercased.
    assert classify.init_lowercase() and causal.init_lowercase()
    assert not generation.init_lowercase()

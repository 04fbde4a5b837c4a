"""The generation task's keys in run ids, job keys and validation: a model key absent and at its
default are one run; the metric only rescores (in no run id, no train or floor key); a floor
follows the model's content, not the path model.source names; one metric key per task."""

from __future__ import annotations

import copy

import pytest
import yaml

from campaign.core.errors import CampaignError
from campaign.core.params import validate
from campaign.core.registry import get_stage as stage
from campaign.plan import plan_runs, run_spec_of
from conftest import FIXTURES

MODEL = {
    "task": "generation",
    "source": "from_config",
    "chat_template": "none",
    "generation": {"metric": "token_f1", "max_new_tokens": 10},
    "config": {
        "architecture": "llama", "hidden_size": 64, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128,
        "max_position_embeddings": 128, "dropout": 0.0,
    },
    "tokenizer": {"source": "train_split", "vocab_size": 300, "min_frequency": 1,
                  "lowercase": False},
}  # fmt: skip


@pytest.fixture
def params() -> dict:
    p = yaml.safe_load((FIXTURES / "tiny_params.yaml").read_text())
    p["model"] = copy.deepcopy(MODEL)
    p["data"]["fields"] = {
        "id": "id", "text": None, "label": None, "messages": "messages", "group": None,
        "timestamp": None,
    }  # fmt: skip
    p["evaluation"]["floor"] = ["retrieval", "zero_shot"]
    del p["evaluation"]["metric"]
    return p


def ids(p: dict) -> list[str]:
    return [r.run_id for r in plan_runs(p)]


def train_keys(p: dict) -> list:
    train = stage("train")
    return [train.key_view(run_spec_of(p, r.run_id)) for r in plan_runs(p)]


def test_a_model_key_absent_and_at_its_default_is_one_run(params):
    absent = copy.deepcopy(params)
    del absent["model"]["chat_template"]
    at_default = copy.deepcopy(params)
    at_default["model"]["chat_template"] = "model"
    assert ids(absent) == ids(at_default)
    assert not set(ids(absent)) & set(ids(params))  # "none" is another template: other runs
    explicit = copy.deepcopy(params)
    explicit["model"]["generation"].update(batch_size=8, max_truncated_share=0.02)
    assert ids(explicit) == ids(params)
    longer = copy.deepcopy(params)
    longer["model"]["generation"]["max_new_tokens"] = 11
    assert not set(ids(longer)) & set(ids(params))


def test_changing_the_generation_metric_rescores_and_retrains_nothing(params):
    other = copy.deepcopy(params)
    other["model"]["generation"]["metric"] = "json_fields"
    assert ids(other) == ids(params)
    assert train_keys(other) == train_keys(params)
    # nor Snakemake's params of a training job: the run's spec does not hold the metric
    run = plan_runs(params)[0].run_id
    assert run_spec_of(other, run) == run_spec_of(params, run)
    floor = stage("floor")
    assert floor.key_view(floor.spec(other)) == floor.key_view(floor.spec(params))
    # the evaluation reads it: that (cheap) job is the one that reruns
    evaluate = stage("evaluate")
    assert evaluate.spec(other) != evaluate.spec(params)


def test_the_floor_follows_the_model_content_not_its_path(params):
    floor = stage("floor")
    here, there = copy.deepcopy(params), copy.deepcopy(params)
    here["model"]["source"], there["model"]["source"] = "models/base", "elsewhere/base-copy"
    for p in (here, there):
        p["model"]["tokenizer"] = {"source": "model"}
        del p["model"]["config"]
    assert floor.key_view(floor.spec(here)) == floor.key_view(floor.spec(there))
    # the folder is still what the zero-shot floor loads (its content is the base_model input)
    assert floor.spec(there)["model"]["source"] == "elsewhere/base-copy"
    assert floor.key_view(floor.spec(params)) != floor.key_view(floor.spec(here))


def test_one_metric_key_per_task(params):
    validate(copy.deepcopy(params))
    label = copy.deepcopy(params)
    label["evaluation"]["metric"] = "accuracy"
    with pytest.raises(
        CampaignError,
        match=r"evaluation.metric: accuracy scores labels; a "
        r"generation campaign is decided on model.generation.metric \(token_f1\)",
    ):
        validate(label)
    wrong = copy.deepcopy(params)
    wrong["model"]["generation"]["metric"] = "macro_f1"
    with pytest.raises(CampaignError, match="model.generation.metric: macro_f1 scores labels"):
        validate(wrong)
    classify = yaml.safe_load((FIXTURES / "tiny_params.yaml").read_text())
    del classify["evaluation"]["metric"]
    with pytest.raises(CampaignError, match="evaluation.metric: required for model.task"):
        validate(classify)
    classify["evaluation"]["metric"] = "accuracy"
    classify["model"]["generation"] = {"metric": "token_f1"}
    with pytest.raises(CampaignError, match="model.generation: only read by a generation task"):
        validate(classify)


def test_the_reference_prints_the_model_defaults():
    from campaign.core.defaults import GENERATION_DEFAULTS
    from campaign.tools import params_doc

    page = (params_doc.ROOT / "docs" / "params.md").read_text()
    assert "`model.chat_template`" in page and "Absent: model |" in page
    assert f"Absent: {GENERATION_DEFAULTS['metric']} |" in page


def test_which_model_keys_count_in_run_ids_is_the_task_own(params, monkeypatch):
    """The task names its own model settings, which of them only score (in no run id) and their
    defaults (TaskModule.settings_key, scoring_only_settings, settings_defaults): run ids and
    run specs follow the task's declaration, not key names written in the plan."""
    from campaign.core.tasks import module_of

    wider = copy.deepcopy(params)
    wider["model"]["generation"]["batch_size"] = 4
    assert ids(wider) != ids(params)  # a generating key: another run
    task = module_of("generation")
    monkeypatch.setattr(task, "scoring_only_settings", ("metric", "batch_size"))
    assert ids(wider) == ids(params)  # declared scoring only: the same run
    assert "batch_size" not in run_spec_of(wider, ids(wider)[0])["model"]["generation"]

"""The prompted floors of the generation task against the runs they are compared with: the same
device (the training job's selection), the same base weights (train.base_quantization), the same
template (a train.command run that saved another is refused); and the few-shot floor (the base
model with k training conversations in its prompt, never an evaluated one)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import torch
from genkit import tiny_llama, tiny_tokenizer
from trainkit import tiny_generation_spec, write_conversations

from campaign.core.errors import CampaignError
from campaign.core.registry import get_stage
from campaign.data import conversations as conv
from campaign.evaluate.floor import Timings
from campaign.evaluate.stage import stage_floor
from campaign.tasks.generation import chat
from campaign.tasks.generation.few_shot import FewShot, chooser, few_shot_floor, with_examples
from campaign.tasks.generation.floor import BaseModel, EvalSet, base_generate
from campaign.tasks.generation.floor_stage import base_model
from campaign.train import devices, models

pytestmark = pytest.mark.usefixtures("one_thread")

# Words of genkit's tiny vocabulary: the prompts tokenize to known ids.
TRAIN = [
    conv.from_prompt_response("what is the cat", "the cat sat"),
    conv.from_prompt_response("what is the dog", "the dog ran"),
    conv.from_prompt_response("what is red", "red"),
    conv.from_prompt_response("what is blue", "blue"),
    conv.from_prompt_response("what city", "one city"),
]
TRAIN_IDS = [f"train{i}" for i in range(len(TRAIN))]
EVALS = {
    "validation": EvalSet(
        ["v0", "v1"],
        [
            conv.from_prompt_response("the cat and the dog", "yes"),
            conv.from_prompt_response("is it red", "no"),
        ],
    ),
    "test": EvalSet(
        ["t0"],
        [
            [
                {"role": "system", "content": "answer yes or no"},
                {"role": "user", "content": "is it blue"},
                {"role": "assistant", "content": "yes"},
            ]
        ],
    ),
}
MODEL = {
    "task": "generation",
    "source": "base",
    "chat_template": "none",
    "generation": {"metric": "token_f1", "max_new_tokens": 4, "batch_size": 2},
}


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("base")
    tiny_llama(seed=1).save_pretrained(folder)
    tiny_tokenizer().save_pretrained(folder)
    return folder


def _tiny_base(model=None, max_positions=None) -> BaseModel:
    tok = tiny_tokenizer()
    return BaseModel(
        model or tiny_llama(),
        tok,
        lambda talk: chat.prompt_ids(tok, chat.PLAIN_TEMPLATE, talk),
        max_new_tokens=3,
        batch_size=2,
        eos_token_ids=[2],
        max_positions=max_positions,
    )


# ------------------------------------------------------------------ the same device
def test_the_floor_job_computes_with_a_training_jobs_execution_settings():
    """The device type and threads are in the floor job's key and pinned in it, by the module a
    training job pins with: on a GPU host the floor's key says cuda, as the runs' keys do."""
    assert get_stage("floor").execution == get_stage("train").execution is not None


def test_the_base_model_goes_to_the_device_a_training_job_selects(base, monkeypatch, tmp_path):
    """The floor asks the trainer's own selection (campaign.train.select_device) and moves the
    model there: a job whose key says cuda refuses on a machine without one, as a training job
    does, and a selected device is where the model ends."""
    spec = {"model": MODEL, "floors": ["zero_shot"]}
    monkeypatch.setenv("CAMPAIGN_DEVICE", "cuda")
    if not torch.cuda.is_available():
        with pytest.raises(CampaignError, match="this job's key says cuda"):
            base_model(spec, base, tmp_path)
    monkeypatch.setattr(devices, "select_device", lambda: torch.device("meta"))
    floor = base_model(spec, base, tmp_path)
    assert {p.device.type for p in floor.model.parameters()} == {"meta"}


# ------------------------------------------------------------------ the same base weights
def test_a_quantized_base_floor_generates_with_the_runs_base_weights(base, tmp_path):
    """train.base_quantization int8_weight_only: a run's frozen base is int8 and its model is
    the dequantized base plus its adapters. The floor's weights are the run's before training
    (adapters at zero), not the fp32 base's."""
    spec = {"model": MODEL, "floors": ["zero_shot"], "base_quantization": "int8_weight_only"}
    floor = base_model(spec, base, tmp_path).model.state_dict()
    fp32 = base_model({**spec, "base_quantization": None}, base, tmp_path).model.state_dict()
    lora = {"r": 4, "alpha": 8, "dropout": 0.0, "target_modules": ["q_proj", "v_proj"]}
    run = models._pretrained(base, "generation", tiny_tokenizer(), [])
    run = models.quantize_base(run, {"lora": lora, "base_quantization": "int8_weight_only"}, "cpu")
    run = models.unwrap(models.apply_lora(run, lora, "generation")).state_dict()
    assert set(floor) == set(run)
    assert all(torch.equal(floor[n], run[n]) for n in run)
    q_proj = "model.layers.0.self_attn.q_proj.weight"
    assert not torch.equal(floor[q_proj], fp32[q_proj])


def test_the_floor_spec_holds_the_base_quantization_when_a_floor_prompts_the_base():
    params = {
        "campaign": {"seed": 7},
        "model": {**MODEL, "tokenizer": {"source": "model"}},
        "train": {"base_quantization": "int8_weight_only", "lora": {"r": 4}},
        "evaluation": {"floor": ["retrieval", "zero_shot"]},
        "data": {},
    }
    spec = get_stage("floor").spec
    assert spec(params)["base_quantization"] == "int8_weight_only"
    params["evaluation"]["floor"] = ["retrieval"]
    assert "base_quantization" not in spec(params)
    params["evaluation"] |= {"floor": ["few_shot"], "few_shot": {"k": 2, "choose": "seeded"}}
    assert spec(params)["few_shot"] == {"k": 2, "choose": "seeded", "seed": 7}


# ------------------------------------------------------------------ the same template
def _command_run(tmp_path: Path, base: Path, template: str) -> tuple:
    """A train.command run's model folder whose saved tokenizer carries `template`, and the
    spec and data it is scored with (model.chat_template: model, the base's own PLAIN one)."""
    from campaign.train import read_data

    tok = tiny_tokenizer()
    tok.chat_template = chat.PLAIN_TEMPLATE
    tok.save_pretrained(base / "with-template")
    tiny_llama(seed=1).save_pretrained(base / "with-template")
    folder = tmp_path / "run"
    tiny_llama(seed=2).save_pretrained(folder)
    tok.chat_template = template
    tok.save_pretrained(folder)
    spec = tiny_generation_spec(max_length=64, micro_batch=2)
    spec["model"] = {**MODEL, "source": str(base / "with-template"), "chat_template": "model"}
    splits = {
        name: write_conversations(tmp_path, name, ids, talks)
        for name, ids, talks in [
            ("train", TRAIN_IDS, TRAIN),
            *[(s, e.ids, e.conversations) for s, e in EVALS.items()],
        ]
    }
    return spec, read_data(splits), folder, base / "with-template"


def test_a_command_run_that_saved_another_template_is_refused(base, tmp_path):
    """A command run is scored with its saved tokenizer's template; the floors with the one the
    run spec gave the command. Another template would compare the run and the floors on two
    prompts: refused in one line naming the folder, before the model is loaded."""
    from campaign.train.command import score

    other = chat.PLAIN_TEMPLATE.replace("User: ", "Question: ")
    spec, data, folder, base_folder = _command_run(tmp_path, base, other)
    with pytest.raises(CampaignError, match="saved a tokenizer whose chat template is not") as e:
        score(spec, data, [], folder, base_folder, torch.device("cpu"), tmp_path)
    assert str(e.value).startswith(f"{folder}: ")
    spec, data, folder, base_folder = _command_run(tmp_path / "same", base, chat.PLAIN_TEMPLATE)
    _model, _tok, frames, _val = score(spec, data, [], folder, base_folder, "cpu", tmp_path)
    assert frames["test"]["id"].tolist() == ["t0"]


# ------------------------------------------------------------------ the few-shot floor
def test_a_seeded_choice_is_one_draw_from_the_train_split_for_every_item():
    prompts = [c[0]["content"] for c in TRAIN]
    draw = chooser(prompts, FewShot(2, "seeded", seed=3))(["a", "b", "c"])
    assert draw.shape == (3, 2) and (draw == draw[0]).all() and len(set(draw[0])) == 2
    again = chooser(prompts, FewShot(2, "seeded", seed=3))(["z"])
    assert again[0].tolist() == draw[0].tolist()
    others = {tuple(chooser(prompts, FewShot(2, "seeded", seed=s))(["a"])[0]) for s in range(8)}
    assert len(others) > 1  # another seed, another draw
    with pytest.raises(CampaignError, match=r"evaluation.few_shot.k: 6 examples .* has 5 records"):
        chooser(prompts, FewShot(6, "nearest"))


def test_a_nearest_choice_puts_the_most_similar_training_prompts_last():
    prompts = [c[0]["content"] for c in TRAIN]
    got = chooser(prompts, FewShot(2, "nearest"))(["what is the dog doing", "zzz"])
    assert got[0].tolist() == [0, 1]  # the dog's prompt (1) next to the question, the cat's before
    assert got[1].tolist() == [1, 0]  # no known word: ties to the earliest records


def test_the_examples_are_earlier_turns_after_the_items_system_message():
    shots = [TRAIN[0], [{"role": "system", "content": "x"}, *TRAIN[1]]]
    talk = with_examples(shots, EVALS["test"].conversations[0])
    assert [m["role"] for m in talk] == ["system", *["user", "assistant"] * 3]
    assert talk[0]["content"] == "answer yes or no" and talk[1] == TRAIN[0][0]
    assert talk[-2]["content"] == "is it blue"


def test_the_few_shot_floor_generates_from_training_examples_only():
    """Evaluated items whose prompts are closest to each other: their examples are still
    training records (never an evaluated one), each item's prompt holds no evaluated reference,
    and the floor's output is the engine's on those prompts, with their length in tokens."""
    base, timings = _tiny_base(), Timings()
    train = EvalSet(TRAIN_IDS, TRAIN)
    frames = few_shot_floor(base, train, EVALS, FewShot(2, "nearest"), timings)
    for split, data in EVALS.items():
        out = frames[split]
        used = [e.split(",") for e in out["examples"]]
        assert all(len(u) == 2 and set(u) <= set(TRAIN_IDS) for u in used)
        assert not {i for u in used for i in u} & {i for e in EVALS.values() for i in e.ids}
        talks = [
            with_examples([TRAIN[TRAIN_IDS.index(i)] for i in u], c)
            for u, c in zip(used, data.conversations, strict=True)
        ]
        prompts = [base.prompt_ids(t) for t in talks]
        assert out["prompt_tokens"].tolist() == [len(p) for p in prompts]
        zero = [len(base.prompt_ids(c)) for c in data.conversations]
        assert all(f > z for f, z in zip(out["prompt_tokens"], zero, strict=True))
        assert out["prediction"].tolist() == base_generate(base, prompts).texts
        taught = {m["content"] for c in TRAIN for m in c}
        for talk, own in zip(talks, data.conversations, strict=True):
            before = talk[: len(talk) - len([m for m in own if m["role"] != "system"])]
            assert {m["content"] for m in before if m["role"] != "system"} <= taught
    assert frames["validation"]["examples"].tolist()[0] == "train1,train0"
    assert set(timings.as_dict()["floors"]) == {"floor/few_shot"}


def test_a_few_shot_prompt_past_the_models_positions_is_refused():
    with pytest.raises(CampaignError, match=r"evaluation.few_shot.k: the 5-shot prompt of "):
        few_shot_floor(
            _tiny_base(max_positions=20),
            EvalSet(TRAIN_IDS, TRAIN),
            EVALS,
            FewShot(5, "seeded", seed=0),
            Timings(),
        )


def test_the_floor_stage_writes_the_few_shot_floor_beside_zero_shot(base, tmp_path):
    paths = {"train": write_conversations(tmp_path, "train", TRAIN_IDS, TRAIN)}
    for split, data in EVALS.items():
        paths[split] = write_conversations(tmp_path, split, data.ids, data.conversations)
    spec = {
        "floors": ["zero_shot", "few_shot"],
        "task": "generation",
        "model": MODEL,
        "few_shot": {"k": 2, "choose": "seeded", "seed": 0},
    }
    ctx = SimpleNamespace(
        spec=spec,
        inputs=paths | {"base_model": [base]},
        outputs={"floor": tmp_path / "floor", "timings": tmp_path / "timings.json"},
        root=tmp_path,
    )
    stage_floor(ctx)
    few = pd.read_parquet(tmp_path / "floor" / "few_shot" / "predictions_test.parquet")
    assert list(few.columns[:3]) == ["id", "reference", "prediction"]
    assert {"prompt_tokens", "examples", "new_tokens"} <= set(few.columns)
    zero = pd.read_parquet(tmp_path / "floor" / "zero_shot" / "predictions_test.parquet")
    assert not (tmp_path / "floor" / "retrieval").exists()
    timings = json.loads((tmp_path / "timings.json").read_text())
    assert timings["floors"]["floor/few_shot"]["predict_items"] == 3
    # What a request holds, beside the time it took (the budget prices a request by them): the
    # tokens of each prompted floor's prompts and answers, summed over the split's items, the
    # zero-shot prompt being the runs' (the template alone), the few-shot one longer by its
    # examples; and the device they were measured on.
    for name, frame in (("zero_shot", zero), ("few_shot", few)):
        timed = timings["floors"][f"floor/{name}"]
        assert timed["predict"]["test"]["prompt_tokens"] == int(frame["prompt_tokens"].sum())
        assert timed["predict"]["test"]["new_tokens"] == int(frame["new_tokens"].sum())
        assert timed["device"] == "cpu"
    runs_prompt = chat.prompt_ids(
        tiny_tokenizer(), chat.PLAIN_TEMPLATE, EVALS["test"].conversations[0]
    )
    assert zero["prompt_tokens"].tolist() == [len(runs_prompt)]
    assert few["prompt_tokens"].iloc[0] > len(runs_prompt)
    # from_config: both prompted floors are skipped with the reason
    ctx.inputs = paths | {"base_model": []}
    ctx.outputs = {"floor": tmp_path / "skipped"}
    stage_floor(ctx)
    assert (
        (tmp_path / "skipped" / "few_shot" / "SKIPPED.txt")
        .read_text()
        .startswith("model.source is from_config")
    )


# ------------------------------------------------------------------ the params
def test_validate_takes_the_few_shot_floor_with_its_examples_and_refuses_it_without(
    tmp_path, monkeypatch, capsys
):
    """evaluation.floor: few_shot needs evaluation.few_shot (k, choose: seeded | nearest):
    `campaign validate` says so in one line, and refuses an unknown choice by its key."""
    import yaml

    from campaign.cli import main

    params = yaml.safe_load(
        (Path(__file__).parents[1] / "fixtures" / "tiny_params.yaml").read_text()
    )
    params["model"] = {
        "task": "generation", "source": "from_config", "chat_template": "none",
        "config": {
            "architecture": "llama", "hidden_size": 64, "num_hidden_layers": 2,
            "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128,
            "max_position_embeddings": 128, "dropout": 0.0,
        },
        "tokenizer": {"source": "train_split", "vocab_size": 300, "min_frequency": 1,
                      "lowercase": False},
    }  # fmt: skip
    params["data"]["fields"] |= {"text": None, "label": None, "messages": "messages"}
    params["ablation"]["factors"] = {}
    del params["evaluation"]["metric"]
    params["data"]["sources"] = [
        {"path": "talks.jsonl", "format": "jsonl", "licence": "CC0-1.0", "origin": "x"}
    ]
    talk = {"id": "q", "messages": TRAIN[0]}
    (tmp_path / "talks.jsonl").write_text(json.dumps(talk) + "\n")
    monkeypatch.chdir(tmp_path)

    def validate(evaluation: dict) -> str | None:
        p = {**params, "evaluation": {**params["evaluation"], **evaluation}}
        (tmp_path / "params.yaml").write_text(yaml.safe_dump(p, sort_keys=False))
        code = main(["validate", "--params", "params.yaml"])
        err = capsys.readouterr().err
        return None if code == 0 else err.strip()

    floor = {"floor": ["retrieval", "zero_shot", "few_shot"]}
    assert validate(floor | {"few_shot": {"k": 3, "choose": "nearest"}}) is None
    assert validate(floor) == (
        "error: params.yaml: evaluation.few_shot: required when evaluation.floor names few_shot "
        "(e.g. {k: 3, choose: nearest})"
    )
    assert "evaluation.few_shot.choose" in validate(floor | {"few_shot": {"k": 3, "choose": "x"}})


# ------------------------------------------------------------------ weighed as every floor
def test_a_few_shot_floor_above_an_under_trained_fine_tune_is_kept(tmp_path):
    """Planted per-item scores (read back by a user metric): a fine-tune at ~0.3 whose few-shot
    floor answers at ~0.7. The evaluation weighs the few-shot floor as it weighs every floor:
    the cell is below it, and the verdict keeps the prompt, not the fine-tune."""
    import numpy as np
    import yaml
    from genkit import PLANTED_METRIC, planted_text

    from campaign.evaluate.stage import stage_evaluate

    n, rng = 120, np.random.default_rng(0)
    splits, inputs = {}, {"predictions_validation": [], "predictions_test": []}
    for split in ("train", "validation", "test"):
        ids = [f"{split}-{i:03d}" for i in range(n)]
        talks = [conv.from_prompt_response(f"what is {i}", f"answer {i}") for i in range(n)]
        splits[split] = (ids, talks)
        inputs[split] = write_conversations(tmp_path, split, ids, talks)

    def planted(path: Path, ids, talks, mean: float) -> Path:
        scores = np.clip(rng.beta(8 * mean, 8 * (1 - mean), len(ids)), 0, 1).round(3)
        refs = [t[-1]["content"] for t in talks]
        path.parent.mkdir(parents=True, exist_ok=True)
        pd.DataFrame(
            {
                "id": ids,
                "reference": refs,
                "prediction": [planted_text("x", float(s)) for s in scores],
                "new_tokens": 3,
                "stopped_at_eos": True,
                "nll": 1.0,
                "tokens": 4,
            }
        ).to_parquet(path, index=False)
        return path

    lines = ["run\ttrain.lr\tseed\ttier\tprojected_hours\tcumulative_hours\tkept"]
    for seed in (1, 2):
        lines.append(f"r-{seed}\t0.001\t{seed}\tmain\t0.1\t0.1\ttrue")
        for split in ("validation", "test"):
            path = tmp_path / "runs" / f"r-{seed}" / f"predictions_{split}.parquet"
            inputs[f"predictions_{split}"].append(planted(path, *splits[split], 0.3))
    (tmp_path / "runs.tsv").write_text("\n".join(lines) + "\n")
    for name, mean in (("retrieval", 0.1), ("few_shot", 0.7)):
        for split in ("validation", "test"):
            planted(
                tmp_path / "floor" / name / f"predictions_{split}.parquet", *splits[split], mean
            )
    inputs |= {"runs": [tmp_path / "runs.tsv"], "floor": [tmp_path / "floor"]}
    params = yaml.safe_load(
        (Path(__file__).parents[1] / "fixtures" / "tiny_params.yaml").read_text()
    )
    evaluation = {**params["evaluation"], "floor": ["retrieval", "few_shot"]}
    evaluation["few_shot"] = {"k": 3, "choose": "nearest"}
    evaluation.pop("metric", None)
    out = tmp_path / "out"
    out.mkdir()
    outputs = {
        "metrics": out / "metrics.parquet",
        "comparisons": out / "comparisons.parquet",
        "scored_items": out / "items.parquet",
        "decisions": out / "decisions.json",
        "errors": out / "errors",
        "summary": out / "summary.txt",
    }
    spec = {
        "evaluation": evaluation,
        "task": "generation",
        "model": {"generation": {"metric": PLANTED_METRIC}},
    }
    stage_evaluate(SimpleNamespace(spec=spec, inputs=inputs, outputs=outputs))
    decisions = json.loads(outputs["decisions"].read_text())
    comparisons = pd.read_parquet(outputs["comparisons"])
    floors = comparisons[(comparisons.kind == "floor") & (comparisons.split == "validation")]
    assert set(floors.reference) == {"floor/few_shot"}
    assert floors.decision.tolist() == ["below floor"]
    assert decisions["verdict"]["keep"] == "floor/few_shot", decisions["verdict"]


def test_a_label_floor_spec_holds_only_its_floors_and_task():
    """The majority and TF-IDF floors read only the split files: their spec (their key) holds
    the floors' names and the task, not the model source, so switching model.source (from_config
    to a pretrained folder) does not recompute them."""
    params = {
        "campaign": {"seed": 7},
        "model": {"task": "sequence_classification", "source": "models/all-MiniLM-L6-v2"},
        "train": {},
        "evaluation": {"floor": ["majority", "tfidf_logreg"]},
        "data": {},
    }
    spec = get_stage("floor").spec(params)
    assert spec == {"floors": ["majority", "tfidf_logreg"], "task": "sequence_classification"}


def test_few_shot_settings_go_with_the_few_shot_floor(tmp_path):
    """evaluation.few_shot without the few_shot floor would be read by nothing: refused in one
    line naming the key, as the floor without its settings is; a label task refuses it too."""
    from campaign.evaluate import _check_params

    base = {"model": {"task": "generation", "source": "from_config"}, "evaluation": {}}
    for floor, extra, words in (
        (["zero_shot"], {"few_shot": {"k": 2, "choose": "nearest"}}, "does not name few_shot"),
        (["few_shot"], {}, "required when evaluation.floor names few_shot"),
    ):
        params = {**base, "evaluation": {"floor": floor, **extra}}
        with pytest.raises(CampaignError, match=f"evaluation.few_shot: .*{words}"):
            _check_params(params)
    label = {
        "model": {"task": "causal_lm"},
        "evaluation": {"floor": ["majority"], "metric": "accuracy", "few_shot": {"k": 2}},
    }
    with pytest.raises(CampaignError, match="evaluation.few_shot: only read by a generation task"):
        _check_params(label)

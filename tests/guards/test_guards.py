"""Guard benchmarks (evaluation.guards): the base model and two fine-tunes of it score a tiny
local multiple-choice task with lm-evaluation-harness, item by item, through the guard stages;
the fine-tune trained far too long at a high learning rate loses the guard, the gentle one holds
it, and the evaluation's verdict carries both lines. The models are real transformers models
(the tiny Llama of genkit), the fine-tunes real AdamW steps, the scores what the harness logged.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from campaign.core.errors import CampaignError
from campaign.guards.decide import decide_guards
from campaign.guards.stage import ITEM_COLUMNS, stage_guard, stage_guard_base, stage_guards
from campaign.guards.tasks import check_guard_files, check_guards
from conftest import FIXTURES

TASK = FIXTURES / "guard_task"
INPUTS = {"task_yaml": [TASK / "tiny_guard.yaml"], "task_data": [TASK / "items.jsonl"]}
# Unrelated text the over-trained fine-tune memorizes: afterwards it prefers these sentences to
# the one-word answers the base gives every guard item.
TEXTS = [
    "what is the cat sat on the mat the dog ran on the rug answer the cat sat on the mat",
    "one the dog ran on the rug the cat sat on the mat answer the dog ran on the rug",
]
RUNS = {"r-bad1": ("0.03", 60), "r-ok1": ("1e-05", 2)}  # run: (lr, steps)


def fine_tune(base: Path, out: Path, lr: float, steps: int) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(base)
    model = AutoModelForCausalLM.from_pretrained(base)
    batch = tok(TEXTS, return_tensors="pt", padding=True)
    labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
    torch.manual_seed(0)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    for _ in range(steps):
        model(**batch, labels=labels).loss.backward()
        opt.step()
        opt.zero_grad()
    model.save_pretrained(out)
    tok.save_pretrained(out)


@pytest.fixture(scope="module")
def guarded(tmp_path_factory):
    """The guard stages on the base and two one-seed cells: (folder, outputs of `guards`)."""
    from genkit import tiny_llama, tiny_tokenizer

    tmp = tmp_path_factory.mktemp("guards")
    base = tmp / "base"
    tiny_llama(seed=1).save_pretrained(base)
    tiny_tokenizer().save_pretrained(base)
    guard = {"task": "tiny_guard", "include": "tiny_guard.yaml"}
    stage_guard_base(
        SimpleNamespace(
            spec={"guard": guard},
            inputs={"base_model": [base], **INPUTS},
            outputs={"scores": tmp / "base.parquet"},
        )
    )
    lines = ["run\ttrain.lr\tseed\ttier\tprojected_hours\tcumulative_hours\tkept"]
    for i, (run, (lr, steps)) in enumerate(RUNS.items()):
        fine_tune(base, tmp / run, float(lr), steps)
        ctx = SimpleNamespace(
            spec={"guard": guard, "run": run},
            inputs={"model": [tmp / run], "base_model": [base], **INPUTS},
            outputs={"scores": tmp / f"{run}.parquet"},
        )
        stage_guard(ctx)
        lines.append(f"{run}\t{lr}\t1\t{'control' if i == 0 else 'main'}\t0.1\t0.1\ttrue")
    (tmp / "runs.tsv").write_text("\n".join(lines) + "\n")
    outputs = {n: tmp / f"{n}.out" for n in ("table", "guards", "summary")}
    stage_guards(
        SimpleNamespace(
            spec={
                "guards": [{"task": "tiny_guard", "margin": 0.15}],
                "confidence": 0.95,
                "power": 0.8,
            },
            inputs={
                "runs": [tmp / "runs.tsv"],
                "base_scores": [tmp / "base.parquet"],
                "run_scores": [tmp / f"{r}.parquet" for r in RUNS],
            },
            outputs=outputs,
        )
    )
    return tmp, outputs


def test_the_over_trained_fine_tune_loses_the_guard_and_the_gentle_one_holds_it(guarded):
    _, out = guarded
    decided = json.loads(out["guards"].read_text())
    (task,) = decided["guards"]
    assert task["task"] == "tiny_guard" and task["metric"] == "acc" and task["n_items"] == 40
    assert task["base_score"] == 1.0  # the base answers every item
    outcome = {c["cell"]: c["outcome"] for c in task["cells"]}
    assert outcome == {"train.lr=0.03": "loses", "train.lr=1e-05": "holds"}
    bad, ok = task["cells"]
    assert bad["runs"][0]["decision"] == "reject" and ok["runs"][0]["decision"] == "adopt"
    assert bad["runs"][0]["adj_high"] < -0.15 < ok["runs"][0]["adj_low"]
    summary = out["summary"].read_text().splitlines()
    assert summary[0].startswith(
        "guards: tiny_guard: train.lr=0.03 loses more than 15 points against the base"
    )
    assert summary[1].startswith(
        "guards: tiny_guard: train.lr=1e-05 not worse than the base by more than 15 points"
    )


def test_the_items_table_holds_what_the_harness_logged_per_document(guarded):
    _, out = guarded
    items = pd.read_parquet(out["table"])
    assert tuple(items.columns) == ITEM_COLUMNS
    assert items.groupby("variant").size().to_dict() == {"base": 40, "r-bad1": 40, "r-ok1": 40}
    assert set(items["split"]) == {"guard"} and set(items["metric"]) == {"acc"}
    assert items.loc[items.variant == "r-ok1", "seed"].tolist() == [1] * 40
    assert sorted(items.loc[items.variant == "base", "item"], key=int) == [
        str(i) for i in range(40)
    ]
    # the prediction is the chosen option: right wherever the score says so
    data = [json.loads(x) for x in (TASK / "items.jsonl").read_text().splitlines()]
    for r in items.itertuples():
        assert (r.prediction == str(data[int(r.item)]["answer"])) == (r.score == 1.0)
    assert items.loc[items.variant == "r-bad1", "score"].mean() < 0.5


def test_too_few_items_for_the_margin_leave_the_guard_open_with_its_price(guarded):
    _, out = guarded
    items = pd.read_parquet(out["table"])
    decided = decide_guards(items, [{"task": "tiny_guard", "margin": 0.05}], 0.95, 0.8)
    ok = decided["guards"][0]["cells"][1]
    assert ok["outcome"] == "open" and ok["runs"][0]["decision"].startswith("inconclusive")
    needed = ok["runs"][0]["items_needed"]  # no item lost: the exact count that shows 5 points
    assert needed > 40 and f"about {needed} guard items would decide" in ok["words"]


def test_the_evaluation_verdict_carries_the_guard_lines(guarded):
    from campaign.evaluate import evaluate_inputs
    from campaign.evaluate.guard_lines import guard_lines
    from campaign.evaluate.records import read_decisions
    from campaign.evaluate.stage import summary_text

    _, out = guarded

    lines = guard_lines([out["guards"]])
    text = summary_text(read_decisions(FIXTURES / "demo_verdict" / "decisions.json"), lines)
    block = text.split("\n\n")[0]  # the verdict block, before the decisions
    assert block.startswith("Verdict")
    assert f"  {lines[0]}" in block and f"  {lines[1]}" in block
    spec = {"evaluation": {"guards": [{"task": "tiny_guard"}]}, "task": "causal_lm"}
    assert evaluate_inputs(spec, Path("."))["guards"] == ["results/guards/guards.json"]
    assert evaluate_inputs({**spec, "evaluation": {}}, Path("."))["guards"] == []


def _params(guards, source="models/base", task="causal_lm") -> dict:
    return {
        "model": {"task": task, "source": source},
        "evaluation": {"max_quality_loss": 0.01, "guards": guards},
    }


def test_a_guard_task_yaml_that_is_missing_is_refused_naming_the_key(tmp_path):
    with pytest.raises(
        CampaignError, match=r"^evaluation.guards\[0\].include: .*no such task YAML"
    ):
        check_guard_files(_params([{"task": "x", "include": "guards/x.yaml"}]), tmp_path)


def test_a_guard_over_a_remote_dataset_is_refused_naming_the_key(tmp_path):
    (tmp_path / "mmlu.yaml").write_text("task: mini_mmlu\ndataset_path: cais/mmlu\n")
    with pytest.raises(
        CampaignError, match=r"^evaluation.guards\[0\].include: dataset_path 'cais/mmlu' is not"
    ):
        check_guard_files(_params([{"task": "mini_mmlu", "include": "mmlu.yaml"}]), tmp_path)
    shutil.copytree(TASK, tmp_path / "g")
    (tmp_path / "g" / "items.jsonl").unlink()
    with pytest.raises(CampaignError, match=r"data_files items.jsonl: no such file"):
        check_guard_files(
            _params([{"task": "tiny_guard", "include": "g/tiny_guard.yaml"}]), tmp_path
        )


def test_a_guard_the_key_cannot_hash_is_refused_naming_the_key(tmp_path):
    """A registry task reads the datasets cache, and a YAML's include another file: neither is
    in the guard job's content key, so a changed dataset would come back as a store hit."""
    with pytest.raises(CampaignError, match=r"^evaluation.guards\[0\].include: required"):
        check_guards(_params([{"task": "arc_easy"}]))
    shutil.copytree(TASK, tmp_path / "g")
    yaml = tmp_path / "g" / "tiny_guard.yaml"
    yaml.write_text("include: base.yaml\n" + yaml.read_text())
    with pytest.raises(CampaignError, match=r"includes 'base.yaml'; write the guard task in one"):
        check_guard_files(
            _params([{"task": "tiny_guard", "include": "g/tiny_guard.yaml"}]), tmp_path
        )


def test_a_base_with_nothing_to_forget_is_refused():
    one = [{"task": "tiny_guard", "include": "g/tiny_guard.yaml"}]
    with pytest.raises(CampaignError, match="model.source is from_config"):
        check_guards(_params(one, source="from_config"))
    with pytest.raises(CampaignError, match="model.task sequence_classification"):
        check_guards(_params(one, task="sequence_classification"))


def test_which_tasks_a_guard_can_score_is_what_the_task_model_offers(monkeypatch):
    """A task is guarded when its model is a causal LM the harness can score (its TaskModule
    offers "lm_harness"): the check and its words follow the task, not a list of names."""
    from campaign.core.tasks import module_of

    one = [{"task": "tiny_guard", "include": "g/tiny_guard.yaml"}]
    message = "guards need causal_lm or generation"
    with pytest.raises(CampaignError, match=message):
        check_guards(_params(one, task="sequence_classification"))
    classifier = module_of("sequence_classification")
    monkeypatch.setattr(classifier, "model_offers", (*classifier.model_offers, "lm_harness"))
    check_guards(_params(one, task="sequence_classification"))  # now one the harness scores
    monkeypatch.setattr(module_of("causal_lm"), "model_offers", ())
    with pytest.raises(CampaignError, match="guards need sequence_classification or generation"):
        check_guards(_params(one, task="causal_lm"))


def test_guards_margin_defaults_to_the_max_quality_loss():
    from campaign.guards.tasks import guards_of

    p = _params([{"task": "a"}, {"task": "b", "margin": 0.1}])
    assert [g["margin"] for g in guards_of(p)] == [0.01, 0.1]
    p["evaluation"]["guards_margin"] = 0.05
    assert [g["margin"] for g in guards_of(p)] == [0.05, 0.1]


def test_a_lora_run_is_scored_as_its_adapter_over_the_base(guarded, tmp_path):
    """A LoRA run's model folder holds only its adapter (as the train stage saves it): the guard
    loads the base with the adapter applied, so the over-trained adapter loses the guard too."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from campaign.train.models import save_run_model

    folder, _ = guarded
    base = folder / "base"
    tok = AutoTokenizer.from_pretrained(base)
    config = LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj", "lm_head"])
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(base), config)
    batch = tok(TEXTS, return_tensors="pt", padding=True)
    labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
    torch.manual_seed(0)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=3e-2)
    for _ in range(60):
        model(**batch, labels=labels).loss.backward()
        opt.step()
        opt.zero_grad()
    save_run_model(model, tok, tmp_path / "lora", base, labels=[])
    assert (tmp_path / "lora" / "adapter_config.json").is_file()
    assert not (tmp_path / "lora" / "model.safetensors").exists()
    stage_guard(
        SimpleNamespace(
            spec={"guard": {"task": "tiny_guard", "include": "tiny_guard.yaml"}, "run": "r-lora1"},
            inputs={"model": [tmp_path / "lora"], "base_model": [base], **INPUTS},
            outputs={"scores": tmp_path / "lora.parquet"},
        )
    )
    scores = pd.read_parquet(tmp_path / "lora.parquet")
    assert len(scores) == 40 and scores["score"].mean() < 0.5  # the base: every item right


def test_an_open_guard_with_items_lost_is_priced_at_its_estimate_not_at_no_loss():
    """A run 30 points down on 40 items with a 15-point margin is open (the exact test of
    "loses more than 15" does not pass at these items): the price is the fewest items at which
    that test passes, were the estimate the truth, not the count that assumes no item lost."""
    rows = []
    for i in range(40):
        rows.append(("base", "base", 0, str(i), 1.0))
        rows.append(("r1", "lr=1", 1, str(i), 0.0 if i < 12 else 1.0))
    items = pd.DataFrame(rows, columns=["variant", "cell", "seed", "item", "score"]).assign(
        split="guard", task="t", prediction="", metric="acc"
    )
    decided = decide_guards(items, [{"task": "t", "margin": 0.15}], 0.95, 0.8)
    (cell,) = decided["guards"][0]["cells"]
    (run,) = cell["runs"]
    assert cell["outcome"] == "open" and run["estimate"] == pytest.approx(-0.30)
    assert run["decision"] == "inconclusive"  # the exact test of "loses more" does not pass
    # the exact test of "loses more than 15 points", 3 of 10 items lost at every size: it
    # passes at the count said and not one item before
    from campaign.evaluate.comparison import loss_exceeds_p

    need = run["items_needed"]
    assert need > 40
    assert loss_exceeds_p(round(12 * need / 40), 0, need, 0.15) < 0.025
    assert loss_exceeds_p(round(12 * (need - 1) / 40), 0, need - 1, 0.15) >= 0.025
    assert "no item lost" not in cell["words"]

"""The floor and evaluate stages on a generation campaign with planted per-item scores in [0, 1]:
the retrieval floor computed from the split files, the zero-shot floor of a from_config model
skipped with its reason, the same statistics and verdict path as for labels on the generated
score (planted in the generated text and read back by a user metric: the evaluation scores
every text itself), perplexity from the runs' answer-token losses, no
classification rows, the worst items and samples, and one-line errors for predictions that are
not the split's items."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import yaml
from genkit import PLANTED_METRIC, planted_text

from campaign.core.errors import CampaignError
from campaign.data import conversations as conv
from campaign.evaluate.stage import stage_evaluate, stage_floor

REPO = Path(__file__).resolve().parents[2]
N = 200  # items per evaluation split
MODEL = {
    "task": "generation",
    "source": "from_config",
    "chat_template": "none",
    "generation": {"metric": PLANTED_METRIC},
}


def split_frame(split: str, n: int) -> pd.DataFrame:
    """A generation split file: id, text, messages (no label column: the task has none)."""
    if split == "train":  # answers that share no word with the evaluation references
        talks = [conv.from_prompt_response(f"question {i} about cats", "meow") for i in range(n)]
    else:
        talks = [
            conv.from_prompt_response(f"question {i} about cats", f"answer word{i} here")
            for i in range(n)
        ]
    return pd.DataFrame(
        {
            "id": [f"{split}-{i:03d}" for i in range(n)],
            "text": [conv.dedup_text(t) for t in talks],
            "messages": [conv.dump_messages(t) for t in talks],
        }
    )


def predictions(items: pd.DataFrame, score: np.ndarray, nll: bool = True) -> pd.DataFrame:
    refs = [json.loads(m)[-1]["content"] for m in items["messages"]]
    frame = pd.DataFrame(
        {
            "id": items["id"],
            "reference": refs,
            "prediction": [
                planted_text(r if s == 1 else "something else", float(s))
                for r, s in zip(refs, score, strict=True)
            ],
            "score": score,
            "new_tokens": 3,
            "stopped_at_eos": True,
            "seconds": 0.01,
        }
    )
    if nll:
        frame["nll"] = 2.0 * (1 - score) * 4
        frame["tokens"] = 4
    return frame


def scores(mean: float, seed: int) -> np.ndarray:
    """Continuous per-item scores in [0, 1] around `mean` (a token F1's spread)."""
    rng = np.random.default_rng(seed)
    return np.clip(rng.beta(4 * mean, 4 * (1 - mean), N), 0, 1).round(3)


@pytest.fixture
def campaign(tmp_path):
    """Control lr=0.001 (score ~0.4) and lr=0.003 (~0.7), two seeds each; the floors from the
    split files; a quantized copy of r-m1 that generates garbage (score ~0.05)."""
    paths = {}
    splits = {s: split_frame(s, n) for s, n in (("train", 300), ("validation", N), ("test", N))}
    for s, frame in splits.items():
        paths[s] = tmp_path / f"{s}.parquet"
        frame.to_parquet(paths[s], index=False)
    plan = [("r-c1", "0.001", 1, 0.4), ("r-c2", "0.001", 2, 0.4)]
    plan += [("r-m1", "0.003", 1, 0.7), ("r-m2", "0.003", 2, 0.7)]
    lines = ["run\ttrain.lr\tseed\ttier\tprojected_hours\tcumulative_hours\tkept"]
    lines += [f"{r}\t{lr}\t{seed}\tmain\t0.1\t0.1\ttrue" for r, lr, seed, _ in plan]
    (tmp_path / "runs.tsv").write_text("\n".join(lines) + "\n")
    pred = {"validation": [], "test": []}
    for k, (run, _, _, mean) in enumerate(plan):
        for j, s in enumerate(pred):
            path = tmp_path / "runs" / run / f"predictions_{s}.parquet"
            path.parent.mkdir(parents=True, exist_ok=True)
            predictions(splits[s], scores(mean, 10 * k + j)).to_parquet(path, index=False)
            pred[s].append(path)
    quant = {}
    for j, s in enumerate(pred):
        path = tmp_path / "quantize" / "r-m1" / "kv_broken" / f"predictions_{s}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        predictions(splits[s], scores(0.05, 99 + j), nll=False).to_parquet(path, index=False)
        quant[s] = [path]
    floor_dir = tmp_path / "floor"
    stage_floor(
        SimpleNamespace(
            spec={"floors": ["retrieval", "zero_shot"], "task": "generation", "model": MODEL},
            inputs={s: [p] for s, p in paths.items()} | {"base_model": []},
            outputs={"floor": floor_dir},
            root=tmp_path,
        )
    )
    inputs = {s: [p] for s, p in paths.items()}
    inputs |= {
        "runs": [tmp_path / "runs.tsv"],
        "predictions_validation": pred["validation"],
        "predictions_test": pred["test"],
        "floor": [floor_dir],
        "variants_validation": quant["validation"],
        "variants_test": quant["test"],
    }
    return tmp_path, inputs


def spec() -> dict:
    params = yaml.safe_load((REPO / "tests/fixtures/tiny_params.yaml").read_text())
    evaluation = {**params["evaluation"], "floor": ["retrieval", "zero_shot"]}
    return {
        "evaluation": evaluation,
        "task": "generation",
        "model": {"generation": MODEL["generation"]},
    }


def evaluate(tmp_path: Path, inputs: dict, given: dict | None = None, name: str = "out") -> dict:
    out = tmp_path / name
    out.mkdir(parents=True, exist_ok=True)
    outputs = {
        "metrics": out / "metrics.parquet",
        "comparisons": out / "comparisons.parquet",
        "scored_items": out / "items.parquet",
        "decisions": out / "decisions.json",
        "errors": out / "errors",
        "summary": out / "summary.txt",
    }
    stage_evaluate(SimpleNamespace(spec=given or spec(), inputs=inputs, outputs=outputs))
    return outputs


def test_the_retrieval_floor_answers_from_the_train_split_and_zero_shot_says_why_not(campaign):
    tmp_path, _ = campaign
    floor = pd.read_parquet(tmp_path / "floor" / "retrieval" / "predictions_validation.parquet")
    assert floor["id"].tolist() == [f"validation-{i:03d}" for i in range(N)]
    # "question 7 about cats" finds the train prompt with the same words; its answer is "meow"
    assert set(floor["prediction"]) == {"meow"} and "score" not in floor.columns
    skipped = (tmp_path / "floor" / "zero_shot" / "SKIPPED.txt").read_text()
    assert "from_config" in skipped
    assert not (tmp_path / "floor" / "zero_shot" / "predictions_validation.parquet").exists()


def test_generated_scores_go_through_the_statistics_and_the_verdict(campaign):
    tmp_path, inputs = campaign
    outputs = evaluate(tmp_path, inputs)
    metrics = pd.read_parquet(outputs["metrics"])
    val = metrics[metrics.split == "validation"]
    # the decision metric is the generated score's mean, per run, with its items' interval
    run = val[(val.variant == "r-c1") & (val.metric == PLANTED_METRIC)].iloc[0]
    planted = pd.read_parquet(inputs["predictions_validation"][0])["score"].mean()
    assert run.value == pytest.approx(planted) and run.ci_low < run.value < run.ci_high
    # perplexity from the answer-token losses: exp(sum nll / sum tokens)
    ppl = val[(val.variant == "r-c1") & (val.metric == "perplexity")].iloc[0]
    assert ppl.value == pytest.approx(np.exp(2.0 * (1 - planted)))
    assert not val[val.variant == "floor/retrieval"].metric.eq("perplexity").any()
    # no label metrics for generated text
    assert set(val.metric) == {PLANTED_METRIC, "perplexity"}

    comparisons = pd.read_parquet(outputs["comparisons"])
    decide = comparisons[comparisons.split == "validation"]
    main = decide[decide.kind == "main"].iloc[0]
    assert main.metric == PLANTED_METRIC and main.decision == "adopt"
    assert main.estimate == pytest.approx(0.3, abs=0.05)
    # the garbage-generating variant is rejected on its generated scores
    broken = decide[decide.subject == "r-m1/kv_broken"].iloc[0]
    assert broken.kind == "quantized" and broken.decision == "reject"
    # every cell is weighed against the retrieval floor, the floor that ran
    floors = decide[decide.kind == "floor"]
    assert set(floors.reference) == {"floor/retrieval"} and len(floors) == 2

    decisions = json.loads(outputs["decisions"].read_text())
    assert {"variant": "floor/zero_shot", "reason": (tmp_path / "floor/zero_shot/SKIPPED.txt")
            .read_text().strip()} in decisions["skipped_variants"]  # fmt: skip
    assert decisions["below_floor"] == []

    errors = outputs["errors"]
    assert not (errors / "confusion.parquet").exists()
    worst = pd.read_parquet(errors / "worst.parquet")
    mine = worst[(worst.variant == "r-c1") & (worst.split == "validation")]
    lowest = pd.read_parquet(inputs["predictions_validation"][0])["score"].min()
    assert mine.score.tolist() == sorted(mine.score) and mine.score.iloc[0] == lowest
    samples = pd.read_parquet(errors / "samples.parquet")
    assert {"reference", "prediction", "score"} <= set(samples.columns)


def test_predictions_of_other_items_are_refused_naming_the_file(campaign):
    tmp_path, inputs = campaign
    bad = inputs["predictions_validation"][1]
    frame = pd.read_parquet(bad)
    frame.loc[0, "id"] = "someone-else"
    frame.to_parquet(bad, index=False)
    with pytest.raises(CampaignError, match=rf"{bad}: its {N} ids are not the {N} items"):
        evaluate(tmp_path, inputs)


def test_a_score_outside_zero_one_is_refused_naming_the_file(campaign):
    tmp_path, inputs = campaign
    bad = inputs["predictions_test"][0]
    frame = pd.read_parquet(bad)
    frame.loc[3, "prediction"] = planted_text("too good", 1.5)
    frame.to_parquet(bad, index=False)
    with pytest.raises(
        CampaignError, match=rf"{bad}: metric {PLANTED_METRIC}, item test-003: returned 1.5"
    ):
        evaluate(tmp_path, inputs)


def test_the_evaluation_scores_the_text_not_a_score_column(campaign):
    """A producer's own `score` column (an older file's) is not what decides: the evaluation
    scores what was generated, by the metric the params name now."""
    tmp_path, inputs = campaign
    for path in inputs["predictions_validation"]:
        frame = pd.read_parquet(path)
        frame["score"] = 1.0
        frame.to_parquet(path, index=False)
    metrics = pd.read_parquet(evaluate(tmp_path, inputs)["metrics"])
    run = metrics[(metrics.variant == "r-c1") & (metrics.split == "validation")]
    assert run[run.metric == PLANTED_METRIC].value.iloc[0] < 0.6


def test_a_label_floor_for_generated_text_is_refused(tmp_path):
    ctx = SimpleNamespace(
        spec={"floors": ["tfidf_logreg"], "task": "generation", "model": MODEL},
        inputs={},
        outputs={"floor": tmp_path / "floor"},
        root=tmp_path,
    )
    with pytest.raises(CampaignError, match="evaluation.floor: tfidf_logreg is not a floor of"):
        stage_floor(ctx)


def test_the_zero_shot_floor_generates_with_the_pretrained_base(tmp_path):
    """A pretrained folder (the tiny Llama with GQA, saved): the floor prompts it with the runs'
    template and generates on every evaluation item (the evaluation scores it)."""
    from genkit import tiny_llama, tiny_tokenizer

    base = tmp_path / "base"
    tiny_llama(seed=1).save_pretrained(base)
    tiny_tokenizer().save_pretrained(base)
    talks = [conv.from_prompt_response(f"what is {w}", f"the {w}") for w in ("cat", "dog", "mat")]
    paths = {}
    for split in ("train", "validation", "test"):
        paths[split] = [tmp_path / f"{split}.parquet"]
        pd.DataFrame(
            {
                "id": [f"{split}{i}" for i in range(3)],
                "text": [conv.dedup_text(t) for t in talks],
                "messages": [conv.dump_messages(t) for t in talks],
            }
        ).to_parquet(paths[split][0])
    model = MODEL | {"source": "base", "generation": {"metric": "token_f1", "max_new_tokens": 4}}
    ctx = SimpleNamespace(
        spec={"floors": ["zero_shot"], "task": "generation", "model": model},
        inputs=paths | {"base_model": [base]},
        outputs={"floor": tmp_path / "floor", "timings": tmp_path / "timings.json"},
        root=tmp_path,
    )
    stage_floor(ctx)
    frame = pd.read_parquet(tmp_path / "floor" / "zero_shot" / "predictions_test.parquet")
    assert frame["id"].tolist() == ["test0", "test1", "test2"]
    assert frame["reference"].tolist() == ["the cat", "the dog", "the mat"]
    assert "score" not in frame.columns and (frame["new_tokens"] <= 4).all()
    assert not (tmp_path / "floor" / "retrieval").exists()  # only the floors evaluation.floor names
    timings = json.loads((tmp_path / "timings.json").read_text())
    assert timings["floors"]["floor/zero_shot"]["predict_items"] == 6


def test_the_report_shows_the_samples_escaped_with_the_generation_metric(campaign):
    """The Generated samples section of a planted campaign whose reference holds markup: the
    HTML page shows it as text; the scores table has the metric and perplexity per variant."""
    from campaign.evaluate.section import samples_section
    from campaign.report.stage import render_html

    tmp_path, inputs = campaign
    for split in ("validation", "test"):
        for path in inputs[f"predictions_{split}"]:
            frame = pd.read_parquet(path)
            frame.loc[0, "prediction"] = "<script>alert(1)</script> & co"
            frame.to_parquet(path, index=False)
    outputs = evaluate(tmp_path, inputs)
    from campaign.evaluate.records import read_decisions

    decisions = read_decisions(outputs["decisions"])
    section = samples_section(outputs["errors"], pd.read_parquet(outputs["metrics"]), decisions)
    tables = dict(section.tables)
    scores = tables["Scores per variant (validation)"]
    assert {"variant", PLANTED_METRIC, "perplexity"} <= set(scores.columns)
    assert set(scores["variant"]) >= {"r-c1", "floor/retrieval", "r-m1/kv_broken"}
    samples = tables["Samples (validation)"]
    assert samples.groupby("variant")["id"].nunique().eq(5).all()
    page = render_html("t", [replace(section, key="samples", title="Generated samples")], {})
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt; &amp; co" in page


def test_a_label_campaign_has_no_samples_section(tmp_path):
    from campaign.evaluate.section import samples_section

    (tmp_path / "errors").mkdir()
    assert samples_section(tmp_path / "errors", pd.DataFrame(), None) is None


def test_the_quantize_selection_scores_generation_runs_by_their_metric(campaign):
    """quantization.runs best_seed on a generation campaign: the runs are scored by their mean
    per-item score (the evaluation's scorer), not by label probabilities."""
    from campaign.quantize.targets import stage_select

    tmp_path, inputs = campaign
    out = tmp_path / "selection.json"
    spec = {"mode": "best_seed", "cells": None, "metric": "accuracy", "split": "validation",
            "task": "generation", "model": {"generation": MODEL["generation"]}}  # fmt: skip
    ctx = SimpleNamespace(spec=spec, inputs=inputs, outputs={"selection": out})
    stage_select(ctx)
    chosen = json.loads(out.read_text())
    assert chosen["criterion"] == f"validation.{PLANTED_METRIC}"
    planted = {
        p.parent.name: pd.read_parquet(p)["score"].mean() for p in inputs["predictions_validation"]
    }
    assert chosen["scores"] == pytest.approx(planted)
    assert chosen["runs"] == [max(planted, key=planted.get)]


def test_items_table_holds_each_generated_text_and_its_score(campaign):
    """items.parquet for generated text: every variant's text on every item, scored by the
    campaign's metric (its mean is metrics.parquet's value); the slices name that metric."""
    from campaign.evaluate.item_table import read_items_table

    tmp_path, inputs = campaign
    outputs = evaluate(tmp_path, inputs)
    items = read_items_table(outputs["scored_items"])
    variants = {"r-c1", "r-c2", "r-m1", "r-m2", "r-m1/kv_broken", "floor/retrieval"}
    assert set(items.variant) == variants and len(items) == len(variants) * 2 * N
    assert set(items.metric) == {PLANTED_METRIC}
    metrics = pd.read_parquet(outputs["metrics"])
    for split, paths in (("validation", inputs["predictions_validation"]),
                         ("test", inputs["predictions_test"])):  # fmt: skip
        written = pd.read_parquet(paths[0])
        mine = items[(items.variant == "r-c1") & (items.split == split)]
        assert mine.item.tolist() == [f"{split}-{i:03d}" for i in range(N)]
        assert mine.prediction.tolist() == written.prediction.tolist()
        assert mine.score.to_numpy() == pytest.approx(written.score.to_numpy())
        for variant in variants:
            got = items[(items.variant == variant) & (items.split == split)].score.mean()
            value = metrics[(metrics.variant == variant) & (metrics.split == split)
                            & (metrics.metric == PLANTED_METRIC)].value.item()  # fmt: skip
            assert got == pytest.approx(value)
    floor = items[items.variant == "floor/retrieval"]
    assert set(floor.prediction) == {"meow"} and set(floor.cell) == {""}
    assert floor.seed.isna().all()
    slices = pd.read_parquet(outputs["errors"] / "slices.parquet")
    assert set(slices.metric) == {PLANTED_METRIC} and "accuracy" not in slices.columns


def test_the_zero_shot_floor_refuses_a_prompt_that_spells_a_control_token(tmp_path):
    """data.special_tokens: refuse (the default) holds for the floor that prompts the base model
    too: one line naming the record, field and token, and no floor written; keep generates."""
    from genkit import tiny_llama, tiny_tokenizer

    base = tmp_path / "base"
    tiny_llama(seed=1).save_pretrained(base)
    tiny_tokenizer().save_pretrained(base)
    talks = [conv.from_prompt_response(f"what is {w}", f"the {w}") for w in ("cat", "dog")]
    talks.append(conv.from_prompt_response("what is </s> red", "the mat"))
    paths = {}
    for split in ("train", "validation", "test"):
        paths[split] = [tmp_path / f"{split}.parquet"]
        pd.DataFrame(
            {
                "id": [f"{split}{i}" for i in range(3)],
                "text": [conv.dedup_text(t) for t in talks],
                "messages": [conv.dump_messages(t) for t in talks],
            }
        ).to_parquet(paths[split][0])
    model = MODEL | {"source": "base", "generation": {"metric": "token_f1", "max_new_tokens": 4}}
    for policy in ("refuse", "keep"):
        spec = {"floors": ["zero_shot"], "task": "generation", "model": model}
        if policy == "keep":
            spec["model"] = model | {"special_tokens": "keep"}
        ctx = SimpleNamespace(
            spec=spec,
            inputs=paths | {"base_model": [base]},
            outputs={"floor": tmp_path / policy, "timings": tmp_path / f"{policy}.json"},
            root=tmp_path,
        )
        if policy == "refuse":
            with pytest.raises(CampaignError) as e:
                stage_floor(ctx)
            assert str(e.value).startswith(
                "validation record validation2: field messages[0].content holds '</s>'"
            )
            assert not (tmp_path / "refuse" / "zero_shot").exists()
        else:
            stage_floor(ctx)
            assert (tmp_path / "keep" / "zero_shot" / "predictions_test.parquet").is_file()


def test_the_items_the_runs_were_judged_on_while_training_decide_nothing(campaign):
    """model.generation.eval_items: the runs generated on those validation items while they
    trained, and train.select: best_generated chose their step by them, so the evaluation
    leaves them out of the validation split for every variant (floors and variants included);
    test keeps every item. Taking every validation item is one line naming the key."""
    from campaign.evaluate.item_table import read_items_table
    from campaign.train import judged_positions

    tmp_path, inputs = campaign
    judged = spec()
    judged["model"] = {"generation": {**MODEL["generation"], "eval_items": 10}}
    outputs = evaluate(tmp_path, inputs, judged, "judged")
    ids = [f"validation-{i:03d}" for i in range(N)]
    left_out = {ids[i] for i in judged_positions(ids, 10)}
    assert len(left_out) == 10
    items = read_items_table(outputs["scored_items"])
    for variant, rows in items.groupby("variant"):
        validation = set(rows[rows.split == "validation"].item)
        assert validation == set(ids) - left_out, variant
        assert len(rows[rows.split == "test"]) == N
    judged["model"]["generation"]["eval_items"] = N
    with pytest.raises(CampaignError, match=f"eval_items \\({N}\\) takes all {N} validation"):
        evaluate(tmp_path, inputs, judged, "all_judged")
    assert not (tmp_path / "all_judged" / "decisions.json").exists()

"""Generated scores during training (model.generation.eval_items) and the checkpoint choice
(train.select: best_generated) on a tiny from-config Llama: the curve column, its fixed
validation items, its exactness across a killed and resumed job, the chosen step's weights in
the saved model, and the refusals."""

from __future__ import annotations

import io
import json

import pandas as pd
import pytest
import torch
from trainkit import QA_PAIRS, REPO, context, tiny_generation_spec, write_conversations

from campaign.core.errors import CampaignError
from campaign.core.hashing import hash_tree
from campaign.data import conversations as conv
from campaign.train import PHASE, Trainer, checkpoint, read_data, run_training
from campaign.train.batches import Split
from campaign.train.judged import judged_subsample

pytestmark = pytest.mark.usefixtures("one_thread")

# A metric that prefers wrong answers (1 - token F1): the run learns its answers, so its later
# steps score lower and best_generated keeps an earlier step (a user metric, as
# model.generation.metric takes one: a dotted name importable from the project).
WRONG = "test_generation_curve.wrong_answers"


def wrong_answers(prediction: str, reference: str) -> float:
    from campaign.tasks.generation.text_scores import token_f1

    return 1.0 - token_f1(prediction, reference)


@pytest.fixture(scope="module")
def splits(tmp_path_factory):
    """Train on six prompt/response pairs; validation repeats four of them under ids of its
    own, test the other two: the ids of the three splits never overlap."""
    folder = tmp_path_factory.mktemp("splits")
    talks = [conv.from_prompt_response(q, a) for q, a in QA_PAIRS]
    return {
        "train": write_conversations(folder, "train", [f"t{i}" for i in range(6)], talks),
        "validation": write_conversations(
            folder, "validation", [f"v{i}" for i in range(4)], talks[:4]
        ),
        "test": write_conversations(folder, "test", ["x4", "x5"], talks[4:]),
    }


def _spec(eval_items=4, select=None, metric="token_f1", **train) -> dict:
    """40 steps at a constant lr 1e-2: the answers come in the second half (token F1 0 up to
    step 20, then 0.25 to 0.75); checkpoints every 4 steps, all kept."""
    every = {"max_steps": 40, "eval_every": 4, "checkpoint_every": 4, "keep_checkpoints": 10}
    recipe = {"max_length": 128, "micro_batch": 6, "lr": 1e-2, "schedule": "constant"}
    spec = tiny_generation_spec(**{**recipe, **every, **train})
    spec["model"]["generation"].update(eval_items=eval_items, metric=metric)
    if select is not None:
        spec["train"]["select"] = select
    return spec


def _run(spec, splits, folder, after_step=None):
    ctx = context(spec, splits, folder)
    log = io.StringIO()
    trainer = run_training(
        ctx.spec, ctx.inputs, ctx.outputs, ctx.work_dir, REPO, after_step=after_step, stream=log
    )
    return ctx, trainer, log.getvalue()


class Killed(Exception):
    """A job stopped for good after a step (its process state lost but its work folder)."""


def _kill_at(step: int):
    def after(s):
        if s == step:
            raise Killed

    return after


def test_the_curve_has_a_generated_score_per_evaluation_and_resumes_exactly(splits, tmp_path):
    spec = _spec()
    ref, trainer, _ = _run(spec, splits, tmp_path / "ref")
    metrics = pd.read_parquet(ref.outputs["metrics"])
    val = metrics[metrics["split"] == "validation"]
    assert val["step"].tolist() == list(range(4, 41, 4))
    assert val["generated"].between(0, 1).all() and val["generated"].notna().all()
    assert metrics.loc[metrics["split"] == "train", "generated"].isna().all()
    # the run learns its answers: the last generated score is higher than the first
    assert val["generated"].iloc[-1] > val["generated"].iloc[0]
    assert metrics["kept"].sum() == 1 and val.loc[val["kept"], "step"].tolist() == [40]
    # killed after step 26 (its last checkpoint: step 24), started again on the same folder
    folder = tmp_path / "killed"
    with pytest.raises(Killed):
        _run(spec, splits, folder, after_step=_kill_at(26))
    again, resumed, _ = _run(spec, splits, folder)
    assert resumed.resumed_from == 24
    for name in ("metrics", "model", "predictions_validation", "predictions_test"):
        assert hash_tree(again.outputs[name]) == hash_tree(ref.outputs[name]), name


def test_the_judged_items_are_fixed_validation_items_whatever_the_seed(splits, tmp_path):
    data = read_data(splits)
    picked = []
    for seed in (1, 2):
        spec = {**_spec(eval_items=2), "seed": seed}
        t = Trainer(spec, data, tmp_path / str(seed), root=REPO, stream=io.StringIO())
        picked.append(t.judged.ids)
    assert picked[0] == picked[1] and len(picked[0]) == 2
    assert set(picked[0]) <= set(data.validation.ids)
    assert not set(picked[0]) & (set(data.train.ids) | set(data.test.ids))
    # a rule of the ids alone: in file order, all of them when eval_items exceeds the split
    ids = [f"r{i}" for i in range(50)]
    split = Split(ids, ids, ["x"] * 50)
    some = judged_subsample(split, 10).ids
    assert len(some) == 10 and some == sorted(some, key=ids.index) and some != ids[:10]
    assert judged_subsample(split, 80).ids == ids


def test_best_generated_keeps_an_earlier_step_and_survives_a_kill(splits, tmp_path):
    """The metric prefers wrong answers, so the chosen step is early: the saved model is that
    step's checkpoint, the metrics table and the manifest name it, and a job killed after the
    choice and resumed writes the same bytes."""
    spec = _spec(select="best_generated", metric=WRONG)
    ref, trainer, log = _run(spec, splits, tmp_path / "ref")
    metrics = pd.read_parquet(ref.outputs["metrics"])
    val = metrics[metrics["split"] == "validation"]
    assert val["generated"].iloc[-1] < val["generated"].max()
    best = val["generated"].max()
    chosen = int(val.loc[val["generated"] == best, "step"].max())  # the latest of ties
    assert chosen < 24 and val.loc[val["kept"], "step"].tolist() == [chosen]
    assert f"kept step {chosen} of 40" in log
    manifest = json.loads(ref.outputs["run_manifest"].read_text())
    assert manifest["selected"]["step"] == chosen and manifest["selected"]["generated"] == best
    assert manifest["final_validation"]["step"] == chosen
    # the saved model is the chosen step's checkpoint (every 4 steps here, the last 10 kept)
    files = dict(checkpoint.checkpoint_files(ref.work_dir))
    saved = torch.load(files[chosen], map_location="cpu", weights_only=True)["model"]
    for name, value in trainer.model.state_dict().items():
        assert torch.equal(value, saved[name]), name
    # the run's own predictions are the chosen model's, not the last step's
    preds = pd.read_parquet(ref.outputs["predictions_validation"])
    last = _spec(metric=WRONG)
    other, _, _ = _run(last, splits, tmp_path / "last")
    assert not preds["prediction"].equals(
        pd.read_parquet(other.outputs["predictions_validation"])["prediction"]
    )
    # killed after step 26, past the choice (restored from the step-24 checkpoint's copy)
    folder = tmp_path / "killed"
    with pytest.raises(Killed):
        _run(spec, splits, folder, after_step=_kill_at(26))
    again, resumed, _ = _run(spec, splits, folder)
    assert resumed.resumed_from == 24
    for name in ("metrics", "model", "predictions_validation", "predictions_test"):
        assert hash_tree(again.outputs[name]) == hash_tree(ref.outputs[name]), name


def test_eval_items_and_the_metric_it_scores_by_are_in_the_run_id():
    """eval_items set (and the metric then: the train stage scores with it) makes another run;
    absent and null are one run, and without eval_items the metric stays scoring only."""
    from campaign.plan import identity

    def ident(**generation):
        spec = _spec(eval_items=None)
        spec["model"]["generation"] = {**spec["model"]["generation"], **generation}
        return identity(spec)

    off = ident()
    assert ident(eval_items=None) == off
    assert "eval_items" not in off["model"].get("generation", {})
    assert ident(metric="exact_match") == off
    assert ident(eval_items=4) != off
    assert ident(eval_items=4, metric="exact_match") != ident(eval_items=4)
    assert ident(eval_items=4)["train"] == off["train"]
    assert "select" not in off["train"]
    last = _spec(select="last")
    assert identity(last) == identity(_spec())
    assert identity(_spec(select="best_generated")) != identity(_spec())


def test_the_floors_do_not_rerun_when_the_runs_judge_their_generations():
    """eval_items and the metric it scores by change the runs, not the floors (the floor
    generates nothing during training): the floor's spec, its store key, is the same."""
    import copy

    import yaml

    from campaign.tasks.generation.floor_stage import floor_spec

    params = yaml.safe_load((REPO / "examples/smollm2-debian/describe.yaml").read_text())
    judged = copy.deepcopy(params)
    judged["model"]["generation"] |= {"eval_items": 32, "metric": "exact_match"}
    judged["train"]["select"] = "best_generated"
    assert floor_spec(judged) == floor_spec(params)


def test_best_generated_without_eval_items_is_refused_in_one_line(splits, tmp_path):
    spec = _spec(eval_items=None, select="best_generated")
    want = r"^train.select: best_generated needs model.generation.eval_items"
    with pytest.raises(CampaignError, match=want):
        PHASE.check_params({"model": spec["model"], "train": spec["train"]})
    with pytest.raises(CampaignError, match=want):
        Trainer(spec, read_data(splits), tmp_path / "work", root=REPO, stream=io.StringIO())
    # an ablation level counts as much as the baseline
    base = _spec(eval_items=None)
    params = {"model": base["model"], "train": base["train"]}
    params["ablation"] = {"factors": {"train": {"select": ["last", "best_generated"]}}}
    with pytest.raises(CampaignError, match=want):
        PHASE.check_params(params)
    PHASE.check_params(
        {"model": _spec()["model"], "train": _spec(select="best_generated")["train"]}
    )
    # a train.command run's trainer generates nothing while it trains: eval_items is refused
    for command in ("hf", {"argv": ["python", "train.py"]}):
        judged = _spec(command=command)
        with pytest.raises(CampaignError, match=r"^model.generation.eval_items: a train.command"):
            PHASE.check_params({"model": judged["model"], "train": judged["train"]})
    builtin = _spec(command="builtin")
    PHASE.check_params({"model": builtin["model"], "train": builtin["train"]})


def test_the_forecast_counts_the_generated_scores(splits, tmp_path):
    """The throughput check times the judged items' generation and puts it in each
    evaluation's time: the projected run costs more with eval_items than without, by about
    evaluations x eval_items x the measured seconds per judged item."""
    from trainkit import preflight_config, run_preflight

    from campaign.plan.projection import evaluations_per_run, run_cost

    config = preflight_config(["throughput"])
    rates = {}
    for items in (None, 4):
        report = run_preflight(_spec(eval_items=items), splits, config, tmp_path / str(items))
        assert report["throughput"]["passed"], report["throughput"]
        rates[items] = report["throughput"]["details"]["rates"]
    off, on = rates[None], rates[4]
    assert off["judged_seconds_per_evaluation"] == 0.0
    assert on["generate_seconds_per_item"] > 0
    assert on["judged_seconds_per_evaluation"] == pytest.approx(4 * on["generate_seconds_per_item"])
    n_val = 4
    assert on["eval_seconds_per_example"] == pytest.approx(
        on["loss_seconds_per_example"] + on["judged_seconds_per_evaluation"] / n_val
    )
    recipe = _spec()["train"]
    sizes = {"validation_examples": n_val, "test_examples": 2, "checkpoint_bytes": 0,
             "model_bytes": 0, "prediction_bytes": 0, "log_bytes": 0}  # fmt: skip
    evaluation = run_cost(recipe, recipe, on, sizes)["parts"]["evaluation"]
    judged = evaluations_per_run(40, 4) * on["judged_seconds_per_evaluation"]
    assert evaluation == pytest.approx(
        evaluations_per_run(40, 4) * n_val * on["loss_seconds_per_example"] + judged
    )


def test_a_judged_run_counts_its_metric_s_code_and_libraries_in_its_key(tmp_path, monkeypatch):
    """With eval_items the train stage scores with the metric (and best_generated keeps the
    step it ranks first): an edited user metric's module, or a new version of the library a
    built-in metric computes with, trains again, as it rescores in the evaluation."""
    from campaign.train.command import derive_inputs, key_view

    module = tmp_path / "house_metric_t.py"
    module.write_text("def score(p, r):\n    return float(p == r)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    judged = _spec(eval_items=4, metric="house_metric_t.score")
    assert derive_inputs(judged, tmp_path)["metric_code"] == [module]
    unjudged = _spec(eval_items=None, metric="house_metric_t.score")
    assert derive_inputs(unjudged, tmp_path)["metric_code"] == []
    similarity = key_view(_spec(eval_items=4, metric="similarity"))
    assert "rapidfuzz" in similarity["metric_libraries"]
    assert "metric_libraries" not in key_view(_spec(eval_items=None, metric="similarity"))
    assert "metric_libraries" not in key_view(_spec(eval_items=4, metric="token_f1"))


def test_the_disk_check_sizes_a_checkpoint_with_the_kept_step_s_copy(splits, tmp_path):
    """best_generated: every checkpoint after the first judged step also holds the kept step's
    trainable state, so the preflight's checkpoint (which the plan multiplies by
    keep_checkpoints) is larger by about that state than with select last."""
    from trainkit import preflight_config, run_preflight

    config = preflight_config(["disk"])
    sizes = {}
    for select in ("last", "best_generated"):
        report = run_preflight(_spec(select=select), splits, config, tmp_path / select)
        sizes[select] = report["disk"]["details"]["checkpoint_bytes"]
    assert sizes["best_generated"] > 1.2 * sizes["last"]

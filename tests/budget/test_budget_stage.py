"""The budget stage on small hand-made inputs: the tables, the summary's words, the cost at
equal quality, and one-line errors on bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from campaign.budget import PHASE
from campaign.budget.stage import stage_budget
from campaign.core.errors import CampaignError
from campaign.core.runner import StageContext

RUNS = ["run-a", "run-b", "run-c", "run-d"]
BUDGET = {
    "currency": "EUR",
    "offers": [
        {"name": "box", "gpu": "cpu", "memory_gib": 16, "peak_tflops": 1.0, "hourly": 2.0,
         "hourly_gpus": 1, "packages": []},
        {"name": "cloud", "gpu": "A100", "memory_gib": 80, "peak_tflops": 1e-9, "hourly": 10.0,
         "hourly_gpus": 1, "packages": [{"days": 3, "price": 50.0, "gpus": 1}]},
    ],
    "reference_offer": "box",
    "margin": 0.5,
    "deadline_hours": 100,
    "utilization": 0.5,
    "predictions": 360000,
    "min_pairs": 2,
    "resamples": 200,
    "seed": 0,
}  # fmt: skip
RECIPE = {"max_steps": 10, "micro_batch": 2, "grad_accum": 1, "max_length": 8, "eval_every": 10}


def write_inputs(
    root: Path, finished=("run-a", "run-b"), tsv_extra="", quantized=True, verdict=None
) -> dict:
    """A plan of 4 runs projected at 1 h each; the finished ones took 1.5 h of steps and 2 h
    in all (0.5 h overhead); run-d is cut by the plan. The chosen cell is run-a's, chosen on
    validation (0.9) and reported on test (0.85 [0.80, 0.90]); the TF-IDF floor fits in 360 s
    and predicts 1,000 items a second (test 0.90 [0.86, 0.94])."""
    lines = ["run\ttrain.lr\tseed\ttier\tprojected_hours\tcumulative_hours\tprojected_bytes\tkept"]
    for i, run in enumerate(RUNS):
        kept = "false" if run == "run-d" else "true"
        lr = {"run-a": "0.001", "run-b": "0.001", "run-c": "0.002"}.get(run, "0.003")
        lines.append(f"{run}\t{lr}\t{i}\tmain\t1.0\t{i + 1}.0\t100\t{kept}{tsv_extra}")
    (root / "runs.tsv").write_text("\n".join(lines) + "\n")
    report = {
        "memory": {"details": {"estimate_for_cards": {
            "peak_bytes": 2**30, "model": {"n_params": 1000, "n_trainable": 1000}}}},
        "disk": {"details": {"validation_examples": 10, "test_examples": 10}},
    }  # fmt: skip
    (root / "report.json").write_text(json.dumps(report))
    (root / "measurements.json").write_text("{}")
    inputs = {
        "runs": [root / "runs.tsv"],
        "preflight_report": [root / "report.json"],
        "preflight_measurements": [root / "measurements.json"],
        "run_manifests": [],
        "timings": [],
        "benchmarks": [],
        "decisions": [root / "decisions.json"],
        "metrics": [root / "metrics.parquet"],
        "variants": [root / "variants.parquet"] if quantized else [],
        "floor_timings": [root / "floor_timings.json"],
    }
    for run in finished:
        folder = root / "runs" / run
        folder.mkdir(parents=True)
        (folder / "run_manifest.json").write_text("{}")
        timings = {"device": {"type": "cpu", "name": "AMD EPYC"}, "train_seconds": 5400.0,
                   "wall_seconds": 7200.0, "resumed_from_step": None}  # fmt: skip
        (folder / "timings.json").write_text(json.dumps(timings))
        bench = root / "bench" / f"{run}.tsv"
        bench.parent.mkdir(exist_ok=True)
        bench.write_text("s\th:m:s\tmax_rss\tmax_vms\n7201.5\t2:00:01\t512.0\t1024.0\n")
        inputs["run_manifests"].append(folder / "run_manifest.json")
        inputs["timings"].append(folder / "timings.json")
        inputs["benchmarks"].append(bench)
    decisions = {
        "decide_on": "validation",
        "metric": "accuracy",
        "best_cell": {
            "cell": "train.lr=0.001", "runs": ["run-a"], "value": 0.9, "ci_low": 0.88,
            "ci_high": 0.92, "chosen_on": "validation", "reported_on": "test",
            "reported": {"value": 0.85, "ci_low": 0.80, "ci_high": 0.90},
            "representative_run": "run-a",
        },
        "verdict": verdict or {"keep": "train.lr=0.001", "kind": "cell"},
        "decisions": [
            {"kind": "quantized", "subject": "run-a/int8_dynamic", "reference": "run-a",
             "decision": "adopt"},
            {"kind": "quantized", "subject": "run-a/int4", "reference": "run-a",
             "decision": "reject"},
            {"kind": "main", "subject": "train.lr", "reference": "control",
             "decision": "inconclusive", "n_seeds": 2, "seeds_needed": 5, "dominant": "seeds",
             "items_needed": 4000, "seeds_needed_low": 3, "seeds_needed_high": 12},
            {"kind": "main", "subject": "train.warmup", "reference": "control",
             "decision": "inconclusive", "n_seeds": 2, "seeds_needed": None,
             "dominant": "items", "items_needed": 9000},
            {"kind": "main", "subject": "train.max_length", "reference": "control",
             "decision": "inconclusive (one seed)", "n_seeds": 1},
            {"kind": "main", "subject": "model.dropout", "reference": "control",
             "decision": "reject", "n_seeds": 2, "seeds_needed": None},
        ],
    }  # fmt: skip
    (root / "decisions.json").write_text(json.dumps(decisions))
    pd.DataFrame(
        {
            "variant": ["run-a", "run-a", "floor/tfidf_logreg", "floor/tfidf_logreg"],
            "split": ["validation", "test", "validation", "test"],
            "metric": ["accuracy"] * 4,
            "value": [0.9, 0.85, 0.95, 0.90],
            "ci_low": [0.88, 0.80, 0.93, 0.86],
            "ci_high": [0.92, 0.90, 0.97, 0.94],
        }
    ).to_parquet(root / "metrics.parquet")
    timed = {"fit_seconds": 360.0, "predict_seconds": 2.0, "predict_items": 2000,
             "throughput": 1000.0}  # fmt: skip
    floors = {"floors": {"floor/tfidf_logreg": timed}, "repeats": 1, "items": 2000}
    (root / "floor_timings.json").write_text(json.dumps(floors))
    pd.DataFrame(
        {
            "run": ["run-a", "run-a", "run-a"],
            "variant": ["fp32", "int8_dynamic", "int4"],
            "status": ["ok", "ok", "ok"],
            "throughput": [100.0, 400.0, 1000.0],
            "weight_file": ["model.safetensors", "state_dict.pt", "state_dict.pt"],
        }
    ).to_parquet(root / "variants.parquet")
    return inputs


def run_stage(
    root: Path, inputs: dict, budget: dict = BUDGET, recipe: dict = RECIPE, runs=RUNS
) -> dict[str, Path]:
    out = root / "out"
    out.mkdir(exist_ok=True)
    names = next(s for s in PHASE.stages if s.name == "budget").outputs
    outputs = {
        n: out / (n.rsplit("_", 1)[0] + "." + n.rsplit("_", 1)[1] if n != "summary" else n)
        for n in names
    }
    spec = {
        "budget": budget,
        "recipes": dict.fromkeys(runs, recipe | {"lora": None}),
    }
    ctx = StageContext("budget", spec, inputs, outputs, root / "work", root)
    stage_budget(ctx)
    return outputs


def test_forecast_jobs_and_plans(tmp_path):
    out = run_stage(tmp_path, write_inputs(tmp_path))
    jobs = pd.read_csv(out["jobs_csv"])
    # 2 h of wall time at 2.00/h on the reference offer; peak memory 512 MiB from the benchmark
    # (the timings hold no peak here)
    assert jobs["cost"].tolist() == [4.0, 4.0]
    assert jobs["peak_memory_bytes"].tolist() == [512 * 2**20] * 2
    assert jobs["device"].tolist() == ["AMD EPYC"] * 2
    forecast = pd.read_parquet(out["forecast_parquet"]).set_index("run")
    # Steps x1.5, + 0.5 h a job: an unfinished run projected at 1 h is forecast at 2 h.
    assert forecast.loc["run-c", "forecast_hours"] == pytest.approx(2.0)
    assert forecast.loc["run-a", "abs_error_projected"] == pytest.approx(0.5)
    assert forecast.loc["run-c", "step_factor"] == pytest.approx(1.5)
    plans = pd.read_csv(out["plans_csv"])
    rest = plans[plans["scenario"] == "rest"].set_index(["offer", "pricing"])
    # The rest: run-c and run-d, 2 h each on the measured cpu, +50 % margin: 3 h each, 6 h
    # at 2.00/h on one card = 12.00, done in 6 h.
    box = rest.loc[("box", "hourly")]
    assert (box["card_hours"], box["cost"], box["wall_hours"]) == (6.0, 12.0, 6.0)
    assert bool(box["cheapest"])
    # cloud: no A100 was measured, so FLOPs: 6 x 1000 x (10 x 2 x 8) + 2 x 1000 x 2 passes x
    # 20 examples x 8 tokens = 1.6e6 FLOPs a run at 50 % of 1e3 FLOP/s = 3200 s, plus the
    # measured 0.5 h overhead a job: 25/18 h, +50 %: 25/12 h a run, 25/6 card-hours, 41.67 at
    # 10.00/h; the 3-day package (50.00) is dearer.
    cloud = rest.loc[("cloud", "hourly")]
    assert cloud["hours_from"] == "FLOPs at 50% of 1e-09 TFLOP/s + measured job overhead"
    assert cloud["card_hours"] == pytest.approx(25 / 6)
    assert cloud["cost"] == pytest.approx(250 / 6)
    offers = pd.read_csv(out["offers_csv"]).set_index(["offer", "pricing"])
    assert offers.loc[("cloud", "3-day package"), "verdict"] == "dearer than hourly"
    assert offers.loc[("cloud", "3-day package"), "break_even_card_hours"] == 5.0
    summary = out["summary"].read_text()
    assert "The rest: 2 run(s) (1 kept, 1 cut by the plan)" in summary
    assert "Measured: 2 finished run(s), 4.0 h, 8.00 EUR." in summary


def test_a_run_on_two_cards_is_paid_and_scheduled_on_both(tmp_path):
    # Every run with train.devices 2; box rents 2 cards by the hour, cloud 1.
    box, cloud = BUDGET["offers"]
    two = BUDGET | {"offers": [box | {"hourly_gpus": 2}, cloud]}
    out = run_stage(tmp_path, write_inputs(tmp_path), two, RECIPE | {"devices": 2})
    jobs = pd.read_csv(out["jobs_csv"])
    # 2 h of wall time holding 2 cards: 4 card-hours at 2.00 a card-hour = 8.00 a run.
    assert (
        jobs[["wall_hours", "cards", "card_hours", "cost"]].values.tolist()
        == [[2.0, 2, 4.0, 8.0]] * 2
    )
    assert pd.read_csv(out["forecast_csv"])["cards"].tolist() == [2] * 4
    rest = pd.read_csv(out["plans_csv"]).query("scenario == 'rest'").set_index(["offer", "pricing"])
    # run-c and run-d, 2 h forecast +50 % = 3 h each, each on both of box's cards: one after
    # the other, done in 6 h, 12 card-hours, 24.00 (a card a run: side by side in 3 h, 12.00).
    assert rest.loc[("box", "hourly"), ["wall_hours", "card_hours", "cost"]].tolist() == [
        6.0, 12.0, 24.0
    ]  # fmt: skip
    # cloud has one card by the hour and 1-card packages: a 2-card run cannot run there.
    hourly = rest.loc[("cloud", "hourly")]
    assert not hourly["meets_deadline"]
    assert hourly["why_not"] == "a run takes 2 cards, the offer rents 1 by the hour"
    package = rest.loc[("cloud", "3-day package x1 + hourly")]
    assert package["why_not"].startswith("2 run(s) do not fit its 1 card(s) x 72 h")
    # 2 h x 2 cards +50 % = 6 card-hours a run; to 5 seeds, 3 + 4 runs (test_what_deciding_...):
    # 42 card-hours, 84.00.
    lr = pd.read_csv(out["to_decide_csv"]).set_index("subject").loc["train.lr"]
    assert (lr["hours_per_run"], lr["extra_hours"], lr["cost"]) == (6.0, 42.0, 84.0)
    summary = out["summary"].read_text()
    assert (
        "Measured: 2 finished run(s), 4.0 h (8 card-hours: runs on several cards), 16.00 EUR."
        in summary
    )


def test_equal_quality_names_the_cheapest_variant(tmp_path):
    out = run_stage(tmp_path, write_inputs(tmp_path))
    eq = pd.read_csv(out["equal_quality_csv"]).set_index("variant")
    # 360,000 predictions: fp32 at 100/s = 1 h = 2.00, int8 at 400/s = 0.25 h = 0.50; training
    # run-a cost 4.00. The rejected int4 is not at the bar, however fast.
    assert sorted(eq.index) == ["run-a", "run-a/int8_dynamic"]
    assert eq.loc["run-a", "total_cost"] == pytest.approx(6.0)
    assert eq.loc["run-a/int8_dynamic", "total_cost"] == pytest.approx(4.5)
    assert eq["cheapest"].tolist() == [False, True]
    # Each candidate's quality on the split the cell was not chosen on (test), when measured.
    assert eq.loc["run-a", ["quality_split", "quality", "quality_low"]].tolist() == [
        "test", 0.85, 0.80,
    ]  # fmt: skip
    summary = out["summary"].read_text()
    # The verdict block keeps the same variant and names the file to ship.
    ship = tmp_path / "run-a" / "int8_dynamic" / "model" / "state_dict.pt"
    assert f"\n  Ship: {ship.as_posix()}\n" in summary.partition("\n\n")[0]
    lines = after_verdict(summary).splitlines()
    assert lines[0] == (
        "At equal quality, keep run-a/int8_dynamic: 4.00 EUR to train + 0.50 EUR to serve "
        "360,000 predictions = 4.50 EUR."
    )
    # The bar: the chosen cell's test number, not its validation 0.9 (where it was chosen).
    assert lines[1] == (
        "Quality bar: the chosen cell train.lr=0.001 (chosen on validation), test accuracy "
        "85.0 % [80.0, 90.0]."
    )
    # The floor is cheaper (0.40 EUR) but the evaluation kept the cell: not a candidate.
    assert "floor" not in " ".join(eq.index)


def test_without_the_quantization_table_serving_is_unknown(tmp_path):
    out = run_stage(tmp_path, write_inputs(tmp_path, quantized=False))
    eq = pd.read_csv(out["equal_quality_csv"])
    assert eq["variant"].tolist() == ["run-a", "run-a/int8_dynamic"]
    assert eq["total_cost"].isna().all()
    assert "no variant has both a training and a serving cost" in out["summary"].read_text()


def test_a_deadline_rules_out_the_reference_offer(tmp_path):
    # 6 card-hours on one cpu card take 6 h: a 5 h deadline leaves the cloud only (4.17 h).
    out = run_stage(tmp_path, write_inputs(tmp_path), BUDGET | {"deadline_hours": 5})
    plans = pd.read_csv(out["plans_csv"])
    best = plans[(plans["scenario"] == "rest") & plans["cheapest"]]
    assert best[["offer", "pricing"]].values.tolist() == [["cloud", "hourly"]]
    assert best["cost"].tolist() == [pytest.approx(250 / 6)]
    assert "Ruled out: box: takes 6.0 h on 1 card(s), deadline 5 h." in out["summary"].read_text()


def test_a_plan_table_with_more_columns_is_read_by_name(tmp_path):
    inputs = write_inputs(tmp_path, tsv_extra="\t0.5")
    text = (tmp_path / "runs.tsv").read_text().replace("\tkept\n", "\tkept\tprojected_cost\n", 1)
    (tmp_path / "runs.tsv").write_text(text)
    out = run_stage(tmp_path, inputs)
    assert len(pd.read_csv(out["forecast_csv"])) == 4


def test_bad_inputs_fail_in_one_line(tmp_path):
    inputs = write_inputs(tmp_path)
    text = (tmp_path / "runs.tsv").read_text().replace("projected_hours", "hours", 1)
    (tmp_path / "runs.tsv").write_text(text)
    with pytest.raises(CampaignError, match=r"runs.tsv: expected a column 'projected_hours'"):
        run_stage(tmp_path, inputs)


def test_a_measured_run_outside_the_plan_fails(tmp_path):
    inputs = write_inputs(tmp_path, finished=("run-a", "run-x"))
    with pytest.raises(CampaignError, match="run run-x: measured but not in the plan table"):
        run_stage(tmp_path, inputs)


FLOOR_WINS = {"keep": "floor/tfidf_logreg", "kind": "floor"}


def test_a_floor_better_than_the_chosen_cell_and_cheaper_is_the_first_line(tmp_path):
    out = run_stage(tmp_path, write_inputs(tmp_path, verdict=FLOOR_WINS))
    eq = pd.read_csv(out["equal_quality_csv"]).set_index("variant")
    # The floor at 2.00/h: a 360 s fit = 0.1 h = 0.20; 360,000 predictions at 1,000/s =
    # 0.1 h = 0.20; 0.40 in all, against 4.50 for the cheapest fine-tune (int8, above).
    floor = eq.loc["floor/tfidf_logreg"]
    assert (floor["kind"], floor["train_cost"], floor["serve_cost"]) == ("floor", 0.2, 0.2)
    assert floor["total_cost"] == pytest.approx(0.4) and bool(floor["cheapest"])
    assert floor["quality"] == 0.90 and floor["decision"] == "better than the chosen cell"
    first = after_verdict(out["summary"].read_text()).splitlines()[0]
    assert first == (
        "Keep the reference floor floor/tfidf_logreg: the chosen cell train.lr=0.001 is below "
        "it by the evaluation's test, and it is cheaper: 0.20 EUR to train + 0.20 EUR to serve "
        "360,000 predictions = 0.40 EUR, against 4.50 EUR for the cheapest fine-tune "
        "(run-a/int8_dynamic)."
    )


def test_the_bar_and_the_floors_from_the_decisions():
    from campaign.budget import stage
    from campaign.evaluate import decisions_from_dict

    def quality_bar(d: dict):
        return stage.quality_bar(decisions_from_dict(d))

    def floors_at_bar(d: dict):
        return stage.floors_at_bar(decisions_from_dict(d))

    best = {"cell": "c1", "value": 0.9, "ci_low": 0.88, "ci_high": 0.92, "runs": ["r1"]}
    older = {"decide_on": "validation", "metric": "accuracy", "best_cell": best}
    # Without a reported split, the chosen split's number stands in, marked optimistic; an
    # older evaluation's by_split gives the other split's.
    bar = quality_bar(older)
    assert (bar["split"], bar["value"], bar["optimistic"]) == ("validation", 0.9, True)
    by_split = {"validation": {"value": 0.9}, "test": {"value": 0.75, "ci_low": 0.7}}
    bar = quality_bar(older | {"best_cell": best | {"by_split": by_split}})
    assert (bar["split"], bar["value"], bar["ci_low"], bar["optimistic"]) == (
        "test", 0.75, 0.7, False,
    )  # fmt: skip
    newer = older | {
        "best_cell": best | {"reported_on": "test", "reported": {"value": 0.8, "ci_low": 0.7,
                                                                   "ci_high": 0.9}},
    }  # fmt: skip
    bar = quality_bar(newer)
    assert (bar["split"], bar["value"], bar["optimistic"]) == ("test", 0.8, False)
    assert quality_bar(older | {"best_cell": None}) is None
    # The verdict decides; only an evaluation without one is read from its floor flags, and
    # only a floor the chosen cell is shown below counts ("not shown above" is not enough).
    assert floors_at_bar(newer | {"verdict": FLOOR_WINS}) == ["floor/tfidf_logreg"]
    assert floors_at_bar(newer | {"verdict": {"keep": "c1", "kind": "cell"}}) == []
    flags = [
        {"cell": "c1", "floor": "floor/tfidf_logreg", "verdict": "below floor"},
        {"cell": "c1", "floor": "floor/majority", "verdict": "not shown above floor"},
        {"cell": "c2", "floor": "floor/other", "verdict": "below floor"},
    ]
    assert floors_at_bar(older | {"below_floor": flags}) == ["floor/tfidf_logreg"]


def test_what_deciding_an_open_effect_would_cost(tmp_path):
    out = run_stage(tmp_path, write_inputs(tmp_path))
    rows = pd.read_csv(out["to_decide_csv"]).set_index("subject")
    # Kept runs a, b (2 h each, measured) and c (forecast 2 h): 2 h a run, +50 % margin = 3 h,
    # in 2 cells (run-d's is cut): lr 0.001 has 2 seeds (a, b), lr 0.002 one (c). 5 seeds per
    # cell: 3 + 4 = 7 runs, 21 h, 42.00 EUR at 2.00/h. One seed: a second one where a cell has
    # one, 1 run, 3 h, 6.00 EUR. A rejected effect is decided: not listed.
    assert sorted(rows.index) == ["train.lr", "train.max_length", "train.warmup"]
    lr = rows.loc["train.lr"]
    assert (lr["extra_runs"], lr["extra_hours"], lr["cost"]) == (7, 21.0, 42.0)
    # 3 to 12 seeds with the seed spread's uncertainty: 1 + 2 = 3 or 10 + 11 = 21 runs.
    assert (lr["cost_low"], lr["cost_high"]) == (18.0, 126.0)
    assert rows.loc["train.max_length", "cost"] == 6.0
    assert pd.isna(rows.loc["train.warmup", "extra_runs"])
    text = out["summary"].read_text()
    assert (
        "To decide train.lr (inconclusive; seeds dominate its variance): 5 seeds per cell (3 to "
        "12 with the spread's error): 7 more run(s) (2 cell(s)), 21.0 h on cpu, 42.00 EUR "
        "(18.00 EUR to 126.00 EUR) at box; or 4,000 evaluation items (labelling not priced)."
        in text
    )
    assert (
        "To decide train.warmup (inconclusive; items dominate its variance): more seeds alone "
        "cannot; 9,000 evaluation items would (not priced)." in text
    )


def test_a_better_floor_is_named_in_the_first_line_even_when_dearer(tmp_path):
    inputs = write_inputs(tmp_path, verdict=FLOOR_WINS)
    timed = json.loads((tmp_path / "floor_timings.json").read_text())
    timed["floors"]["floor/tfidf_logreg"]["fit_seconds"] = 36000.0  # 10 h: 20.00 EUR
    (tmp_path / "floor_timings.json").write_text(json.dumps(timed))
    out = run_stage(tmp_path, inputs)
    assert after_verdict(out["summary"].read_text()).splitlines()[0] == (
        "Keep the reference floor floor/tfidf_logreg: the chosen cell train.lr=0.001 is below it "
        "by the evaluation's test, though dearer: 20.00 EUR to train + 0.20 EUR to serve 360,000 "
        "predictions = 20.20 EUR, against 4.50 EUR for the cheapest fine-tune "
        "(run-a/int8_dynamic)."
    )  # quality first, as the verdict block keeps it
    # No fine-tune with a known serving cost: the floor is kept for its quality, not "cheaper".
    out = run_stage(tmp_path / "b", write_inputs(_mkdir(tmp_path / "b"), quantized=False,
                                                 verdict=FLOOR_WINS))  # fmt: skip
    first = after_verdict(out["summary"].read_text()).splitlines()[0]
    assert first.startswith(
        "Keep the reference floor floor/tfidf_logreg: the chosen cell train.lr=0.001 is below it "
        "by the evaluation's test; it costs 0.20 EUR to train"
    )
    assert first.endswith("(no fine-tune at the bar has a known serving cost).")


def after_verdict(summary: str) -> str:
    """The summary after its opening verdict block (tests/budget/test_verdict_block.py)."""
    block, blank, rest = summary.partition("\n\n")
    assert blank and block.startswith("Verdict ("), summary[:200]
    return rest


def _mkdir(path):
    path.mkdir()
    return path


def adaptive_inputs(root: Path, looks: list[dict], finished=("run-a", "run-b")) -> dict:
    """write_inputs' plan with two adaptive candidates after it (run-e in run-a's cell, run-f
    in run-c's, 1 h projected each, not kept), and the looks given as look_<j>.json."""
    inputs = write_inputs(root, finished=finished)
    with open(root / "runs.tsv", "a") as f:
        for run, lr in (("run-e", "0.001"), ("run-f", "0.002")):
            f.write(f"{run}\t{lr}\t5\tadaptive\t1.0\t5.0\t100\tfalse\n")
    inputs["looks"] = []
    for j, look in enumerate(looks, start=1):
        (root / f"look_{j}.json").write_text(json.dumps({"look": j, **look}))
        inputs["looks"].append(root / f"look_{j}.json")
    return inputs


ADAPTIVE_RUNS = [*RUNS, "run-e", "run-f"]
ASKED = {"runs": ["run-a", "run-b", "run-c", "run-e"], "appended": ["run-e"], "final": False}


def test_an_adaptive_campaign_prices_the_runs_its_last_look_lists(tmp_path):
    # Look 1 appended run-e to run-a's cell; look 2 was the last. run-e is trained (2 h, as
    # run-a and run-b); run-f no look asked for.
    last = ASKED | {"appended": [], "final": True}
    inputs = adaptive_inputs(tmp_path, [ASKED, last], finished=("run-a", "run-b", "run-e"))
    out = run_stage(tmp_path, inputs, runs=ADAPTIVE_RUNS)
    forecast = pd.read_parquet(out["forecast_parquet"]).set_index("run")
    assert "run-f" not in forecast.index
    assert forecast.loc["run-e", "kept"] and forecast.loc["run-e", "finished"]
    plans = pd.read_csv(out["plans_csv"]).set_index(["scenario", "offer", "pricing"])
    # The kept plan: run-a, b, e (2 h each, measured) and run-c (projected 1 h: steps x1.5 +
    # 0.5 h = 2 h), +50 %: 12 card-hours, 24.00 at 2.00/h. The rest: run-c and run-d (cut by
    # the plan), 6 card-hours, 12.00; run-f is not part of it.
    assert plans.loc[("kept plan", "box", "hourly"), ["runs", "cost"]].tolist() == [4, 24.0]
    assert plans.loc[("rest", "box", "hourly"), ["runs", "cost"]].tolist() == [2, 12.0]
    summary = out["summary"].read_text()
    assert "Measured: 3 finished run(s), 6.0 h, 12.00 EUR." in summary
    assert (
        "Adaptive campaign, last look (2) taken: the kept plan is the 4 run(s) it lists (1 "
        "appended by the looks); 1 adaptive run(s) (1.0 h projected) no look asked for are "
        "left out." in summary
    )
    assert "The rest: 2 run(s) (1 kept, 1 cut by the plan)" in summary


def test_between_looks_an_appended_run_not_trained_is_the_rest(tmp_path):
    out = run_stage(tmp_path, adaptive_inputs(tmp_path, [ASKED]), runs=ADAPTIVE_RUNS)
    plans = pd.read_csv(out["plans_csv"]).set_index(["scenario", "offer", "pricing"])
    # The rest: run-c, run-e (appended, 1 h projected: 2 h forecast) and run-d: 9 card-hours.
    assert plans.loc[("rest", "box", "hourly"), ["runs", "cost"]].tolist() == [3, 18.0]
    summary = out["summary"].read_text()
    assert "The rest: 3 run(s) (2 kept, 1 cut by the plan)" in summary
    assert (
        "Adaptive campaign between looks (1 taken, not the last): the kept plan is the 4 run(s) "
        "look 1 lists (1 appended by the looks); a later look may ask for any of 1 adaptive "
        "run(s) (1.0 h projected) not asked for yet, left out here." in summary
    )
    # A run trained that no look asked for is refused.
    (tmp_path / "x").mkdir()
    inputs = adaptive_inputs(tmp_path / "x", [ASKED], finished=("run-a", "run-f"))
    with pytest.raises(CampaignError, match=r"run run-f: measured but no look of the campaign"):
        run_stage(tmp_path / "x", inputs, runs=ADAPTIVE_RUNS)


def test_guard_benchmarks_are_priced_in_the_plans(tmp_path):
    """evaluation.guards adds one lm-eval job per run and guard task and one per task for the
    base: each priced at one job's overhead (here 0.5 h: 2 h wall, 1.5 h of steps), in the
    plans beside the runs. The rest (run-c, run-d) gains their 2 guard jobs: 6 h of runs and
    2 x 0.5 h, +50 % margin: 7.5 card-hours, 15.00 at 2.00/h; the kept plan holds 4 (3 kept
    runs and the base)."""
    inputs = write_inputs(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    names = next(s for s in PHASE.stages if s.name == "budget").outputs
    outputs = {
        n: out / (n.rsplit("_", 1)[0] + "." + n.rsplit("_", 1)[1] if n != "summary" else n)
        for n in names
    }
    spec = {
        "budget": BUDGET,
        "recipes": dict.fromkeys(RUNS, RECIPE | {"lora": None}),
        "guards": ["tiny_guard"],
    }
    stage_budget(StageContext("budget", spec, inputs, outputs, tmp_path / "work", tmp_path))
    plans = pd.read_csv(outputs["plans_csv"]).set_index(["scenario", "offer", "pricing"])
    rest = plans.loc[("rest", "box", "hourly")]
    assert (rest["runs"], rest["guard_jobs"], rest["guard_card_hours"]) == (2, 2, 1.5)
    assert (rest["card_hours"], rest["cost"]) == (7.5, 15.0)
    kept = plans.loc[("kept plan", "box", "hourly")]
    assert (kept["runs"], kept["guard_jobs"]) == (3, 4)
    assert "Guard benchmarks (1 task(s)" in outputs["summary"].read_text()
    forecast = pd.read_parquet(outputs["forecast_parquet"])
    assert len(forecast) == len(RUNS)  # the forecast stays the runs'


def test_guard_jobs_before_any_job_finished_are_not_priced():
    from campaign.budget import words
    from campaign.budget.calibrate import NO_CALIBRATION
    from campaign.budget.stage import guard_jobs

    forecast = [{"run": "run-a", "kept": True, "finished": False}]
    assert guard_jobs(forecast, NO_CALIBRATION, [], ["tiny_guard"]) == []
    assert "not priced yet" in words.guard_words([], [], ["tiny_guard"])
    assert words.guard_words([], [], []) == ""

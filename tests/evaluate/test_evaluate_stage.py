"""The evaluate stage on planted predictions whose answers are known by construction: metrics,
effects paired by seed, quantized variants against their reference (items fixed and broken), the
floor flag, decisions in words, and one-line errors for predictions that do not match the items."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import yaml

from campaign.core.errors import CampaignError
from campaign.core.io import cell_id
from campaign.evaluate.records import Skipped, read_decisions
from campaign.evaluate.stage import stage_evaluate, stage_floor

REPO = Path(__file__).resolve().parents[2]
N = 400  # items per evaluation split
LABELS = ["neg", "pos"]


def split_frame(split: str, n: int) -> pd.DataFrame:
    rng = np.random.default_rng(len(split))
    labels = np.where(np.arange(n) % 2 == 0, "neg", "pos")
    return pd.DataFrame(
        {
            "id": [f"{split}-{i:03d}" for i in range(n)],
            "text": [
                ("good " if lab == "pos" else "bad ") * int(k)
                for lab, k in zip(labels, rng.integers(1, 200, n), strict=True)
            ],
            "label": labels,
            "group": [f"g{i // 4}" for i in range(n)],
            "source": np.where(np.arange(n) < n // 2, "a.jsonl", "b.jsonl"),
            "unit": [f"u{i // 4}" for i in range(n)],
            "duplicate_cluster": [f"c{i}" if i % 10 == 0 else None for i in range(n)],
        }
    )


def predictions(items: pd.DataFrame, right: np.ndarray) -> pd.DataFrame:
    """A model right exactly on `right` (bool per item), confident 0.9."""
    truth = (items["label"] == "pos").to_numpy()
    says_pos = np.where(right, truth, ~truth)
    return pd.DataFrame(
        {
            "id": items["id"],
            "label": items["label"],
            "prediction": np.where(says_pos, "pos", "neg"),
            "score_neg": np.where(says_pos, 0.1, 0.9),
            "score_pos": np.where(says_pos, 0.9, 0.1),
        }
    )


def settings(**over) -> dict:
    params = yaml.safe_load((REPO / "tests/fixtures/tiny_params.yaml").read_text())
    return {"evaluation": {**params["evaluation"], **over}, "task": "sequence_classification"}


def right_first(k: int, n: int = N) -> np.ndarray:
    return np.arange(n) < k


@pytest.fixture
def campaign(tmp_path):
    """Splits, a plan table (control lr=0.001 and lr=0.003, seeds 1 to 3; a third cell that is
    worse than always saying one label), runs' predictions, a quantized variant, the majority
    floor (the TF-IDF floor has its own tests)."""
    splits = {s: split_frame(s, n) for s, n in (("train", 400), ("validation", N), ("test", N))}
    paths = {}
    for s, frame in splits.items():
        paths[s] = tmp_path / f"{s}.parquet"
        frame.to_parquet(paths[s], index=False)
    plan = [  # run, lr, seed, tier, items right (the first k)
        ("r-c1", "0.001", 1, "control", 260),  # accuracy 0.65
        ("r-c2", "0.001", 2, "extra_seed", 280),  # 0.70
        ("r-c3", "0.001", 3, "extra_seed", 270),  # 0.675
        ("r-m1", "0.003", 1, "main", 340),  # 0.85: +0.20 at seed 1
        ("r-m2", "0.003", 2, "extra_seed", 356),  # 0.89: +0.19 at seed 2
        ("r-m3", "0.003", 3, "extra_seed", 354),  # 0.885: +0.21 at seed 3
        ("r-w1", "0.01", 1, "main", 120),  # 0.30: below the floor (majority 0.5)
        ("r-w2", "0.01", 2, "extra_seed", 140),  # 0.35
        ("r-w3", "0.01", 3, "extra_seed", 130),  # 0.325
    ]
    lines = ["run\ttrain.lr\tseed\ttier\tprojected_hours\tcumulative_hours\tkept"]
    lines += [f"{r}\t{lr}\t{seed}\t{tier}\t0.1\t0.1\ttrue" for r, lr, seed, tier, _ in plan]
    (tmp_path / "runs.tsv").write_text("\n".join(lines) + "\n")
    pred = {"validation": [], "test": []}
    for run, _, _, _, k in plan:
        for s in pred:
            path = tmp_path / "runs" / run / f"predictions_{s}.parquet"
            path.parent.mkdir(parents=True, exist_ok=True)
            predictions(splits[s], right_first(k)).to_parquet(path, index=False)
            pred[s].append(path)
    # r-c1 quantized: right on items 1..260 instead of 0..259: fixes item 260, breaks item 0
    quant = []
    for s in pred:
        right = right_first(261)
        right[0] = False
        path = tmp_path / "quantize" / "r-c1" / "int8_dynamic" / f"predictions_{s}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        predictions(splits[s], right).to_parquet(path, index=False)
        quant.append(path)
    floor_dir = tmp_path / "floor"
    stage_floor(
        SimpleNamespace(
            spec={"floors": ["majority"], "task": "sequence_classification"},
            inputs={s: [p] for s, p in paths.items()},
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
        "variants_validation": [q for q in quant if q.name.endswith("validation.parquet")],
        "variants_test": [q for q in quant if q.name.endswith("test.parquet")],
    }
    return tmp_path, inputs


def evaluate(tmp_path: Path, inputs: dict, spec: dict) -> tuple[dict, Path]:
    out = tmp_path / "out"
    out.mkdir(parents=True, exist_ok=True)
    outputs = {
        "metrics": out / "metrics.parquet",
        "comparisons": out / "comparisons.parquet",
        "scored_items": out / "items.parquet",
        "decisions": out / "decisions.json",
        "errors": out / "errors",
        "summary": out / "summary.txt",
    }
    stage_evaluate(SimpleNamespace(spec=spec, inputs=inputs, outputs=outputs))
    return outputs, out


def test_metrics_effects_quantized_floor_and_words(campaign):
    tmp_path, inputs = campaign
    outputs, _ = evaluate(tmp_path, inputs, settings())
    metrics = pd.read_parquet(outputs["metrics"])
    acc = metrics[(metrics.metric == "accuracy") & (metrics.split == "validation")]
    by_variant = dict(zip(acc.variant, acc.value, strict=True))
    assert by_variant["r-c1"] == pytest.approx(0.65)
    assert by_variant["r-m2"] == pytest.approx(0.89)
    assert by_variant["floor/majority"] == pytest.approx(0.5)
    row = acc[acc.variant == "r-c1"].iloc[0]
    assert row.ci_low < 0.65 < row.ci_high and row.ci_high - row.ci_low < 0.2
    # the cell's value is the mean over its seeds, with a t interval over seeds
    cell = metrics[(metrics.kind == "cell") & (metrics.split == "validation")]
    assert dict(zip(cell.cell, cell.value, strict=True))["train.lr=0.003"] == pytest.approx(0.875)

    comparisons = pd.read_parquet(outputs["comparisons"])
    main = comparisons[(comparisons.kind == "main") & (comparisons.split == "validation")]
    effect = main[main.subject == "train.lr 0.001 -> 0.003"].iloc[0]
    assert effect.estimate == pytest.approx(0.20)
    assert effect.n_seeds == 3 and effect.test.startswith("crossed seed x item")
    # seeds' se 0.01 / sqrt(3) and the items' (~0.02) together: t(2) interval ~ +/- 0.09
    assert 0.05 < effect.ci_low < 0.2 < effect.ci_high < 0.35
    assert effect.decision == "adopt"
    worse = main[main.subject == "train.lr 0.001 -> 0.01"].iloc[0]
    # the same -0.35 at every seed; the seeds' sd is pooled over the design's 9 runs (6 df):
    # run variances 0.025^2, 0.0218^2 (0.85, 0.89, 0.885), 0.025^2 averaged
    assert worse.estimate == pytest.approx(-0.35) and worse.decision == "reject"
    assert worse.seed_sd == pytest.approx(((0.000625 + 0.000475 + 0.000625) / 3) ** 0.5)
    assert 0 < worse.p_value and worse.ci_low < worse.ci_high
    # Holm: every p-value of the split's family adjusted, never below the raw one
    family = comparisons[(comparisons.split == "validation") & (comparisons.kind != "floor")]
    assert (family.p_holm >= family.p_value - 1e-12).all()

    quant = comparisons[(comparisons.kind == "quantized") & (comparisons.split == "validation")]
    q = quant.iloc[0]
    assert q.subject == "r-c1/int8_dynamic" and q.reference == "r-c1"
    assert q.estimate == pytest.approx(0.0) and q.test.startswith("Tango score")
    assert q.mcnemar_p == pytest.approx(1.0)
    # one loss, one gain on 400 items, margin 1 point: Tango's restricted P(loss) under -0.01 is
    # (10 + sqrt(100 - 32.32)) / 1600 = 0.011392, z = 4 / sqrt(400 (2q - 0.0101)) = 1.776,
    # one-sided p 0.0379 > 0.025: not shown within a point (the old percentile bootstrap was)
    assert q.p_value == pytest.approx(0.0379, abs=2e-4) and q.decision == "inconclusive"
    changes = pd.read_parquet(outputs["errors"] / "changes.parquet")
    mine = changes[(changes.variant == "r-c1/int8_dynamic") & (changes.split == "validation")]
    assert sorted(zip(mine.change, mine.id, strict=True)) == [
        ("broken", "validation-000"),
        ("fixed", "validation-260"),
    ]

    decisions = read_decisions(outputs["decisions"])
    assert decisions.best_cell.cell == "train.lr=0.003"
    assert sorted(decisions.best_cell.runs) == ["r-m1", "r-m2", "r-m3"]
    assert set(decisions.best_cell.by_split) == {"validation", "test"}
    # lr=0.01 (0.30-0.35) is below the floor (majority: 0.5); the control clears it
    assert [(f.cell, f.verdict) for f in decisions.below_floor] == [
        ("train.lr=0.01", "below floor")
    ]
    summary = outputs["summary"].read_text()
    assert "train.lr 0.001 -> 0.003: +20.0 points" in summary and "adopt" in summary
    assert "does not beat the floor" in summary
    assert "Decisions use the validation split" in summary
    # The plan's cell id travels with every row about a cell (what index and budget join on).
    ids = {lr: cell_id({"train.lr": lr}) for lr in ("0.001", "0.003", "0.01")}
    assert decisions.best_cell.cell_id == ids["0.003"]
    assert [f.cell_id for f in decisions.below_floor] == [ids["0.01"]]
    assert {d.cell_id for d in decisions.of_kind("main")} == {None}
    assert {d.cell_id for d in decisions.of_kind("quantized")} == {ids["0.001"]}
    cells = comparisons[comparisons.kind == "cell"]
    moved = cells[cells.subject.str.startswith("train.lr 0.001 -> 0.003")]
    assert set(moved.cell_id) == {ids["0.003"]}
    assert set(metrics[metrics.variant == "r-m1"].cell_id) == {ids["0.003"]}


def test_slices_confusions_and_pairs(campaign):
    tmp_path, inputs = campaign
    outputs, _ = evaluate(tmp_path, inputs, settings())
    slices = pd.read_parquet(outputs["errors"] / "slices.parquet")
    mine = slices[(slices.variant == "r-c1") & (slices.split == "validation")]
    assert set(mine.slice) == {"source", "text length", "group size", "duplicate cluster"}
    source = mine[mine.slice == "source"].set_index("bucket")
    # r-c1 is right on items 0..259: all of source a (0..199), 60 of source b's 200; the
    # slice names what its value averages: each item's right or wrong, the accuracy
    assert set(mine.metric) == {"accuracy"}
    assert source.loc["a.jsonl", "value"] == pytest.approx(1.0)
    assert source.loc["b.jsonl", "value"] == pytest.approx(0.3)
    dup = mine[mine.slice == "duplicate cluster"].set_index("bucket")
    assert dup.loc["member", "items"] == N // 10
    confusion = pd.read_parquet(outputs["errors"] / "confusion.parquet")
    c1 = confusion[(confusion.variant == "r-c1") & (confusion.split == "validation")]
    assert c1["count"].sum() == N
    wrong = c1[c1.label != c1.predicted]["count"].sum()
    assert wrong == 140
    pairs = pd.read_parquet(outputs["errors"] / "confused_pairs.parquet")
    p1 = pairs[(pairs.variant == "r-c1") & (pairs.split == "validation")]
    assert p1["count"].sum() == 140 and all(len(x) <= 5 for x in p1.example_ids)


def test_every_level_of_zero_one_items_reads_the_exact_interval(campaign):
    """A run's accuracy (metrics.parquet), a slice bucket's (slices.parquet) and the best floor's
    level in decisions.json: Clopper-Pearson's interval of k right of n items, the one
    stats.score_interval gives, where the percentile bootstrap was too short near 100 %
    (bucket a.jsonl, 200 of 200 right: [0.025^(1/200), 1])."""
    from scipy.stats import beta

    from campaign.evaluate.stats import EXACT_OVER

    def exact(k: int, n: int) -> tuple[float, float]:
        low = beta.ppf(0.025, k, n - k + 1) if k else 0.0
        return low, beta.ppf(0.975, k + 1, n - k) if k < n else 1.0

    tmp_path, inputs = campaign
    outputs, _ = evaluate(tmp_path, inputs, settings())
    metrics = pd.read_parquet(outputs["metrics"])
    acc = metrics[(metrics.metric == "accuracy") & (metrics.split == "validation")]
    run = acc[acc.variant == "r-c1"].iloc[0]  # 260 of 400 right
    assert (run.ci_low, run.ci_high) == pytest.approx(exact(260, N))
    assert run.interval_over == EXACT_OVER
    slices = pd.read_parquet(outputs["errors"] / "slices.parquet")
    mine = slices[(slices.variant == "r-c1") & (slices.split == "validation")]
    source = mine[mine.slice == "source"].set_index("bucket")
    assert tuple(source.loc["a.jsonl", ["ci_low", "ci_high"]]) == pytest.approx(exact(200, 200))
    assert tuple(source.loc["b.jsonl", ["ci_low", "ci_high"]]) == pytest.approx(exact(60, 200))
    floor = read_decisions(outputs["decisions"]).floor
    assert floor.name == "floor/majority" and floor.value == pytest.approx(0.5)
    assert (floor.ci_low, floor.ci_high) == pytest.approx(exact(N // 2, N))


def test_one_seed_uses_items_and_says_so(campaign):
    tmp_path, inputs = campaign
    keep = {"r-c1", "r-m1"}
    for s in ("predictions_validation", "predictions_test"):
        inputs[s] = [p for p in inputs[s] if p.parent.name in keep]
    plan = (tmp_path / "runs.tsv").read_text().splitlines()
    (tmp_path / "runs.tsv").write_text(
        "\n".join([plan[0], *[ln for ln in plan[1:] if ln.split("\t")[0] in keep]]) + "\n"
    )
    outputs, _ = evaluate(tmp_path, inputs, settings())
    comparisons = pd.read_parquet(outputs["comparisons"])
    effect = comparisons[(comparisons.kind == "main") & (comparisons.split == "validation")].iloc[0]
    assert effect.n_seeds == 1 and effect.test.startswith("items (one seed")
    assert effect.estimate == pytest.approx(0.20) and effect.p_value < 1e-6
    assert "seed-to-seed spread not measured" in effect.interval_over
    # a p below 1e-6 on the items, yet one seed: not adopted
    assert effect.decision == "inconclusive (one seed)"


def test_bootstrap_is_seeded_and_reproducible(campaign):
    tmp_path, inputs = campaign
    a, _ = evaluate(tmp_path, inputs, settings())
    first = a["metrics"].read_bytes(), a["comparisons"].read_bytes(), a["decisions"].read_bytes()
    for path in a.values():
        if path.is_dir():
            import shutil

            shutil.rmtree(path)
        else:
            path.unlink()
    b, _ = evaluate(tmp_path, inputs, settings())
    assert (
        b["metrics"].read_bytes(),
        b["comparisons"].read_bytes(),
        b["decisions"].read_bytes(),
    ) == first


def test_predictions_missing_an_item_name_the_file(campaign):
    tmp_path, inputs = campaign
    bad = inputs["predictions_validation"][0]
    pd.read_parquet(bad).iloc[:-1].to_parquet(bad, index=False)
    with pytest.raises(CampaignError, match=r"predictions_validation\.parquet: 399 predictions"):
        evaluate(tmp_path, inputs, settings())


def test_predictions_of_another_split_name_the_item(campaign):
    tmp_path, inputs = campaign
    bad = inputs["predictions_validation"][0]
    frame = pd.read_parquet(bad)
    frame.loc[3, "label"] = "neg" if frame.loc[3, "label"] == "pos" else "pos"
    frame.to_parquet(bad, index=False)
    with pytest.raises(CampaignError, match=r"item validation-003 has label"):
        evaluate(tmp_path, inputs, settings())


def test_another_seed_resamples_differently_and_decides_the_same(campaign):
    tmp_path, inputs = campaign
    a, _ = evaluate(tmp_path, inputs, settings(seed=0))
    first_metrics = pd.read_parquet(a["metrics"])
    first = read_decisions(a["decisions"])
    b, _ = evaluate(tmp_path / "again", inputs, settings(seed=1))
    second_metrics = pd.read_parquet(b["metrics"])
    second = read_decisions(b["decisions"])
    # the intervals move with the resamples (points do not) ...
    assert (first_metrics.value == second_metrics.value).all()
    assert not (first_metrics.ci_low.fillna(0) == second_metrics.ci_low.fillna(0)).all()
    # ... and clear cases are decided the same
    assert [d.decision for d in first.decisions] == [d.decision for d in second.decisions]
    assert first.below_floor and [f.cell for f in first.below_floor] == [
        f.cell for f in second.below_floor
    ]


def test_a_skipped_variant_is_listed_with_its_reason_not_scored(campaign):
    tmp_path, inputs = campaign
    folder = tmp_path / "quantize" / "r-c1" / "int4_weight_only"
    folder.mkdir(parents=True)
    (folder / "result.json").write_text(json.dumps({"status": "skipped", "reason": "needs CUDA"}))
    empty = predictions(split_frame("validation", N), right_first(0)).iloc[:0]
    for s in ("validation", "test"):
        empty.to_parquet(folder / f"predictions_{s}.parquet", index=False)
    inputs["variants_result"] = [folder / "result.json"]
    inputs["variants_validation"].append(folder / "predictions_validation.parquet")
    inputs["variants_test"].append(folder / "predictions_test.parquet")
    outputs, _ = evaluate(tmp_path, inputs, settings())
    decisions = read_decisions(outputs["decisions"])
    assert decisions.skipped_variants == (Skipped("r-c1/int4_weight_only", "needs CUDA"),)
    assert "r-c1/int4_weight_only" not in set(pd.read_parquet(outputs["metrics"]).variant)


def test_causal_lm_runs_get_exact_match_and_perplexity(campaign):
    tmp_path, inputs = campaign
    for path in inputs["predictions_validation"] + inputs["predictions_test"]:
        frame = pd.read_parquet(path)
        # item i: nll (i % 3) + 1 nats over 2 tokens; the last item's label never seen
        frame["nll"] = (np.arange(len(frame)) % 3 + 1).astype(float)
        frame["tokens"] = 2
        frame.loc[len(frame) - 1, ["nll", "tokens"]] = [np.nan, 0]
        frame.to_parquet(path, index=False)
    outputs, _ = evaluate(tmp_path, inputs, {**settings(), "task": "causal_lm"})
    metrics = pd.read_parquet(outputs["metrics"])
    ppl = metrics[metrics.metric == "perplexity"]
    assert set(ppl.split) == {"validation", "test"}
    assert set(ppl.variant) == {v for v in metrics.variant if v.startswith("r-")} - {
        v
        for v in metrics.variant
        if "/" in v  # the floor and the quantized copy carry none
    }
    nll = (np.arange(N - 1) % 3 + 1).sum()
    assert ppl.value.to_numpy() == pytest.approx(np.exp(nll / (2 * (N - 1))))
    assert (ppl.ci_low <= ppl.value).all() and (ppl.value <= ppl.ci_high).all()
    assert (ppl.ci_low < ppl.ci_high).all()
    em = metrics[metrics.metric == "exact_match"].set_index(["variant", "split"]).value
    acc = metrics[metrics.metric == "accuracy"].set_index(["variant", "split"]).value
    assert em.equals(acc.loc[em.index])


def test_the_floor_wins_the_verdict_and_an_fp32_copy_is_only_checked(campaign):
    """Only the lr=0.01 cell (0.30-0.35) left: below the majority floor (0.5) by the test, so
    the verdict keeps the floor; r-w1's fp32 copy (the same predictions) is a consistency check,
    outside the quantized family's Holm correction."""
    tmp_path, inputs = campaign
    keep = {"r-w1", "r-w2", "r-w3"}
    for s in ("predictions_validation", "predictions_test"):
        inputs[s] = [p for p in inputs[s] if p.parent.name in keep]
    plan = (tmp_path / "runs.tsv").read_text().splitlines()
    (tmp_path / "runs.tsv").write_text(
        "\n".join([plan[0], *[ln for ln in plan[1:] if ln.split("\t")[0] in keep]]) + "\n"
    )
    for s in ("validation", "test"):
        copy = tmp_path / "quantize" / "r-w1" / "fp32" / f"predictions_{s}.parquet"
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_bytes((tmp_path / "runs" / "r-w1" / f"predictions_{s}.parquet").read_bytes())
        inputs[f"variants_{s}"] = [copy]
    outputs, _ = evaluate(tmp_path, inputs, settings())
    decisions = read_decisions(outputs["decisions"])
    assert decisions.verdict.kind == "floor"
    assert decisions.verdict.keep == "floor/majority"
    # summary.txt opens with the verdict block: the floor kept, its test level in percent.
    keep = outputs["summary"].read_text().splitlines()[1]
    assert keep.startswith("  Keep: the reference floor floor/majority: test accuracy ")
    level = decisions.verdict.quality.value
    assert f"test accuracy {level * 100:.1f} % [" in keep
    # 0.325 against 0.5 on the same 400 items: 17.5 points below, well past the interval
    flag = decisions.below_floor[0]
    assert flag.verdict == "below floor" and flag.estimate == pytest.approx(-0.175)
    assert decisions.best_cell.representative_run == "r-w3"  # 0.30, 0.325, 0.35
    assert decisions.best_cell.reported_on == "test"
    comparisons = pd.read_parquet(outputs["comparisons"])
    copy = comparisons[comparisons.subject == "r-w1/fp32"].iloc[0]
    assert copy.decision == "consistency check" and np.isnan(copy.p_holm)
    assert copy.estimate == 0 and copy.items_changed == 0


def test_a_best_cell_not_shown_above_the_floor_keeps_the_floor_and_says_what_would_decide(
    campaign,
):
    """Only the lr=0.01 cell left, now at 0.53, 0.54, 0.52 against the majority floor's 0.50:
    neither above nor below it by the test. The fine-tune is not shown to be worth its cost, so
    the verdict keeps the floor, and names the cell's question, with no count of seeds or items
    (none sized against a floor has been shown to deliver)."""
    from campaign.evaluate import decide

    tmp_path, inputs = campaign
    splits = {s: pd.read_parquet(tmp_path / f"{s}.parquet") for s in ("validation", "test")}
    keep = {"r-w1": 212, "r-w2": 216, "r-w3": 208}
    for s in ("predictions_validation", "predictions_test"):
        inputs[s] = [p for p in inputs[s] if p.parent.name in keep]
        for p in inputs[s]:
            split = s.removeprefix("predictions_")
            predictions(splits[split], right_first(keep[p.parent.name])).to_parquet(p, index=False)
    plan = (tmp_path / "runs.tsv").read_text().splitlines()
    (tmp_path / "runs.tsv").write_text(
        "\n".join([plan[0], *[ln for ln in plan[1:] if ln.split("\t")[0] in keep]]) + "\n"
    )
    inputs["variants_validation"], inputs["variants_test"] = [], []
    outputs, _ = evaluate(tmp_path, inputs, settings())
    d = read_decisions(outputs["decisions"])
    f = d.verdict.against_floor
    assert (f.cell, f.floor, f.decision) == (
        "train.lr=0.01",
        "floor/majority",
        "not shown above floor",
    )
    assert f.estimate == pytest.approx(0.03)  # (212 + 216 + 208) / 1200 - 0.5
    assert f.ci_low < 0 < f.ci_high
    assert (d.verdict.kind, d.verdict.keep) == ("floor", "floor/majority")
    assert d.verdict.quality.value == pytest.approx(0.5)  # the floor's test level
    row = pd.read_parquet(outputs["comparisons"]).query("kind == 'floor' and split == 'validation'")
    (r,) = row.to_dict("records")
    # A cell against a floor gets no count (none has been shown to deliver the power it would
    # state, decide.FLOOR_UNSIZED); the note says so, and the row still says what dominates.
    assert f.dominant == "items" and f.seeds_needed is None and f.items_needed is None
    assert f.seeds_note == decide.FLOOR_UNSIZED["seeds_note"]
    assert r["seeds_needed"] is None or r["seeds_needed"] != r["seeds_needed"]  # None or NaN
    block = outputs["summary"].read_text().partition("\n\n")[0].splitlines()
    assert block[1].startswith("  Keep: the reference floor floor/majority: test accuracy 50.0 %")
    assert block[2].startswith(
        "  Kept cell against the floor floor/majority: +3.0 points ["
    ) and block[2].endswith("on validation, not shown above floor")
    opened = [line for line in block if line.startswith("  Open: ")]
    assert opened[0].startswith(
        "  Open: train.lr=0.01 against floor/majority, not shown above floor: "
    )
    assert opened[0].endswith(f.seeds_note)
    assert "not shown above it" in d.verdict.line
    # The open question the verdict lists is the one the summary prints.
    assert d.floor_question.items_needed == f.items_needed


def test_items_table_holds_every_variant_split_and_item(campaign):
    """items.parquet: one row per variant x split x item, the split file's ids in its order,
    each item's 0/1 score (whose mean is metrics.parquet's accuracy) and the predicted label;
    a run's cell and seed, a quantized variant's from its run, a floor's "" and null."""
    from campaign.evaluate.item_table import COLUMNS, read_items_table

    tmp_path, inputs = campaign
    outputs, _ = evaluate(tmp_path, inputs, settings(metric="macro_f1"))
    items = read_items_table(outputs["scored_items"])
    assert tuple(items.columns) == COLUMNS
    runs = [f"r-{c}{s}" for c in "cmw" for s in (1, 2, 3)]
    variants = {*runs, "r-c1/int8_dynamic", "floor/majority"}
    assert set(items.variant) == variants and len(items) == len(variants) * 2 * N
    assert set(items.metric) == {"accuracy"} and set(items.task) == {""}
    metrics = pd.read_parquet(outputs["metrics"])
    for split in ("validation", "test"):
        ids = pd.read_parquet(inputs[split][0])["id"].tolist()
        for variant in variants:
            mine = items[(items.variant == variant) & (items.split == split)]
            assert mine.item.tolist() == ids
            acc = metrics[
                (metrics.variant == variant) & (metrics.split == split)
                & (metrics.metric == "accuracy")
            ].value  # fmt: skip
            assert mine.score.mean() == pytest.approx(acc.item())
    c1 = items[(items.variant == "r-c1") & (items.split == "validation")]
    truth = pd.read_parquet(inputs["validation"][0])["label"].to_numpy()
    right = right_first(260)
    assert (c1.score.to_numpy() == right).all()
    other = np.where(truth == "pos", "neg", "pos")
    assert (c1.prediction.to_numpy() == np.where(right, truth, other)).all()
    assert set(c1.cell) == {"train.lr=0.001"} and set(c1.seed) == {1}
    quant = items[items.variant == "r-c1/int8_dynamic"]
    assert set(quant.cell) == {"train.lr=0.001"} and set(quant.seed) == {1}
    floor = items[items.variant == "floor/majority"]
    assert set(floor.cell) == {""} and floor.seed.isna().all()

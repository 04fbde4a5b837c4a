"""The evaluate phase's stages: the reference floor, and the evaluation of every variant.

Outputs of `evaluate` (results/evaluation/): metrics.parquet (every variant and every cell on
validation and test, each metric with its interval), comparisons.parquet (effects, cells against
the control, quantized variants against their reference, cells against the floor; Holm-adjusted
p-values over all comparisons of the campaign on a split), decisions.json (adopt / reject /
inconclusive with the numbers behind each, the best cell, the floor flags), errors/ (confusion,
confused pairs, slices, items fixed and broken) and summary.txt (the decisions in words).
"""

from __future__ import annotations

import json
import math

import numpy as np

from campaign.core.errors import CampaignError
from campaign.evaluate import compare, errors, floor
from campaign.evaluate.effects import contrasts
from campaign.evaluate.items import (
    SPLITS,
    Items,
    campaign_labels,
    read_items,
    read_probs,
    read_response_nll,
)
from campaign.evaluate.metrics import classification_metrics, metric_draws, perplexity
from campaign.evaluate.plan_table import read_plan
from campaign.evaluate.stats import INCONCLUSIVE, decide, decide_loss, holm, resample_indices


def stage_floor(ctx) -> None:
    """Fit the floors on the train split; write floor/<name>/predictions_<split>.parquet.

    One BLAS thread: a multi-threaded BLAS sums in an order that depends on the thread count,
    and the floor's probabilities must be the same bytes wherever the job runs (reproduce)."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):
        _floor(ctx)


def _floor(ctx) -> None:
    import pandas as pd

    train = pd.read_parquet(ctx.inputs["train"][0], columns=["text", "label"])
    texts = train["text"].astype(str).tolist()
    labels = train["label"].astype(str).tolist()
    names = floor.labels_of(labels)
    out = ctx.outputs["floor"]
    timings = floor.Timings()  # the fit and the predictions, for the budget (volatile)
    for name in ctx.spec["floors"]:
        (out / name).mkdir(parents=True)
        with timings.fit(name):
            model = (
                floor.majority_model(labels)
                if name == "majority"
                else floor.tfidf_model(texts, labels)
            )
        for split in SPLITS:
            items = pd.read_parquet(ctx.inputs[split][0], columns=["id", "text", "label"])
            with timings.predict(name, split, len(items)):
                probs = model(items["text"].astype(str).tolist())
            frame = floor.predictions_frame(
                items["id"].astype(str).tolist(), items["label"].astype(str).tolist(), names, probs
            )
            frame.to_parquet(out / name / f"predictions_{split}.parquet", index=False)
    if "timings" in ctx.outputs:
        timings.write(ctx.outputs["timings"])


def _variants(ctx) -> list[dict]:
    """Every variant with a predictions file per split: trained runs, floors, quantized."""
    found: dict[str, dict] = {}
    for path in [
        *ctx.inputs.get("predictions_validation", []),
        *ctx.inputs.get("predictions_test", []),
    ]:
        split = path.stem.removeprefix("predictions_")
        v = found.setdefault(path.parent.name, {"kind": "run", "run": path.parent.name})
        v.setdefault("paths", {})[split] = path
    for folder in ctx.inputs.get("floor", []):
        for sub in sorted(p for p in folder.iterdir() if p.is_dir()):
            v = found.setdefault(f"floor/{sub.name}", {"kind": "floor", "run": None})
            v["paths"] = {s: sub / f"predictions_{s}.parquet" for s in SPLITS}
    # Quantized variants: results/quantize/<run>/<variant>/{result.json, predictions_*.parquet};
    # a skipped one (its backend cannot run here) is listed with its reason, not scored.
    skipped = {}
    quantized = ("variants_result", "variants_validation", "variants_test")
    for path in [p for name in quantized for p in ctx.inputs.get(name, [])]:
        run, variant = path.parent.parent.name, path.parent.name
        if path.name == "result.json":
            result = json.loads(path.read_text(encoding="utf-8"))
            if result.get("status") != "ok":
                skipped[f"{run}/{variant}"] = result.get("reason") or result.get("status")
            continue
        if not path.name.startswith("predictions_"):
            continue
        v = found.setdefault(f"{run}/{variant}", {"kind": "quantized", "run": run})
        v.setdefault("paths", {})[path.stem.removeprefix("predictions_")] = path
    for name in skipped:
        found.pop(name, None)
    for name, v in found.items():
        missing = [s for s in SPLITS if s not in v.get("paths", {})]
        if missing:
            raise CampaignError(f"variant {name}: no predictions for {', '.join(missing)}")
        v["name"] = name
    return [found[k] for k in sorted(found)], skipped


def _metric_rows(name, v, items, scores, cell_name) -> list[dict]:
    rows = []
    for metric, iv in scores.items():
        rows.append(
            {
                "variant": name,
                "kind": v["kind"],
                "run": v["run"],
                "cell": cell_name,
                "seed": v.get("seed"),
                "split": items.split,
                "metric": metric,
                "value": iv.value,
                "ci_low": iv.low,
                "ci_high": iv.high,
                "interval_over": "items (bootstrap)",
            }
        )
    return rows


def _cell_name(factors: list[str], cell: tuple) -> str:
    return ", ".join(f"{f}={v}" for f, v in zip(factors, cell, strict=True)) or "baseline"


def stage_evaluate(ctx) -> None:
    import pandas as pd

    s = ctx.spec["evaluation"]
    conf, alpha, power = s["confidence"], 1 - s["confidence"], s["power"]
    metric = s["metric"]
    factors, cells, seeds, control = read_plan(ctx.inputs["runs"][0])
    labels = campaign_labels(ctx.inputs["train"][0], [ctx.inputs[x][0] for x in SPLITS])
    items = {x: read_items(ctx.inputs[x][0], x, labels, s["slices"]) for x in SPLITS}
    variants, skipped = _variants(ctx)
    for v in variants:
        if v["kind"] == "run":
            if v["run"] not in cells:
                raise CampaignError(f"run {v['run']}: predictions given but not in the plan table")
            v["cell"], v["seed"] = cells[v["run"]], seeds[v["run"]]
        elif v["kind"] == "quantized" and v["run"] in cells:
            v["cell"], v["seed"] = cells[v["run"]], seeds[v["run"]]

    metric_rows: list[dict] = []
    comparison_rows: list[dict] = []
    error_rows: dict[str, list[dict]] = {
        "confusion": [],
        "confused_pairs": [],
        "slices": [],
        "changes": [],
    }
    scored: dict[str, dict[str, dict]] = {x: {} for x in SPLITS}  # split -> variant -> scores
    for n, split in enumerate(SPLITS):
        its: Items = items[split]
        if len(its) == 0:
            raise CampaignError(f"{ctx.inputs[split][0]}: the {split} split has no items")
        indices = resample_indices(np.random.default_rng([s["seed"], n]), len(its), s["resamples"])
        for v in variants:
            probs = read_probs(v["paths"][split], its)
            pred = probs.argmax(axis=1)
            point, draws = metric_draws(its.truth, probs, indices, metric)
            correct = (pred == its.truth).astype(np.float64)
            scored[split][v["name"]] = {"point": point, "draws": draws, "correct": correct}
            all_scores = classification_metrics(its.truth, probs, labels, indices, conf)
            if ctx.spec["task"] == "causal_lm":
                # The answer is the label's response: the model's best-scored response is the
                # true one exactly when the prediction is right.
                all_scores["exact_match"] = all_scores["accuracy"]
                response = read_response_nll(v["paths"][split], its)
                if response is not None and response[1].sum() > 0:
                    all_scores["perplexity"] = perplexity(*response, indices, conf)
            cell_name = _cell_name(factors, v["cell"]) if "cell" in v else None
            metric_rows += _metric_rows(v["name"], v, its, all_scores, cell_name)
            error_rows["confusion"] += errors.confusion_rows(v["name"], its, pred)
            error_rows["confused_pairs"] += errors.confused_pairs(
                v["name"], its, pred, s["confused_pairs"], s["examples"]
            )
            error_rows["slices"] += errors.slice_rows(
                v["name"], its, correct, (s["seed"], n), s["resamples"], conf
            )
    # The floor a cell must beat: the best floor on the split decisions use, on both splits.
    floors = [v["name"] for v in variants if v["kind"] == "floor"]
    best_floor = max(floors, key=lambda f: scored[s["decide_on"]][f]["point"]) if floors else None
    for split in SPLITS:
        comparison_rows += _comparisons(
            split,
            variants,
            scored[split],
            factors,
            control,
            metric,
            s,
            conf,
            alpha,
            power,
            items[split],
            error_rows,
            metric_rows,
            best_floor,
        )

    # Holm per split over each family of tests: the effects decisions are made on (main effects
    # and interactions), the cells against the control (one-at-a-time cells repeat the main
    # effects: kept apart so they do not double the family), the quantized variants. The floor
    # rows are flags, not tests.
    families = (("main", "interaction"), ("cell",), ("quantized",))
    for split in SPLITS:
        for kinds in families:
            family = [r for r in comparison_rows if r["split"] == split and r["kind"] in kinds]
            adjusted = holm(np.array([r["p_value"] for r in family], dtype=np.float64))
            for r, p in zip(family, adjusted, strict=True):
                r["p_holm"] = float(p)
    for r in comparison_rows:
        r.setdefault("p_holm", math.nan)
    for r in comparison_rows:
        r["decision"] = _decision(r, s, alpha)

    decisions = _decisions(ctx.spec, comparison_rows, metric_rows, factors, variants, ctx)
    decisions["skipped_variants"] = [
        {"variant": name, "reason": reason} for name, reason in sorted(skipped.items())
    ]
    _write(ctx, metric_rows, comparison_rows, error_rows, decisions, pd)


def _comparisons(
    split,
    variants,
    scored,
    factors,
    control,
    metric,
    s,
    conf,
    alpha,
    power,
    its,
    error_rows,
    metric_rows,
    best,
) -> list[dict]:
    rows: list[dict] = []
    runs = [v for v in variants if v["kind"] == "run"]
    by_cell: dict[tuple, dict[int, str]] = {}
    for v in runs:
        by_cell.setdefault(v["cell"], {})[v["seed"]] = v["name"]
    # Cells over seeds (one row per cell and metric, in metrics.parquet).
    for cell, at in sorted(by_cell.items()):
        values = np.array([scored[name]["point"] for _, name in sorted(at.items())])
        if len(values) >= 2:
            from campaign.evaluate.stats import paired_t

            mean, sd, low, high, _ = (float(x) for x in paired_t(values, conf))
            over = f"seeds (t interval over {len(values)} seeds; seed sd {sd:.4f})"
        else:
            mean, low, high = float(values[0]), math.nan, math.nan
            over = "one seed: no interval over seeds"
        metric_rows.append(
            {
                "variant": f"cell: {_cell_name(factors, cell)}",
                "kind": "cell",
                "run": None,
                "cell": _cell_name(factors, cell),
                "seed": None,
                "split": split,
                "metric": metric,
                "value": mean,
                "ci_low": low,
                "ci_high": high,
                "interval_over": over,
            }
        )
    # Effects and cells against the control.
    if control is not None and control in by_cell:
        seeds_of = {cell: len(at) for cell, at in by_cell.items()}
        for c in contrasts(factors, sorted(by_cell), control, seeds_of):
            row = _contrast(c, by_cell, scored, metric, conf, alpha, power, s)
            if row is not None:
                rows.append(
                    {
                        "split": split,
                        "kind": c.kind,
                        "subject": c.name,
                        "reference": "control",
                        "metric": metric,
                        "estimability": c.estimability or None,
                        "aliases": "; ".join(" x ".join(a) for a in c.aliases) or None,
                        **row,
                    }
                )
    # Quantized variants against their reference run, on the same items.
    for v in variants:
        if v["kind"] != "quantized" or v["run"] not in scored:
            continue
        ref, mine = scored[v["run"]], scored[v["name"]]
        row = compare.by_items(ref, mine, metric, conf)
        rows.append(
            {
                "split": split,
                "kind": "quantized",
                "subject": v["name"],
                "reference": v["run"],
                "metric": metric,
                **row,
            }
        )
        error_rows["changes"] += errors.change_rows(
            v["name"], v["run"], its, ref["correct"], mine["correct"]
        )
    # Cells against the best floor (flags, not decisions).
    if best is not None:
        for cell, at in sorted(by_cell.items()):
            per_seed = {seed: scored[name]["point"] for seed, name in at.items()}
            fixed = {seed: scored[best]["point"] for seed in at}
            # The floor varies with the items too: the items' share of (cell mean - floor).
            diff_draws = np.mean([scored[name]["draws"] for name in at.values()], axis=0)
            item_se = float(np.std(diff_draws - scored[best]["draws"], ddof=1))
            row = compare.by_seeds(
                fixed, per_seed, conf, alpha, power, s["min_useful_effect"], item_se
            )
            if row is None:
                row = compare.by_items(scored[best], scored[next(iter(at.values()))], metric, conf)
            rows.append(
                {
                    "split": split,
                    "kind": "floor",
                    "subject": _cell_name(factors, cell),
                    "reference": best,
                    "metric": metric,
                    **row,
                }
            )
        # Each run (and quantized variant) against the floor, item-paired: the error changes.
        for v in variants:
            if v["kind"] == "run":
                error_rows["changes"] += (
                    errors.change_rows(
                        v["name"], best, its, scored[best]["correct"], scored[v["name"]]["correct"]
                    )
                    if s["floor_changes"]
                    else []
                )
    return rows


def _contrast(c, by_cell, scored, metric, conf, alpha, power, s) -> dict | None:
    """The contrast's value per seed (every cell it weighs ran at that seed), compared over
    seeds when two or more seeds have it, else over items at the one seed."""
    weights = dict(c.weights)
    seeds = sorted(set.intersection(*(set(by_cell.get(cell, {})) for cell in weights)))
    if not seeds:
        return None
    values = {
        seed: sum(w * scored[by_cell[cell][seed]]["point"] for cell, w in weights.items())
        for seed in seeds
    }
    # The items' share: the bootstrap spread of the contrast averaged over the seeds.
    mean_draws = np.mean(
        [
            sum(w * scored[by_cell[cell][seed]]["draws"] for cell, w in weights.items())
            for seed in seeds
        ],
        axis=0,
    )
    row = compare.by_seeds(
        {k: 0.0 for k in values},
        values,
        conf,
        alpha,
        power,
        s["min_useful_effect"],
        float(np.std(mean_draws, ddof=1)),
    )
    if row is not None:
        return row
    seed = seeds[0]
    draws = sum(w * scored[by_cell[cell][seed]]["draws"] for cell, w in weights.items())
    from campaign.evaluate.stats import percentile_interval

    iv = percentile_interval(values[seed], draws, conf)
    p = compare.bootstrap_p(draws)
    test = "paired bootstrap over items"
    if c.kind != "interaction" and metric == "accuracy" and len(weights) == 2:
        (a, _), (b, _) = sorted(weights.items(), key=lambda kv: kv[1])
        from campaign.evaluate.stats import mcnemar_p

        p = mcnemar_p(scored[by_cell[a][seed]]["correct"], scored[by_cell[b][seed]]["correct"])
        test = "McNemar (exact)"
    return {
        "n_seeds": 1,
        "estimate": values[seed],
        "ci_low": iv.low,
        "ci_high": iv.high,
        "p_value": p,
        "test": test,
        "wilcoxon_p": math.nan,
        "seed_sd": math.nan,
        "mde": math.nan,
        "seeds_needed": None,
        "interval_over": "items (one seed: seed-to-seed spread not measured)",
    }


def _decision(row: dict, s: dict, alpha: float) -> str:
    if row["kind"] == "quantized":  # the same trained weights: items are the only noise
        return decide_loss(row["ci_low"], row["ci_high"], s["max_quality_loss"])
    if row["kind"] == "floor":
        low, high = row["ci_low"], row["ci_high"]
        if not (math.isfinite(low) and math.isfinite(high)):
            return "not shown above floor"
        if high < 0:
            return "below floor"
        return "above floor" if low > 0 else "not shown above floor"
    if row["n_seeds"] < 2:
        # One seed measures the items' noise, not the seed-to-seed spread, which is usually
        # larger: nothing is adopted or rejected on it.
        return f"{INCONCLUSIVE} (one seed)"
    if row["kind"] == "interaction":
        return "interaction" if row["p_holm"] < alpha else "no interaction shown"
    return decide(
        row["estimate"],
        row["ci_low"],
        row["ci_high"],
        row["p_holm"],
        s["min_useful_effect"],
        alpha,
    )


def _decisions(spec, comparison_rows, metric_rows, factors, variants, ctx) -> dict:
    s = spec["evaluation"]
    split, metric = s["decide_on"], s["metric"]
    cells = [r for r in metric_rows if r["kind"] == "cell" and r["split"] == split]
    best = max(cells, key=lambda r: r["value"]) if cells else None
    # The best cell's numbers on every split (test included: reported, not used to choose).
    best_by_split = {
        r["split"]: {k: r[k] for k in ("value", "ci_low", "ci_high", "interval_over")}
        for r in metric_rows
        if best is not None and r["kind"] == "cell" and r["cell"] == best["cell"]
    }
    lines, decisions = [], []
    for r in comparison_rows:
        if r["split"] != split or r["kind"] not in ("main", "quantized"):
            continue
        words = f"{r['subject']}: {compare.interval_words(r)} {split} {metric}"
        if r["kind"] == "quantized":
            limit = s["max_quality_loss"] * 100
            words += f" against {r['reference']} (loss limit {limit:.1f} points)"
        words += f", {r['decision']}"
        if r["n_seeds"] >= 2:
            wanted = s["min_useful_effect"] * 100
            needed = r["seeds_needed"] or "over 1000 (or no spread measured)"
            power = round(s["power"] * 100)
            words += (
                f" ({r['n_seeds']} seeds, Holm p {r['p_holm']:.3g}; seeds for {power} % power "
                f"to show a {wanted:.1f}-point effect: {needed})"
            )
        elif r["kind"] == "quantized":
            words += f" ({r['test']} over the same items, Holm p {r['p_holm']:.3g})"
        else:
            words += " (one seed: the seed-to-seed spread is not measured; run more seeds)"
        decisions.append(
            {
                k: r[k]
                for k in (
                    "kind",
                    "subject",
                    "reference",
                    "decision",
                    "estimate",
                    "ci_low",
                    "ci_high",
                    "p_holm",
                    "n_seeds",
                )
            }
            | {"words": words}
        )
        lines.append(words)
    flagged = [
        r
        for r in comparison_rows
        if r["kind"] == "floor" and r["split"] == split and r["decision"] != "above floor"
    ]
    floor_words = [
        f"{r['subject']}: {compare.interval_words(r)} against {r['reference']} — "
        + (
            "the fine-tune does not beat the floor"
            if r["decision"] == "below floor"
            else "not shown to beat the floor (its interval reaches it)"
        )
        for r in flagged
    ]
    note = (
        f"Decisions use the {split} split ({metric}); the other split's numbers are reported "
        "and not used for deciding (evaluation.decide_on)."
    )
    return {
        "decide_on": split,
        "metric": metric,
        "confidence": s["confidence"],
        "min_useful_effect": s["min_useful_effect"],
        "max_quality_loss": s["max_quality_loss"],
        "note": note,
        "best_cell": None
        if best is None
        else {
            "cell": best["cell"],
            "by_split": best_by_split,
            "value": best["value"],
            "ci_low": best["ci_low"],
            "ci_high": best["ci_high"],
            "interval_over": best["interval_over"],
            "runs": sorted(
                v["name"]
                for v in variants
                if v["kind"] == "run" and _cell_name(factors, v["cell"]) == best["cell"]
            ),
        },
        "decisions": decisions,
        "below_floor": [
            {
                "cell": r["subject"],
                "floor": r["reference"],
                "verdict": r["decision"],
                "estimate": r["estimate"],
                "ci_low": r["ci_low"],
                "ci_high": r["ci_high"],
            }
            for r in flagged
        ],
        "lines": [note, *lines, *floor_words],
    }


def _clean(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _write(ctx, metric_rows, comparison_rows, error_rows, decisions, pd) -> None:
    pd.DataFrame(metric_rows).to_parquet(ctx.outputs["metrics"], index=False)
    pd.DataFrame(comparison_rows).to_parquet(ctx.outputs["comparisons"], index=False)
    out = ctx.outputs["errors"]
    out.mkdir(parents=True)
    for name, rows in error_rows.items():
        pd.DataFrame(rows).to_parquet(out / f"{name}.parquet", index=False)
    clean = json.loads(json.dumps(decisions, default=str), parse_constant=lambda c: None)
    clean = _deep_clean(clean)
    ctx.outputs["decisions"].write_text(json.dumps(clean, indent=2, sort_keys=True) + "\n")
    ctx.outputs["summary"].write_text("\n".join(decisions["lines"]) + "\n")


def _deep_clean(value):
    if isinstance(value, dict):
        return {k: _deep_clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_deep_clean(v) for v in value]
    return _clean(value)

"""The evaluate phase's stages: the reference floor, and the evaluation of every variant.

This module only wires the layers: metrics (scoring one variant on one split) -> comparison
(statistics over per-item scores) and questions (one row per question, Holm per family) ->
decide (policy) -> words (the verdict block and the lines). Outputs of `evaluate`
(results/evaluation/): metrics.parquet (every variant and every cell on validation and test,
each metric with its interval), comparisons.parquet (effects, cells against the control,
quantized variants against their reference, cells against the floor, Holm per family on a
split), decisions.json (campaign.evaluate.records: its one builder and reader; its keys:
campaign.evaluate.decide), items.parquet (every variant's score and answer on every item
of both splits: campaign.evaluate.item_table), errors/ (confusion, confused pairs, slices
naming the per-item metric they average, items fixed and broken) and summary.txt (the
verdict block first, then the decisions in words).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from campaign.core.errors import CampaignError
from campaign.core.io import read_json
from campaign.evaluate import (
    comparison,
    errors,
    floor,
    item_table,
    looks,
    questions,
    records,
    words,
)
from campaign.evaluate.effects import contrasts
from campaign.evaluate.items import SPLITS, Items
from campaign.evaluate.look_words import LOOKS_TITLE
from campaign.evaluate.metrics import NOT_ITEM_MEANS
from campaign.evaluate.plan_table import read_plan
from campaign.evaluate.scoring import scorer
from campaign.evaluate.stats import percentile_interval, resample_indices


def stage_floor(ctx) -> None:
    """Score the task's floors (its TaskModule.floor_stage) into
    floor/<name>/predictions_<split>.parquet; a floor the task cannot run here gets
    floor/<name>/SKIPPED.txt with the reason. The fit's and the predictions' seconds go to the
    timings output (the floor's cost, for the budget).

    One BLAS thread: a multi-threaded BLAS sums in an order that depends on the thread count,
    and the floor's probabilities must be the same bytes wherever the job runs (reproduce)."""
    from threadpoolctl import threadpool_limits

    from campaign.core.tasks import check_floors, module_of

    check_floors(ctx.spec["task"], ctx.spec["floors"])
    task = module_of(ctx.spec["task"])
    with threadpool_limits(limits=1):
        timings = floor.Timings()
        task.floor_stage(ctx.spec, ctx.inputs, ctx.outputs["floor"], ctx.root, timings)
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
    # A floor that cannot run here (the zero-shot floor of a from_config model) is listed with
    # its reason, not scored, like a skipped quantized variant.
    skipped = {}
    for folder in ctx.inputs.get("floor", []):
        for sub in sorted(p for p in folder.iterdir() if p.is_dir()):
            if (sub / "SKIPPED.txt").is_file():
                skipped[f"floor/{sub.name}"] = (sub / "SKIPPED.txt").read_text().strip()
                continue
            v = found.setdefault(f"floor/{sub.name}", {"kind": "floor", "run": None})
            v["paths"] = {s: sub / f"predictions_{s}.parquet" for s in SPLITS}
    # Quantized variants: results/quantize/<run>/<variant>/{result.json, predictions_*.parquet};
    # a skipped one (its backend cannot run here) is listed with its reason, not scored.
    quantized = ("variants_result", "variants_validation", "variants_test")
    for path in [p for name in quantized for p in ctx.inputs.get(name, [])]:
        run, variant = path.parent.parent.name, path.parent.name
        if path.name == "result.json":
            result = read_json(path)
            if result.get("status") != "ok":
                skipped[f"{run}/{variant}"] = result.get("reason") or result.get("status")
            elif result.get("canary"):
                found.setdefault(f"{run}/{variant}", {"kind": "quantized", "run": run})
                found[f"{run}/{variant}"]["canary"] = True
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
                "cell_id": v.get("cell_id"),
                "seed": v.get("seed"),
                "split": items.split,
                "metric": metric,
                "value": iv.value,
                "ci_low": iv.low,
                "ci_high": iv.high,
                "interval_over": iv.over,
            }
        )
    return rows


def _cell_name(factors: list[str], cell: tuple) -> str:
    return ", ".join(f"{f}={v}" for f, v in zip(factors, cell, strict=True)) or "baseline"


def stage_evaluate(ctx) -> None:
    """Score every variant on both splits with the task's Scorer, compare and decide per
    split, build the decisions, then the error rows that need them, the items table, and
    write every output."""
    import pandas as pd

    factors, cells, seeds, control, cell_ids = read_plan(ctx.inputs["runs"][0])
    score = scorer(
        ctx.spec["task"], ctx.spec["evaluation"], ctx.spec.get("model", {}),
        ctx.inputs["train"][0], [ctx.inputs[x][0] for x in SPLITS],
    )  # fmt: skip
    # What decides: evaluation.metric, or the generated text's per-item metric; everything
    # after the scoring reads it from the evaluation settings.
    s = {**ctx.spec["evaluation"], "metric": score.metric}
    spec = {**ctx.spec, "evaluation": s}
    items = {x: score.items(ctx.inputs[x][0], x) for x in SPLITS}
    variants, skipped = _variants(ctx)
    _place_variants(variants, cells, seeds, cell_ids)
    metric_rows, error_rows, scored = _score_variants(ctx, score, s, items, variants, factors)
    # The floor a cell must beat: the best floor on the split decisions use, on both splits.
    floors = [v["name"] for v in variants if v["kind"] == "floor"]
    best_floor = max(floors, key=lambda f: scored[s["decide_on"]][f]["point"]) if floors else None
    comparison_rows: list[dict] = []
    for n, split in enumerate(SPLITS):
        rows = _comparisons(
            split, variants, scored[split], factors, control, s["metric"], s, s["confidence"],
            s["power"], items[split], error_rows, metric_rows, best_floor,
            np.random.default_rng([s["seed"], n, 1]),
        )  # fmt: skip
        _decide(rows, split, s["confidence"], s["power"], s, ctx.inputs.get("looks", []))
        comparison_rows += [questions.public(r) for r in rows]

    kept_unless_shown = _cell_name(factors, control) if control is not None else None
    look_records = [read_json(p) for p in ctx.inputs.get("looks", [])]
    decisions = records.build(
        spec, comparison_rows, metric_rows, best_floor, kept_unless_shown, skipped, look_records
    )
    keep = decisions.verdict.keep if decisions.verdict is not None else None
    error_rows.update(
        score.decided_errors(scored, _options(variants, factors), keep, kept_unless_shown)
    )
    items_frame = _item_frame(variants, factors, items, scored, score.item_metric)
    _write(ctx, metric_rows, comparison_rows, error_rows, decisions, items_frame, pd)


def _place_variants(variants, cells, seeds, cell_ids) -> None:
    """Each run (and each quantized variant of a run) in its plan cell: its cell, seed and
    cell id, from the plan table; a run the plan does not name is refused by name."""
    for v in variants:
        if v["kind"] == "run":
            if v["run"] not in cells:
                raise CampaignError(f"run {v['run']}: predictions given but not in the plan table")
            v["cell"], v["seed"] = cells[v["run"]], seeds[v["run"]]
        elif v["kind"] == "quantized" and v["run"] in cells:
            v["cell"], v["seed"] = cells[v["run"]], seeds[v["run"]]
        if "cell" in v:
            v["cell_id"] = cell_ids[v["cell"]]


def _score_variants(ctx, score, s, items, variants, factors):
    """Every variant scored on every split on the split's shared resamples: (metric rows,
    error rows by file name, {split: {variant: {point, draws, correct, predictions}}})."""
    metric_rows: list[dict] = []
    error_rows: dict[str, list[dict]] = {name: [] for name in score.error_files}
    error_rows.setdefault("changes", [])
    scored: dict[str, dict[str, dict]] = {x: {} for x in SPLITS}  # split -> variant -> scores
    for n, split in enumerate(SPLITS):
        its: Items = items[split]
        if len(its) == 0:
            raise CampaignError(f"{ctx.inputs[split][0]}: the {split} split has no items")
        indices = resample_indices(np.random.default_rng([s["seed"], n]), len(its), s["resamples"])
        for v in variants:
            got = score.score(v["name"], v["paths"][split], its, indices, (s["seed"], n))
            scored[split][v["name"]] = {
                "point": got.point,
                "draws": got.draws,
                "correct": got.correct,
                "predictions": got.predictions,
            }
            cell_name = _cell_name(factors, v["cell"]) if "cell" in v else None
            metric_rows += _metric_rows(v["name"], v, its, got.metrics, cell_name)
            for name, rows in got.errors.items():
                error_rows[name] += rows
    return metric_rows, error_rows, scored


def _item_frame(variants, factors, items, scored, metric: str):
    """items.parquet (campaign.evaluate.item_table): every variant's score and answer on every
    item of every split, in split, variant and item order. `scored: {split: {variant:
    {"correct": (n_items,), "predictions": [n_items]}}}`."""
    import pandas as pd

    frames = []
    for split in SPLITS:
        ids = [str(i) for i in items[split].ids]
        for v in variants:
            got = scored[split][v["name"]]
            frame = {
                "variant": v["name"],
                "cell": _cell_name(factors, v["cell"]) if "cell" in v else "",
                "seed": v.get("seed"),
                "split": split,
                "task": "",  # one task per campaign
                "item": ids,
                "score": got["correct"],
                "prediction": got["predictions"],
                "metric": metric,
            }
            frames.append(pd.DataFrame(frame, columns=list(item_table.COLUMNS)))
    return pd.concat(frames, ignore_index=True)


def _options(variants, factors) -> dict[str, list[str]]:
    """The options a verdict can keep, by name: each cell's runs in seed order, each floor."""
    cells: dict[str, dict[int, str]] = {}
    for v in variants:
        if v["kind"] == "run":
            cells.setdefault(_cell_name(factors, v["cell"]), {})[v["seed"]] = v["name"]
    options = {cell: [at[seed] for seed in sorted(at)] for cell, at in sorted(cells.items())}
    return options | {v["name"]: [v["name"]] for v in variants if v["kind"] == "floor"}


def _decide(rows, split, conf, power, s, look_paths) -> None:
    """Holm per family and the decisions; in an adaptive campaign, on the decision split and
    accuracy (what the looks score), the last look's repeated intervals decide instead."""
    questions.decide_family(rows, conf, power, s)
    questions.settle_canaries(rows)
    if look_paths and split == s["decide_on"] and s["metric"] == "accuracy":
        records = [read_json(p) for p in look_paths]
        looks.apply_last_look(rows, records, 1 - conf, s["min_useful_effect"])


# The budget runs after the evaluation: the verdict here says where its costs are.
COSTS_AT = "in results/budget/summary.txt (the budget phase runs after the evaluation)"
PRICE_AT = "results/budget/to_decide.csv"


def summary_text(decisions: records.Decisions, guards: list[str] = ()) -> str:
    """summary.txt: the verdict block (words.verdict_block, without costs) with the guard lines
    (campaign.guards), then the decisions."""
    flags = words.evaluation_flags(decisions)
    values = records.evaluation_verdict(decisions, flags, COSTS_AT, PRICE_AT)
    looks = decisions.adaptive_looks or []
    told = [f"{LOOKS_TITLE}:", *(f"  {line}" for line in looks), ""] if looks else []
    block = [*words.verdict_block(values), *(f"  {line}" for line in guards)]
    return "\n".join([*block, "", *told, *decisions.lines]) + "\n"


@dataclass(frozen=True)
class SplitDesign:
    """One split's trained runs as the comparison rows read them: `design: {cell: Y (k, n)}`
    per-item scores in seed order, and for a metric that is not a mean over items (macro-F1)
    each run's value on the shared resamples (`draws`) and on all items (`points`)."""

    split: str
    metric: str
    n_items: int
    runs_of: dict  # cell -> [run names in seed order]
    ids: dict  # cell -> the plan table's cell id
    design: dict
    draws: dict | None
    points: dict | None
    moments: tuple


def split_design(split, variants, scored, metric, n_items) -> SplitDesign:
    """The split's design from the scored variants (`scored: {variant: {correct, draws,
    point}}`)."""
    by_cell: dict[tuple, dict[int, str]] = {}
    for v in variants:
        if v["kind"] == "run":
            by_cell.setdefault(v["cell"], {})[v["seed"]] = v["name"]
    runs_of = {cell: [at[seed] for seed in sorted(at)] for cell, at in sorted(by_cell.items())}
    design = {
        cell: np.stack([scored[r]["correct"] for r in runs]) for cell, runs in runs_of.items()
    }
    draws = points = None
    if metric in NOT_ITEM_MEANS:  # not a mean over items: the two-way bootstrap
        draws = {c: np.stack([scored[r]["draws"] for r in runs]) for c, runs in runs_of.items()}
        points = {c: np.array([scored[r]["point"] for r in runs]) for c, runs in runs_of.items()}
    ids = {v["cell"]: v["cell_id"] for v in variants if v["kind"] == "run"}
    moments = comparison.design_moments(design)
    return SplitDesign(split, metric, n_items, runs_of, ids, design, draws, points, moments)


def cell_metric_rows(d: SplitDesign, factors, conf, rng) -> list[dict]:
    """metrics.parquet's cell rows: each cell over its seeds and the items."""
    rows = questions.cell_rows(d.design, conf, d.draws, d.points, rng, d.n_items)
    return [
        {
            "variant": f"cell: {_cell_name(factors, cell)}",
            "kind": "cell",
            "run": None,
            "cell": _cell_name(factors, cell),
            "cell_id": d.ids[cell],
            "seed": None,
            "split": d.split,
            "metric": d.metric,
            "value": row["value"],
            "ci_low": row["ci_low"],
            "ci_high": row["ci_high"],
            "interval_over": row["interval_over"],
            # every cell's interval at once (Bonferroni over the cells): a kept cell's headline
            "sel_low": row["sel_low"],
            "sel_high": row["sel_high"],
        }
        for cell, row in rows.items()
    ]


def contrast_rows(d: SplitDesign, factors, control, conf, rng) -> list[dict]:
    """The cells against the control, the main effects and the interactions."""
    if control is None or control not in d.runs_of:
        return []
    rows = []
    seeds_of = {cell: len(runs) for cell, runs in d.runs_of.items()}
    for c in contrasts(factors, sorted(d.runs_of), control, seeds_of):
        weights = dict(c.weights)
        if not all(cell in d.design for cell in weights):
            continue
        row = questions.contrast_row(
            d.design, weights, conf, moments=d.moments, draws=d.draws, points=d.points,
            rng=rng, n_items=d.n_items,
        )  # fmt: skip
        rows.append(
            {
                "split": d.split,
                "kind": c.kind,
                "subject": c.name,
                "cell_id": d.ids[c.weights[0][0]] if c.kind == "cell" else None,
                "reference": "control",
                "metric": d.metric,
                "estimability": c.estimability or None,
                "aliases": "; ".join(" x ".join(a) for a in c.aliases) or None,
                **row,
            }
        )
    return rows


def quantized_rows(d: SplitDesign, variants, scored, s, conf, its, changes: list) -> list[dict]:
    """Compressed variants against their reference run, on the same items (the items each
    fixed and broke into `changes`)."""
    rows = []
    for v in variants:
        if v["kind"] != "quantized" or v["run"] not in scored:
            continue
        ref, mine = scored[v["run"]], scored[v["name"]]
        row = questions.quantized_row(
            ref["correct"],
            mine["correct"],
            conf,
            s["max_quality_loss"],
            consistency=v["name"].rpartition("/")[2] == "fp32",
        )
        if d.metric in NOT_ITEM_MEANS:
            diff = mine["draws"] - ref["draws"]
            iv = percentile_interval(mine["point"] - ref["point"], diff, conf)
            # _draws: the family-adjusted interval is the same bootstrap at its level
            row |= {"estimate": iv.value, "ci_low": iv.low, "ci_high": iv.high, "_draws": diff}
            row["test"] += " on accuracy (interval: paired bootstrap of the metric)"
        rows.append(
            {
                "split": d.split,
                "kind": "quantized",
                "subject": v["name"],
                "cell_id": v.get("cell_id"),
                "reference": v["run"],
                "metric": d.metric,
                **row,
                **({"_canary": True} if v.get("canary") else {}),
            }
        )
        changes += errors.change_rows(v["name"], v["run"], its, ref["correct"], mine["correct"])
    return rows


def floor_rows(d: SplitDesign, scored, best, factors, conf, rng) -> list[dict]:
    """Each cell against the best floor: the same variance model, the floor without seed
    spread (comparison.contrast counts its df for that)."""
    key = ("floor", best)
    with_floor = {**d.design, key: scored[best]["correct"][None, :]}
    fdraws = fpoints = None
    if d.draws is not None:
        fdraws = {**d.draws, key: scored[best]["draws"][None, :]}
        fpoints = {**d.points, key: np.array([scored[best]["point"]])}
    rows = []
    for cell in d.runs_of:
        row = questions.contrast_row(
            with_floor, {cell: 1.0, key: -1.0}, conf, frozenset([key]), d.moments, fdraws,
            fpoints, rng, d.n_items,
        )  # fmt: skip
        rows.append(
            {
                "split": d.split,
                "kind": "floor",
                "subject": _cell_name(factors, cell),
                "cell_id": d.ids[cell],
                "reference": best,
                "metric": d.metric,
                **row,
            }
        )
    return rows


def _comparisons(
    split,
    variants,
    scored,
    factors,
    control,
    metric,
    s,
    conf,
    power,
    its,
    error_rows,
    metric_rows,
    best,
    rng,
) -> list[dict]:
    """The split's comparison rows (cells into metric_rows), one function per kind of row."""
    d = split_design(split, variants, scored, metric, len(its))
    metric_rows += cell_metric_rows(d, factors, conf, rng)
    rows = contrast_rows(d, factors, control, conf, rng)
    rows += quantized_rows(d, variants, scored, s, conf, its, error_rows["changes"])
    if best is not None:
        rows += floor_rows(d, scored, best, factors, conf, rng)
        if s["floor_changes"]:
            for v in variants:
                if v["kind"] == "run":
                    error_rows["changes"] += errors.change_rows(
                        v["name"], best, its, scored[best]["correct"], scored[v["name"]]["correct"]
                    )
    return rows


def _write(ctx, metric_rows, comparison_rows, error_rows, decisions, items_frame, pd) -> None:
    pd.DataFrame(metric_rows).to_parquet(ctx.outputs["metrics"], index=False)
    item_table.write_items(ctx.outputs["scored_items"], items_frame)
    pd.DataFrame(comparison_rows).to_parquet(ctx.outputs["comparisons"], index=False)
    out = ctx.outputs["errors"]
    out.mkdir(parents=True)
    for name, rows in error_rows.items():
        pd.DataFrame(rows).to_parquet(out / f"{name}.parquet", index=False)
    records.write_decisions(ctx.outputs["decisions"], decisions)
    # summary.txt from what the file holds (read back: the words see what every reader sees)
    from campaign.evaluate.guard_lines import guard_lines

    guards = guard_lines(ctx.inputs.get("guards", []))
    ctx.outputs["summary"].write_text(
        summary_text(records.read_decisions(ctx.outputs["decisions"]), guards)
    )


# The names `campaign compare` calls (campaign.compare: decisions on scored items produced
# elsewhere run this stage's path from the scored items onwards, no second implementation).
comparisons_of, decide_rows, run_metric_rows, cell_name = (
    _comparisons,
    _decide,
    _metric_rows,
    _cell_name,
)
build_decisions, public_row = records.build, questions.public

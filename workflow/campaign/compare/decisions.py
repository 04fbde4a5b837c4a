"""From the scored-items table to decisions, through the evaluate stage's own path.

The table's models become the stage's design: each model a cell of one factor `model`, its runs
(seeds, or fine-tunes of one recipe) the cell's runs; `--control` the control cell, `--floor` a
reference floor (one run, no seed spread), `--variant NAME=SOURCE` a compressed or merged
variant of SOURCE's runs (non-inferiority within the margin, paired by seed). Each task is
scored as the stage scores a split (campaign.evaluate: split_design, cell_metric_rows,
contrast_rows, quantized_rows, floor_rows through its comparisons, Holm and the decisions
through its decide step, the typed records through its builder): no statistic and no policy is
computed here. The rows of every task are decided together, so Holm's families run across the
tasks; a pooled scope (the tasks' items together, each item one weight) is its own family.

Compare has no held-out split: the kept option's level is reported on the items that chose it
(its note says so), where the stage reports it on the split not used to choose.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from campaign.compare.table import CELL, ITEM, SCORE, SEED, SOURCE, TASK, VARIANT
from campaign.core.errors import CampaignError
from campaign.evaluate import (
    Decisions,
    Items,
    Level,
    Quality,
    build_decisions,
    cell_name,
    comparisons_of,
    decide_rows,
    public_row,
    resample_indices,
    run_metric_rows,
    score_interval,
    verdict_lines,
)

FACTOR = "model"  # the one factor whose levels are the compared models
POOLED = "all tasks (items-weighted)"


@dataclass(frozen=True)
class Design:
    """What the user says about the models: roles, bars and settings."""

    control: str | None = None
    floors: tuple[str, ...] = ()
    variants: dict = field(default_factory=dict)  # variant model -> the model it was made from
    margin: float = 0.01  # evaluation.max_quality_loss: the loss a variant may have
    useful: float = 0.0  # evaluation.min_useful_effect: the gain that counts as useful
    confidence: float = 0.95
    power: float = 0.8
    resamples: int = 1000
    seed: int = 0
    pool: str | None = None  # "items": a pooled decision over the tasks, each item one weight


@dataclass
class Scope:
    """One set of items decided on (a task, or the tasks pooled) and what was decided there."""

    name: str
    metric: str
    n_items: int
    decisions: Decisions
    comparisons: list[dict]
    metrics: list[dict]
    changes: list[dict]


def _cell(name: str) -> tuple:
    return (name,)


def variants_of(table, design: Design) -> tuple[list[dict], list[str]]:
    """The stage's variant list (runs, floors, compressed variants) and the assumptions the
    mapping makes, in words; a role naming no model, a floor of several runs, a variant whose
    seeds are not its source's: one line each."""
    import pandas as pd

    runs = table.drop_duplicates(VARIANT)[[VARIANT, CELL, SEED, SOURCE]]
    models = sorted(runs[CELL].unique())
    named = [design.control] if design.control else []
    named += [*design.floors, *design.variants, *design.variants.values()]
    for name in named:
        if name not in models:
            raise CampaignError(
                f"no model named {name!r} in the inputs (they hold {', '.join(models)})"
            )
    seeds = {m: sorted(runs.loc[runs[CELL] == m, SEED].dropna().astype(int)) for m in models}
    by_model = {m: runs[runs[CELL] == m] for m in models}
    trained = [m for m in models if m not in design.floors and m not in design.variants]
    if len(trained) > 1 and design.control is None:
        raise CampaignError(
            f"{len(trained)} models ({', '.join(trained)}) and no --control: name the one the "
            "others are compared with"
        )
    out, assumed = [], []
    for m in design.floors:
        if len(by_model[m]) != 1:
            raise CampaignError(f"floor {m}: {len(by_model[m])} runs; a floor is one run")
        out.append({"kind": "floor", "run": None, "name": by_model[m][VARIANT].iloc[0]})
    for m in trained:
        for _, r in by_model[m].iterrows():
            seed = 0 if pd.isna(r[SEED]) else int(r[SEED])
            out.append({"kind": "run", "run": r[VARIANT], "name": r[VARIANT], "cell": _cell(m),
                        "seed": seed, "cell_id": m})  # fmt: skip
        if len(by_model[m]) == 1 and len(trained) > 1:
            assumed.append(
                f"{m} has one run: its seed-to-seed spread is not measured, so a recipe "
                "question about it stays open (inconclusive (one seed)); its interval is over "
                "items, and the seeds of the other models where they have several"
            )
    for v, source in sorted(design.variants.items()):
        # One source run (a base model): every run of the variant against it; else run by
        # run, paired by seed (a quantized copy of each fine-tune).
        one = len(by_model[source]) == 1
        if not one and (seeds[v] != seeds[source] or len(by_model[v]) != len(by_model[source])):
            raise CampaignError(
                f"variant {v}: runs {seeds[v] or 'one'} do not pair with {source}'s "
                f"{seeds[source] or 'one'}; a variant is paired run by run with its source"
            )
        if not one:  # how runs pair is the user's to check: say it where they read
            assumed.append(
                f"variant {v}: its runs are paired with {source}'s by seed; an lm-eval or "
                "Inspect source's seed is its position among the model's sources in the "
                f"order given (give {v}'s in the order of {source}'s, or a plain table with "
                "a seed column)"
            )
        key = [-1 if pd.isna(x) else int(x) for x in by_model[source][SEED]]
        ref = dict(zip(key, by_model[source][VARIANT], strict=True))
        if not one:
            assumed += _pairing_doubts(table, v, by_model[v], ref)
        for _, r in by_model[v].iterrows():
            seed = -1 if pd.isna(r[SEED]) else int(r[SEED])
            run = by_model[source][VARIANT].iloc[0] if one else ref[seed]
            out.append({"kind": "quantized", "run": run, "name": r[VARIANT],
                        "cell": _cell(source), "seed": max(seed, 0),
                        "cell_id": source})  # fmt: skip
    return out, assumed


# A variant's pairing is doubted, in the summary's assumptions, when another run of the source
# differs from the variant's run on fewer than this share of the items its paired run does.
PAIRING_RATIO = 0.5


def _pairing_doubts(table, v: str, runs, ref: dict) -> list[str]:
    """Where the scores doubt a pairing by seed, a line saying so (the summary's assumptions):
    a compressed or merged copy of a run usually agrees with that run on more items than with
    any other run of its source, so a variant run whose paired run differs from it on over
    twice the items (mean absolute score difference) another run does may have been given in
    another order (an lm-eval or Inspect source's seed is its position). A doubt, not a
    refusal: a copy that collapsed, beside a seed that diverged, is paired right and looks
    like that too; and a copy that moved as many items as a seed does is not caught."""
    wide = table.pivot_table(index=[TASK, ITEM], columns=VARIANT, values=SCORE, aggfunc="first")
    doubts = []
    for _, r in runs.iterrows():
        seed = -1 if r[SEED] != r[SEED] or r[SEED] is None else int(r[SEED])
        apart = {
            run: float(np.nanmean(np.abs(wide[r[VARIANT]] - wide[run]))) for run in ref.values()
        }
        closest = min(apart, key=lambda run: (apart[run], run))
        if apart[closest] < PAIRING_RATIO * apart[ref[seed]]:
            doubts.append(
                f"{r[SOURCE]}: variant run {r[VARIANT]} is paired by seed with {ref[seed]} but "
                f"its scores are closest to {closest} ({apart[closest]:.3f} against "
                f"{apart[ref[seed]]:.3f} mean difference per item): if {v}'s sources were not "
                "given in the order of its source's, give them so, or a table with a seed column"
            )
    return doubts


def _check_tasks(table) -> None:
    """Every run scored on every task (a missing task is as much a mismatch as a missing item)."""
    tasks = sorted(table[TASK].unique())
    for run, rows in table.groupby(VARIANT):
        lacking = sorted(set(tasks) - set(rows[TASK]))
        if lacking:
            raise CampaignError(
                f"{rows[SOURCE].iloc[0]}: {run} has no scores for task {lacking[0]} "
                f"({len(lacking)} of {len(tasks)} tasks missing); compare needs every model on "
                "every task"
            )


def _scored(table, variants, split: str, rng, design: Design) -> tuple:
    """(Items, {variant: {point, draws, correct}}, {variant: Interval}) of one scope's table,
    items in sorted id order; the item resamples shared by every variant (paired), as the
    stage's generated-text scoring draws them."""
    ids = np.array(sorted(table[ITEM].unique()), dtype=object)
    its = Items(split=split, ids=ids, truth=None, labels=None)
    indices = resample_indices(rng, len(ids), design.resamples)
    scored, intervals = {}, {}
    for v in variants:
        rows = table[table[VARIANT] == v["name"]].set_index(ITEM)
        correct = rows.loc[list(ids), SCORE].to_numpy(dtype=np.float64)
        iv = score_interval(correct, indices, design.confidence)
        scored[v["name"]] = {"point": iv.value, "draws": correct[indices].mean(axis=1),
                             "correct": correct}  # fmt: skip
        intervals[v["name"]] = iv
    return its, scored, intervals


def _spec(design: Design, scope: str, metric: str) -> dict:
    return {
        "evaluation": {
            "decide_on": scope,
            "metric": metric,
            "confidence": design.confidence,
            "power": design.power,
            "min_useful_effect": design.useful,
            "max_quality_loss": design.margin,
            "seed": design.seed,
            "resamples": design.resamples,
            "floor_changes": True,
        }
    }


def _rows_of(scope, table, variants, metric, design: Design, n: int) -> tuple:
    """One scope's comparison rows (not yet decided), metric rows and changed items, from the
    stage's comparisons (cells, cells against the control, variants, cells against the
    floor); the floor a cell must beat is the best floor on these items, as the stage's."""
    s = _spec(design, scope, metric)["evaluation"]
    its, scored, intervals = _scored(
        table, variants, scope, np.random.default_rng([design.seed, n]), design
    )
    metric_rows, errors = [], {"changes": []}
    for v in variants:
        name = cell_name([FACTOR], v["cell"]) if "cell" in v else None
        metric_rows += run_metric_rows(v["name"], v, its, {metric: intervals[v["name"]]}, name)
    floors = [v["name"] for v in variants if v["kind"] == "floor"]
    best = max(floors, key=lambda f: scored[f]["point"]) if floors else None
    control = _cell(design.control) if design.control else None
    rows = comparisons_of(
        scope, variants, scored, [FACTOR], control, metric, s, design.confidence,
        design.power, its, errors, metric_rows, best,
        np.random.default_rng([design.seed, n, 1]),
    )  # fmt: skip
    return rows, metric_rows, errors["changes"], best, len(its)


def decide(table, design: Design) -> tuple[list[Scope], list[str]]:
    """The scopes decided on (each task; the tasks pooled when design.pool says how) and the
    assumptions made, in words. `table`: the scored-items table, checked (table.check_table)."""
    _check_tasks(table)
    variants, assumed = variants_of(table, design)
    tasks = sorted(table[TASK].unique())
    metric_of = {t: str(table.loc[table[TASK] == t, "metric"].iloc[0]) for t in tasks}
    parts = {t: (table[table[TASK] == t], metric_of[t]) for t in tasks}
    pooled = {}
    if len(tasks) > 1 and design.pool == "items":
        both = table.assign(**{ITEM: table[TASK] + ":" + table[ITEM]})
        pooled[POOLED] = (both, f"mean score ({', '.join(sorted(set(metric_of.values())))})")
        assumed.append(
            f"The pooled decision weighs every item once: a task counts by its items "
            f"({', '.join(f'{t} {parts[t][0][ITEM].nunique()}' for t in tasks)})"
        )
    elif len(tasks) > 1:
        assumed.append(
            "No pooled decision over the tasks: name its weighting (--pool items) to have one"
        )
    found = {}
    for group in (parts, pooled):
        decided = []
        for n, (scope, (rows, metric)) in enumerate(group.items()):
            got = _rows_of(
                scope, rows, variants, metric, design, n + (100 if group is pooled else 0)
            )
            found[scope] = (metric, *got)
            decided += got[0]
        if decided:  # Holm across the group's tasks: one call, the families span them
            any_s = _spec(design, "", "")["evaluation"]
            decide_rows(decided, None, design.confidence, design.power, any_s, [])
    return [_scope(scope, design, *found[scope]) for scope in found], assumed


def _scope(scope, design, metric, rows, metric_rows, changes, best, n_items) -> Scope:
    comparisons = [public_row(r) for r in rows]
    control = cell_name([FACTOR], _cell(design.control)) if design.control else None
    spec = _spec(design, scope, metric)
    decisions = build_decisions(spec, comparisons, metric_rows, best, control, {}, [])
    decisions = on_same_items(decisions, scope, metric, metric_rows, best)
    return Scope(scope, metric, n_items, decisions, comparisons, metric_rows, changes)


def on_same_items(d: Decisions, scope: str, metric: str, metric_rows, best) -> Decisions:
    """The records with the kept option's level on the items that chose it: the builder reports
    it on the stage's other split, which compare does not have. The verdict's lines are the
    stage's words (verdict_lines) with that level; the note says where it comes from."""
    floor_row = next((r for r in metric_rows if r["variant"] == best), None) if best else None
    kept, v = d.best_cell, d.verdict
    if v is None:
        return d
    level = kept.by_split.get(scope) if kept is not None else None
    if kept is not None:
        kept = replace(kept, reported_on=scope, reported=level or Level())
    lines = verdict_lines(kept, v.against_floor, best, floor_row, scope, scope, metric)
    chosen = floor_row if v.kind == "floor" else (level.__dict__ if level else None)
    quality = Quality(scope, metric, *(_levels(chosen) if chosen else (None, None, None)))
    note = (
        f"Decisions use the items of {scope} ({metric}); compare has no held-out split, so the "
        "kept option's level is on the same items that chose it (one shown better than the "
        "control may read a little high there)."
    )
    rest = d.lines[len(v.lines) + 2 :]
    v = replace(v, line=lines[0], lines=tuple(lines), quality=quality)
    return replace(d, best_cell=kept, verdict=v, note=note, lines=(*lines, "", note, *rest))


def _levels(row: dict) -> tuple:
    return row["value"], row["ci_low"], row["ci_high"]

"""The adaptive campaign's look stage: after a batch of runs, the interim evaluation on the
decision split (accuracy per item, the evaluate phase's own readers), one interim look
(campaign.evaluate.sequential.interim_look) and the runs it appends. Its output (results/
adaptive/look_<j>.json) is what the DAG reads to know which runs to train next and, at the last
look, which runs the campaign has; `campaign status`, the verdict and the report tell it.

look_<j>.json
  look, final, max_looks
  runs        every run the campaign has after this look (the plan's kept runs first, then the
              appended ones in the order they were asked for): what the next look evaluates
  appended    the runs this look adds (empty at the last look)
  history     one {cell_id: seeds} per look so far, this one last
  seeds       {cell_id: seeds} after this look
  decided     {question: decision} of the questions closed so far (adopt, reject)
  rows        one per question: name, kind, estimate, se, df, boundary, of_look, rci_low,
              rci_high, decision, status, seeds_target, reason (sequential.LookResult);
              boundaries [[look, z], ...] (z null: that look could not cross), alpha_spent,
              spending_time, info_fraction: what the boundary used. The next look keeps
              these boundaries and solves its own conditional on them
  stopped     {cell_id: reason}; open_cost_hours {question: hours}
  stop_contrasts  one per stop contrast tested (a cell not stopped against the best cell or
              the floor): name, cell, against, estimate, boundary, of_look, boundaries,
              alpha_spent, spending_time, info_fraction, rci_high, stops (sequential.LookResult
              stop_rows); the next look keeps these boundaries as it keeps the rows'. Records
              written before this key had it not: their stop contrasts are solved afresh
  add_runs, add_hours  the appended runs' count and projected hours (seeds, add_runs and
              appended come from one list: a cell whose candidate runs ran out counts only
              those it got)
  spent       {runs, hours} projected hours of the runs evaluated at this look
  fixed       {runs, hours}: the fixed design at max_seeds for every cell, for comparison
"""

from __future__ import annotations

import json
import math

import numpy as np
from scipy import stats

from campaign.core.errors import CampaignError
from campaign.core.fsutil import atomic_write_text
from campaign.core.io import read_json
from campaign.core.io import read_plan as plan_table
from campaign.evaluate import decide, sequential
from campaign.evaluate.effects import contrasts
from campaign.evaluate.items import SPLITS, campaign_labels, read_items, read_probs
from campaign.evaluate.plan_table import read_plan
from campaign.evaluate.stats import holm


def look_spec(params: dict, look: str | int) -> dict:
    """The look job's params subset: the decision settings, the caps, and the adaptive runs it
    may append ({cell_id: [run ids in seed order]})."""
    from campaign.core.io import cell_id
    from campaign.plan import adaptive_runs

    ablation, evaluation = params["ablation"], params["evaluation"]
    candidates: dict[str, list[str]] = {}
    for run in adaptive_runs(params):
        candidates.setdefault(cell_id(dict(run.cell)), []).append(run.run_id)
    # Appended runs stay within both hour caps: the campaign's budget and the preflight's limit
    # on the plan's projected hours (which the plan checks on the kept runs alone).
    hours = (ablation["budget_hours"], params["preflight"]["max_hours"])
    caps = [h for h in hours if h is not None]
    return {
        "look": int(look),
        "adaptive": ablation["adaptive"],
        "max_runs": ablation["max_runs"],
        "budget_hours": min(caps) if caps else None,
        "evaluation": {
            k: evaluation[k]
            for k in ("decide_on", "confidence", "power", "min_useful_effect", "slices")
        },
        "candidates": candidates,
    }


def _items(ctx, spec: dict):
    """The decision split's items, labelled as the evaluation labels them."""
    split = spec["evaluation"]["decide_on"]
    labels = campaign_labels(ctx.inputs["train"][0], [ctx.inputs[x][0] for x in SPLITS])
    return read_items(ctx.inputs[split][0], split, labels, spec["evaluation"]["slices"])


def _design(ctx, items, split: str) -> tuple[dict, dict]:
    """({cell_id: Y (k, n_items)} on the decision split, seeds in seed order; {run: cell_id})."""
    factors, cells, seeds, control, ids = read_plan(ctx.inputs["runs"][0])
    rows: dict[str, list] = {}
    run_cell = {}
    for path in ctx.inputs[f"predictions_{split}"]:
        run = path.parent.name
        if run not in cells:
            raise CampaignError(f"run {run}: predictions given but not in the plan table")
        correct = (read_probs(path, items).argmax(axis=1) == items.truth).astype(np.float64)
        cid = ids[cells[run]]
        rows.setdefault(cid, []).append((seeds[run], correct))
        run_cell[run] = cid
    design = {c: np.stack([y for _, y in sorted(v, key=lambda x: x[0])]) for c, v in rows.items()}
    return design, run_cell


def _questions(runs_path, design: dict) -> tuple[list, str]:
    """The questions of the look (each cell against the control, the estimable main effects and
    interactions, as the evaluation asks them) keyed by cell id, and the control's cell id."""
    factors, cells, _, control, ids = read_plan(runs_path)
    by_id = {cid: cell for cell, cid in ids.items()}
    present = sorted(by_id[c] for c in design)
    seeds_of = {by_id[c]: y.shape[0] for c, y in design.items()}
    out = []
    for c in contrasts(factors, present, control, seeds_of):
        weights = {ids[cell]: w for cell, w in c.weights}
        if all(cid in design for cid in weights):
            out.append(sequential.Question(c.name, c.kind, weights))
    return out, ids[control]


def _hours(runs_path) -> tuple[dict, dict]:
    """({run: projected hours}, {cell_id: projected hours of one run}) from the plan table."""
    table = plan_table(runs_path, ("run", "seed", "projected_hours"))
    per_run = {r["run"]: float(r["projected_hours"]) for r in table.rows}
    per_cell: dict[str, list] = {}
    for r in table.rows:
        per_cell.setdefault(r["cell_id"], []).append(float(r["projected_hours"]))
    return per_run, {c: float(np.mean(v)) for c, v in per_cell.items()}


def _floor(ctx, split: str, items) -> tuple | None:
    """(key, Y (1, n_items)) of the best floor on the decision split, or None."""
    folders = ctx.inputs.get("floor", [])
    if not folders:
        return None
    best = None
    for sub in sorted(p for p in folders[0].iterdir() if p.is_dir()):
        probs = read_probs(sub / f"predictions_{split}.parquet", items)
        y = (probs.argmax(axis=1) == items.truth).astype(np.float64)
        if best is None or y.mean() > best[1].mean():
            best = (f"floor/{sub.name}", y[None, :])
    return best


def stage_look(ctx) -> None:
    """One interim look: evaluate the runs so far, decide on repeated intervals, append runs."""
    spec = ctx.spec
    adaptive = spec["adaptive"]
    previous = {}
    if ctx.inputs.get("previous"):
        previous = read_json(ctx.inputs["previous"][0])
    items = _items(ctx, spec)
    design, run_cell = _design(ctx, items, spec["evaluation"]["decide_on"])
    questions_, control = _questions(ctx.inputs["runs"][0], design)
    run_hours, cell_hours = _hours(ctx.inputs["runs"][0])
    runs = list(previous.get("runs", [])) or sorted(run_cell, key=list(run_hours).index)
    if set(runs) != set(run_cell):
        raise CampaignError(
            f"look {spec['look']}: the predictions given are not the runs of the last look"
        )
    seeds_now = {c: int(y.shape[0]) for c, y in design.items()}
    history = [*previous.get("history", []), seeds_now]
    if len(history) != spec["look"]:
        raise CampaignError(f"look {spec['look']}: {len(history) - 1} earlier looks given")
    spent = {"runs": len(runs), "hours": sum(run_hours[r] for r in runs)}
    settings = {
        **{k: spec["evaluation"][k] for k in ("confidence", "power", "min_useful_effect")},
        "max_looks": adaptive["max_looks"],
        "max_seeds": adaptive["max_seeds"],
        "budget_hours": spec["budget_hours"],
        "max_runs": spec["max_runs"],
    }
    result = sequential.interim_look(
        design,
        questions_,
        control,
        history,
        settings,
        cell_hours,
        spent,
        _floor(ctx, spec["evaluation"]["decide_on"], items),
        previous.get("decided", {}),
        {r["name"]: r["boundaries"] for r in previous.get("rows", []) if r.get("boundaries")},
        previous.get("stopped", {}),
        {r["name"]: r["boundaries"] for r in previous.get("stop_contrasts", [])},
    )
    appended, seeds = appended_runs(result.seeds, seeds_now, runs, spec["candidates"])
    out = {
        "look": spec["look"],
        "final": result.final or not appended,
        "max_looks": adaptive["max_looks"],
        "runs": [*runs, *appended],
        "appended": appended,
        "history": history,
        "seeds": seeds,
        "decided": {
            r["name"]: r["decision"] for r in result.rows if r["decision"] in sequential.CLOSED
        },
        "rows": [_clean(r) for r in result.rows],
        "stopped": result.stopped,
        "stop_contrasts": [_clean(r) for r in result.stop_rows],
        "add_runs": len(appended),
        "add_hours": sum((k - seeds_now.get(c, 0)) * cell_hours[c] for c, k in seeds.items()),
        "open_cost_hours": result.open_cost_hours,
        "spent": spent,
        "fixed": {
            "runs": len(cell_hours) * adaptive["max_seeds"],
            "hours": adaptive["max_seeds"] * sum(cell_hours.values()),
        },
    }
    atomic_write_text(ctx.outputs["look"], json.dumps(out, indent=2, sort_keys=True) + "\n")


def appended_runs(wanted: dict, seeds_now: dict, runs: list, candidates: dict) -> tuple[list, dict]:
    """(the runs a look appends, {cell_id: seeds after them}): towards `wanted: {cell_id:
    seeds}`, each cell's next candidate runs (`candidates: {cell_id: [run ids in seed order]}`,
    those in `runs` already appended by earlier looks). A cell whose candidates run out (the
    plan's max_runs cut them) gets what there is, and its seeds count only those: the counts
    and the list are one."""
    appended: list = []
    seeds = dict(seeds_now)
    for cid, total in sorted(wanted.items()):
        mine = candidates.get(cid, [])
        done = sum(r in mine for r in runs)  # appended by earlier looks
        add = mine[done : done + max(0, total - seeds_now.get(cid, 0))]
        appended += add
        seeds[cid] = seeds_now.get(cid, 0) + len(add)
    return appended, seeds


def _clean(row: dict) -> dict:
    return {
        k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in row.items()
    }


ADAPTIVE_OVER = "repeated confidence interval at the last look (group-sequential, O'Brien-Fleming)"


FLOOR_OVER = "Bonferroni over the {k} planned looks: the looks chose the seeds"


def apply_last_look(
    rows: list[dict], looks: list[dict], alpha: float | None = None, useful: float | None = None
) -> None:
    """An adaptive campaign's decisions on the decision split: each effect, interaction and
    cell-against-control row takes the looks' repeated intervals (intersected) as its adjusted
    interval, and the look's decision (a question closed at an earlier look keeps that
    look's; an interaction is shown when that interval excludes 0), so the decision is valid
    after the looks chose what to add and stop; in place. A row of those kinds that no look
    asked is not decided (decision inconclusive / no interaction shown, undecided_reason says
    why). Rows are matched on (kind, name): both come from campaign.evaluate.effects.contrasts
    over the same plan and runs.

    A cell-against-floor row (what the verdict keeps rests on it; the looks stop cells on it)
    is tested at alpha / max_looks: its p on the df capped at the seed df (interval_df), Holm
    over the floor family, times the planned looks (Bonferroni over the looks, more conservative
    than the O'Brien-Fleming boundary at any look), `alpha` being the level its fixed-design
    decision used.

    Looks whose repeated intervals do not overlap (`_intersection`): the row shows their span,
    is decided on it (decide.effect at `useful`, min_useful_effect; without it, inconclusive)
    and says so: intervals_disagree true and interval_note naming each look's interval."""
    if not looks:
        return
    last = looks[-1]
    k = int(last.get("max_looks", 1))
    if alpha is not None and k > 1:
        _floor_rows_over_looks(rows, k, alpha)
    by_name = {(r["kind"], r["name"]): r for r in last["rows"]}
    for r in rows:
        if r["kind"] not in SEEDED_KINDS:
            continue
        found = by_name.get((r["kind"], r["subject"]))
        if found is None:  # the looks chose its seeds but never asked it: nothing valid decides
            r["decision"] = NOT_DECIDED[r["kind"]]
            r["undecided_reason"] = NOT_ASKED
            r["interval_over"] = f"{r['interval_over']}; {NOT_ASKED}"
            continue
        r["adj_low"], r["adj_high"], apart = _intersection(looks, r["kind"], found)
        if r["kind"] == "interaction":
            r["decision"] = _interaction(r["adj_low"], r["adj_high"], found)
        elif apart:
            r["decision"] = (
                decide.INCONCLUSIVE
                if useful is None
                else decide.effect(r["adj_low"], r["adj_high"], int(found["n_seeds"]), useful)
            )
        else:
            r["decision"] = last["decided"].get(found["name"], found["decision"])
        if apart:
            r["intervals_disagree"] = True
            r["interval_note"] = DISAGREE.format(
                looks=", ".join(f"look {j} [{lo * 100:.1f}, {hi * 100:.1f}]" for j, lo, hi in apart)
            )
        joined = "their span: they do not overlap" if apart else "intersected with the earlier"
        r["interval_over"] = (
            f"{r['interval_over']}; adjusted: {ADAPTIVE_OVER} {last['look']}, {joined} looks'"
        )
        r["look"] = found["of_look"]
        # The fixed design's Holm p and detectable size are not valid over seeds the looks chose.
        r["p_holm"] = r["mde"] = math.nan
        if found.get("status") == "stopped":
            # No look adds seeds to a stopped cell: left open, it is not priced in seeds.
            r["stopped_by_look"] = found.get("reason") or "a cell of it stopped"


# Every contrast whose cells the looks gave seeds: decided on the looks' repeated intervals only
# (a fixed-design interval or Holm p over seeds the interim results chose is not valid).
SEEDED_KINDS = ("main", "cell", "interaction")
NOT_DECIDED = {
    "main": decide.INCONCLUSIVE,
    "cell": decide.INCONCLUSIVE,
    "interaction": "no interaction shown",
}
NOT_ASKED = (
    "not decided: the looks chose its cells' seeds but did not ask it, so no repeated "
    "interval covers it"
)


def _floor_rows_over_looks(rows: list[dict], k: int, alpha: float) -> None:
    """The cell-against-floor rows of an adaptive campaign: each p on the estimate's df capped
    at the seed level's error df (sequential.interval_df, as the looks' intervals read theirs:
    on few seed df the Satterthwaite df is largest where the seed part came out low), Holm over
    the family, times the `k` planned looks; in place."""
    family = [
        r
        for r in rows
        if r["kind"] == "floor" and r.get("p_holm") is not None and math.isfinite(r["p_holm"])
    ]
    if not family:
        return
    raw = np.array([_p_on_capped_df(r) for r in family], dtype=np.float64)
    for r, p in zip(family, holm(raw), strict=True):
        r["p_holm"] = min(1.0, float(p) * k)
        r["decision"] = decide.against_floor(r["estimate"], r["p_holm"], alpha)
        r["interval_over"] = f"{r['interval_over']}; test: {FLOOR_OVER.format(k=k)}"


def _p_on_capped_df(row: dict) -> float:
    """Two-sided p that the row's contrast is 0, t on sequential.interval_df(row)."""
    se, est = float(row["se"]), float(row["estimate"])
    if not se > 0:
        return 1.0 if est == 0 else 0.0
    df = sequential.interval_df(row)
    t = abs(est) / se
    sf = stats.norm.sf(t) if not math.isfinite(df) else stats.t.sf(t, df)
    return float(min(1.0, 2 * sf))


def _interaction(low, high, found: dict) -> str:
    """An interaction on the looks' intersected repeated interval: shown when it excludes 0."""
    if int(found.get("n_seeds") or 0) < 2:
        return decide.ONE_SEED
    if low is None or high is None:
        return "no interaction shown"
    return "interaction" if low > 0 or high < 0 else "no interaction shown"


DISAGREE = (
    "the looks' repeated intervals do not overlap ({looks}): at least one misses the true "
    "value, which all of them together do with probability at most alpha, so no look's "
    "decision stands; shown: their span, decided on it"
)


def _intersection(
    looks: list[dict], kind: str, found: dict
) -> tuple[float, float, list[tuple[int, float, float]]]:
    """(low, high, apart): the question's repeated intervals at every look intersected, apart
    []; or, where they do not overlap, their span, apart [(look, low, high), ...].

    The intervals cover the true value together with probability >= 1 - alpha, so their
    intersection is as valid as each, and a question an earlier look closed keeps an interval
    that agrees with its decision (the last look's alone may not). An empty intersection is
    that event failing (or a seed spread estimated too small at a look): the data say nothing
    consistent, and picking one look's interval (the last, say) would choose among conflicting
    answers after seeing them. The span (the smallest interval holding every look's) is the
    defensible choice: it holds the true value whenever any one look's interval does, a
    decision read off it is one every look's own interval agrees with (adopt only if every
    look's lower end clears the useful size), so it can only be more cautious than any look's,
    and the coverage of the rule as a whole stays >= 1 - alpha (it is the intersection whenever
    all intervals cover). Infinite or missing ends (a look that could not cross) are left out."""
    found_at = int(found.get("of_look") or looks[-1]["look"])
    seen = [(found_at, found["rci_low"], found["rci_high"])]
    for look in looks[:-1]:
        for row in look["rows"]:
            if (row["kind"], row["name"]) == (kind, found["name"]):
                seen.append(
                    (int(row.get("of_look") or look["look"]), row["rci_low"], row["rci_high"])
                )
    lows = [x for _, x, _ in seen if _finite(x)]
    highs = [x for _, _, x in seen if _finite(x)]
    low = max(lows) if lows else found["rci_low"]
    high = min(highs) if highs else found["rci_high"]
    if low <= high:
        return low, high, []
    finite = [(j, lo, hi) for j, lo, hi in seen if _finite(lo) and _finite(hi)]
    return min(lows), max(highs), sorted(set(finite))


def _finite(x) -> bool:
    return x is not None and math.isfinite(x)

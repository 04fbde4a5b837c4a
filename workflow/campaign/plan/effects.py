"""What the plan's runs estimate, as data for the phases that analyse trained runs.

`plan_effects(params, runs_tsv=None)` tells, for the current plan (or the runs a plan table kept),
each run's cell, seed and role, and every estimable main effect and two-factor interaction with
its contrasts: weighted sums of cell means, each cell mean the mean over that cell's runs (its
seeds), so a consumer needs only the runs' metrics.

How a contrast is built (levels against the control's):
    main effect of F at level a     matched pairs: every cell at F = a whose twin at F = control
                                    (all other factors equal) is planned; weight ±1/pairs each.
                                    A fraction has no such twins: the mean of the cells at F = a
                                    minus the mean of those at the control's level (halves)
    interaction F × G at (a, b)     matched quadruples (a, b), (a, g0), (f0, b), (f0, g0), the
                                    other factors equal: y_ab − y_a0 − y_0b + y_00, averaged.
                                    Without any (a fraction): the halves by the sign product
                                    (both moved or neither, minus one moved), twice, so
                                    it is on the quadruples' scale; two-level only
The verdict (clear, at_control, if_additive) and aliases are campaign.plan.estimability's; terms
it finds not estimable are left out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from campaign.core.errors import CampaignError
from campaign.core.io import read_plan
from campaign.plan.estimability import analyse
from campaign.plan.planner import design_parts, plan_index

Levels = tuple[Any, ...]


def _kept_in(path: Path, planned: dict) -> set[str]:
    rows = read_plan(path, ("run", "kept")).rows
    for n, row in enumerate(rows, start=2):
        if row["run"] not in planned:
            raise CampaignError(
                f"{path}:{n}: {row['run']} is not a run of the current plan (the plan table is "
                f"older than params; rerun it)"
            )
    return {r["run"] for r in rows if r["kept"] == "true"}


def plan_effects(params: dict, runs_tsv: str | Path | None = None) -> dict:
    """{factors, control, runs, effects} of the plan (only its kept runs when a plan table is
    given: results/plan/runs.tsv, after the budget cut):

    factors   the factors' dotted keys, in params order
    control   {key: the control's level}
    runs      {run id: {levels: {key: level}, seed, tier, kept, role, moved}} in plan order;
              role "control" (the baseline recipe, any seed) or "moved", moved the keys whose
              level differs from the control's
    effects   one per estimable term: {term: [key] or [key, key], kind, seeds, aliases (lists
              of keys), contrasts: [{levels: {key: level}, weights: [{runs: [ids], weight}]}]}
              estimate = Σ weight × mean(metric over runs); kept runs only
    """
    index = plan_index(params)
    keys, _, baseline, _ = design_parts(params)
    control = tuple(baseline[k] for k in keys)
    kept = _kept_in(Path(runs_tsv), index) if runs_tsv is not None else None
    runs: dict[str, dict] = {}
    cell_runs: dict[Levels, list[str]] = {}
    levels: list[list[Any]] = [[] for _ in keys]
    for rid, run in index.items():
        cell = tuple(level for _, level in run.cell)
        is_kept = run.kept if kept is None else rid in kept
        runs[rid] = {
            "levels": dict(run.cell),
            "seed": run.seed,
            "tier": run.tier,
            "kept": is_kept,
            "role": "moved" if run.moved else "control",
            "moved": list(run.moved),
        }
        for i, level in enumerate(cell):
            if level not in levels[i]:
                levels[i].append(level)
        if is_kept:
            cell_runs.setdefault(cell, []).append(rid)
    cells = list(cell_runs)
    effects = [
        {
            **{k: v for k, v in term.items() if k != "contrasts"},
            "contrasts": [
                {
                    "levels": lv,
                    "weights": [{"runs": cell_runs[c], "weight": w} for c, w in weights],
                }
                for lv, weights in term["contrasts"]
            ],
        }
        for term in estimable_contrasts(
            [(c, len(cell_runs[c])) for c in cells], keys, control, levels
        )
    ]
    return {
        "factors": keys,
        "control": dict(zip(keys, control, strict=True)),
        "runs": runs,
        "effects": effects,
    }


def estimable_contrasts(
    cells: list[tuple[Levels, int]],
    keys: list[str],
    control: Levels,
    levels: list[list[Any]] | None = None,
) -> list[dict]:
    """Which cells estimate which effect, for any consumer (this module's plan_effects, the
    evaluate phase's comparisons): one entry per estimable main effect and two-factor interaction,
    {term: [key] or [key, key], kind, seeds, aliases, contrasts: [(levels {key: level},
    [(cell, weight)])]}; estimate = Σ weight × the cell's mean over its seeds.

    cells: (levels in `keys` order, seeds run) per distinct cell; levels: each factor's levels in
    the whole plan (default: those the cells hold, in first-seen order)."""
    if levels is None:
        levels = [list(dict.fromkeys(c[i] for c, _ in cells)) for i in range(len(keys))]
    present = [c for c, _ in cells]
    out = []
    for v in analyse(cells, keys, control, levels):
        if v.kind == "none":
            continue
        idx = [keys.index(k) for k in v.term]
        contrasts = (
            _main_contrasts(idx[0], present, control, keys)
            if len(idx) == 1
            else _pair_contrasts(idx[0], idx[1], present, control, keys)
        )
        out.append(
            {
                "term": list(v.term),
                "kind": v.kind,
                "seeds": v.seeds,
                "aliases": [list(a) for a in v.aliases],
                "contrasts": contrasts,
            }
        )
    return out


def _with(cell: Levels, i: int, level: Any) -> Levels:
    return tuple(level if n == i else v for n, v in enumerate(cell))


def _moved_levels(i: int, cells: list[Levels], control: Levels) -> list[Any]:
    out: list[Any] = []
    for c in cells:
        if c[i] != control[i] and c[i] not in out:
            out.append(c[i])
    return out


def _halves(plus: list[Levels], minus: list[Levels]) -> list[tuple[Levels, float]]:
    if not plus or not minus:
        return []
    return [(c, 1 / len(plus)) for c in plus] + [(c, -1 / len(minus)) for c in minus]


def _main_contrasts(i: int, cells: list[Levels], control: Levels, keys: list[str]):
    present = set(cells)
    out = []
    for a in _moved_levels(i, cells, control):
        pairs = [
            (c, _with(c, i, control[i]))
            for c in cells
            if c[i] == a and _with(c, i, control[i]) in present
        ]
        if pairs:
            weights = [(c, s / len(pairs)) for p in pairs for c, s in zip(p, (1, -1), strict=True)]
        else:
            weights = _halves(
                [c for c in cells if c[i] == a], [c for c in cells if c[i] == control[i]]
            )
        if weights:
            out.append(({keys[i]: a}, _merged(weights)))
    return out


def _pair_contrasts(i: int, j: int, cells: list[Levels], control: Levels, keys: list[str]):
    present = set(cells)
    out = []
    moved_i, moved_j = _moved_levels(i, cells, control), _moved_levels(j, cells, control)
    for a in moved_i:
        for b in moved_j:
            quads = []
            for c in cells:
                if c[i] == a and c[j] == b:
                    a0 = _with(c, j, control[j])
                    b0 = _with(c, i, control[i])
                    zero = _with(a0, i, control[i])
                    if {a0, b0, zero} <= present:
                        quads.append(((c, 1), (a0, -1), (b0, -1), (zero, 1)))
            if quads:
                weights = [(c, s / len(quads)) for q in quads for c, s in q]
            elif len(moved_i) == 1 and len(moved_j) == 1:  # two levels each: sign product
                both = [c for c in cells if (c[i] == a) == (c[j] == b)]
                one = [c for c in cells if (c[i] == a) != (c[j] == b)]
                # mean(both) − mean(one) is half of y_ab − y_a0 − y_0b + y_00 in a 2 × 2
                weights = [(c, 2 * w) for c, w in _halves(both, one)]
            else:
                weights = []
            if weights:
                out.append(({keys[i]: a, keys[j]: b}, _merged(weights)))
    return out


def _merged(weights: list[tuple[Levels, float]]) -> list[tuple[Levels, float]]:
    """One weight per cell (a cell in several pairs sums them), in first-seen order."""
    total: dict[Levels, float] = {}
    for c, w in weights:
        total[c] = total.get(c, 0.0) + w
    return [(c, round(w, 12)) for c, w in total.items() if abs(w) > 1e-12]

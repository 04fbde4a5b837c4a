"""The planner: params → the runs of the campaign (baseline and ablation cells × seeds).

Pure and cheap: the Snakefile calls it at DAG-build time. A run's id is a hash of its resolved
spec (model, train recipe, seed) and nothing else, so editing one ablation level adds new run
paths and leaves every other run untouched.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from campaign.core.errors import CampaignError
from campaign.core.hashing import canonical_json, hash_value
from campaign.core.params import get_key
from campaign.plan import designs

RUN_ID_PREFIX = "run-"
RUN_ID_HEX = 12
RUN_ID_PATTERN = RUN_ID_PREFIX + f"[0-9a-f]{{{RUN_ID_HEX}}}"
# The plan table's columns that are not factor levels (results/plan/runs.tsv).
ID_COLUMNS = ("run", "roles", "seed")


@dataclass(frozen=True)
class Run:
    """One training run: a cell of the design at one seed."""

    run_id: str
    seed: int
    cell: tuple[tuple[str, Any], ...]  # (dotted factor key, level) for every factor
    spec: dict = field(hash=False, compare=False)
    roles: tuple[str, ...] = ()  # "baseline" (the control cell) and/or "grid"


def factor_keys(factors: dict, prefix: str = "") -> list[str]:
    """Dotted keys of the factors mapping, in the order params lists them."""
    keys = []
    for name, value in factors.items():
        dotted = f"{prefix}.{name}" if prefix else name
        if isinstance(value, dict):
            keys.extend(factor_keys(value, dotted))
        else:
            keys.append(dotted)
    return keys


def _copy(value: Any) -> Any:
    """A copy of nested dicts and lists of plain values (5x faster than copy.deepcopy, which
    matters at 1,000 runs when the Snakefile builds the plan)."""
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def resolved_spec(params: dict, overrides: dict[str, Any], seed: int) -> dict:
    """The full recipe a run trains with: model and train sections with the cell's levels set."""
    # One copy per spec (the sections are small); levels are then set in place.
    spec = {"model": _copy(params["model"]), "train": _copy(params["train"])}
    for key, level in overrides.items():
        node = spec
        *head, last = key.split(".")
        for part in head:
            node = node[part]
        node[last] = level
    spec["seed"] = seed
    return spec


# Train keys that change how a run is executed, not what it computes (resume is exact): they are
# left out of run ids and store keys, so changing them retrains nothing.
OPERATIONAL_TRAIN_KEYS = ("checkpoint_every", "keep_checkpoints")


def identity(spec: dict) -> dict:
    """The part of a run spec that decides its result: what run ids and store keys hash.

    Operational train keys are left out, and so is where a pretrained model lies: its folder
    counts by its content (the base_model input of every job that builds the model)."""
    train = {k: v for k, v in spec["train"].items() if k not in OPERATIONAL_TRAIN_KEYS}
    model = spec["model"]
    if model["source"] != "from_config":
        model = {**model, "source": "pretrained"}
    return {**spec, "model": model, "train": train}


def run_id(spec: dict) -> str:
    return RUN_ID_PREFIX + hash_value(identity(spec))[:RUN_ID_HEX]


def plan_runs(params: dict) -> list[Run]:
    """Baseline + the design's cells (`ablation.design`), each × every seed; identical runs merged.

    The baseline is the control cell (the train/model values themselves). When the baseline's
    values are also levels of every factor, its grid cell is the same run and is computed once.
    """
    ablation = params["ablation"]
    keys = factor_keys(ablation["factors"])
    levels = [get_key(ablation["factors"], k) for k in keys]
    baseline = {k: get_key(params, k) for k in keys}
    baseline_cell = tuple(baseline.items())
    design = designs.get(ablation["design"])
    cells: list[tuple[tuple[tuple[str, Any], ...], str]] = [(baseline_cell, "baseline")]
    cells += [(cell, "grid") for cell in design.cells(keys, levels, baseline, ablation)]

    runs: dict[str, Run] = {}
    for seed in ablation["seeds"]:
        for cell, role in cells:
            spec = resolved_spec(params, dict(cell), seed)
            rid = run_id(spec)
            if rid in runs:
                old = runs[rid]
                if role not in old.roles:
                    runs[rid] = Run(rid, seed, old.cell, old.spec, old.roles + (role,))
                continue
            runs[rid] = Run(rid, seed, cell, spec, (role,))

    n_cells = len({r.cell for r in runs.values()})
    if len(runs) > ablation["max_runs"]:
        raise CampaignError(
            f"ablation.max_runs: the plan has {len(runs)} runs ({n_cells} cells × "
            f"{len(ablation['seeds'])} seeds) but max_runs is {ablation['max_runs']}; "
            f"raise max_runs or trim ablation.factors"
        )
    return list(runs.values())


def run_ids(params: dict) -> list[str]:
    return [r.run_id for r in plan_runs(params)]


_INDEX_CACHE: dict[str, dict[str, Run]] = {}


def plan_index(params: dict) -> dict[str, Run]:
    """Runs by id, memoized on the params' content."""
    fingerprint = canonical_json(
        {"model": params["model"], "train": params["train"], "ablation": params["ablation"]}
    )
    if fingerprint not in _INDEX_CACHE:
        _INDEX_CACHE[fingerprint] = {r.run_id: r for r in plan_runs(params)}
    return _INDEX_CACHE[fingerprint]


def run_spec(params: dict, rid: str) -> dict:
    try:
        return plan_index(params)[rid].spec
    except KeyError:
        raise CampaignError(f"{rid}: not a run of the current plan") from None


def plan_rows(runs: list[Run]) -> list[dict]:
    """One flat row per run: id, roles, seed, then one column per factor."""
    rows = []
    for run in runs:
        row = {"run": run.run_id, "roles": "+".join(run.roles), "seed": run.seed}
        row.update({k: v for k, v in run.cell})
        rows.append(row)
    return rows


def format_table(rows: list[dict]) -> str:
    """A plain fixed-width text table."""
    if not rows:
        return "(no runs)"
    columns = list(rows[0])
    cells = [[str(r.get(c, "")) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join(lines)


# ------------------------------------------------------------------ stages (campaign.core.runner)
def stage_run_spec(ctx) -> None:
    """Write one run's resolved spec: what its training job will consume."""
    ctx.outputs["spec"].write_text(json.dumps(ctx.spec, indent=2, sort_keys=True) + "\n")


def table_spec(params: dict) -> dict:
    """The plan table's params subset: the rows, each run's recipe as far as its cost goes, the
    baseline recipe it is scaled against, and the limits the plan is held to."""
    runs = list(plan_index(params).values())
    cost_keys = (
        "max_steps",
        "eval_every",
        "checkpoint_every",
        "keep_checkpoints",
        "micro_batch",
        "grad_accum",
        "max_length",
    )
    return {
        "rows": plan_rows(runs),
        "recipes": {r.run_id: {k: r.spec["train"][k] for k in cost_keys} for r in runs},
        "baseline": {k: params["train"][k] for k in cost_keys},
        "max_hours": params["preflight"]["max_hours"],
        "disk_margin": params["preflight"]["disk_margin"],
    }


def stage_plan_table(ctx) -> None:
    """Write the plan as a TSV table, one row per run, with each run's projected cost (spec: see
    table_spec; inputs: the preflight's report and measurements)."""
    from campaign.plan.projection import project

    report = json.loads(ctx.inputs["preflight_report"][0].read_text(encoding="utf-8"))
    measured = json.loads(ctx.inputs["preflight_measurements"][0].read_text(encoding="utf-8"))
    rows = project(ctx.spec, report, measured)
    columns = list(rows[0]) if rows else ["run", "roles", "seed"]
    lines = ["\t".join(columns)]
    lines += [
        "\t".join(json.dumps(r[c]) if not isinstance(r[c], str) else r[c] for c in columns)
        for r in rows
    ]
    ctx.outputs["runs"].write_text("\n".join(lines) + "\n")

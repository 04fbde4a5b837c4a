"""The planner: params → the runs of the campaign, in the order that tells most per unit of cost.

Pure and cheap: the Snakefile calls it at DAG-build time. The runs are the control (the baseline
recipe) and the design's cells (`ablation.design`), each at every seed, identical runs merged: a
run's id is a hash of its resolved spec, so a cell equal to the control is the control, and
editing one level adds new run paths and leaves every other run untouched. The order (control,
main effects, interactions, higher orders, extra seeds; cheaper first within a tier) is
campaign.plan.order's; `ablation.max_runs` keeps the first runs of it. `ablation.budget_hours`
cuts further from the end of the same order, in the plan table, which has the preflight's
measurements to turn runs into hours.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from campaign.core.defaults import train_key
from campaign.core.errors import CampaignError
from campaign.core.hashing import canonical_json
from campaign.core.io import cell_id, read_json
from campaign.core.params import get_key
from campaign.plan import designs
from campaign.plan.columns import in_order, tsv_text
from campaign.plan.guard_jobs import guard_tasks, plan_guards
from campaign.plan.ids import BUILTIN_TRAINER, RUN_ID_PATTERN, identity, resolved_spec, run_id
from campaign.plan.order import tier_cells

__all__ = ["RUN_ID_PATTERN", "identity", "resolved_spec", "run_id"]

# A design is enumerated and ordered whole before any cut: past this many runs, refuse.
MAX_PLANNED_RUNS = 100_000


@dataclass(frozen=True)
class Run:
    """One training run: a cell of the design at one seed, and its place in the plan."""

    run_id: str
    seed: int
    cell: tuple[tuple[str, Any], ...]  # (dotted factor key, level) for every factor
    spec: dict = field(hash=False, compare=False)
    tier: str = "control"  # campaign.plan.order.TIERS
    rank: int = 0  # position in the plan's order, 0 first
    kept: bool = True  # within ablation.max_runs (budget_hours is the plan table's cut)
    moved: tuple[str, ...] = ()  # the factor keys whose level is not the control's (): control

    @property
    def roles(self) -> tuple[str, ...]:
        """("baseline",) for the control recipe (at any seed), ("grid",) for the other cells."""
        return ("grid",) if self.moved else ("baseline",)


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


def training_tokens(train: dict) -> int:
    """Padded tokens a run trains on (steps × micro_batch × grad_accum × devices × max_length):
    the planner's measure of cost, known before anything ran. The projection scales the
    preflight's measured step rate by the same tokens, so cheaper here is cheaper in projected
    card-hours (what the budget prices) unless the runs differ in how often they evaluate."""
    per_step = train["micro_batch"] * train["grad_accum"] * int(train_key(train, "devices"))
    return train["max_steps"] * per_step * train["max_length"]


def has_key(params: dict, dotted: str) -> bool:
    node = params
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def design_parts(params: dict) -> tuple[list[str], list[list[Any]], dict[str, Any], Any]:
    """(factor keys, their levels, the baseline's value of each, the design module)."""
    ablation = params["ablation"]
    keys = factor_keys(ablation["factors"])
    levels = [get_key(ablation["factors"], k) for k in keys]
    unset = [k for k in keys if not has_key(params, k)]
    if unset:
        raise CampaignError(
            f"ablation.factors.{unset[0]}: the baseline sets no {unset[0]}; set it (the control "
            f"cell's level) in {unset[0].split('.')[0]}"
        )
    baseline = {k: get_key(params, k) for k in keys}
    return keys, levels, baseline, designs.get(ablation["design"])


def plan_runs(params: dict) -> list[Run]:
    """Every run of the design in plan order, `kept` for the first ablation.max_runs."""
    ablation = params["ablation"]
    keys, levels, baseline, design = design_parts(params)
    if (
        ablation["design"] == "full"
        and math.prod(map(len, levels)) * len(ablation["seeds"]) > MAX_PLANNED_RUNS
    ):
        _too_many(math.prod(map(len, levels)), ablation)
    control = tuple(baseline.items())
    listed = [control, *design.cells(keys, levels, baseline, ablation)]
    seeds = ablation["seeds"]
    if len(listed) * len(seeds) > MAX_PLANNED_RUNS:
        _too_many(len(listed), ablation)

    # Distinct cells, the control first: a cell whose recipe is the control's is the control.
    cells, specs, seen = [], [], set()
    for cell in listed:
        spec = resolved_spec(params, dict(cell), seeds[0])
        rid = run_id(spec)
        if rid not in seen:
            seen.add(rid)
            cells.append(cell)
            specs.append(spec)
    order = tier_cells(cells, [training_tokens(s["train"]) for s in specs])

    moved = [tuple(k for k, v in cell if v != baseline[k]) for cell in cells]
    runs: list[Run] = []
    for n, seed in enumerate(seeds):
        for i, tier in order:
            spec = specs[i] if n == 0 else resolved_spec(params, dict(cells[i]), seed)
            rank = len(runs)
            kept = rank < ablation["max_runs"]
            runs.append(
                Run(
                    run_id(spec),
                    seed,
                    cells[i],
                    spec,
                    tier if n == 0 else "extra_seed",
                    rank,
                    kept,
                    moved[i],
                )
            )
    return runs


def _too_many(n_cells: int, ablation: dict) -> None:
    raise CampaignError(
        f"ablation.factors: design {ablation['design']} has {n_cells} cells × "
        f"{len(ablation['seeds'])} seeds, more than the {MAX_PLANNED_RUNS} runs the planner "
        f"orders; trim the levels, or use design one_at_a_time or fractional"
    )


def run_ids(params: dict) -> list[str]:
    return [r.run_id for r in plan_runs(params)]


_INDEX_CACHE: dict[str, dict[str, Run]] = {}


def plan_index(params: dict) -> dict[str, Run]:
    """Every planned run by id, in plan order (cut ones included), memoized on the params'
    content."""
    fingerprint = canonical_json(
        {"model": params["model"], "train": params["train"], "ablation": params["ablation"]}
    )
    if fingerprint not in _INDEX_CACHE:
        _INDEX_CACHE[fingerprint] = {r.run_id: r for r in plan_runs(params)}
    return _INDEX_CACHE[fingerprint]


def kept_runs(params: dict) -> list[str]:
    """Ids of the runs ablation.max_runs keeps, in plan order: what Snakemake trains when no
    budget_hours needs the plan table to cut further."""
    return [rid for rid, run in plan_index(params).items() if run.kept]


def run_priorities(params: dict) -> dict[str, int]:
    """Snakemake priority per run id: the plan's order, first highest (the last run gets 1)."""
    index = plan_index(params)
    return {rid: len(index) - run.rank for rid, run in index.items()}


def run_spec(params: dict, rid: str) -> dict:
    index = plan_index(params)
    if rid in index:
        return index[rid].spec
    for run in adaptive_runs(params):
        if run.run_id == rid:
            return run.spec
    raise CampaignError(f"{rid}: not a run of the current plan")


def adaptive_seeds(ablation: dict) -> list[int]:
    """The seeds an adaptive campaign may append, in the order it appends them: the integers
    after the largest of ablation.seeds, up to ablation.adaptive.max_seeds seeds in all (none
    when adaptive is off)."""
    adaptive = ablation["adaptive"]
    if not adaptive["enabled"]:
        return []
    start = max(ablation["seeds"]) + 1
    return list(range(start, start + max(0, adaptive["max_seeds"] - len(ablation["seeds"]))))


def adaptive_runs(params: dict) -> list[Run]:
    """Every run an adaptive campaign may append: each cell of the plan at each adaptive seed,
    after the plan's runs (tier "adaptive", not kept until a look asks for it). A run's id is its
    resolved spec's, so it is the id the same cell and seed have in a fixed plan listing that
    seed: the store, resume and reruns treat it as any planned run."""
    index = plan_index(params)
    firsts = [r for r in index.values() if r.tier != "extra_seed"]
    out: list[Run] = []
    for seed in adaptive_seeds(params["ablation"]):
        for run in firsts:
            spec = resolved_spec(params, dict(run.cell), seed)
            out.append(
                Run(
                    run_id(spec),
                    seed,
                    run.cell,
                    spec,
                    "adaptive",
                    len(index) + len(out),
                    False,
                    run.moved,
                )
            )
    return out


def appended_runs(params: dict, seeds_per_cell: dict[str, int]) -> list[Run]:
    """The adaptive runs that bring each cell (by cell id) to `seeds_per_cell` seeds: its
    ablation.seeds, then the next adaptive seeds in order. A cell asked for more seeds than
    ablation.adaptive.max_seeds is refused."""
    cap = params["ablation"]["adaptive"]["max_seeds"]
    planned = len(params["ablation"]["seeds"])
    by_cell: dict[str, list[Run]] = {}
    for run in adaptive_runs(params):
        by_cell.setdefault(cell_id(dict(run.cell)), []).append(run)
    out = []
    for cid, total in seeds_per_cell.items():
        if cid not in by_cell and total > planned:
            raise CampaignError(f"{cid}: not a cell of the plan, or adaptive is off")
        if total > cap:
            raise CampaignError(f"{cid}: {total} seeds asked, ablation.adaptive.max_seeds {cap}")
        out += by_cell.get(cid, [])[: max(0, total - planned)]
    return sorted(out, key=lambda r: r.rank)


def plan_rows(runs: list[Run]) -> list[dict]:
    """One flat row per run: id, one column per factor, seed, tier, and the cell's stable id
    (campaign.core.io.cell_id: the same at every seed; not part of the run id)."""
    rows = []
    for run in runs:
        row: dict[str, Any] = {"run": run.run_id}
        row.update({k: v for k, v in run.cell})
        row.update(seed=run.seed, tier=run.tier, cell_id=cell_id(dict(run.cell)))
        rows.append(row)
    return rows


# ------------------------------------------------------------------ stages (campaign.core.runner)
def stage_run_spec(ctx) -> None:
    """Write one run's resolved spec: what its training job will consume."""
    ctx.outputs["spec"].write_text(json.dumps(ctx.spec, indent=2, sort_keys=True) + "\n")


COST_KEYS = (
    "max_steps",
    "eval_every",
    "checkpoint_every",
    "keep_checkpoints",
    "micro_batch",
    "grad_accum",
    "max_length",
)


def cost_recipe(train: dict) -> dict:
    """A recipe as far as its projected cost goes (COST_KEYS), and its train.devices where
    it is not 1 (a spec without it keeps its key)."""
    recipe = {k: train[k] for k in COST_KEYS}
    devices = int(train_key(train, "devices"))
    recipe |= {"devices": devices} if devices != 1 else {}
    # An outside trainer's run is timed at the rate the preflight measured for its command
    # (its name in train.commands, or train.command written inline); the built-in loop's
    # runs keep the recipe they had.
    command = train.get("command")
    if isinstance(command, dict):
        recipe["trainer"] = "train.command"
    elif command is not None and command != BUILTIN_TRAINER:
        recipe["trainer"] = command
    return recipe


def table_spec(params: dict) -> dict:
    """The plan table's params subset: the ordered rows with the max_runs cut (then the adaptive
    runs, tier "adaptive", not kept), each run's recipe as far as its cost goes, the baseline
    recipe it is scaled against, the design as written, and the limits the plan is held to."""
    # With ablation.adaptive the runs a look may append follow, not kept until a look asks.
    runs = [*plan_index(params).values(), *adaptive_runs(params)]
    keys, levels, baseline, design = design_parts(params)
    describe = getattr(design, "describe", None)
    ablation = params["ablation"]
    rows = plan_rows(runs)
    for row, run in zip(rows, runs, strict=True):
        row["kept"] = run.kept
    # The guard tasks (evaluation.guards), only where set: a campaign without guards keeps its key.
    guards = guard_tasks(params)
    return ({"guards": guards} if guards else {}) | {
        "design": {
            "name": ablation["design"],
            "factors": keys,
            "control": [baseline[k] for k in keys],
            "seeds": ablation["seeds"],
            "lines": describe(keys, levels, baseline, ablation) if describe else [],
        },
        "rows": rows,
        "recipes": {r.run_id: cost_recipe(r.spec["train"]) for r in runs},
        "baseline": cost_recipe(params["train"]),
        "max_runs": ablation["max_runs"],
        "budget_hours": ablation["budget_hours"],
        "max_hours": params["preflight"]["max_hours"],
        "disk_margin": params["preflight"]["disk_margin"],
    }


def stage_plan_table(ctx) -> None:
    """Write the plan as a TSV table, one row per run in plan order with its projected cost and
    whether it is kept, and the plan's report: the design, what it can estimate as written and
    after the cut (spec: see table_spec; inputs: the preflight's report and measurements)."""
    from campaign.core.diskspace import free_disk_bytes
    from campaign.plan.projection import project
    from campaign.plan.summary import report_lines

    report = read_json(ctx.inputs["preflight_report"][0])
    measured = read_json(ctx.inputs["preflight_measurements"][0])
    # The free disk is measured now, on the file system of the store (where runs write): it
    # decides only whether the plan fits, never a byte of the table, so it stays out of the key.
    free = free_disk_bytes(ctx.work_dir)
    rows = in_order(project(ctx.spec, report, measured, free), ctx.spec["design"]["factors"])
    guards = plan_guards(ctx.spec, rows, report, measured)
    ctx.outputs["runs"].write_text(tsv_text(rows))  # runs only: a row there is a run to train
    ctx.outputs["report"].write_text("\n".join(report_lines(ctx.spec, rows, guards=guards)) + "\n")


def plan_report(
    params: dict, report_path: Path, measurements_path: Path
) -> tuple[list[dict], list[str]]:
    """(rows, report lines) of the current plan: projected and cut by budget_hours when the
    preflight's report and measurements exist, else in order with the max_runs cut only. The
    rows end with the guard jobs' (tier "guard", campaign.plan.guard_jobs) where
    evaluation.guards is set."""
    from campaign.core.diskspace import free_disk_bytes
    from campaign.plan.projection import project
    from campaign.plan.summary import report_lines

    spec = table_spec(params)
    factors = spec["design"]["factors"]
    if report_path.is_file() and measurements_path.is_file():
        report = read_json(report_path)
        measured = read_json(measurements_path)
        free = free_disk_bytes(params["campaign"]["state_dir"])
        rows = in_order(project(spec, report, measured, free), factors)
        guards = plan_guards(spec, rows, report, measured)
        note = f"(hours projected from {measurements_path})"
    else:
        rows = in_order(spec["rows"], factors)
        guards = plan_guards(spec, rows)
        note = (
            f"(projected hours need the preflight's measurements, {measurements_path}: run "
            f"`snakemake {report_path}` first"
            + ("; the budget_hours cut waits for them too)" if spec["budget_hours"] else ")")
        )
    return rows + guards, report_lines(spec, rows, note, guards)

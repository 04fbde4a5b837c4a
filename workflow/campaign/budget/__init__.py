"""The budget phase: what each finished job cost (measured), what every planned run and the rest
of the plan will cost (projected by the plan table, corrected by what the finished runs took),
the cheapest offer or mix of packages that finishes the rest before the deadline, and the cost to
train and serve each variant that reaches the quality bar, the reference floor included (its fit
and predictions as the floor stage timed them)."""

from campaign.core.declare import outputs_of, sections_by, tables_in
from campaign.core.defaults import train_key
from campaign.core.lazy import exports
from campaign.core.stage import (
    EachLook,
    EachRun,
    File,
    From,
    IndexColumns,
    Nothing,
    Phase,
    Stage,
)
from campaign.evaluate import VARIANT_FILES
from campaign.train import PREDICTIONS

_PUBLIC = {
    "split_verdict": "section",
    "Factor": "calibrate",
    "error_summary": "calibrate",
    "fit_factor": "calibrate",
    "format_money": "money",
}
__getattr__, __dir__ = exports(__name__, _PUBLIC)

# A run's recipe as far as its FLOP count goes.
RECIPE_KEYS = ("max_steps", "micro_batch", "grad_accum", "max_length", "eval_every", "lora")


def _devices(train: dict) -> dict:
    """train.devices where it is not 1: the run's batch holds that many devices' micro-batches."""
    n = int(train_key(train, "devices"))
    return {"devices": n} if n != 1 else {}


def _budget_spec(params: dict) -> dict:
    from campaign.plan import adaptive_runs, plan_index

    # The runs an adaptive campaign's looks may append are priced as any planned run.
    runs = [*plan_index(params).values(), *adaptive_runs(params)]
    from campaign.guards import guard_names

    # The guard tasks (evaluation.guards), only where set: a campaign without guards keeps its key.
    guards = guard_names(params) if params["evaluation"].get("guards") else []
    return ({"guards": guards} if guards else {}) | {
        "budget": params["budget"],
        "recipes": {
            run.run_id: {k: run.spec["train"][k] for k in RECIPE_KEYS} | _devices(run.spec["train"])
            for run in runs
        },
    }


def _check_params(params: dict) -> None:
    from campaign.core.errors import CampaignError

    budget = params["budget"]
    names = [o["name"] for o in budget["offers"]]
    for name in names:
        if names.count(name) > 1:
            raise CampaignError(f"budget.offers: offer name '{name}' appears twice")
    if budget["reference_offer"] not in names:
        raise CampaignError(
            f"budget.reference_offer: '{budget['reference_offer']}' is not one of the offers "
            f"({', '.join(names)})"
        )
    for o in budget["offers"]:
        if o["hourly"] is None and not o["packages"]:
            raise CampaignError(f"budget.offers.{o['name']}: no hourly price and no package")


_SECTION = sections_by("campaign.budget.section", figure="5. Budget")

PHASE = Phase(
    name="budget",
    order=70,
    report=(
        _SECTION(
            "budget",
            "Budget and recommended offer",
            70,
            {
                "plans": From("budget", "plans_parquet"),
                "jobs": From("budget", "jobs_parquet"),
                "budget_summary": From("budget", "summary"),
            },
        ),
        _SECTION(
            "forecast", "Forecast vs actual", 71, {"forecast": From("budget", "forecast_parquet")}
        ),
    ),
    # What each trained run cost, at the budget's reference offer.
    index=(
        IndexColumns(
            (
                ("hours", "float64"),
                ("cost", "float64"),
                ("currency", "string"),
                ("cost_offer", "string"),
                ("cost_reason", "string"),
            ),
            "campaign.budget.columns:cost_columns",
            {"jobs": From("budget", "jobs_parquet")},
        ),
    ),
    stages=(
        Stage(
            name="budget",
            entry="campaign.budget.stage:stage_budget",
            help="cost of the finished jobs, calibrated forecast of the rest, offers, cost at "
            "equal quality",
            inputs={
                "runs": From("plan_table", "runs"),
                "preflight_report": From("preflight", "report"),
                "preflight_measurements": From("preflight", "measurements"),
                "run_manifests": EachRun("train", "run_manifest"),
                "timings": EachRun("train", "timings"),
                # Snakemake's own measurement of each training job (seconds, max_rss), for a
                # person who passes it. Not from the DAG: a job served from the store rewrites
                # its benchmark with the hit's seconds. The runs' timings.json hold what the
                # computation took.
                "benchmarks": Nothing(),
                "decisions": From("evaluate", "decisions"),
                "metrics": From("evaluate", "metrics"),
                # An adaptive campaign's looks: its runs are the last look's (appended ones
                # kept, candidates no look asked for left out; campaign.plan.look_runs).
                "looks": EachLook("look", "look"),
                "variants": From("quantize_table", "table"),
                "floor_timings": From("floor", "timings"),
                # The serving table's generated tokens per request: each run's predictions and
                # each quantize job's (campaign.budget.serving reads them beside the timings).
                **outputs_of("train", *PREDICTIONS, each=EachRun),
                **VARIANT_FILES,
            },
            outputs={
                **tables_in(
                    "results/budget",
                    "jobs",
                    "forecast",
                    "offers",
                    "plans",
                    "equal_quality",
                    "to_decide",
                    # Each option priced per request (tokens in and out, measured speed, cost
                    # per million requests) and the fine-tune's break-even against each floor.
                    "serving",
                ),
                "summary": File("results/budget/summary.txt"),
            },
            final=True,
            spec=_budget_spec,
            # Not volatile: the tables are a function of the inputs' bytes (the runs' timings,
            # the preflight's measurements), the same bytes on every identical computation;
            # `campaign reproduce` compares them. Two campaigns differ because their inputs do.
        ),
    ),
    check_params=_check_params,
)

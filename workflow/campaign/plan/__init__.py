"""The plan phase: the runs of the campaign (the baseline and the ablation design's cells, each
at every seed), each with an id derived from its resolved recipe, and the plan table."""

from campaign.core.lazy import exports
from campaign.core.stage import Phase, Stage

_PUBLIC = {
    "COST_COLUMNS": "projection",
    "ID_COLUMNS": "planner",
    "RUN_ID_PATTERN": "planner",
    "Run": "planner",
    "format_table": "planner",
    "identity": "planner",
    "plan_index": "planner",
    "plan_rows": "planner",
    "plan_runs": "planner",
    "resolved_spec": "planner",
    "run_id": "planner",
    "run_spec": "planner",
}
__getattr__, __dir__ = exports(__name__, _PUBLIC)


def run_spec_of(params: dict, run: str) -> dict:
    """A planned run's resolved spec: the params subset of its run_spec and train stages."""
    from campaign.plan.planner import run_spec

    return run_spec(params, run)


def _plan_spec(params: dict) -> dict:
    from campaign.plan.planner import table_spec

    return table_spec(params)


def _check_params(params: dict) -> None:
    from campaign.core.errors import CampaignError
    from campaign.plan.planner import plan_index

    if params["model"]["source"] != "from_config" and params["ablation"]["factors"].get("model"):
        raise CampaignError(
            "ablation.factors.model: model.config can only be varied when model.source is "
            "from_config"
        )
    plan_index(params)  # the plan must fit in ablation.max_runs


PHASE = Phase(
    name="plan",
    order=30,
    stages=(
        Stage(
            name="run_spec",
            entry="campaign.plan.planner:stage_run_spec",
            help="write one planned run's resolved spec",
            inputs=(),
            outputs=("spec",),
            spec=run_spec_of,
        ),
        Stage(
            name="plan_table",
            entry="campaign.plan.planner:stage_plan_table",
            help="write the plan as a table, with each run's projected hours and disk",
            inputs=("preflight_report", "preflight_measurements"),
            outputs=("runs",),
            spec=_plan_spec,
        ),
    ),
    check_params=_check_params,
)

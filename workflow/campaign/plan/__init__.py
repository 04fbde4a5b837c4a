"""The plan phase: the runs of the campaign (the baseline and the ablation design's cells, each
at every seed), each with an id derived from its resolved recipe, in the order that tells most per
unit of cost; the plan table (projected hours, the budget cut) and its report (what the plan can
estimate)."""

from campaign.core.declare import files_in
from campaign.core.lazy import exports
from campaign.core.stage import File, From, Phase, Stage

_PUBLIC = {
    "COST_COLUMNS": "columns",
    "CampaignRuns": "look_runs",
    "ID_COLUMNS": "columns",
    "RUN_ID_PATTERN": "ids",
    "Run": "planner",
    "TIERS": "order",
    "adaptive_runs": "planner",
    "campaign_runs": "look_runs",
    "estimable_contrasts": "effects",
    "format_table": "columns",
    "command_of": "ids",
    "identity": "ids",
    "generating_keys": "ids",
    "kept_in_table": "columns",
    "kept_runs": "planner",
    "look_files": "look_runs",
    "plan_index": "planner",
    "plan_report": "planner",
    "plan_effects": "effects",
    "plan_rows": "planner",
    "plan_runs": "planner",
    "resolved_spec": "ids",
    "with_special_tokens": "ids",
    "run_id": "ids",
    "run_priorities": "planner",
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


def _check_command_names(params: dict) -> None:
    """Every trainer name (train.command, its factor's levels, an explicit cell's) is builtin
    or one of train.commands: a typo fails before the plan, not in a training job."""
    from campaign.core.errors import CampaignError
    from campaign.plan.ids import BUILTIN_TRAINER, command_of

    if BUILTIN_TRAINER in (params["train"].get("commands") or {}):
        raise CampaignError(
            f"train.commands.{BUILTIN_TRAINER}: the built-in loop's name; name the command "
            "otherwise"
        )
    factor = _trainer_factor(params)
    for where, level in trainer_levels(params):
        try:
            command_of({**params["train"], "command": level})
        except CampaignError as e:
            raise CampaignError(f"{where}: {str(e).split(': ', 1)[1]}") from None
    _check_distinct_levels(params["train"], factor)


def _trainer_factor(params: dict) -> list:
    ablation = params.get("ablation") or {}
    return ((ablation.get("factors") or {}).get("train") or {}).get("command") or []


def trainer_levels(params: dict) -> list[tuple[str, object]]:
    """(where, level) of every train.command the campaign's runs may take, as written: the
    baseline's, its factor's levels, an explicit cell's (resolve one with command_of)."""
    levels = [("train.command", params["train"].get("command"))]
    levels += [("ablation.factors.train.command", level) for level in _trainer_factor(params)]
    cells = ((params.get("ablation") or {}).get("explicit") or {}).get("cells") or []
    levels += [(f"ablation.explicit.cells[{i}]", c["train.command"])
               for i, c in enumerate(cells) if "train.command" in c]  # fmt: skip
    return levels


def _check_distinct_levels(train: dict, factor: list) -> None:
    """Two trainer levels that resolve to one command (builtin and null, or two names of the
    same argv, files and packages) would be one run each seed, and so one cell under two names:
    said before the plan, in one line naming both."""
    from campaign.core.errors import CampaignError
    from campaign.plan.ids import command_identity, command_of

    seen: list[tuple[str, object]] = []
    for level in factor:
        name = "null" if level is None else str(level)
        resolved = command_identity(command_of({**train, "command": level}))
        same = next((other for other, r in seen if r == resolved), None)
        if same is not None:
            raise CampaignError(
                f"ablation.factors.train.command: levels {same} and {name} are the same "
                "command (argv, files and packages), so they would train one cell; list one"
            )
        seen.append((name, resolved))


def _check_params(params: dict) -> None:
    from campaign.core.errors import CampaignError
    from campaign.plan.planner import plan_index

    _check_command_names(params)
    ablation = params["ablation"]
    if params["model"]["source"] != "from_config" and ablation["factors"].get("model"):
        raise CampaignError(
            "ablation.factors.model: model.config can only be varied when model.source is "
            "from_config"
        )
    # A design's own settings are read by that design only (like split.temporal_cutoff).
    for design, key in (("fractional", "p"), ("explicit", "cells")):
        if ablation["design"] != design and ablation[design][key] is not None:
            raise CampaignError(
                f"ablation.{design}.{key}: only used by design '{design}' (the design is "
                f"'{ablation['design']}'); set it to null"
            )
    adaptive = ablation["adaptive"]
    if adaptive["enabled"] and adaptive["max_seeds"] < len(ablation["seeds"]):
        raise CampaignError(
            f"ablation.adaptive.max_seeds: {adaptive['max_seeds']}, fewer than the "
            f"{len(ablation['seeds'])} of ablation.seeds every cell runs"
        )
    if adaptive["enabled"] and len(ablation["seeds"]) < 2:
        raise CampaignError(
            f"ablation.adaptive.enabled: ablation.seeds has {len(ablation['seeds'])} seed; the "
            f"first look needs 2 seeds a cell to measure the seed spread (list 2 seeds)"
        )
    metric = params["evaluation"].get("metric")
    if adaptive["enabled"] and metric != "accuracy":
        raise CampaignError(
            f"ablation.adaptive.enabled: the looks decide on accuracy per item; evaluation."
            f"metric is {metric}: set it to accuracy or adaptive off"
        )
    plan_index(params)  # the design's own checks (levels, p, cells)


PHASE = Phase(
    name="plan",
    order=30,
    stages=(
        Stage(
            name="run_spec",
            entry="campaign.plan.planner:stage_run_spec",
            help="write one planned run's resolved spec",
            inputs={},
            # A run's path carries its id, a hash of its spec: editing one ablation level adds
            # new run paths and touches no other run.
            outputs={"spec": File("results/runs/{run}/spec.json")},
            final=True,
            spec=run_spec_of,
        ),
        Stage(
            name="plan_table",
            entry="campaign.plan.planner:stage_plan_table",
            help="write the ordered plan with each run's projected hours, disk and the cut, and "
            "what it can estimate",
            inputs={
                "preflight_report": From("preflight", "report"),
                "preflight_measurements": From("preflight", "measurements"),
            },
            outputs=files_in("results/plan", "runs.tsv", "report.txt"),
            final=True,
            spec=_plan_spec,
        ),
    ),
    check_params=_check_params,
)

"""The guards phase: guard benchmarks inside a campaign (evaluation.guards). The base model and
every trained run score each guard task with lm-evaluation-harness, one job per (run, task) and
one per task for the base; one job then decides, per task, whether each cell loses more than
the margin against the base, by the paired non-inferiority test the evaluation gives a
quantized variant against its run. The evaluation's verdict carries the guard lines."""

from campaign.core.declare import files_in
from campaign.core.lazy import exports
from campaign.core.stage import Derived, EachGuard, File, From, Phase, Stage

_PUBLIC = {
    "check_guard_files": "tasks",
    "guard_names": "tasks",
    "guards_of": "tasks",
    "guard_paths": "targets",
}
__getattr__, __dir__ = exports(__name__, _PUBLIC)

# Whose installed versions a guard job's scores depend on.
LIBRARIES = ("lm_eval", "torch", "transformers", "peft", "datasets", "pandas", "pyarrow")


def guards_on(params: dict) -> bool:
    return bool(params["evaluation"].get("guards"))


def _guard_spec(params: dict, guard: str, run: str | None = None) -> dict:
    """What one guard job reads: the task, its local YAML, the run, where the base lies."""
    from campaign.guards.tasks import guard_of

    g = guard_of(params, guard)
    spec = {"guard": {"task": g["task"], "include": g["include"]}}
    return (
        spec
        | ({"run": run} if run is not None else {})
        | {"base_source": params["model"]["source"]}
    )


def _base_spec(params: dict, guard: str) -> dict:
    return _guard_spec(params, guard)


def _guard_key(spec: dict) -> dict:
    # Where the base and the task YAML lie is no part of the scores: their content is (inputs).
    return {
        **{k: v for k, v in spec.items() if k != "base_source"},
        "guard": {"task": spec["guard"]["task"]},
    }


def _decide_spec(params: dict) -> dict:
    from campaign.guards.tasks import guards_of

    evaluation = params["evaluation"]
    return {
        "guards": [{"task": g["task"], "margin": g["margin"]} for g in guards_of(params)],
        "confidence": evaluation["confidence"],
        "power": evaluation["power"],
    }


def _check_params(params: dict) -> None:
    from campaign.guards.tasks import check_guards

    check_guards(params)


_TASK_FILES = {"base_model": Derived(), "task_yaml": Derived(), "task_data": Derived()}
# How both scoring stages (a run's, the base model's) key, find their files and version.
_SCORING = {
    "key_view": _guard_key,
    "derive_inputs": "campaign.guards.tasks:derive_inputs",
    "libraries": LIBRARIES,
}

PHASE = Phase(
    name="guards",
    order=55,
    stages=(
        Stage(
            name="guard",
            entry="campaign.guards.stage:stage_guard",
            help="score one trained run on one guard task (lm-evaluation-harness, per item)",
            inputs={"model": From("train", "model"), **_TASK_FILES},
            outputs={"scores": File("results/guards/runs/{run}/{guard}.parquet")},
            spec=_guard_spec,
            **_SCORING,
        ),
        Stage(
            name="guard_base",
            entry="campaign.guards.stage:stage_guard_base",
            help="score the base model (model.source) on one guard task, per item",
            inputs=dict(_TASK_FILES),
            outputs={"scores": File("results/guards/base/{guard}.parquet")},
            spec=_base_spec,
            **_SCORING,
        ),
        Stage(
            name="guards",
            entry="campaign.guards.stage:stage_guards",
            help="decide, per guard task, whether each cell loses more than the margin "
            "against the base",
            inputs={
                "runs": From("plan_table", "runs"),
                "base_scores": EachGuard("guard_base", "scores"),
                "run_scores": EachGuard("guard", "scores"),
            },
            outputs=files_in(
                "results/guards", table="items.parquet", guards="guards.json", summary="summary.txt"
            ),
            final=guards_on,
            spec=_decide_spec,
            libraries=("numpy", "scipy", "pandas", "pyarrow"),
            input_views=(("runs", "campaign.evaluate.plan_table:design_view"),),
        ),
    ),
    check_params=_check_params,
)

"""The evaluate phase: every model variant (trained runs, quantized variants, the reference
floor) scored on the same validation and test items; cells and effects with one crossed seed x
item variance model pooled over the design (comparison), quantized variants by a paired score
non-inferiority test, Holm per family (questions); decisions against
`evaluation.min_useful_effect` and `evaluation.max_quality_loss` (decide); the verdict and words
(words); error analysis (confusions, slices, items fixed and broken). stage.py wires them."""

from campaign.core.declare import files_in, outputs_of, sections_by
from campaign.core.lazy import exports
from campaign.core.stage import (
    Derived,
    EachJob,
    EachLook,
    EachLookRun,
    EachRun,
    File,
    Findings,
    Folder,
    From,
    Phase,
    PreviousLook,
    Stage,
)
from campaign.data import SPLIT_FILES
from campaign.train import EXECUTION, PREDICTIONS

# Every quantize job's result (status) and predictions, as the evaluation and the index read
# them (the quantize phase imports this one: the names live here).
VARIANT_FILES = {
    "variants_result": EachJob("quantize", "result"),
    "variants_validation": EachJob("quantize", "predictions_validation"),
    "variants_test": EachJob("quantize", "predictions_test"),
}

_PUBLIC = {
    "ACT_PREFIX": "words",
    "LOOKS_TITLE": "look_words",
    "look_lines": "look_words",
    "read_looks": "look_words",
    "Interval": "stats",
    "ADOPT": "decide",
    "NOT_SHOWN": "decide",
    "BELOW": "decide",
    "scorer": "scoring",
    "NO_FINDINGS": "words",
    "Decisions": "records",
    "Cost": "records",
    "KeepOption": "records",
    "VerdictBlock": "records",
    "read_decisions": "records",
    "decisions_from_dict": "records",
    "record_dict": "records",
    "VERDICT_TITLE": "words",
    "campaign_labels": "items",
    "classification_metrics": "metrics",
    "evaluation_flags": "words",
    "evaluation_verdict": "records",
    "finding_lines": "words",
    "holm": "stats",
    "level_words": "words",
    "points": "words",
    "verdict_block": "words",
    "metric_draws": "metrics",
    "read_items": "items",
    "read_probs": "items",
    "representative": "decide",
    # `campaign compare` (campaign.compare): the stage's own path from scored items onwards.
    "Items": "items",
    "Level": "records",
    "Quality": "records",
    "build_decisions": "stage",
    "comparisons_of": "stage",
    "decide_rows": "stage",
    "public_row": "stage",
    "run_metric_rows": "stage",
    "cell_name": "stage",
    "split_design": "stage",
    "resample_indices": "stats",
    "score_interval": "stats",
    "verdict_lines": "words",
    "decision_line": "words",
    # the scored-items table every producer writes: this stage, the guards, `campaign compare`
    "ITEM_COLUMNS": "item_table",
    # what the guards phase decides with (the quantized variant's test) and reads
    "REJECT": "decide",
    "Decision": "records",
    "decide_family": "questions",
    "quantized_row": "questions",
    "loss_exceeds_p": "comparison",
    "noninferiority_p": "comparison",
    "read_plan": "plan_table",
    # What the task modules score and analyse with (core/tasks.TaskModule's evaluate section).
    "LabelScoring": "scoring",
    "Scored": "scoring",
    "perplexity": "metrics",
    "slice_rows": "errors",
    "CHANGE_THRESHOLD": "errors",
    "CHANGE_RULE": "errors",
    "KEPT_CHANGE_COLUMNS": "errors",
    "WORST_CELL_COLUMNS": "errors",
    "Timings": "floor",
    "label_floors": "floor",
}
__getattr__, __dir__ = exports(__name__, _PUBLIC)


def _floor_spec(params: dict) -> dict:
    from campaign.core.tasks import module_of

    spec = {"floors": list(params["evaluation"]["floor"]), "task": params["model"]["task"]}
    # The task's part: which model its floors prompt, and how ({} where they read only the
    # split files, as the label floors do).
    return spec | module_of(params["model"]["task"]).floor_spec(params)


def _floor_key(spec: dict) -> dict:
    """What the floor job's key holds of its spec: a pretrained model counts by its folder's
    content (the base_model input), not by the path model.source names, as a run's does
    (plan/ids.identity): the same model moved to another folder is the same floor."""
    model = spec.get("model")
    if model is None or model["source"] == "from_config":
        return spec
    return {**spec, "model": {**model, "source": "pretrained"}}


# The metrics evaluation.metric takes (the label tasks'), as the schema lists them.
LABEL_METRICS = ("accuracy", "macro_f1")


def _check_params(params: dict) -> None:
    """evaluation.floor names floors of model.task (core/tasks.check_floors); the metric keys
    are the task's to check (TaskModule.check_evaluation: evaluation.metric for labels,
    model.generation.metric for generated text)."""
    from campaign.core.tasks import check_floors, module_of

    check_floors(params["model"]["task"], params["evaluation"]["floor"])
    module_of(params["model"]["task"]).check_evaluation(params)


def floor_inputs(spec: dict, root) -> dict:
    """The floor stage's base_model input (Stage.derive_inputs): the pretrained folder the
    zero-shot floor generates with, or nothing (label floors, a from_config model)."""
    from pathlib import Path

    from campaign.core.tasks import template_files

    model = spec.get("model")
    prompted = {"zero_shot", "few_shot"} & set(spec["floors"])
    if model is None or not prompted or model["source"] == "from_config":
        return {"base_model": [], "chat_template": []}
    return {
        "base_model": [Path(root) / model["source"]],
        "chat_template": template_files(model, root),
    }


def _evaluate_spec(params: dict) -> dict:
    from campaign.core.tasks import module_of

    spec = {"evaluation": params["evaluation"], "task": params["model"]["task"]}
    # The task's settings of its per-item metric (TaskModule.evaluation_model), where it has any.
    model = module_of(params["model"]["task"]).evaluation_model(params["model"])
    if model:
        spec["model"] = model
    return spec


def _evaluate_key(spec: dict) -> dict:
    """What the evaluation's key holds of its spec: all of it, and the versions of the libraries
    that compute the task's per-item scores (TaskModule.metric_libraries), so a new version
    rescores instead of reusing stored scores. A user metric's module counts by content, as an
    input (evaluate_inputs)."""
    from campaign.core.tasks import module_of

    libraries = module_of(spec["task"]).metric_libraries(spec.get("model", {}))
    return {**spec, "metric_libraries": libraries} if libraries else spec


def evaluate_inputs(spec: dict, root) -> dict:
    """The evaluate stage's metric_code input (Stage.derive_inputs): the file of a user
    metric's module (TaskModule.metric_code), or nothing; and the guards' decisions."""
    from campaign.core.tasks import module_of

    source = module_of(spec["task"]).metric_code(spec.get("model", {}), root)
    return {"metric_code": source, "guards": _guards_file(spec)}


def _guards_file(spec: dict) -> list:
    """The guards' decisions (evaluation.guards set): the verdict carries their lines."""
    if not spec["evaluation"].get("guards"):
        return []
    from campaign.core.registry import get_stage

    return [get_stage("guards").outputs["guards"].path]


def check_metric(params: dict, root) -> None:
    """`campaign validate`'s check of the task's per-item metric as the evaluate stage resolves
    it (TaskModule.check_metric: a generation campaign's model.generation.metric as a dotted
    name must import as a function (prediction, reference) -> float of the project or an
    installed package). One line naming the key, else nothing."""
    from campaign.core.tasks import module_of

    module_of(params["model"]["task"]).check_metric(params["model"], root)


def _look_spec(params: dict, look: str) -> dict:
    from campaign.evaluate.looks import look_spec

    return look_spec(params, look)


_SECTION = sections_by("campaign.evaluate.section", figure="4. Evaluation")

PHASE = Phase(
    name="evaluate",
    order=60,
    report=(
        _SECTION(
            "effects",
            "Ablation effects",
            60,
            {
                "comparisons": From("evaluate", "comparisons"),
                "decisions": From("evaluate", "decisions"),
            },
        ),
        _SECTION(
            "seeds",
            "Seed spread and the reference floor",
            61,
            {
                "eval_metrics": From("evaluate", "metrics"),
                "comparisons": From("evaluate", "comparisons"),
                "decisions": From("evaluate", "decisions"),
            },
        ),
        # A generated-text campaign's outputs: samples, worst items, scores (none for labels).
        _SECTION(
            "samples",
            "Generated samples",
            62,
            {
                "errors": From("evaluate", "errors"),
                "eval_metrics": From("evaluate", "metrics"),
                "decisions": From("evaluate", "decisions"),
            },
            figure=None,
        ),
        # An adaptive campaign's looks, after the seed spread (a fixed campaign has none).
        _SECTION(
            "looks", "Adaptive looks", 62, {"decisions": From("evaluate", "decisions")}, figure=None
        ),
        # Last in the report: every decision in words.
        _SECTION(
            "decisions", "Decisions", 90, {"decisions": From("evaluate", "decisions")}, figure=None
        ),
    ),
    findings=(
        Findings(
            {"decisions": From("evaluate", "decisions")},
            "campaign.evaluate.findings:evaluation_findings",
        ),
    ),
    stages=(
        Stage(
            name="floor",
            entry="campaign.evaluate.stage:stage_floor",
            help="score the reference floor (majority class, TF-IDF + logistic regression; "
            "for generation: retrieval, the zero-shot and few-shot base model)",
            inputs={**SPLIT_FILES, "base_model": Derived(), "chat_template": Derived()},
            derive_inputs="campaign.evaluate:floor_inputs",
            outputs={
                "floor": Folder("results/evaluation/floor"),
                "timings": File("results/evaluation/floor_timings.json"),
            },
            spec=_floor_spec,
            key_view=_floor_key,
            libraries=("scikit-learn", "numpy", "scipy", "torch", "transformers"),
            # The fit's and the predictions' seconds (the floor's cost, for the budget).
            volatile=("timings",),
            # The prompted floors generate on the device a training job selects (in the key).
            execution=EXECUTION,
        ),
        Stage(
            name="look",
            entry="campaign.evaluate.looks:stage_look",
            help="an adaptive campaign's interim look: evaluate the runs so far, append seeds "
            "to the open questions, stop the clearly worse cells",
            inputs={
                **SPLIT_FILES,
                "runs": From("plan_table", "runs"),
                **outputs_of("train", *PREDICTIONS, each=EachLookRun),
                "floor": From("floor", "floor"),
                "previous": PreviousLook("look", "look"),
            },
            outputs={"look": File("results/adaptive/look_{look}.json")},
            spec=_look_spec,
            libraries=("numpy", "scipy"),
        ),
        Stage(
            name="evaluate",
            entry="campaign.evaluate.stage:stage_evaluate",
            help="score every variant with intervals, compare, decide, and analyse errors",
            inputs={
                **SPLIT_FILES,
                "runs": From("plan_table", "runs"),
                **outputs_of("train", *PREDICTIONS, each=EachRun),
                "floor": From("floor", "floor"),
                # Every quantized variant's result (status) and predictions.
                **VARIANT_FILES,
                # An adaptive campaign's looks: the last one's repeated intervals decide.
                "looks": EachLook("look", "look"),
                # A user metric's module (model.generation.metric): it computes the scores, so
                # it counts by content in the key; imported, not read, by the stage.
                "metric_code": Derived(),
                # evaluation.guards: the guards' decisions (results/guards/guards.json).
                "guards": Derived(),
            },
            derive_inputs="campaign.evaluate:evaluate_inputs",
            outputs={
                **files_in(
                    "results/evaluation",
                    metrics="metrics.parquet",
                    comparisons="comparisons.parquet",
                    # One row per variant x split x item: score, answer, metric (item_table);
                    # not named "items", a name Snakemake reserves.
                    scored_items="items.parquet",
                    decisions="decisions.json",
                ),
                "errors": Folder("results/evaluation/errors"),
                "summary": File("results/evaluation/summary.txt"),
            },
            final=True,
            spec=_evaluate_spec,
            key_view=_evaluate_key,
            libraries=("numpy", "scipy"),
            # runs.tsv's projected hours come from timings: only its design part is keyed.
            input_views=(("runs", "campaign.evaluate.plan_table:design_view"),),
        ),
    ),
    check_params=_check_params,
)

"""The evaluate phase: every model variant (trained runs, quantized variants, the reference
floor) scored on the same validation and test items; cells and effects with one crossed seed x
item variance model pooled over the design (comparison), quantized variants by a paired score
non-inferiority test, Holm per family (questions); decisions against
`evaluation.min_useful_effect` and `evaluation.max_quality_loss` (decide); the verdict and words
(words); error analysis (confusions, slices, items fixed and broken). stage.py wires them."""

from campaign.core.lazy import exports
from campaign.core.stage import Phase, Stage

_PUBLIC = {
    "Interval": "stats",
    "campaign_labels": "items",
    "classification_metrics": "metrics",
    "holm": "stats",
    "metric_draws": "metrics",
    "read_items": "items",
    "read_probs": "items",
}
__getattr__, __dir__ = exports(__name__, _PUBLIC)


def _floor_spec(params: dict) -> dict:
    return {"floors": list(params["evaluation"]["floor"]), "task": params["model"]["task"]}


def _evaluate_spec(params: dict) -> dict:
    return {"evaluation": params["evaluation"], "task": params["model"]["task"]}


PHASE = Phase(
    name="evaluate",
    order=60,
    stages=(
        Stage(
            name="floor",
            entry="campaign.evaluate.stage:stage_floor",
            help="score the reference floor (majority class, TF-IDF + logistic regression)",
            inputs=("train", "validation", "test"),
            outputs=("floor", "timings"),
            spec=_floor_spec,
            libraries=("scikit-learn", "numpy", "scipy"),
            # The fit's and the predictions' seconds (the floor's cost, for the budget).
            volatile=("timings",),
        ),
        Stage(
            name="evaluate",
            entry="campaign.evaluate.stage:stage_evaluate",
            help="score every variant with intervals, compare, decide, and analyse errors",
            inputs=(
                "train",
                "validation",
                "test",
                "runs",
                "predictions_validation",
                "predictions_test",
                "floor",
                "variants_result",
                "variants_validation",
                "variants_test",
            ),
            outputs=("metrics", "comparisons", "decisions", "errors", "summary"),
            spec=_evaluate_spec,
            libraries=("numpy", "scipy"),
            # runs.tsv's projected hours come from timings: only its design part is keyed.
            input_views=(("runs", "campaign.evaluate.plan_table:design_view"),),
        ),
    ),
)

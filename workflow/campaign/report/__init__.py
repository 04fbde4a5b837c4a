"""The report phase: the campaign's headline numbers (`dvc metrics show`), and the report a user
reads instead of the logs (HTML and Markdown with figures, curves for `dvc plots show`)."""

from campaign.core.stage import Phase, Stage


def _no_spec(params: dict) -> None:
    return None


def _report_spec(params: dict) -> dict:
    return {"campaign": params["campaign"]["name"]}


FIGURES = (
    "data",
    "leakage",
    "preflight",
    "curves",
    "effects",
    "seeds",
    "quantize",
    "budget",
    "forecast",
)


PHASE = Phase(
    name="report",
    order=80,
    stages=(
        Stage(
            name="metrics",
            entry="campaign.report.metrics:stage",
            help="write the campaign's headline metrics",
            inputs=("summary", "runs", "run_manifests", "decisions"),
            outputs=("metrics",),
            spec=_no_spec,
        ),
        Stage(
            name="report",
            entry="campaign.report.stage:stage_report",
            help="write the campaign's report: HTML and Markdown with figures",
            inputs=(
                "manifest",
                "privacy",
                "artifact_findings",
                "leakage_audit",
                "preflight_report",
                "run_metrics",
                "comparisons",
                "eval_metrics",
                "decisions",
                "variants",
                "jobs",
                "plans",
                "forecast",
                "budget_summary",
            ),
            outputs=(
                "html",
                "markdown",
                "train_curves",
                "validation_curves",
                *(f"fig_{name}" for name in FIGURES),
            ),
            spec=_report_spec,
            # The figures' bytes depend on matplotlib's version (rendering, fonts it ships).
            libraries=("matplotlib", "numpy", "pandas", "pyarrow"),
        ),
    ),
)

"""The report phase: the campaign's headline numbers (`dvc metrics show`), and the report a user
reads instead of the logs (HTML and Markdown with figures, curves for `dvc plots show`)."""

from campaign.core.stage import EachRun, Figure, File, From, Phase, Stage


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
# Where `snakemake --report` files each figure, in FIGURES' order.
FIGURE_CATEGORIES = (
    "1. Data",
    "1. Data",
    "2. Preflight",
    "3. Training",
    "4. Evaluation",
    "4. Evaluation",
    "4. Evaluation",
    "5. Budget",
    "5. Budget",
)


PHASE = Phase(
    name="report",
    order=80,
    stages=(
        Stage(
            name="metrics",
            entry="campaign.report.metrics:stage",
            help="write the campaign's headline metrics",
            inputs={
                "summary": From("manifest", "summary"),
                "runs": From("plan_table", "runs"),
                "run_manifests": EachRun("train", "run_manifest"),
                "decisions": From("evaluate", "decisions"),
            },
            # Read by `dvc metrics show`.
            outputs={"metrics": File("results/metrics.json")},
            final=True,
            spec=_no_spec,
        ),
        Stage(
            name="report",
            entry="campaign.report.stage:stage_report",
            help="write the campaign's report: HTML and Markdown with figures",
            inputs={
                "manifest": From("manifest", "manifest"),
                "privacy": From("split", "privacy"),
                "artifact_findings": From("artifact_scan", "findings"),
                "leakage_audit": From("split", "audit"),
                "preflight_report": From("preflight", "report"),
                "run_metrics": EachRun("train", "metrics"),
                "comparisons": From("evaluate", "comparisons"),
                "eval_metrics": From("evaluate", "metrics"),
                "decisions": From("evaluate", "decisions"),
                "variants": From("quantize_table", "table"),
                "jobs": From("budget", "jobs_parquet"),
                "plans": From("budget", "plans_parquet"),
                "forecast": From("budget", "forecast_parquet"),
                "budget_summary": From("budget", "summary"),
            },
            # index.html (figures embedded), summary.md (linking figures/, so each figure is
            # written to results/report/figures/<section>.png), the training curves as CSV for
            # `dvc plots show`; `snakemake --report` shows the figures with their captions.
            outputs={
                "html": File("results/report/index.html"),
                "markdown": File("results/report/summary.md"),
                "train_curves": File("results/report/train_curves.csv"),
                "validation_curves": File("results/report/validation_curves.csv"),
                **{
                    f"fig_{name}": Figure(f"results/report/figures/{name}.png", category)
                    for name, category in zip(FIGURES, FIGURE_CATEGORIES, strict=True)
                },
            },
            final=True,
            spec=_report_spec,
            # The figures' bytes depend on matplotlib's version (rendering, fonts it ships).
            libraries=("matplotlib", "numpy", "pandas", "pyarrow"),
        ),
    ),
)

"""The track phase: the finished campaign where its users already compare runs. One MLflow run
per row of the experiment index (trained run, quantized variant, floor) under a parent run for
the campaign, and TensorBoard event files per trained run. An effect after the DAG's results:
no other stage reads what it writes, so a tracking server never changes a result's key."""

from campaign.core.stage import EachRun, File, Folder, From, Phase, Stage


def _track_spec(params: dict) -> dict:
    tracking = params["tracking"]
    mlflow = tracking["mlflow"]
    return {
        "campaign": params["campaign"]["name"],
        "mlflow": {
            "uri": mlflow["uri"],
            # null: the campaign's name, so two campaigns on one server log apart.
            "experiment": mlflow["experiment"] or params["campaign"]["name"],
        },
        "tensorboard": tracking["tensorboard"],
    }


def _check_params(params: dict) -> None:
    from campaign.track.mlflow_log import check_uri

    check_uri(params["tracking"]["mlflow"]["uri"])


def _tracking_enabled(params: dict) -> bool:
    return bool(params["tracking"]["enabled"])


PHASE = Phase(
    name="track",
    order=85,
    check_params=_check_params,
    stages=(
        Stage(
            name="track",
            entry="campaign.track.stage:stage_track",
            help="log every run, variant and floor to MLflow and the curves to TensorBoard",
            inputs={
                "index": From("index", "index"),
                "run_metrics": EachRun("train", "metrics"),
                "run_specs": EachRun("run_spec", "spec"),
                "decisions": From("evaluate", "decisions"),
                # generated samples (a generation campaign), an MLflow artifact
                "errors": From("evaluate", "errors"),
                "report_html": From("report", "html"),
                "report_markdown": From("report", "markdown"),
                "budget_summary": From("budget", "summary"),
                "jobs": From("budget", "jobs_parquet"),
                "plans": From("budget", "plans_parquet"),
                "forecast": From("budget", "forecast_parquet"),
            },
            outputs={
                "logged": File("results/tracking/logged.json"),
                "tensorboard": Folder("results/tensorboard"),
            },
            # Part of a bare `snakemake` only with tracking.enabled.
            final=_tracking_enabled,
            spec=_track_spec,
            # MLflow run ids are new in every store; event files carry wall times and the host.
            volatile=("logged", "tensorboard"),
            # Metric A, B, then A again: the third job hits A's entry, and MLflow must show A.
            effect=True,
            libraries=("mlflow-skinny", "tensorboard", "pandas", "pyarrow"),
        ),
    ),
)

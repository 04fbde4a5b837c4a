"""The track phase: the finished campaign where its users already compare runs. One MLflow run
per row of the experiment index (trained run, quantized variant, floor) under a parent run for
the campaign, and TensorBoard event files per trained run. An effect after the DAG's results:
no other stage reads what it writes, so a tracking server never changes a result's key."""

from campaign.core.stage import Phase, Stage


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


PHASE = Phase(
    name="track",
    order=85,
    stages=(
        Stage(
            name="track",
            entry="campaign.track.stage:stage_track",
            help="log every run, variant and floor to MLflow and the curves to TensorBoard",
            inputs=(
                "index",
                "run_metrics",
                "run_specs",
                "decisions",
                "report_html",
                "report_markdown",
                "budget_summary",
                "jobs",
                "plans",
                "forecast",
            ),
            outputs=("logged", "tensorboard"),
            spec=_track_spec,
            # MLflow run ids are new in every store; event files carry wall times and the host.
            volatile=("logged", "tensorboard"),
            libraries=("mlflow-skinny", "tensorboard", "pandas", "pyarrow"),
        ),
    ),
)

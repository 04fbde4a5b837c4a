"""The report phase: the campaign's headline numbers (`dvc metrics show`)."""

from campaign.core.stage import Phase, Stage


def _no_spec(params: dict) -> None:
    return None


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
    ),
)

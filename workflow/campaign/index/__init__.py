"""The experiment index: one table (results/index.parquet) with a row per trained run, per
quantized variant and per reference floor, joining what each one is (factor levels, seed, data
and split hashes, code version, artifact hashes) with what it scored, what was decided and what
it cost, so a user answers questions about the campaign with one pandas query."""

from campaign.core.stage import Phase, Stage


def _no_spec(params: dict) -> None:
    # Everything the index holds is read from its inputs; no param changes its bytes.
    return None


PHASE = Phase(
    name="index",
    order=75,
    stages=(
        Stage(
            name="index",
            entry="campaign.index.stage:stage_index",
            help="one row per run, quantized variant and floor: identity, hashes, metrics, "
            "decision, cost",
            inputs=(
                "summary",
                "train",
                "validation",
                "test",
                "runs",
                "run_manifests",
                "models",
                "predictions_validation",
                "predictions_test",
                "variants_result",
                "variants_model",
                "variants_validation",
                "variants_test",
                "metrics",
                "comparisons",
                "decisions",
                "jobs",
            ),
            outputs=("index",),
            spec=_no_spec,
            # The data summary's licences and origins do not change the index: its key hashes
            # only the dataset hash.
            input_views=(("summary", "campaign.index.views:summary_view"),),
            # Parquet writer and reader, and the hashes it computes of artifacts.
            libraries=("pandas", "pyarrow", "blake3"),
        ),
    ),
)

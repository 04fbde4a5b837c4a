"""The experiment index: one table (results/index.parquet) with a row per trained run, per
quantized variant and per reference floor, joining what each one is (factor levels, seed, data
and split hashes, code version, artifact hashes) with what it scored, what was decided and what
it cost, so a user answers questions about the campaign with one pandas query."""

from campaign.core.stage import EachJob, EachRun, File, From, Phase, Stage
from campaign.data import SPLIT_FILES


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
            inputs={
                "summary": From("manifest", "summary"),
                **SPLIT_FILES,
                "runs": From("plan_table", "runs"),
                "run_manifests": EachRun("train", "run_manifest"),
                "models": EachRun("train", "model"),
                "predictions_validation": EachRun("train", "predictions_validation"),
                "predictions_test": EachRun("train", "predictions_test"),
                "variants_result": EachJob("quantize", "result"),
                "variants_model": EachJob("quantize", "model"),
                "variants_validation": EachJob("quantize", "predictions_validation"),
                "variants_test": EachJob("quantize", "predictions_test"),
                "metrics": From("evaluate", "metrics"),
                "comparisons": From("evaluate", "comparisons"),
                "decisions": From("evaluate", "decisions"),
                "jobs": From("budget", "jobs_parquet"),
            },
            outputs={"index": File("results/index.parquet")},
            final=True,
            spec=_no_spec,
            # The data summary's licences and origins do not change the index: its key hashes
            # only the dataset hash.
            input_views=(("summary", "campaign.index.views:summary_view"),),
            # Parquet writer and reader, and the hashes it computes of artifacts.
            libraries=("pandas", "pyarrow", "blake3"),
        ),
    ),
)

"""The experiment index: one table (results/index.parquet) with a row per trained run, per
quantized variant and per reference floor, joining what each one is (factor levels, seed, data
and split hashes, code version, artifact hashes) with what it scored, what was decided and what
it cost, so a user answers questions about the campaign with one pandas query."""

from dataclasses import replace

from campaign.core.declare import outputs_of
from campaign.core.errors import CampaignError
from campaign.core.io import module_of
from campaign.core.registry import merged_inputs
from campaign.core.stage import EachJob, EachLook, EachRun, File, From, IndexColumns, Phase, Stage
from campaign.data import SPLIT_FILES
from campaign.evaluate import VARIANT_FILES
from campaign.train import PREDICTIONS


def _no_spec(params: dict) -> None:
    # Everything the index holds is read from its inputs; no param changes its bytes.
    return None


def columns_of(phases) -> list[IndexColumns]:
    """Every phase's index columns, in DAG order (they follow the index's own columns)."""
    found = [c for p in phases for c in p.index]
    names = [name for c in found for name, _ in c.columns]
    for name in names:
        if names.count(name) > 1:
            raise CampaignError(f"index: two phases declare the column '{name}'")
    return found


def gather(stage: Stage, phases) -> Stage:
    """The index stage with the inputs the phases' columns read and the modules that read
    them as part of its code version."""
    contributed = columns_of(phases)
    parts = [(f"index columns {c.read}", c.inputs) for c in contributed]
    code = {module_of(c.read) for c in contributed}
    return replace(
        stage, inputs=merged_inputs(stage, parts), code=tuple(sorted(set(stage.code) | code))
    )


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
                **outputs_of("train", *PREDICTIONS, each=EachRun),
                **VARIANT_FILES,
                "variants_model": EachJob("quantize", "model"),
                **outputs_of("evaluate", "metrics", "comparisons", "decisions"),
                # An adaptive campaign's looks: which look appended each run.
                "looks": EachLook("look", "look"),
            },
            # The columns the phases declare (Phase.index: the budget's cost, ...) after these.
            gather="campaign.index:gather",
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

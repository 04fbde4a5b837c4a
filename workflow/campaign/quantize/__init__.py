"""The quantize phase: compressed variants of trained runs (a registry, variants/), each scored
on the same held-out items as its run's fp32 predictions and measured (bytes on disk, memory
peak, latency, throughput, agreement), and one table of them all. One job per (run, variant):
a training change requantizes that run's jobs only, a library upgrade only its variants' jobs.
"""

from campaign.core.declare import files_in, outputs_of, sections_by
from campaign.core.lazy import exports
from campaign.core.stage import (
    Derived,
    EachJob,
    EachRun,
    File,
    Folder,
    From,
    Phase,
    Stage,
)
from campaign.data import SPLIT_FILES
from campaign.train import EXECUTION, PREDICTIONS

_PUBLIC = {
    "get_variant": "variant",
    "key_info": "variant",
    "placement": "variant",
    "dag_job_paths": "targets",
    "job_paths": "targets",
    "quantize_jobs": "targets",
    "planned_targets": "targets",
    "select_best_seed": "targets",
    "select_representative": "targets",
    "selected_runs": "targets",
    "quantize_run": "stage",
    "variants_table": "table",
    "COLUMNS": "table",
}
__getattr__, __dir__ = exports(__name__, _PUBLIC)

# Whose installed versions a quantize job's bytes depend on besides its variant's own library
# (that one is in the job's spec: campaign.quantize.variant.key_info).
LIBRARIES = ("torch", "transformers", "safetensors", "numpy", "pandas", "pyarrow")


def quantize_spec(params: dict, run: str, variant: str) -> dict:
    """The params subset one (run, variant) job reads: how its run was trained (task, encoding
    length, evaluation batch), the variant's method and library version, and the phase's
    calibration, timing and generation settings where they apply."""
    from campaign.plan import run_spec_of
    from campaign.quantize.variant import get_variant, key_info

    run_spec = run_spec_of(params, run)
    declared = get_variant(variant)
    section = params["quantization"]
    task = run_spec["model"]["task"]
    source = run_spec["model"]["source"]
    from campaign.core.tasks import module_of

    # A task whose runs generate: the run's template and generation settings (its variants
    # generate as the run did; the evaluation scores them by the runs' metric, in no key here).
    from campaign.plan import generating_keys

    generates = generating_keys(run_spec["model"])
    return {
        "run": run,
        "task": task,
        **({"model": generates} if module_of(task).generates_text() else {}),
        "max_length": run_spec["train"]["max_length"],
        "batch_size": run_spec["train"]["micro_batch"],
        "variant": key_info(variant),
        "calibration": section["calibration"] if declared.calibration else None,
        # The task's part: the sample generation its jobs show (quantization.generation).
        **module_of(task).quantize_settings(section),
        "timing": section["timing"],
        # A LoRA run's model folder is its adapter: the base is read beside it (derive_inputs).
        "base_source": None if source == "from_config" else source,
    }


def _key_view(spec: dict) -> dict:
    # Where the base lies is no part of the result: its content is (the base_model input).
    return {k: v for k, v in spec.items() if k != "base_source"}


def _selection_is_a_target(params: dict) -> bool:
    """With quantization.runs representative or best_seed, the selection is a target of a bare
    `snakemake`. Snakemake learns of a checkpoint only through the input functions that read
    its output; when that output is missing while its consumers' outputs exist (a campaign
    switched from control to representative, a selection file an upgrade moved or removed), it
    does not run the checkpoint, so the quantize jobs the checkpoint adds, and their params and
    code triggers, stay unseen: nothing is done, or only part, and a later run finds the rest.
    As a target, a missing selection is always made, and Snakemake then evaluates the jobs that
    wait for it in the same run."""
    from campaign.quantize.targets import SELECTED

    runs = params["quantization"]["runs"]
    return isinstance(runs, str) and runs in SELECTED


def _select_spec(params: dict) -> dict:
    from campaign.quantize.targets import SELECTED, run_cells

    runs = params["quantization"]["runs"]
    mode = runs if isinstance(runs, str) and runs in SELECTED else None
    # The cells only where they decide: a new ablation level does not redo a best_seed pick.
    cells = run_cells(params) if mode == "representative" else None
    # The evaluation's metric and decision split, only where a selection is made.
    evaluation = params["evaluation"]
    # (a generation campaign has none: targets.py asks the task's metric_of then)
    metric = evaluation.get("metric") if mode else None
    spec = {
        "mode": mode,
        "cells": cells,
        "metric": metric,
        "split": evaluation["decide_on"] if mode else None,
    }
    from campaign.core.tasks import module_of

    task = params["model"]["task"]
    if mode:  # the task ranks the runs; its own settings may name its per-item metric
        spec |= {"task": task, "model": module_of(task).own_settings(params["model"])}
    return spec


def _table_spec(params: dict) -> dict:
    return {"variants": list(params["quantization"]["variants"])}


def _check_params(params: dict) -> None:
    from campaign.quantize.targets import check_runs

    check_runs(params)


# Filed with the evaluation's figures: its quality numbers come from there.
_SECTION = sections_by("campaign.quantize.section", figure="4. Evaluation")

PHASE = Phase(
    name="quantize",
    order=50,
    # After the evaluation's sections: its quality numbers come from there.
    report=(
        _SECTION(
            "quantize",
            "Quantization trade-off",
            62,
            {
                "variants": From("quantize_table", "table"),
                "eval_metrics": From("evaluate", "metrics"),
                "decisions": From("evaluate", "decisions"),
            },
        ),
    ),
    stages=(
        Stage(
            name="quantize",
            entry="campaign.quantize.stage:stage",
            help="quantize one trained run with one variant; score, compare and measure it",
            inputs={
                **outputs_of("train", "model", "run_manifest", *PREDICTIONS),
                **SPLIT_FILES,
                "base_model": Derived(),
                "chat_template": Derived(),
            },
            outputs={
                "model": Folder("results/quantize/{run}/{variant}/model"),
                **files_in(
                    "results/quantize/{run}/{variant}",
                    "predictions_validation.parquet",
                    "predictions_test.parquet",
                    "result.json",
                    "measurements.json",
                ),
            },
            spec=quantize_spec,
            key_view=_key_view,
            derive_inputs="campaign.quantize.inputs:derive_inputs",
            libraries=LIBRARIES,
            volatile=("measurements",),
            execution=EXECUTION,
        ),
        Stage(
            name="quantize_select",
            entry="campaign.quantize.targets:stage_select",
            help="pick the chosen cell's median-seed run (quantization.runs: representative) or "
            "the single best run (best_seed), by evaluation.metric on evaluation.decide_on",
            # Both splits' predictions (one train job writes them): the stage scores the one
            # evaluation.decide_on names.
            inputs={
                **outputs_of("train", *PREDICTIONS, each=EachRun),
                **SPLIT_FILES,
            },
            outputs={"selection": File("results/quantize/selection.json")},
            final=_selection_is_a_target,
            spec=_select_spec,
        ),
        Stage(
            name="quantize_table",
            entry="campaign.quantize.table:stage",
            help="one table of every quantized variant (results/quantize/variants.parquet)",
            inputs={
                "results": EachJob("quantize", "result"),
                "measurements": EachJob("quantize", "measurements"),
            },
            outputs={"table": File("results/quantize/variants.parquet")},
            final=True,
            spec=_table_spec,
            libraries=("pandas", "pyarrow"),
            # Not volatile: it copies the jobs' measurements (volatile there) into one table,
            # the same bytes for the same inputs.
        ),
    ),
    check_params=_check_params,
)

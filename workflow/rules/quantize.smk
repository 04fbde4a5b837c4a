# Quantize phase: one job per (chosen run, variant), each scoring its variant on the run's own
# validation/test items and measuring it; one table of them all (results/quantize/
# variants.parquet). quantization.runs: control, all or a list are known from params;
# representative and best_seed are known after training, so a checkpoint (quantize_select)
# picks the run from the runs' predictions on evaluation.decide_on, by evaluation.metric, and
# the table asks it which run's jobs to add.
from campaign.quantize import job_paths
from campaign.quantize.variants import names as variant_names


wildcard_constraints:
    variant="|".join(variant_names()),


localrules:
    quantize_select,
    quantize_table,


# The selection file, once the checkpoint has written it (representative and best_seed).
QUANTIZE_SELECTION = lambda: checkpoints.quantize_select.get().output.selection


checkpoint quantize_select:
    input:
        **SPLITS,
        predictions=decision_predictions(),
    output:
        selection="results/quantize/selection.json",
    log:
        "logs/quantize_select/quantize_select.log",
    benchmark:
        "logs/benchmarks/quantize_select/quantize_select.tsv"
    conda:
        CONDA_ENV
    params:
        **stage_params("quantize_select"),
    shell:
        stage_shell("quantize_select")


rule quantize:
    input:
        **SPLITS,
        model="results/runs/{run}/model",
        run_manifest="results/runs/{run}/run_manifest.json",
        predictions_validation="results/runs/{run}/predictions_validation.parquet",
        predictions_test="results/runs/{run}/predictions_test.parquet",
        base_model=BASE_MODEL,
    output:
        model=directory("results/quantize/{run}/{variant}/model"),
        predictions_validation="results/quantize/{run}/{variant}/predictions_validation.parquet",
        predictions_test="results/quantize/{run}/{variant}/predictions_test.parquet",
        result="results/quantize/{run}/{variant}/result.json",
        measurements="results/quantize/{run}/{variant}/measurements.json",
    log:
        "logs/quantize/{run}/{variant}.log",
    benchmark:
        "logs/benchmarks/quantize/{run}/{variant}.tsv"
    conda:
        CONDA_ENV
    params:
        **stage_params("quantize"),
    shell:
        stage_shell("quantize")


rule quantize_table:
    input:
        results=job_paths(config, "result.json", run_paths("{run}"), QUANTIZE_SELECTION),
        measurements=job_paths(
            config, "measurements.json", run_paths("{run}"), QUANTIZE_SELECTION
        ),
    output:
        table="results/quantize/variants.parquet",
    log:
        "logs/quantize_table/quantize_table.log",
    benchmark:
        "logs/benchmarks/quantize_table/quantize_table.tsv"
    conda:
        CONDA_ENV
    params:
        **stage_params("quantize_table"),
    shell:
        stage_shell("quantize_table")

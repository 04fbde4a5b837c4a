# Evaluate phase: the reference floor (majority class, TF-IDF + logistic regression on the same
# train split), then every variant scored on the same items, compared and decided.


rule floor:
    input:
        **SPLITS,
    output:
        floor=directory("results/evaluation/floor"),
        timings="results/evaluation/floor_timings.json",
    log:
        "logs/floor/floor.log",
    benchmark:
        "logs/benchmarks/floor/floor.tsv"
    conda:
        CONDA_ENV
    params:
        **stage_params("floor"),
    shell:
        stage_shell("floor")


rule evaluate:
    input:
        **SPLITS,
        runs="results/plan/runs.tsv",
        predictions_validation=run_paths(
            "results/runs/{run}/predictions_validation.parquet"
        ),
        predictions_test=run_paths("results/runs/{run}/predictions_test.parquet"),
        floor="results/evaluation/floor",
        # Every quantized variant's result (status) and predictions: job_paths asks the
        # quantize_select checkpoint which runs were chosen (quantization.runs: representative or
        # best_seed).
        variants_result=job_paths(
            config, "result.json", run_paths("{run}"), QUANTIZE_SELECTION
        ),
        variants_validation=job_paths(
            config,
            "predictions_validation.parquet",
            run_paths("{run}"),
            QUANTIZE_SELECTION,
        ),
        variants_test=job_paths(
            config, "predictions_test.parquet", run_paths("{run}"), QUANTIZE_SELECTION
        ),
    output:
        metrics="results/evaluation/metrics.parquet",
        comparisons="results/evaluation/comparisons.parquet",
        decisions="results/evaluation/decisions.json",
        errors=directory("results/evaluation/errors"),
        summary="results/evaluation/summary.txt",
    log:
        "logs/evaluate/evaluate.log",
    benchmark:
        "logs/benchmarks/evaluate/evaluate.tsv"
    conda:
        CONDA_ENV
    params:
        **stage_params("evaluate"),
    shell:
        stage_shell("evaluate")

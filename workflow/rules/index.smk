# Index phase: results/index.parquet, one row per trained run, quantized variant and reference
# floor, joining identity (factors, seed, data, split and code hashes, artifacts), metrics with
# intervals, decisions and cost from the files the earlier phases wrote.


localrules:
    index,


rule index:
    input:
        **SPLITS,
        summary="results/data/summary.json",
        runs="results/plan/runs.tsv",
        run_manifests=run_paths("results/runs/{run}/run_manifest.json"),
        models=run_paths("results/runs/{run}/model"),
        predictions_validation=run_paths(
            "results/runs/{run}/predictions_validation.parquet"
        ),
        predictions_test=run_paths("results/runs/{run}/predictions_test.parquet"),
        variants_result=job_paths(
            config, "result.json", run_paths("{run}"), QUANTIZE_SELECTION
        ),
        variants_model=job_paths(
            config, "model", run_paths("{run}"), QUANTIZE_SELECTION
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
        metrics="results/evaluation/metrics.parquet",
        comparisons="results/evaluation/comparisons.parquet",
        decisions="results/evaluation/decisions.json",
        jobs="results/budget/jobs.parquet",
    output:
        index="results/index.parquet",
    log:
        "logs/index/index.log",
    benchmark:
        "logs/benchmarks/index/index.tsv"
    conda:
        CONDA_ENV
    params:
        **stage_params("index"),
    shell:
        stage_shell("index")

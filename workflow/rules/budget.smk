# Budget phase: what the finished jobs cost, the calibrated forecast of the rest, the offers and
# the cheapest way to buy the rest before the deadline, the cost at equal quality (the reference
# floor priced from the fit and predictions the floor stage timed).


localrules:
    budget,


rule budget:
    input:
        runs="results/plan/runs.tsv",
        preflight_report="results/preflight/report.json",
        preflight_measurements="results/preflight/measurements.json",
        run_manifests=run_paths("results/runs/{run}/run_manifest.json"),
        timings=run_paths("results/runs/{run}/timings.json"),
        # Snakemake's own measurement of each training job (seconds, max_rss).
        # Not Snakemake's benchmark files: a job served from the store rewrites its benchmark
        # with the hit's seconds. The runs' timings.json hold what the computation took.
        benchmarks=[],
        decisions="results/evaluation/decisions.json",
        metrics="results/evaluation/metrics.parquet",
        variants="results/quantize/variants.parquet",
        floor_timings="results/evaluation/floor_timings.json",
    output:
        jobs_csv="results/budget/jobs.csv",
        jobs_parquet="results/budget/jobs.parquet",
        forecast_csv="results/budget/forecast.csv",
        forecast_parquet="results/budget/forecast.parquet",
        offers_csv="results/budget/offers.csv",
        offers_parquet="results/budget/offers.parquet",
        plans_csv="results/budget/plans.csv",
        plans_parquet="results/budget/plans.parquet",
        equal_quality_csv="results/budget/equal_quality.csv",
        equal_quality_parquet="results/budget/equal_quality.parquet",
        to_decide_csv="results/budget/to_decide.csv",
        to_decide_parquet="results/budget/to_decide.parquet",
        summary="results/budget/summary.txt",
    log:
        "logs/budget/budget.log",
    benchmark:
        "logs/benchmarks/budget/budget.tsv"
    conda:
        CONDA_ENV
    params:
        **stage_params("budget"),
    shell:
        stage_shell("budget")

# Track phase: the finished campaign logged where its users compare runs. One MLflow run per row
# of the index under a parent run for the campaign (tracking.mlflow; a local SQLite store under
# results/ with uri: null), each trained run's curves as TensorBoard event files. Local: the
# login node reaches the tracking server; a server it cannot reach fails this job alone.


localrules:
    track,


rule track:
    input:
        index="results/index.parquet",
        run_metrics=run_paths("results/runs/{run}/metrics.parquet"),
        run_specs=run_paths("results/runs/{run}/spec.json"),
        decisions="results/evaluation/decisions.json",
        report_html="results/report/index.html",
        report_markdown="results/report/summary.md",
        budget_summary="results/budget/summary.txt",
        jobs="results/budget/jobs.parquet",
        plans="results/budget/plans.parquet",
        forecast="results/budget/forecast.parquet",
    output:
        logged="results/tracking/logged.json",
        tensorboard=directory("results/tensorboard"),
    log:
        "logs/track/track.log",
    benchmark:
        "logs/benchmarks/track/track.tsv"
    conda:
        CONDA_ENV
    params:
        **stage_params("track"),
    shell:
        stage_shell("track")

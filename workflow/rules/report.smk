# Report phase: the campaign's headline numbers (read by `dvc metrics show`).


localrules:
    metrics,


rule metrics:
    input:
        summary="results/data/summary.json",
        runs="results/plan/runs.tsv",
        run_manifests=run_paths("results/runs/{run}/run_manifest.json"),
        decisions="results/evaluation/decisions.json",
    output:
        metrics="results/metrics.json",
    log:
        "logs/metrics/metrics.log",
    benchmark:
        "logs/benchmarks/metrics/metrics.tsv"
    conda:
        CONDA_ENV
    params:
        **stage_params("metrics"),
    shell:
        stage_shell("metrics")

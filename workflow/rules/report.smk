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


# The report a user reads: index.html (figures embedded), summary.md (linking figures/, so each
# figure must be written to results/report/figures/<section>.png), and the training curves as
# CSV for `dvc plots show`. `snakemake --report` shows the figures with their captions.
localrules:
    report,


rule report:
    input:
        manifest="results/data/manifest.parquet",
        privacy="results/data/privacy_report.json",
        artifact_findings="results/data/artifact_findings.json",
        leakage_audit="results/data/leakage_audit.json",
        preflight_report="results/preflight/report.json",
        run_metrics=run_paths("results/runs/{run}/metrics.parquet"),
        comparisons="results/evaluation/comparisons.parquet",
        eval_metrics="results/evaluation/metrics.parquet",
        decisions="results/evaluation/decisions.json",
        variants="results/quantize/variants.parquet",
        jobs="results/budget/jobs.parquet",
        plans="results/budget/plans.parquet",
        forecast="results/budget/forecast.parquet",
        budget_summary="results/budget/summary.txt",
    output:
        html="results/report/index.html",
        markdown="results/report/summary.md",
        train_curves="results/report/train_curves.csv",
        validation_curves="results/report/validation_curves.csv",
        fig_data=report(
            "results/report/figures/data.png",
            caption="../report/data.rst",
            category="1. Data",
        ),
        fig_leakage=report(
            "results/report/figures/leakage.png",
            caption="../report/leakage.rst",
            category="1. Data",
        ),
        fig_preflight=report(
            "results/report/figures/preflight.png",
            caption="../report/preflight.rst",
            category="2. Preflight",
        ),
        fig_curves=report(
            "results/report/figures/curves.png",
            caption="../report/curves.rst",
            category="3. Training",
        ),
        fig_effects=report(
            "results/report/figures/effects.png",
            caption="../report/effects.rst",
            category="4. Evaluation",
        ),
        fig_seeds=report(
            "results/report/figures/seeds.png",
            caption="../report/seeds.rst",
            category="4. Evaluation",
        ),
        fig_quantize=report(
            "results/report/figures/quantize.png",
            caption="../report/quantize.rst",
            category="4. Evaluation",
        ),
        fig_budget=report(
            "results/report/figures/budget.png",
            caption="../report/budget.rst",
            category="5. Budget",
        ),
        fig_forecast=report(
            "results/report/figures/forecast.png",
            caption="../report/forecast.rst",
            category="5. Budget",
        ),
    log:
        "logs/report/report.log",
    benchmark:
        "logs/benchmarks/report/report.tsv"
    conda:
        CONDA_ENV
    params:
        **stage_params("report"),
    shell:
        stage_shell("report")

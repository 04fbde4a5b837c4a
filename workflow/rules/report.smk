# Report phase: the campaign's headline numbers (read by `dvc metrics show`).


localrules:
    metrics,


rule metrics:
    input:
        **stage_inputs("metrics"),
    output:
        **stage_outputs("metrics"),
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
        **stage_inputs("report"),
    output:
        **stage_outputs("report"),
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

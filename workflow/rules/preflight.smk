# Preflight phase: once, on the baseline recipe, before any training job (every train job takes
# its report as input). A failed blocking check stops the campaign; the report stays in the log.


rule preflight:
    input:
        **stage_inputs("preflight"),
    output:
        **stage_outputs("preflight"),
    log:
        "logs/preflight/preflight.log",
    benchmark:
        "logs/benchmarks/preflight/preflight.tsv"
    conda:
        CONDA_ENV
    # Two checks at a time, one torch thread each, as a training job runs (threads is not in
    # the key: campaign.preflight.execution); the throughput check runs alone after them.
    # Snakemake gives fewer where --cores is lower.
    threads: 2
    params:
        **stage_params("preflight"),
    shell:
        stage_shell("preflight")

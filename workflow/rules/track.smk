# Track phase: the finished campaign logged where its users compare runs. One MLflow run per row
# of the index under a parent run for the campaign (tracking.mlflow; a local SQLite store under
# results/ with uri: null), each trained run's curves as TensorBoard event files. Local: the
# login node reaches the tracking server; a server it cannot reach fails this job alone.


localrules:
    track,


rule track:
    input:
        **stage_inputs("track"),
    output:
        **stage_outputs("track"),
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

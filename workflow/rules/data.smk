# Data phase: read and validate the sources, write the manifest; privacy scan, leak-free split
# and leakage audit.
rule manifest:
    input:
        **stage_inputs("manifest"),
    output:
        **stage_outputs("manifest"),
    log:
        "logs/manifest/manifest.log",
    benchmark:
        "logs/benchmarks/manifest/manifest.tsv"
    conda:
        CONDA_ENV
    params:
        **stage_params("manifest"),
    shell:
        stage_shell("manifest")


rule split:
    input:
        **stage_inputs("split"),
    output:
        **stage_outputs("split"),
    log:
        "logs/split/split.log",
    benchmark:
        "logs/benchmarks/split/split.tsv"
    conda:
        CONDA_ENV
    params:
        **stage_params("split"),
    shell:
        stage_shell("split")


# The privacy scan of what the campaign wrote (tokenizer vocabularies, predictions, reports).
rule artifact_scan:
    input:
        **stage_inputs("artifact_scan"),
    output:
        **stage_outputs("artifact_scan"),
    log:
        "logs/artifact_scan/artifact_scan.log",
    benchmark:
        "logs/benchmarks/artifact_scan/artifact_scan.tsv"
    conda:
        CONDA_ENV
    params:
        **stage_params("artifact_scan"),
    shell:
        stage_shell("artifact_scan")

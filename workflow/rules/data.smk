# Data phase: read and validate the sources, write the manifest; privacy scan, leak-free split
# and leakage audit.
rule manifest:
    input:
        sources=SOURCES,
        previous=PREVIOUS_MANIFEST,
    output:
        manifest="results/data/manifest.parquet",
        summary="results/data/summary.json",
        diff="results/data/manifest_diff.json",
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
        sources=SOURCES,
        # Not hashed into the split's key (the sources are): it orders the split after the
        # manifest, so a bad record is reported once, by the manifest stage.
        manifest="results/data/manifest.parquet",
        # An earlier run's split files (split.previous), for the moved-record report.
        previous=[config["split"]["previous"]] if config["split"]["previous"] else [],
    output:
        train="results/data/splits/train.parquet",
        validation="results/data/splits/validation.parquet",
        test="results/data/splits/test.parquet",
        audit="results/data/leakage_audit.json",
        audit_table="results/data/leakage_audit.txt",
        privacy="results/data/privacy_report.json",
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


# The privacy scan of what the campaign wrote: a tokenizer trained on text holding a key can
# hold it as a token; predictions and reports can quote records. Logs are not DAG outputs:
# `campaign scan-artifacts` scans them.
rule artifact_scan:
    input:
        models=run_paths("results/runs/{run}/model"),
        predictions_validation=run_paths(
            "results/runs/{run}/predictions_validation.parquet"
        ),
        predictions_test=run_paths("results/runs/{run}/predictions_test.parquet"),
        summary="results/evaluation/summary.txt",
        audit_table="results/data/leakage_audit.txt",
        preflight_report="results/preflight/report.txt",
    output:
        findings="results/data/artifact_findings.json",
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

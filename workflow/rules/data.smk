# Data phase: read and validate the sources, write the manifest (splits come next).


def data_sources(wildcards):
    return SOURCES


def previous_manifest(wildcards):
    previous = config["data"]["previous_manifest"]
    return [previous] if previous else []


def manifest_spec(wildcards):
    return stage_spec("manifest")


def manifest_inputs(wildcards, input):
    return in_args(input, "sources", "previous")


rule manifest:
    input:
        sources=data_sources,
        previous=previous_manifest,
        code=stage_code("manifest"),
    output:
        manifest="results/data/manifest.parquet",
        summary="results/data/summary.json",
        diff="results/data/manifest_diff.json",
    params:
        spec=manifest_spec,
        inputs=manifest_inputs,
        state_dir=STATE_DIR,
    log:
        "logs/manifest/manifest.log",
    benchmark:
        "results/benchmarks/manifest/manifest.tsv"
    shell:
        "{CAMPAIGN} manifest --spec {params.spec:q} --state-dir {params.state_dir:q} "
        "{params.inputs} --out manifest={output.manifest:q} --out summary={output.summary:q} "
        "--out diff={output.diff:q} " + LOGGED

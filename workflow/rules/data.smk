# Data phase: read and validate the sources, write the manifest (splits come next).


rule manifest:
    input:
        sources=data_sources,
        previous=previous_manifest,
        code=stage_code("manifest"),
    output:
        manifest="results/data/manifest.parquet",
        summary="results/data/summary.json",
        diff="results/data/manifest_diff.json",
    log:
        "logs/manifest/manifest.log",
    benchmark:
        "logs/benchmarks/manifest/manifest.tsv"
    params:
        campaign=CAMPAIGN,
        spec=manifest_spec,
        inputs=manifest_inputs,
        state_dir=STATE_DIR,
    shell:
        "{params.campaign} manifest --spec {params.spec:q} --state-dir {params.state_dir:q} "
        "{params.inputs} --out manifest={output.manifest:q} --out summary={output.summary:q} "
        "--out diff={output.diff:q} --log {log:q}"

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


rule split:
    input:
        sources=data_sources,
        # Not hashed into the split's key (the sources are): it orders the split after the
        # manifest, so a bad record is reported once, by the manifest stage.
        manifest="results/data/manifest.parquet",
        code=stage_code("split"),
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
    params:
        campaign=CAMPAIGN,
        spec=split_spec,
        inputs=split_inputs,
        state_dir=STATE_DIR,
    shell:
        "{params.campaign} split --spec {params.spec:q} --state-dir {params.state_dir:q} "
        "{params.inputs} --out train={output.train:q} --out validation={output.validation:q} "
        "--out test={output.test:q} --out audit={output.audit:q} "
        "--out audit_table={output.audit_table:q} --out privacy={output.privacy:q} --log {log:q}"

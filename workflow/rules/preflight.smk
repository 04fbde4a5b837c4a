# Preflight phase: once, on the baseline recipe, before any training job (every train job takes
# its report as input). A failed blocking check stops the campaign; the report stays in the log.


rule preflight:
    input:
        train="results/data/splits/train.parquet",
        validation="results/data/splits/validation.parquet",
        test="results/data/splits/test.parquet",
        base_model=base_model,
        code=stage_code("preflight"),
    output:
        report="results/preflight/report.json",
        report_text="results/preflight/report.txt",
    log:
        "logs/preflight/preflight.log",
    benchmark:
        "logs/benchmarks/preflight/preflight.tsv"
    params:
        campaign=CAMPAIGN,
        spec=preflight_spec,
        inputs=train_inputs,
        state_dir=STATE_DIR,
    shell:
        "{params.campaign} preflight --spec {params.spec:q} --state-dir {params.state_dir:q} "
        "{params.inputs} --out report={output.report:q} "
        "--out report_text={output.report_text:q} --log {log:q}"

# Report phase: the campaign's headline numbers (read by `dvc metrics show`).


rule metrics:
    input:
        summary="results/data/summary.json",
        runs="results/plan/runs.tsv",
        run_manifests=trained_run_manifests,
        code=stage_code("metrics"),
    output:
        metrics="results/metrics.json",
    log:
        "logs/metrics/metrics.log",
    benchmark:
        "logs/benchmarks/metrics/metrics.tsv"
    params:
        campaign=CAMPAIGN,
        inputs=metrics_inputs,
        state_dir=STATE_DIR,
    shell:
        "{params.campaign} metrics --spec null --state-dir {params.state_dir:q} {params.inputs} "
        "--out metrics={output.metrics:q} --log {log:q}"

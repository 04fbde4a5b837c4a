# Report phase: the campaign's headline numbers (read by `dvc metrics show`).


def metrics_inputs(wildcards, input):
    return in_args(input, "summary", "runs")


rule metrics:
    input:
        summary="results/data/summary.json",
        runs="results/plan/runs.tsv",
        code=stage_code("metrics"),
    output:
        metrics="results/metrics.json",
    params:
        inputs=metrics_inputs,
        state_dir=STATE_DIR,
    log:
        "logs/metrics/metrics.log",
    benchmark:
        "results/benchmarks/metrics/metrics.tsv"
    shell:
        "{CAMPAIGN} metrics --spec null --state-dir {params.state_dir:q} {params.inputs} "
        "--out metrics={output.metrics:q} " + LOGGED

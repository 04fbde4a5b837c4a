# Plan phase: the resolved spec of every planned run (what its training job consumes) and the
# plan table. A run's path carries its id, a hash of its spec, so editing one ablation level adds
# new run paths and touches no other run.


rule run_spec:
    input:
        code=stage_code("run_spec"),
    output:
        spec="results/runs/{run}/spec.json",
    log:
        "logs/run_spec/{run}.log",
    benchmark:
        "logs/benchmarks/run_spec/{run}.tsv"
    params:
        campaign=CAMPAIGN,
        spec=run_spec_json,
        state_dir=STATE_DIR,
    shell:
        "{params.campaign} run-spec --spec {params.spec:q} --state-dir {params.state_dir:q} "
        "--out spec={output.spec:q} --log {log:q}"


rule plan_table:
    input:
        code=stage_code("plan_table"),
    output:
        runs="results/plan/runs.tsv",
    log:
        "logs/plan_table/plan_table.log",
    benchmark:
        "logs/benchmarks/plan_table/plan_table.tsv"
    params:
        campaign=CAMPAIGN,
        spec=plan_spec,
        state_dir=STATE_DIR,
    shell:
        "{params.campaign} plan-table --spec {params.spec:q} --state-dir {params.state_dir:q} "
        "--out runs={output.runs:q} --log {log:q}"

# Plan phase: the resolved spec of every planned run (what its training job consumes) and the
# plan table. A run's path carries its id, a hash of its spec, so editing one ablation level adds
# new run paths and touches no other run.
wildcard_constraints:
    run=RUN_ID_PATTERN,


localrules:
    run_spec,
    plan_table,


rule run_spec:
    output:
        spec="results/runs/{run}/spec.json",
    log:
        "logs/run_spec/{run}.log",
    benchmark:
        "logs/benchmarks/run_spec/{run}.tsv"
    conda:
        CONDA_ENV
    params:
        **stage_params("run_spec"),
    shell:
        stage_shell("run_spec")


rule plan_table:
    input:
        preflight_report="results/preflight/report.json",
        preflight_measurements="results/preflight/measurements.json",
    output:
        runs="results/plan/runs.tsv",
    log:
        "logs/plan_table/plan_table.log",
    benchmark:
        "logs/benchmarks/plan_table/plan_table.tsv"
    conda:
        CONDA_ENV
    params:
        **stage_params("plan_table"),
    shell:
        stage_shell("plan_table")

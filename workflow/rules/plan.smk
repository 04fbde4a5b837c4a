# Plan phase: the resolved spec of every planned run (what its training job consumes) and the
# plan table (results/plan/runs.tsv: the runs in order, projected hours, kept or cut) with its
# report (results/plan/report.txt: the design and what it can estimate, as planned and after the
# cut). A run's path carries its id, a hash of its spec, so editing one ablation level adds new
# run paths and touches no other run.
wildcard_constraints:
    run=RUN_ID_PATTERN,


localrules:
    run_spec,
    plan_table,


rule run_spec:
    output:
        **stage_outputs("run_spec"),
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


# Which runs are trained: with ablation.budget_hours the plan table decides from the
# preflight's measurements, so it is a checkpoint and the consumers of trained runs (rule all,
# metrics: DAG_RUNS.run_paths) ask it for the kept runs once it is written. Without a budget
# the kept runs (ablation.max_runs) are known from params, and a plain rule keeps the whole DAG
# visible to `snakemake -n` from the start. The two bodies are the same (tests/plan checks it).
if BUDGET_CUT:

    checkpoint plan_table:
        input:
            **stage_inputs("plan_table"),
        output:
            **stage_outputs("plan_table"),
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

else:

    rule plan_table:
        input:
            **stage_inputs("plan_table"),
        output:
            **stage_outputs("plan_table"),
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

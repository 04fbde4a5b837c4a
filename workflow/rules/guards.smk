# Guards phase (evaluation.guards): one job per (kept run, guard task) and one per guard task for
# the base model, each scoring the task item by item with lm-evaluation-harness; then one job
# deciding each cell against the base (results/guards/guards.json). Every trained run is
# guarded: the kept cell is known only after the evaluation (campaign/guards/targets.py).


wildcard_constraints:
    guard=r"[A-Za-z0-9][A-Za-z0-9_.-]*",


rule guard:
    input:
        **stage_inputs("guard"),
    output:
        **stage_outputs("guard"),
    log:
        "logs/guard/{run}/{guard}.log",
    benchmark:
        "logs/benchmarks/guard/{run}/{guard}.tsv"
    conda:
        CONDA_ENV
    params:
        **stage_params("guard"),
    shell:
        stage_shell("guard")


rule guard_base:
    input:
        **stage_inputs("guard_base"),
    output:
        **stage_outputs("guard_base"),
    log:
        "logs/guard_base/{guard}.log",
    benchmark:
        "logs/benchmarks/guard_base/{guard}.tsv"
    conda:
        CONDA_ENV
    params:
        **stage_params("guard_base"),
    shell:
        stage_shell("guard_base")


rule guards:
    input:
        **stage_inputs("guards"),
    output:
        **stage_outputs("guards"),
    log:
        "logs/guards/guards.log",
    benchmark:
        "logs/benchmarks/guards/guards.tsv"
    conda:
        CONDA_ENV
    params:
        **stage_params("guards"),
    shell:
        stage_shell("guards")

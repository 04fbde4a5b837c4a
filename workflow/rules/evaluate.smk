# Evaluate phase: the reference floor (majority class, TF-IDF + logistic regression on the same
# train split), then every variant scored on the same items, compared and decided.


rule floor:
    input:
        **stage_inputs("floor"),
    output:
        **stage_outputs("floor"),
    log:
        "logs/floor/floor.log",
    benchmark:
        "logs/benchmarks/floor/floor.tsv"
    conda:
        CONDA_ENV
    params:
        **stage_params("floor"),
    shell:
        stage_shell("floor")


rule evaluate:
    input:
        **stage_inputs("evaluate"),
    output:
        **stage_outputs("evaluate"),
    log:
        "logs/evaluate/evaluate.log",
    benchmark:
        "logs/benchmarks/evaluate/evaluate.tsv"
    conda:
        CONDA_ENV
    params:
        **stage_params("evaluate"),
    shell:
        stage_shell("evaluate")


# An adaptive campaign (ablation.adaptive): after the plan's runs, and after each batch it
# appends, a look evaluates the runs so far on repeated confidence intervals and lists the runs
# to add (results/adaptive/look_<j>.json); the consumers of trained runs ask the looks
# (DAG_RUNS.run_paths) which runs the campaign has once the last one is written.
if ADAPTIVE:

    wildcard_constraints:
        look=r"\d+",

    localrules:
        look,

    checkpoint look:
        input:
            **stage_inputs("look"),
        output:
            **stage_outputs("look"),
        log:
            "logs/look/look_{look}.log",
        benchmark:
            "logs/benchmarks/look/look_{look}.tsv"
        conda:
            CONDA_ENV
        params:
            **stage_params("look"),
        shell:
            stage_shell("look")

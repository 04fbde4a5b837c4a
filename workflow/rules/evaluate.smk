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

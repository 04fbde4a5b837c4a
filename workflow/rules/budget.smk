# Budget phase: what the finished jobs cost, the calibrated forecast of the rest, the offers and
# the cheapest way to buy the rest before the deadline, the cost at equal quality (the reference
# floor priced from the fit and predictions the floor stage timed).


localrules:
    budget,


rule budget:
    input:
        **stage_inputs("budget"),
    output:
        **stage_outputs("budget"),
    log:
        "logs/budget/budget.log",
    benchmark:
        "logs/benchmarks/budget/budget.tsv"
    conda:
        CONDA_ENV
    params:
        **stage_params("budget"),
    shell:
        stage_shell("budget")

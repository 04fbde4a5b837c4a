# Index phase: results/index.parquet, one row per trained run, quantized variant and reference
# floor, joining identity (factors, seed, data, split and code hashes, artifacts), metrics with
# intervals, decisions and cost from the files the earlier phases wrote.


localrules:
    index,


rule index:
    input:
        **stage_inputs("index"),
    output:
        **stage_outputs("index"),
    log:
        "logs/index/index.log",
    benchmark:
        "logs/benchmarks/index/index.tsv"
    conda:
        CONDA_ENV
    params:
        **stage_params("index"),
    shell:
        stage_shell("index")

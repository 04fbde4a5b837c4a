# Quantize phase: one job per (chosen run, variant), each scoring its variant on the run's own
# validation/test items and measuring it; one table of them all (results/quantize/
# variants.parquet). quantization.runs: control, all or a list are known from params;
# representative and best_seed are known after training, so a checkpoint (quantize_select)
# picks the run from the runs' predictions on evaluation.decide_on, by evaluation.metric, and
# the table asks it which run's jobs to add.
from campaign.quantize.variants import names as variant_names


wildcard_constraints:
    variant="|".join(variant_names()),


localrules:
    quantize_select,
    quantize_table,


checkpoint quantize_select:
    input:
        **stage_inputs("quantize_select"),
    output:
        **stage_outputs("quantize_select"),
    log:
        "logs/quantize_select/quantize_select.log",
    benchmark:
        "logs/benchmarks/quantize_select/quantize_select.tsv"
    conda:
        CONDA_ENV
    params:
        **stage_params("quantize_select"),
    shell:
        stage_shell("quantize_select")


rule quantize:
    input:
        **stage_inputs("quantize"),
    output:
        **stage_outputs("quantize"),
    log:
        "logs/quantize/{run}/{variant}.log",
    benchmark:
        "logs/benchmarks/quantize/{run}/{variant}.tsv"
    conda:
        CONDA_ENV
    params:
        **stage_params("quantize"),
    shell:
        stage_shell("quantize")


rule quantize_table:
    input:
        **stage_inputs("quantize_table"),
    output:
        **stage_outputs("quantize_table"),
    log:
        "logs/quantize_table/quantize_table.log",
    benchmark:
        "logs/benchmarks/quantize_table/quantize_table.tsv"
    conda:
        CONDA_ENV
    params:
        **stage_params("quantize_table"),
    shell:
        stage_shell("quantize_table")

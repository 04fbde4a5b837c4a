# Train phase: one job per kept run of the plan (rule all and metrics ask DAG_RUNS.run_paths).
# A killed job resumes from its last checkpoint in the store's work folder
# (.campaign/work/<key>/) when it is started again.
rule train:
    input:
        **stage_inputs("train"),
    output:
        **stage_outputs("train"),
    log:
        "logs/train/{run}.log",
    benchmark:
        "logs/benchmarks/train/{run}.tsv"
    # The plan's order (control, main effects, interactions, extra seeds; cheaper first): with
    # fewer cores than runs, the runs that tell most per unit of cost finish first. Not a param:
    # reordering the plan reruns nothing.
    priority: DAG_RUNS.priority
    conda:
        CONDA_ENV
    # train.devices N: N tasks (srun starts one worker per task), one GPU each (--gpus=N
    # --ntasks-per-gpu=1; without tasks_per_gpu the SLURM plugin reads tasks as tasks per GPU).
    # A cluster without GPUs sets gpu: 0 for train in its profile: --ntasks=N, one CPU each.
    resources:
        tasks=DAG_RUNS.devices,
        tasks_per_gpu=1,
        gpu=DAG_RUNS.devices,
    params:
        **stage_params("train"),
    shell:
        stage_shell("train")

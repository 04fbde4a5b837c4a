# Train phase: one job per kept run of the plan (rule all and metrics ask for them: run_paths).
# A killed job resumes from its last checkpoint in the store's work folder
# (.campaign/work/<key>/) when it is started again.
rule train:
    input:
        **SPLITS,
        base_model=BASE_MODEL,
        # Orders training after a passed preflight and a plan that fits its limits. ancient(): a
        # plan table redone for a bigger plan does not make the runs already trained stale. Not
        # hashed into the key.
        plan=ancient("results/plan/runs.tsv"),
    output:
        model=directory("results/runs/{run}/model"),
        metrics="results/runs/{run}/metrics.parquet",
        predictions_validation="results/runs/{run}/predictions_validation.parquet",
        predictions_test="results/runs/{run}/predictions_test.parquet",
        run_manifest="results/runs/{run}/run_manifest.json",
        timings="results/runs/{run}/timings.json",
    log:
        "logs/train/{run}.log",
    benchmark:
        "logs/benchmarks/train/{run}.tsv"
    # The plan's order (control, main effects, interactions, extra seeds; cheaper first): with
    # fewer cores than runs, the runs that tell most per unit of cost finish first. Not a param:
    # reordering the plan reruns nothing.
    priority: run_priority
    conda:
        CONDA_ENV
    resources:
        tasks=train_devices,
        gpu=train_devices,
    params:
        **stage_params("train"),
    shell:
        stage_shell("train")

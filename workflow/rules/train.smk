# Train phase: one job per planned run. A killed job resumes from its last checkpoint in the
# store's work folder (.campaign/work/<key>/) when it is started again.


rule train:
    input:
        train="results/data/splits/train.parquet",
        validation="results/data/splits/validation.parquet",
        test="results/data/splits/test.parquet",
        base_model=base_model,
        # Orders training after a passed preflight. ancient(): a preflight redone for a bigger
        # plan does not make the runs already trained stale. Not hashed into the key.
        preflight=ancient("results/preflight/report.json"),
        code=stage_code("train"),
    output:
        model=directory("results/runs/{run}/model"),
        metrics="results/runs/{run}/metrics.parquet",
        predictions_validation="results/runs/{run}/predictions_validation.parquet",
        predictions_test="results/runs/{run}/predictions_test.parquet",
        run_manifest="results/runs/{run}/run_manifest.json",
    log:
        "logs/train/{run}.log",
    benchmark:
        "logs/benchmarks/train/{run}.tsv"
    params:
        campaign=CAMPAIGN,
        spec=run_spec_json,
        inputs=train_inputs,
        state_dir=STATE_DIR,
    shell:
        "{params.campaign} train --spec {params.spec:q} --state-dir {params.state_dir:q} "
        "{params.inputs} --out model={output.model:q} --out metrics={output.metrics:q} "
        "--out predictions_validation={output.predictions_validation:q} "
        "--out predictions_test={output.predictions_test:q} "
        "--out run_manifest={output.run_manifest:q} --log {log:q}"

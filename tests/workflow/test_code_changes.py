"""A stage's code version is its import closure, docstrings and comments aside: an edit that
cannot change what the code does reruns nothing; a real edit reruns exactly the stages that run
that code, and `campaign gc` then drops the entries the old code made."""

from __future__ import annotations

import pytest

from conftest import campaign, events, planned_jobs, snakemake

pytestmark = pytest.mark.slow


def edit(path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, f"{path}: {old!r} not found"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def test_docstring_edit_reruns_nothing_code_edit_reruns_its_stage_and_gc_drops_old(
    finished_project,
):
    package = finished_project / "workflow" / "campaign"

    # Comments and docstrings in the training loop (part of every training job's code): nothing.
    loop = package / "train" / "loop.py"
    edit(loop, '"""The training loop:', '"""The training loop (docstring edited):')
    edit(loop, "\nimport functools\n", "\n# a comment added by the test\nimport functools\n")
    dry = snakemake(finished_project, "-n")
    assert planned_jobs(dry) == [], dry.stdout

    # A real edit of the metrics stage's module: that stage alone reruns (and `all`).
    metrics = package / "report" / "metrics.py"
    edit(metrics, "\ndef stage(ctx)", "\nEDITED = True\n\n\ndef stage(ctx)")
    dry = snakemake(finished_project, "-n")
    assert [rule for rule, _ in planned_jobs(dry)] == ["all", "metrics"], dry.stdout
    n_events = len(events(finished_project))
    snakemake(finished_project)
    new = events(finished_project)[n_events:]
    assert [(e["event"], e["stage"]) for e in new] == [("miss", "metrics"), ("commit", "metrics")]

    # The entry the old metrics code made can never be hit again: gc lists it, and only it.
    dry = campaign(finished_project, "gc", "--dry-run")
    assert "would remove 1 entries" in dry.stdout, dry.stdout
    assert "metrics" in next(line for line in dry.stdout.splitlines() if "would remove " in line)


@pytest.mark.slow(minutes=5)
def mode_picking_another_run(project, params: dict) -> str:
    """The selection mode (representative or best_seed) whose pick, by the checkpoint's own
    functions on the finished runs' predictions, is not the control run the campaign already
    quantized: its quantize job is then one only the checkpoint adds."""
    from campaign.core.registry import get_stage
    from campaign.quantize import targets

    control = targets.control_run(params)
    splits = {
        n: project / f"results/data/splits/{n}.parquet" for n in ("train", "validation", "test")
    }
    for mode in targets.SELECTED:
        spec = get_stage("quantize_select").spec(
            {**params, "quantization": {**params["quantization"], "runs": mode}}
        )
        runs = sorted(
            p.parent.name
            for p in (project / "results/runs").glob(f"run-*/predictions_{spec['split']}.parquet")
        )
        predictions = [
            project / f"results/runs/{r}/predictions_{spec['split']}.parquet" for r in runs
        ]
        scores = targets.run_scores(predictions, splits, spec["split"], spec["metric"])
        by = targets.criterion(spec["split"], spec["metric"])
        if mode == "best_seed":
            picked = targets.select_best_seed(scores, by)
        else:
            picked = targets.select_representative(scores, spec["cells"], by)
        if control not in picked["runs"]:
            return mode
    raise AssertionError(f"every selection mode picks the control run {control}")


def test_the_quantize_checkpoint_and_its_jobs_run_in_the_first_snakemake(finished_project):
    """quantization.runs: representative (or best_seed) puts the quantize_select checkpoint
    between training and the quantize jobs, which Snakemake knows only once the checkpoint has
    run (issue 32, item 9).

    Switched on in a finished campaign, the first `snakemake` plans the checkpoint (its output is
    a target: missing, it was never run, as the consumers' outputs existed) and quantizes the run
    it picks. Then an upgrade that changes the code of the checkpoint and of the quantize stage:
    the first `snakemake` reruns both (store misses: new code), and a second has nothing to do.
    The pick is another run than the control run the finished campaign quantized, so its job is
    one only the checkpoint adds."""
    import json

    import yaml

    params_path = finished_project / "params.yaml"
    params = yaml.safe_load(params_path.read_text())
    params["quantization"]["runs"] = mode_picking_another_run(finished_project, params)
    params_path.write_text(yaml.safe_dump(params, sort_keys=False))
    dry = snakemake(finished_project, "-n")
    assert "checkpoint quantize_select:" in dry.stdout, dry.stdout[-3000:]
    n_events = len(events(finished_project))
    snakemake(finished_project, timeout=900)
    ran = [(e["event"], e["stage"]) for e in events(finished_project)[n_events:]]
    selection = finished_project / "results" / "quantize" / "selection.json"
    [picked] = json.loads(selection.read_text())["runs"]
    quantized = {p.name for p in (finished_project / "results" / "quantize").glob("run-*")}
    assert picked in quantized and len(quantized) == 2  # the control run's and the pick's
    assert ("commit", "quantize_select") in ran and ("commit", "quantize") in ran, ran
    assert planned_jobs(snakemake(finished_project, "-n")) == []

    package = finished_project / "workflow" / "campaign" / "quantize"
    edit(
        package / "targets.py", "\ndef quantize_jobs(", "\nUPGRADED = True\n\n\ndef quantize_jobs("
    )
    edit(package / "stage.py", "\ndef stage(", "\nUPGRADED = True\n\n\ndef stage(")
    n_events = len(events(finished_project))
    snakemake(finished_project, timeout=900)
    ran = [(e["event"], e["stage"]) for e in events(finished_project)[n_events:]]
    for stage in ("quantize_select", "quantize"):
        assert ("miss", stage) in ran and ("commit", stage) in ran, ran
    dry = snakemake(finished_project, "-n")
    assert planned_jobs(dry) == [], dry.stdout

"""Which runs the phase quantizes (`quantization.runs`), and the `best` run's selection.

control, all and a list of run ids are known from the params alone (when the Snakefile builds
the DAG). `best` is known only after training: the selection stage (a Snakemake checkpoint) reads
every kept run's run_manifest.json and writes the run with the highest final validation accuracy;
the jobs of the chosen run are added to the DAG after it.
"""

from __future__ import annotations

import json
from pathlib import Path

from campaign.core.errors import CampaignError
from campaign.core.fsutil import atomic_write_text

MODES = ("best", "control", "all")
CRITERION = "final_validation.accuracy"


def control_run(params: dict) -> str:
    """The baseline recipe at the first of ablation.seeds."""
    from campaign.plan import plan_index

    first_seed = params["ablation"]["seeds"][0]
    for rid, run in plan_index(params).items():
        if "baseline" in run.roles and run.seed == first_seed:
            return rid
    raise CampaignError("quantization.runs: control: the plan has no baseline run")


def planned_targets(params: dict) -> list[str] | None:
    """The run ids to quantize when the params decide them; None for `best` and `all` (the
    rules ask the selection checkpoint, or take every kept run)."""
    runs = params["quantization"]["runs"]
    if runs in ("best", "all"):
        return None
    if runs == "control":
        return [control_run(params)]
    return list(runs)


def check_runs(params: dict) -> None:
    """A listed run must be a planned run (one-line error naming the key)."""
    runs = params["quantization"]["runs"]
    if isinstance(runs, str):
        if runs not in MODES:
            raise CampaignError(
                f"quantization.runs: {runs!r} is not one of {', '.join(MODES)} or a list of run ids"
            )
        return
    from campaign.plan import plan_index

    planned = plan_index(params)
    for rid in runs:
        if rid not in planned:
            raise CampaignError(
                f"quantization.runs: {rid} is not a planned run (`campaign plan` lists them)"
            )


def select_best(manifests: list[Path]) -> dict:
    """The run with the highest final validation accuracy (ties: the smaller run id).

    manifests: results/runs/<run>/run_manifest.json of every run; a run without a validation
    score is listed and never chosen.
    """
    scores: dict[str, float | None] = {}
    for path in manifests:
        try:
            manifest = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise CampaignError(
                f"input 'run_manifests': {path} is not readable JSON ({e})"
            ) from None
        final = manifest.get("final_validation") or {}
        scores[Path(path).parent.name] = final.get("accuracy")
    scored = {rid: s for rid, s in scores.items() if s is not None}
    if not scored:
        raise CampaignError(
            "quantization.runs: best: no run has a final validation accuracy (empty validation "
            "split?); name the runs instead"
        )
    best = min(scored, key=lambda rid: (-scored[rid], rid))
    return {
        "mode": "best",
        "criterion": CRITERION,
        "runs": [best],
        "scores": dict(sorted(scores.items())),
    }


def selected_runs(selection: Path) -> list[str]:
    """The run ids a selection file names (the rules read it after the checkpoint)."""
    return list(json.loads(Path(selection).read_text(encoding="utf-8"))["runs"])


def stage_select(ctx) -> None:
    """Stage entry: write the selection of `best` among the trained runs."""
    selection = select_best(ctx.inputs["run_manifests"])
    atomic_write_text(
        ctx.outputs["selection"], json.dumps(selection, indent=2, sort_keys=True) + "\n"
    )


def job_paths(params: dict, name: str, kept, selection):
    """An input function for the rules: results/quantize/<run>/<variant>/<name> of every job.

    kept: the kept run ids (a list, or an input function of the wildcards when the plan table
    decides them); selection: a callable giving the selection file (it waits for the
    quantize_select checkpoint), read only for `best`.
    """
    variants = list(params["quantization"]["variants"])
    mode = params["quantization"]["runs"]

    def paths(wildcards) -> list[str]:
        if mode == "best":
            runs = selected_runs(selection())
        elif mode == "all":
            runs = kept(wildcards) if callable(kept) else list(kept)
        else:
            runs = planned_targets(params)
        return [f"results/quantize/{run}/{variant}/{name}" for run in runs for variant in variants]

    return paths

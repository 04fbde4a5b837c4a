"""Which runs the phase quantizes (`quantization.runs`), and the selection of the chosen cell's
representative run.

control, all and a list of run ids are known from the params alone (when the Snakefile builds
the DAG). `representative` and `best_seed` are known only after training: the selection stage (a
Snakemake checkpoint, `quantize_select`) scores every kept run's predictions on the split the
evaluation decides on (evaluation.decide_on) by the evaluation's metric (evaluation.metric),
with the evaluation's own item reader and metric code, and writes the chosen run(s); the jobs of
the chosen runs are added to the DAG after it.

- representative (the default): the cell with the highest mean score over its seeds (the
  choice the evaluation makes on its decision split), and of that cell the median seed's run:
  its runs sorted by (score, run id), the middle one; with an even number of seeds, of the
  middle two the one whose run id sorts first, so it is not the worse seed by construction
  (campaign.evaluate.decide.representative: the evaluation's representative_run). Its quality is
  the cell's, not a lucky draw's. Ties between cells go to the cell whose name sorts first.
- best_seed: the single run with the highest score (ties: the smaller run id): the luckiest
  seed of the best cell, whose quantized variants inherit its luck (the winner's curse). Kept
  for comparison with earlier campaigns; not recommended.
"""

from __future__ import annotations

import json
from pathlib import Path

from campaign.core.errors import CampaignError
from campaign.core.fsutil import atomic_write_text
from campaign.core.io import read_json
from campaign.core.tasks import TASKS, module_of

MODES = ("representative", "best_seed", "control", "all")
SELECTED = ("representative", "best_seed")  # known after training: the checkpoint picks


def control_run(params: dict) -> str:
    """The baseline recipe at the first of ablation.seeds."""
    from campaign.plan import plan_index

    first_seed = params["ablation"]["seeds"][0]
    for rid, run in plan_index(params).items():
        if "baseline" in run.roles and run.seed == first_seed:
            return rid
    raise CampaignError("quantization.runs: control: the plan has no baseline run")


def cell_name(cell: tuple) -> str:
    """A cell's name from its (factor key, level) pairs: 'train.lr=0.001, ...' ('baseline'
    with no factor), as the evaluation writes it."""
    return ", ".join(f"{k}={v}" for k, v in cell) or "baseline"


def run_cells(params: dict) -> dict[str, str]:
    """{run id: its cell's name} of every planned run."""
    from campaign.plan import plan_index

    return {rid: cell_name(run.cell) for rid, run in plan_index(params).items()}


def planned_targets(params: dict) -> list[str] | None:
    """The run ids to quantize when the params decide them; None for `representative`,
    `best_seed` and `all` (the rules ask the selection checkpoint, or take every kept run)."""
    runs = params["quantization"]["runs"]
    if runs in (*SELECTED, "all"):
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


# read_items computes slice buckets the selection does not use; these are the cheapest.
_NO_SLICES = {"length_buckets": [0], "group_size_buckets": [0]}


def criterion(split: str, metric: str) -> str:
    """The selection's criterion as selection.json names it, e.g. 'validation.macro_f1'."""
    return f"{split}.{metric}"


def run_scores(
    predictions: list[Path],
    splits: dict[str, Path],
    split: str,
    metric: str,
    task: str | None = None,
    model: dict | None = None,
) -> dict[str, float | None]:
    """{run id: its `metric` on `split`, None when the split has no items} from the runs'
    results/runs/<run>/predictions_<split>.parquet, scored as the evaluation scores them (its
    items, its campaign label list, its metric code; for generated text the mean per-item
    score, campaign.evaluate.scoring). splits: {train, validation, test: path}. task: model.task
    (None: the first of TASKS, the label task a selection spec named before it held the task)."""
    from campaign.evaluate import scorer

    task = task or next(iter(TASKS))  # a caller that names no task: the classifier

    evals = [splits["validation"], splits["test"]]
    settings = {"metric": metric, "slices": _NO_SLICES}
    score = scorer(task, settings, model or {}, splits["train"], evals)
    items = score.items(splits[split], split)
    scores: dict[str, float | None] = {}
    for path in predictions:
        point = None if len(items) == 0 else score.point(Path(path), items)
        scores[Path(path).parent.name] = point
    return dict(sorted(scores.items()))


def _scored(scores: dict[str, float | None], mode: str, by: str) -> dict[str, float]:
    scored = {rid: s for rid, s in scores.items() if s is not None}
    if not scored:
        raise CampaignError(
            f"quantization.runs: {mode}: no run has a {by} score (empty {by.split('.')[0]} "
            "split?); name the runs instead"
        )
    return scored


def select_best_seed(scores: dict[str, float | None], by: str) -> dict:
    """The single run with the highest score (ties: the smaller run id); a run without a score
    is listed and never chosen. scores: {run id: value of the criterion `by`}."""
    scored = _scored(scores, "best_seed", by)
    best = min(scored, key=lambda rid: (-scored[rid], rid))
    return {"mode": "best_seed", "criterion": by, "runs": [best], "scores": dict(scores)}


def select_representative(scores: dict[str, float | None], cells: dict[str, str], by: str) -> dict:
    """The chosen cell (highest mean score over its scored seeds; ties: the cell name that
    sorts first) and its median-seed run (decide.representative: with an even number of seeds
    the middle run whose id sorts first).

    scores: {run id: value of the criterion `by`}; cells: {run id: cell name} of the planned
    runs; a run outside it is an error.
    """
    # Imported here, not at the top: the DAG imports this module (quantize_jobs) on every
    # `snakemake` call and in every cluster job, and the evaluation's statistics load scipy.
    from campaign.evaluate import representative

    scored = _scored(scores, "representative", by)
    by_cell: dict[str, list[str]] = {}
    for rid in scored:
        if rid not in cells:
            raise CampaignError(f"input 'predictions': run {rid} is not a planned run")
        by_cell.setdefault(cells[rid], []).append(rid)
    means = {c: sum(scored[r] for r in rids) / len(rids) for c, rids in by_cell.items()}
    chosen = min(means, key=lambda c: (-means[c], c))
    ranked = sorted(by_cell[chosen], key=lambda rid: (scored[rid], rid))
    return {
        "mode": "representative",
        "criterion": by,
        "cell": chosen,
        "cell_means": dict(sorted(means.items())),
        "cell_runs": ranked,
        "runs": [representative({rid: scored[rid] for rid in ranked})],
        "scores": dict(scores),
    }


def selected_runs(selection: Path) -> list[str]:
    """The run ids a selection file names (the rules read it after the checkpoint)."""
    return list(read_json(selection, ("runs",))["runs"])


def stage_select(ctx) -> None:
    """Stage entry: write the selection (representative or best_seed) among the trained runs."""
    spec = ctx.spec
    if spec["mode"] not in SELECTED:
        raise CampaignError(
            "quantization.runs: the params name the runs (control, all or ids): nothing to select"
        )
    splits = {name: ctx.inputs[name][0] for name in ("train", "validation", "test")}
    predictions = ctx.inputs[f"predictions_{spec['split']}"]
    task, model = spec.get("task"), spec.get("model")
    scores = run_scores(predictions, splits, spec["split"], spec["metric"], task, model)
    # evaluation.metric, or the per-item metric the task names (generation: its own settings')
    metric = module_of(task).selection_metric(spec["metric"], model)
    by = criterion(spec["split"], metric)
    if spec["mode"] == "best_seed":
        selection = select_best_seed(scores, by)
    else:
        selection = select_representative(scores, spec["cells"], by)
    atomic_write_text(
        ctx.outputs["selection"], json.dumps(selection, indent=2, sort_keys=True) + "\n"
    )


def quantize_jobs(params: dict, kept, selection):
    """An input function's core: the (run, variant) of every quantize job, runs outer.

    kept: the kept run ids (a list, or an input function of the wildcards when the plan table
    decides them); selection: a callable giving the selection file (it waits for the
    quantize_select checkpoint), read only for `representative` and `best_seed`.
    """
    variants = list(params["quantization"]["variants"])
    mode = params["quantization"]["runs"]

    def jobs(wildcards) -> list[tuple[str, str]]:
        if mode in SELECTED:
            runs = selected_runs(selection())
        elif mode == "all":
            runs = kept(wildcards) if callable(kept) else list(kept)
        else:
            runs = planned_targets(params)
        return [(run, variant) for run in runs for variant in variants]

    return jobs


def job_paths(params: dict, pattern: str, kept, selection):
    """An input function: `pattern` (with `{run}` and `{variant}`) of every job (quantize_jobs
    says which)."""
    jobs = quantize_jobs(params, kept, selection)

    def paths(wildcards) -> list[str]:
        return [pattern.format(run=run, variant=variant) for run, variant in jobs(wildcards)]

    return paths


def dag_job_paths(params: dict, pattern: str, kept, checkpoints):
    """job_paths for a rule's input (workflow/rules/common.smk): the selection file is asked of
    Snakemake's quantize_select checkpoint, and only when the chosen runs need it."""

    def selection():
        return checkpoints.quantize_select.get().output.selection

    return job_paths(params, pattern, kept, selection)

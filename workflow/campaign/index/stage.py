"""The index stage: results/index.parquet, one row per trained run, per quantized variant and
per reference floor, built only from the files the rule gives it.

Where each column comes from:
- factor levels, seed, tier: the plan table (runs.tsv; the factor columns are the ones between
  `run` and `seed`, named as there).
- added_at_look: in an adaptive campaign, the look that appended the run (its tier is
  "adaptive"; results/adaptive/look_<j>.json, campaign.plan.look_runs); null for the plan's
  own runs. A trained run is the campaign's whatever runs.tsv's kept says: the looks decide.
- dataset_hash: results/data/summary.json (nothing else of it: campaign.index.views).
- split hashes: each run's manifest records the hash of the train/validation/test files it was
  trained on; they must be the hashes of the split files given here (else the run is from
  another split and the index refuses to mix them).
  split_hash is one hash over the three.
- code_version, spec_hash: the run manifest (the train stage's code version, as in its key);
  a quantized variant's code version: its result.json.
- store_key: the content key the train or quantize job's outputs are stored under, as the run
  manifest or the quantize result records it (the runner hands each stage its key).
- model_hash: the model folder as the store records its output (Snakemake's timestamp file
  aside); weights_hash: its weights file; predictions_*_hash: the prediction files.
- cell_id: the plan table's stable id of the run's cell; every join with the evaluation on a
  cell is on it (never on a comparison's wording).
- validation_* / test_*: the decision metric's value and interval (results/evaluation/
  metrics.parquet; for generation the per-item generated score's mean); *_perplexity: the
  perplexity row where the evaluation has one (runs that record their answer-token loss);
  decision: the run's cell against the control (comparisons.parquet's row
  of kind cell with that cell_id, on the split decisions use), or the quantized variant's
  decision (decisions.json, by the variant's name).
Then the columns the phases declare (Phase.index), in DAG order, each read by its phase's
function from the inputs it declares: hours, cost, currency, cost_offer, cost_reason from
results/budget/jobs.parquet (campaign.budget.columns).
A value no input records is null, with the reason in the matching *_reason column.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from campaign.core.errors import CampaignError
from campaign.core.hashing import ALGORITHM, hash_file, hash_tree, hash_value
from campaign.core.io import get, number_or_none, read_json, read_table, resolve
from campaign.core.io import read_plan as plan_table
from campaign.evaluate import read_decisions
from campaign.index.views import summary_view
from campaign.plan import CampaignRuns, campaign_runs

KINDS = ("run", "quantized", "floor")
# A trained run's own row: not the quantize phase's "fp32" variant (the run reloaded and timed).
TRAINED = "trained"
# How the run was trained (a quantized variant's row inherits its run's): from its manifest.
TRAINING = ("train_precision", "train_base_quantization")
SPLITS = ("validation", "test")
# Written by Snakemake into directory outputs; not part of what the store recorded.
SNAKEMAKE_STAMP = ".snakemake_timestamp"
WEIGHT_SUFFIXES = (".safetensors", ".pt", ".bin")
STORE_KEY_REASON = (
    "not recorded in this job's outputs (made outside the runner, or by an older version); "
    "find the store entry by model_hash"
)
FLOOR_KEY_REASON = "the floor's outputs record no store key"
QUANTIZE_CODE_REASON = "this quantize result records no code version (an older version made it)"

# Columns before the factor levels, then the factor columns, then the rest (types as written).
HEAD = [("name", "string"), ("kind", "string"), ("run", "string"), ("variant", "string")]
TAIL = [
    ("cell", "string"),
    ("cell_id", "string"),
    ("seed", "int64"),
    ("tier", "string"),
    ("added_at_look", "int64"),
    ("status", "string"),
    ("status_reason", "string"),
    ("dataset_hash", "string"),
    ("split_hash", "string"),
    ("train_split_hash", "string"),
    ("validation_split_hash", "string"),
    ("test_split_hash", "string"),
    ("hash_algorithm", "string"),
    ("code_version", "string"),
    ("code_version_reason", "string"),
    ("spec_hash", "string"),
    ("train_precision", "string"),
    ("train_base_quantization", "string"),
    ("store_key", "string"),
    ("store_key_reason", "string"),
    ("model_hash", "string"),
    ("weights_file", "string"),
    ("weights_hash", "string"),
    ("predictions_validation_hash", "string"),
    ("predictions_test_hash", "string"),
    ("metric", "string"),
    ("validation_value", "float64"),
    ("validation_ci_low", "float64"),
    ("validation_ci_high", "float64"),
    ("test_value", "float64"),
    ("test_ci_low", "float64"),
    ("test_ci_high", "float64"),
    ("validation_perplexity", "float64"),
    ("test_perplexity", "float64"),
    ("decision", "string"),
    ("decision_against", "string"),
    ("decision_estimate", "float64"),
    ("decision_ci_low", "float64"),
    ("decision_ci_high", "float64"),
    ("decision_reason", "string"),
    ("best_cell", "bool"),
    ("floor_verdict", "string"),
]
METRICS_COLUMNS = ("variant", "kind", "run", "cell", "split", "metric", "value", "ci_low",
                   "ci_high")  # fmt: skip
COMPARISON_COLUMNS = ("split", "kind", "subject", "cell_id", "reference", "decision", "estimate",
                      "ci_low", "ci_high")  # fmt: skip


def tree_hash(path: Path) -> str:
    """A file's hash, or a folder's as the store records an output folder (hashing.hash_tree)
    without the timestamp file Snakemake adds to directory outputs."""
    return hash_tree(path, skip=(SNAKEMAKE_STAMP,))


def weights(model: Path) -> tuple[str | None, str | None]:
    """(file name, hash) of the model folder's one weights file; (None, None) if not one."""
    found = sorted(p for p in Path(model).rglob("*") if p.suffix in WEIGHT_SUFFIXES)
    if len(found) != 1:
        return None, None
    return found[0].relative_to(model).as_posix(), hash_file(found[0])


def read_plan(path: Path) -> tuple[list[str], dict[str, dict]]:
    """(factor names, {run: row}) from the plan table; factor values typed like the table's
    column (numbers where every level is a number, else text)."""
    import pandas as pd

    table = plan_table(path)
    factors = list(table.factors)
    typed = {}
    for f in factors:
        numbers = pd.to_numeric(pd.Series([r[f] for r in table.rows], dtype=str), errors="coerce")
        typed[f] = numbers.tolist() if numbers.notna().all() else [r[f] for r in table.rows]
    rows = {}
    for i, r in enumerate(table.rows):
        rows[r["run"]] = {
            "levels": table.levels(r),
            "typed": {f: typed[f][i] for f in factors},
            "seed": r["seed"],
            "tier": r["tier"],
            "cell_id": r["cell_id"],
        }
    return factors, rows


def _by_run(paths: list[Path], what: str, depth: int = 1) -> dict:
    """{run: path} for results/runs/<run>/<file>, or {(run, variant): path} (depth 2) for
    results/quantize/<run>/<variant>/<file>."""
    out: dict = {}
    for p in map(Path, paths):
        key = p.parent.name if depth == 1 else (p.parent.parent.name, p.parent.name)
        if key in out:
            raise CampaignError(f"{p}: a second {what} for {key}")
        out[key] = p
    return out


SINGLE_INPUTS = ("summary", "train", "validation", "test", "runs", "metrics", "comparisons",
                 "decisions")  # fmt: skip
EMPTY_DECISION = {k: None for k in ("decision", "decision_against", "decision_estimate",
                                    "decision_ci_low", "decision_ci_high")}  # fmt: skip


@dataclass
class Evaluation:
    """What the index reads of the evaluation, keyed for its joins: scores by (variant, split),
    cell-against-control comparisons and floor verdicts by the plan's cell id, quantized
    decisions by variant name."""

    metric: str
    decide_on: str
    best_cell_id: str | None
    scores: dict
    perplexity: dict  # (variant, split) -> value: a generation run's answer tokens
    cell_vs_control: dict
    floor_verdicts: dict
    quantized_decisions: dict  # {variant: records.Decision}
    paths: dict

    def metric_columns(self, name: str, required: bool) -> dict:
        """{metric, <split>_value, <split>_ci_low, <split>_ci_high} of one variant."""
        out = {"metric": self.metric}
        for split in SPLITS:
            row = self.scores.get((name, split))
            if row is None and required:
                raise CampaignError(
                    f"{self.paths['metrics']}: no '{self.metric}' row for {name} on the "
                    f"{split} split"
                )
            for what in ("value", "ci_low", "ci_high"):
                out[f"{split}_{what}"] = None if row is None else number_or_none(row[what])
            out[f"{split}_perplexity"] = number_or_none(self.perplexity.get((name, split)))
        return out

    def cell_name(self, name: str) -> str | None:
        """The evaluation's name of a variant's cell (metrics.parquet's `cell`)."""
        row = self.scores.get((name, self.decide_on))
        cell = None if row is None else row["cell"]
        return cell if isinstance(cell, str) else None


def read_evaluation(one: dict[str, Path]) -> Evaluation:
    """The evaluation's decisions, metrics and comparisons, read once."""
    decisions = read_decisions(one["decisions"])
    metric, decide_on = decisions.metric, decisions.decide_on
    every = read_table(one["metrics"], METRICS_COLUMNS)
    metrics = every[every["metric"] == metric]
    ppl = every[every["metric"] == "perplexity"]
    comparisons = read_table(one["comparisons"], COMPARISON_COLUMNS)
    decided = comparisons[comparisons["split"] == decide_on].to_dict("records")
    return Evaluation(
        metric=metric,
        decide_on=decide_on,
        best_cell_id=decisions.best_cell.cell_id if decisions.best_cell is not None else None,
        scores={(r["variant"], r["split"]): r for r in metrics.to_dict("records")},
        perplexity={(r["variant"], r["split"]): r["value"] for r in ppl.to_dict("records")},
        cell_vs_control={
            r["cell_id"]: r for r in decided if r["kind"] == "cell" and r["reference"] == "control"
        },
        floor_verdicts={r["cell_id"]: r["decision"] for r in decided if r["kind"] == "floor"},
        quantized_decisions={d.subject: d for d in decisions.of_kind("quantized")},
        paths=one,
    )


def _single_inputs(inputs: dict[str, list[Path]]) -> dict[str, Path]:
    for name in SINGLE_INPUTS:
        if len(inputs.get(name, [])) != 1:
            raise CampaignError(f"index: expected one file for input '{name}' (--in {name}=PATH)")
    return {name: Path(inputs[name][0]) for name in SINGLE_INPUTS}


def _data_columns(one: dict[str, Path]) -> tuple[dict, dict[str, str]]:
    """(the data identity columns every row carries, {split: file hash})."""
    splits = {s: hash_file(one[s]) for s in ("train", "validation", "test")}
    columns = {
        "dataset_hash": summary_view(one["summary"])["dataset_hash"],
        "split_hash": hash_value(splits),
        **{f"{s}_split_hash": h for s, h in splits.items()},
        "hash_algorithm": ALGORITHM,
    }
    return columns, splits


def build_rows(inputs: dict[str, list[Path]]) -> tuple[list[str], list[dict]]:
    """(factor names, index rows) from the stage's inputs, by their logical names."""
    one = _single_inputs(inputs)
    data_columns, splits = _data_columns(one)
    factors, plan = read_plan(one["runs"])
    ev = read_evaluation(one)
    run_rows = _run_rows(inputs, one, plan, ev, data_columns, splits)
    rows = [
        *run_rows.values(),
        *_quantized_rows(inputs, factors, run_rows, ev, data_columns),
        *_floor_rows(ev, data_columns),
    ]
    rows.sort(key=lambda r: (KINDS.index(r["kind"]), r["name"]))
    return factors, rows


def contributed_columns(inputs: dict[str, list[Path]], rows: list[dict], declared) -> list:
    """The phases' columns (IndexColumns) added to the rows, each read by its function; a
    function that returns other than one mapping per row, or a column it did not declare, is
    one error naming it. Returns the (name, type) of the columns added, in order."""
    added = []
    for columns in declared:
        names = {name for name, _ in columns.columns}
        values = list(resolve(columns.read)(inputs, rows))
        if len(values) != len(rows):
            raise CampaignError(
                f"index: {columns.read} returned {len(values)} rows of columns for {len(rows)} "
                "index rows"
            )
        for row, extra in zip(rows, values, strict=True):
            unknown = set(extra) - names
            if unknown:
                raise CampaignError(
                    f"index: {columns.read} returned the undeclared column(s) "
                    f"{', '.join(sorted(unknown))}"
                )
            row.update({name: extra.get(name) for name in names})
        added += list(columns.columns)
    return added


def _check_splits(path: Path, run: str, manifest: dict, splits: dict, one: dict) -> None:
    """A run trained on other split files than the ones given is refused."""
    for s, h in splits.items():
        recorded = get(manifest, ("inputs", s), path)
        if list(recorded) != [h]:
            raise CampaignError(
                f"{path}: run {run} was trained on a {s} split other than {one[s]} "
                f"(recorded {recorded}, the file has {h}); rerun snakemake"
            )


def _run_rows(inputs, one, plan, ev: Evaluation, data_columns, splits) -> dict[str, dict]:
    """{run: index row} of every trained run given (a run manifest each)."""
    manifests = _by_run(inputs.get("run_manifests", []), "run manifest")
    models = _by_run(inputs.get("models", []), "model folder")
    preds = {s: _by_run(inputs.get(f"predictions_{s}", []), f"{s} predictions") for s in SPLITS}
    controls = [r for r in plan.values() if r["tier"] == "control"]
    control_id = controls[0]["cell_id"] if controls else None
    campaign = campaign_runs(one["runs"], inputs.get("looks", []))
    rows = {}
    for run, path in sorted(manifests.items()):
        if run not in plan:
            raise CampaignError(f"{path}: run {run} is not in the plan table {one['runs']}")
        manifest = read_json(path)
        _check_splits(path, run, manifest, splits, one)
        for name, paths in (("model folder", models), *((f"{s} predictions", preds[s])
                                                        for s in SPLITS)):  # fmt: skip
            if run not in paths:
                raise CampaignError(f"index: no {name} given for run {run}")
        p = plan[run]
        weights_file, weights_hash = weights(models[run])
        rows[run] = {
            "name": run,
            "kind": "run",
            "run": run,
            "variant": TRAINED,
            **p["typed"],
            "cell": ev.cell_name(run),
            "cell_id": p["cell_id"],
            "seed": p["seed"],
            "tier": p["tier"],
            "added_at_look": added_at_look(campaign, run, path),
            "status": "ok",
            "status_reason": None,
            **data_columns,
            "code_version": get(manifest, "code.version", path),
            "code_version_reason": None,
            "spec_hash": manifest.get("spec_hash"),
            **_training(manifest),
            "store_key": manifest.get("store_key"),
            "store_key_reason": None if manifest.get("store_key") else STORE_KEY_REASON,
            "model_hash": tree_hash(models[run]),
            "weights_file": weights_file,
            "weights_hash": weights_hash,
            **{f"predictions_{s}_hash": hash_file(preds[s][run]) for s in SPLITS},
            **ev.metric_columns(run, required=True),
            **_run_decision(control_id, p["cell_id"], ev.cell_vs_control),
            "best_cell": ev.best_cell_id is not None and p["cell_id"] == ev.best_cell_id,
            "floor_verdict": ev.floor_verdicts.get(p["cell_id"]),
        }
    return rows


def added_at_look(campaign: CampaignRuns, run: str, path: Path) -> int | None:
    """The look that appended a trained run (None: one of the plan's runs); a run given that no
    look asked for (an adaptive candidate) is one error naming its manifest."""
    if run in campaign.not_asked:
        raise CampaignError(f"{path}: run {run} was trained but no look asked for it")
    return campaign.appended.get(run)


def _quantized_rows(inputs, factors, run_rows, ev: Evaluation, data_columns) -> list[dict]:
    """One index row per quantize result given; its run's row must be there too."""
    results = _by_run(inputs.get("variants_result", []), "quantize result", depth=2)
    q_models = _by_run(inputs.get("variants_model", []), "quantized model", depth=2)
    q_preds = {
        s: _by_run(inputs.get(f"variants_{s}", []), f"quantized {s} predictions", depth=2)
        for s in SPLITS
    }
    rows = []
    for (run, variant), path in sorted(results.items()):
        if run not in run_rows:
            raise CampaignError(f"{path}: quantized run {run} has no run manifest among the inputs")
        result = read_json(path)
        status = get(result, "status", path)
        name = f"{run}/{variant}"
        base = run_rows[run]
        model = q_models.get((run, variant))
        weights_file, weights_hash = weights(model) if model and model.exists() else (None, None)
        inherited = ("run", "cell", "cell_id", "seed", "tier", *factors, *TRAINING)
        rows.append(
            {
                **{k: base[k] for k in inherited},
                "name": name,
                "kind": "quantized",
                "variant": variant,
                "status": status,
                "status_reason": result.get("reason"),
                **data_columns,
                "code_version": result.get("code_version"),
                "code_version_reason": None if result.get("code_version") else QUANTIZE_CODE_REASON,
                "spec_hash": base["spec_hash"],
                "store_key": result.get("store_key"),
                "store_key_reason": None if result.get("store_key") else STORE_KEY_REASON,
                "model_hash": tree_hash(model) if model and model.exists() else None,
                "weights_file": weights_file,
                "weights_hash": weights_hash,
                **{
                    f"predictions_{s}_hash": _hash_if(q_preds[s].get((run, variant)))
                    for s in SPLITS
                },
                **ev.metric_columns(name, required=status == "ok"),
                **_quantized_decision(name, ev),
                "best_cell": base["best_cell"],
                "floor_verdict": None,
            }
        )
    return rows


def _quantized_decision(name: str, ev: Evaluation) -> dict:
    d = ev.quantized_decisions.get(name)
    if d is None:
        return EMPTY_DECISION | {
            "decision_reason": f"no decision for {name} in {ev.paths['decisions']}"
        }
    return {
        "decision": d.decision,
        "decision_against": d.reference,
        "decision_estimate": number_or_none(d.estimate),
        "decision_ci_low": number_or_none(d.ci_low),
        "decision_ci_high": number_or_none(d.ci_high),
        "decision_reason": None,
    }


def _floor_rows(ev: Evaluation, data_columns: dict) -> list[dict]:
    """One index row per reference floor the metrics table scores."""
    floors = sorted({v for (v, _s) in ev.scores if v.startswith("floor/")})
    return [
        {
            "name": name,
            "kind": "floor",
            "variant": name.partition("/")[2],
            "status": "ok",
            **data_columns,
            "code_version_reason": "the floor stage records no code version in its outputs",
            "store_key_reason": FLOOR_KEY_REASON,
            **ev.metric_columns(name, required=True),
            "decision_reason": "a reference floor: compared against, not decided on",
            "best_cell": False,
        }
        for name in floors
    ]


def _training(manifest: dict) -> dict:
    train = (manifest.get("spec") or {}).get("train") or {}
    return {"train_precision": train.get("precision"),
            "train_base_quantization": train.get("base_quantization")}  # fmt: skip


def _run_decision(control_id: str | None, cell_id: str, cell_vs_control: dict) -> dict:
    """A run's decision columns: its cell's comparison against the control, found by the plan
    table's cell id (comparisons.parquet's cell_id), never by the comparison's wording."""
    if control_id is None:
        return EMPTY_DECISION | {"decision_reason": "the plan has no control run"}
    if cell_id == control_id:
        return EMPTY_DECISION | {"decision_reason": "the control cell"}
    r = cell_vs_control.get(cell_id)
    if r is None:
        return EMPTY_DECISION | {
            "decision_reason": f"no comparison of cell {cell_id} against the control"
        }
    return {
        "decision": r["decision"],
        "decision_against": "control",
        "decision_estimate": number_or_none(r["estimate"]),
        "decision_ci_low": number_or_none(r["ci_low"]),
        "decision_ci_high": number_or_none(r["ci_high"]),
        "decision_reason": None,
    }


def _hash_if(path: Path | None) -> str | None:
    return hash_file(path) if path is not None and Path(path).is_file() else None


def declared_columns() -> list[tuple[str, str]]:
    """(name, type) of every column the phases declare (Phase.index), in order."""
    from campaign.core.registry import phases
    from campaign.index import columns_of

    return [column for declared in columns_of(phases()) for column in declared.columns]


def write_index(
    factors: list[str],
    rows: list[dict],
    factor_types: dict,
    path: Path,
    extra: list[tuple[str, str]] | None = None,
) -> None:
    """Parquet with a fixed column order and types, and no writer metadata beyond the schema,
    so the same rows give the same bytes. `extra`: the phases' columns, (name, type), last
    (default: every one they declare)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    extra = declared_columns() if extra is None else extra
    columns = HEAD + [(f, factor_types[f]) for f in factors] + TAIL + list(extra)
    schema = pa.schema([(name, pa.type_for_alias(kind)) for name, kind in columns])
    table = pa.table({name: [r.get(name) for r in rows] for name, _ in columns}, schema=schema)
    pq.write_table(table, path, compression="zstd", store_schema=False)


def stage_index(ctx) -> None:
    from campaign.core.registry import phases
    from campaign.index import columns_of

    factors, rows = build_rows(ctx.inputs)
    extra = contributed_columns(ctx.inputs, rows, columns_of(phases()))
    types = {
        f: "float64"
        if all(isinstance(r.get(f), float | int) or r.get(f) is None for r in rows)
        else "string"
        for f in factors
    }
    write_index(factors, rows, types, ctx.outputs["index"], extra)

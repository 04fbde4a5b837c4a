"""lm-evaluation-harness output folders (written with `--log_samples`) as the scored-items table.

A folder holds, per evaluated model, `results_<time>.json` (the model, each task's version,
few-shot count, hash of its documents and its config) and per task `samples_<task>_<time>.jsonl`
(one line per document: `doc_id`, and each per-item metric value under the metric's name, per
filter). The files are found with lm-eval's own helpers (lm_eval.utils: get_results_filenames,
get_sample_results_filenames, get_latest_filename, get_file_task_name); lm-eval ships no reader
for a samples file's lines, so those are read as JSON lines here.

An item is a task's `doc_id`. The metric is `--metric NAME` (or NAME,FILTER as lm-eval keys
its results), else the task's only per-item metric. Refused, in one line naming the file: a
metric that is not a mean of per-item values (perplexity, corpus F1/BLEU), a value outside [0, 1].
Nothing here decides.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from campaign.compare.table import (
    CELL,
    COLUMNS,
    ITEM,
    METRIC,
    PREDICTION,
    SCORE,
    SEED,
    SOURCE,
    SPLIT,
    TASK,
    VARIANT,
    check_table,
    numbered_runs,
)
from campaign.core.errors import CampaignError


def is_lm_eval(path: Path) -> bool:
    return path.is_dir() and any(path.rglob("results_*.json"))


def model_folders(path: Path) -> list[Path]:
    """The folders under `path` (itself included) holding an lm-eval results file."""
    from lm_eval.utils import get_results_filenames

    files = get_results_filenames([str(p) for p in sorted(path.rglob("*.json"))])
    return sorted({Path(f).parent for f in files})


def read_folder(folder: Path, metric: str | None, name: str | None, seed) -> tuple:
    """(rows of the table, identity) of one model's output folder: identity {model,
    model_args, tasks: {task: {version, n_shot, hash, split}}} from its latest results file."""
    import pandas as pd
    from lm_eval.utils import (
        get_file_task_name,
        get_latest_filename,
        get_results_filenames,
        get_sample_results_filenames,
    )

    names = [str(p) for p in sorted(folder.iterdir()) if p.is_file()]
    results_files = get_results_filenames(names)
    if not results_files:
        raise CampaignError(f"{folder}: no lm-eval results_*.json (run lm_eval with --output_path)")
    results_path = Path(get_latest_filename(results_files))
    try:
        results = json.loads(results_path.read_text())
    except (OSError, ValueError) as e:
        raise CampaignError(f"{results_path}: not a readable lm-eval results file ({e})") from None
    samples = get_sample_results_filenames(names)
    by_task: dict[str, list[str]] = {}
    for f in samples:
        by_task.setdefault(get_file_task_name(Path(f).name), []).append(f)
    tasks = sorted(set(results.get("configs", {})) & set(by_task))
    if not tasks:
        raise CampaignError(
            f"{folder}: no samples_<task>_*.jsonl beside {results_path.name} (run lm_eval with "
            "--log_samples: compare decides on per-item results)"
        )
    cell = name or str(results.get("model_name") or folder.name)
    frames, identity = [], {"model": cell, "model_args": _model_args(results), "tasks": {}}
    for task in tasks:
        path = Path(get_latest_filename(by_task[task]))
        config = results["configs"][task]
        rows = _task_rows(path, task, config, metric)
        split = str(config.get("test_split") or config.get("validation_split") or "test")
        identity["tasks"][task] = {
            "version": results.get("versions", {}).get(task),
            "n_shot": results.get("n-shot", {}).get(task, config.get("num_fewshot")),
            "hash": results.get("task_hashes", {}).get(task),
            "file": str(path),
        }
        frames.append(
            pd.DataFrame(
                {
                    VARIANT: None,
                    CELL: cell,
                    SEED: pd.array([seed] * len(rows), dtype="Int64"),
                    SPLIT: split,
                    TASK: task,
                    ITEM: [r[0] for r in rows],
                    SCORE: [r[1] for r in rows],
                    PREDICTION: [r[2] for r in rows],
                    METRIC: [r[3] for r in rows],
                    SOURCE: str(path),
                }
            )
        )
    return pd.concat(frames, ignore_index=True), identity


def _model_args(results: dict) -> str | None:
    args = results.get("config", {}).get("model_args")
    return args if isinstance(args, str) or args is None else json.dumps(args, sort_keys=True)


def _aggregations(config: dict) -> dict[str, str]:
    """{metric: its aggregation} as the task's config lists them."""
    out = {}
    for m in config.get("metric_list") or []:
        agg = m.get("aggregation", "mean")
        out[str(m.get("metric"))] = agg if isinstance(agg, str) else getattr(agg, "__name__", "?")
    return out


def _task_rows(path: Path, task: str, config: dict, wanted: str | None) -> list[tuple]:
    """[(item, score, prediction, metric)] of one samples file: `wanted` ("name" or
    "name,filter") else the task's only per-item metric and filter."""
    lines = []
    with path.open() as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    lines.append(json.loads(line))
                except ValueError:
                    raise CampaignError(f"{path}: line {n} is not JSON") from None
    if not lines:
        raise CampaignError(f"{path}: no samples")
    name, _, filt = (wanted or "").partition(",")
    filters = sorted({str(s.get("filter", "none")) for s in lines})
    if filt and filt not in filters:
        raise CampaignError(f"{path}: no filter {filt!r} (it has {', '.join(filters)})")
    if not filt:
        if len(filters) > 1:
            raise CampaignError(
                f"{path}: task {task} has filters {', '.join(filters)}; choose one "
                "(--metric NAME,FILTER)"
            )
        filt = filters[0]
    chosen = [s for s in lines if str(s.get("filter", "none")) == filt]
    listed = list(dict.fromkeys(m for s in chosen for m in s.get("metrics", [])))
    if not name:
        if len(listed) != 1:
            raise CampaignError(
                f"{path}: task {task} has metrics {', '.join(listed) or 'none'}; choose one "
                "(--metric NAME)"
            )
        name = listed[0]
    if name not in listed:
        raise CampaignError(
            f"{path}: task {task} has no per-item metric {name!r} (it has "
            f"{', '.join(listed) or 'none'})"
        )
    agg = _aggregations(config).get(name, "mean")
    if agg != "mean":
        raise CampaignError(
            f"{path}: metric {name} of task {task} is aggregated by {agg}, not a mean over "
            "items; compare decides on per-item scores whose mean is the metric"
        )
    return [_row(path, task, s, name, filt) for s in chosen]


def _row(path: Path, task: str, s: dict, name: str, filt: str) -> tuple:
    value = s.get(name)
    item = s.get("doc_id")
    if isinstance(value, bool):
        value = float(value)
    if not isinstance(value, int | float):
        raise CampaignError(
            f"{path}: doc_id {item}: metric {name} of task {task} is {json.dumps(value)[:60]}, "
            "not a per-item number (a metric aggregated over items, such as perplexity or "
            "corpus F1/BLEU, cannot be compared item by item)"
        )
    if not (math.isfinite(value) and 0 <= value <= 1):
        raise CampaignError(
            f"{path}: doc_id {item}: metric {name} of task {task} is {value!r}, not in [0, 1]"
        )
    resp = s.get("filtered_resps")
    prediction = json.dumps(resp)[:200] if resp is not None else None
    metric = name if filt == "none" else f"{name},{filt}"
    return str(item), float(value), prediction, metric


def check_identities(identities: list[tuple[str, dict]]) -> None:
    """The same task version, few-shot count and documents for every model: else one line naming
    both files (scores of two task versions are not on the same items)."""
    seen: dict[str, tuple[str, dict]] = {}
    for _run, ident in identities:
        for task, info in ident["tasks"].items():
            if task not in seen:
                seen[task] = (ident["model"], info)
                continue
            model, first = seen[task]
            for key, what in (("version", "task version"), ("n_shot", "few-shot setting"),
                              ("hash", "task documents (hash)")):  # fmt: skip
                if first.get(key) != info.get(key):
                    raise CampaignError(
                        f"{info['file']}: task {task}: {what} {info.get(key)!r} differs from "
                        f"{first.get(key)!r} in {first['file']} ({model}); compare needs the same "
                        "task, documents and few-shot setting for every model"
                    )


def read(sources: list[tuple[str | None, Path]], metric: str | None):
    """The scored-items table of lm-eval output folders (`sources: [(name or None, folder)]`;
    a folder may hold several models' folders). Runs of one model (the same name) are its
    seeds, numbered 0, 1, ... in the order given."""

    frames, identities = [], []
    for name, path in sources:
        folders = model_folders(path)
        if name is not None and len(folders) > 1:
            raise CampaignError(
                f"{path}: holds {len(folders)} models' results; give each folder its own NAME="
            )
        for folder in folders:
            frame, ident = read_folder(folder, metric, name, None)
            identities.append((ident["model"], ident))
            frames.append(frame)
    table = numbered_runs(frames, lambda frame: frame[CELL].iloc[0])
    check_identities(identities)
    check_table(table)
    return table[[*COLUMNS, SOURCE]], identities

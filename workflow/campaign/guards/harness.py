"""One guard job: a model scores one lm-evaluation-harness task, item by item, offline, and the
per-item scores become rows of the scored-items table (campaign.guards.ITEM_COLUMNS).

The harness runs in this process (lm_eval.simple_evaluate on its HFLM, CPU, log_samples), with
the Hugging Face hub and datasets offline: a guard reads only the files the runner hashed. A
local task YAML is copied into a private include folder with its data files pointed at the
job's inputs, so the harness reads those paths and no other.
"""

from __future__ import annotations

import math
import os
import tempfile
from pathlib import Path

from campaign.core.errors import CampaignError
from campaign.guards.tasks import NEEDS_HARNESS, read_task_yaml

# The per-item metrics a guard decides on, in order of preference: both are in [0, 1].
ITEM_METRICS = ("acc", "exact_match")
BATCH_SIZE = 8  # small: CPU jobs beside others; part of the code version, not a param
SPLIT = "guard"


def include_folder(task_yaml: Path, task_data: list[Path], into: Path) -> Path:
    """A copy of the task YAML in `into` whose dataset_kwargs.data_files name `task_data` (the
    job's inputs, in the order campaign.guards.tasks.derive_inputs lists them: by split, then
    as the YAML lists them)."""
    import yaml

    config = read_task_yaml(task_yaml, "input 'task_yaml'")
    files = config["dataset_kwargs"]["data_files"]
    single = not isinstance(files, dict)
    files = {"train": files} if single else files
    given = iter(task_data)
    placed = {}
    for split in sorted(files):
        names = files[split]
        count = 1 if isinstance(names, str) else len(names)
        placed[split] = [str(Path(next(given)).resolve()) for _ in range(count)]
    kwargs = dict(config["dataset_kwargs"])
    kwargs["data_files"] = placed["train"] if single else placed
    config["dataset_kwargs"] = kwargs
    into.mkdir(parents=True, exist_ok=True)
    (into / task_yaml.name).write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return into


def model_arguments(model: Path, base: Path) -> dict:
    """HFLM's arguments for a run's model folder: a LoRA adapter (adapter_config.json) over the
    base folder, or a full model folder; the tokenizer is the folder's own."""
    if (model / "adapter_config.json").is_file():
        return {"pretrained": str(base), "peft": str(model), "tokenizer": str(model)}
    return {"pretrained": str(model), "tokenizer": str(model)}


def _prediction(sample: dict) -> str:
    """What the model answered: the chosen option's index (multiple choice: the largest
    log-likelihood) or the generated text."""
    responses = sample.get("filtered_resps") or []
    if responses and isinstance(responses[0], (list, tuple)):
        lls = [float(r[0]) for r in responses]
        return str(max(range(len(lls)), key=lls.__getitem__))
    return str(responses[0]) if responses else ""


def item_rows(samples: list[dict], task: str, where: str) -> list[dict]:
    """One row per document: its id, its score in [0, 1] on the first of ITEM_METRICS the task
    logs, the prediction. Refused in one line naming `where`: no per-item metric, a score outside
    [0, 1], a document twice."""
    if not samples:
        raise CampaignError(f"{where}: the harness logged no samples for task {task}")
    metric = next((m for m in ITEM_METRICS if m in samples[0]), None)
    if metric is None:
        raise CampaignError(
            f"{where}: task {task} logs no per-item {' or '.join(ITEM_METRICS)} "
            f"(it logs {', '.join(samples[0].get('metrics', [])) or 'none'})"
        )
    rows, seen = [], set()
    for s in samples:
        item = str(s["doc_id"])
        score = float(s[metric])
        if not (math.isfinite(score) and 0.0 <= score <= 1.0):
            raise CampaignError(
                f"{where}: task {task}, item {item}: {metric} {score} not in [0, 1]"
            )
        if item in seen:
            raise CampaignError(f"{where}: task {task}, item {item}: logged twice")
        seen.add(item)
        rows.append(
            {
                "task": task,
                "item": item,
                "score": score,
                "prediction": _prediction(s),
                "metric": metric,
            }
        )
    return rows


def run_task(model_args: dict, task: str, include: Path | None, where: str) -> list[dict]:
    """Score `task` with the model lm-eval's HFLM loads from `model_args`, offline, on CPU; one
    row per item (item_rows)."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["HF_DATASETS_OFFLINE"] = "1"
    try:
        import lm_eval
        from lm_eval.models.huggingface import HFLM
        from lm_eval.tasks import TaskManager
    except ImportError:
        raise CampaignError(f"{where}: {NEEDS_HARNESS}") from None

    lm = HFLM(**model_args, device="cpu", batch_size=BATCH_SIZE, dtype="float32")
    # A local task: the include folder alone (indexing the harness's own thousands of task
    # YAMLs costs most of a tiny guard's time); a registry task: the harness's index.
    if include is None:
        manager = TaskManager()
    else:
        manager = TaskManager(include_path=str(include), include_defaults=False)
    if task not in manager.all_tasks:
        raise CampaignError(f"{where}: no lm-evaluation-harness task {task}")
    try:
        out = lm_eval.simple_evaluate(
            model=lm, tasks=[task], task_manager=manager, log_samples=True, bootstrap_iters=0,
            random_seed=0, numpy_random_seed=0, torch_random_seed=0, fewshot_random_seed=0,
        )  # fmt: skip
    except (ConnectionError, OSError) as e:  # a registry task whose data is not cached here
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise CampaignError(f"{where}: task {task}: its dataset is not local ({first})") from None
    return item_rows(out["samples"][task], task, where)


def score_guard(model_args: dict, task: str, inputs: dict, where: str) -> list[dict]:
    """A guard job's rows: a local task YAML (inputs task_yaml, task_data) copied into a private
    include folder, or a registry task."""
    if not inputs.get("task_yaml"):
        return run_task(model_args, task, None, where)
    with tempfile.TemporaryDirectory(prefix="guard-") as tmp:
        folder = include_folder(Path(inputs["task_yaml"][0]), inputs["task_data"], Path(tmp))
        return run_task(model_args, task, folder, where)

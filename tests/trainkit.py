"""Tiny training runs for the tests: demo-corpus splits by author, a tiny run spec (a classifier,
or a generation run of a tiny Llama on conversation splits), a stage context, a preflight
section and its run. Shared by the train, checkpoint, memory, preflight and task tests."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd

from campaign.core.hashing import hash_value
from campaign.core.runner import StageContext

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "data" / "raw" / "demo.jsonl"
OUTPUTS = (
    "model",
    "metrics",
    "predictions_validation",
    "predictions_test",
    "run_manifest",
    "timings",
)
SPLITS = ("train", "validation", "test")


def demo_records() -> list[dict]:
    return [json.loads(line) for line in DEMO.read_text(encoding="utf-8").splitlines()]


def split_of(author: str) -> str:
    """70/15/15 by a hash of the author, so no author spans two splits."""
    bucket = int(hash_value(author)[:8], 16) % 100
    return "train" if bucket < 70 else "validation" if bucket < 85 else "test"


def write_splits(folder: Path, n_train: int, n_eval: int, records=None) -> dict[str, list[Path]]:
    """Parquet split files (id, text, label, group, unit) from the demo corpus."""
    records = demo_records() if records is None else records
    folder.mkdir(parents=True, exist_ok=True)
    sizes = {"train": n_train, "validation": n_eval, "test": n_eval}
    inputs = {}
    for name, size in sizes.items():
        rows = [
            {
                "id": r["id"],
                "text": r["text"],
                "label": r["label"],
                "group": r["author"],
                "unit": r["author"],
            }
            for r in records
            if split_of(r["author"]) == name
        ][:size]
        path = folder / f"{name}.parquet"
        pd.DataFrame(rows).to_parquet(path, index=False)
        inputs[name] = [path]
    return inputs


def tiny_spec(
    task: str = "sequence_classification",
    architecture: str = "bert",
    seed: int = 1,
    hidden: int = 32,
    layers: int = 1,
    **train,
) -> dict:
    spec = {
        "model": {
            "task": task,
            "source": "from_config",
            "config": {
                "architecture": architecture,
                "hidden_size": hidden,
                "num_hidden_layers": layers,
                "num_attention_heads": 2,
                "intermediate_size": 2 * hidden,
                "max_position_embeddings": 64,
                "dropout": 0.1,
            },
            "tokenizer": {
                "source": "train_split",
                "vocab_size": 600,
                "min_frequency": 2,
                "lowercase": True,
            },
        },
        "train": {
            "lr": 3.0e-3,
            "weight_decay": 0.01,
            "max_steps": 12,
            "micro_batch": 8,
            "grad_accum": 2,
            "max_length": 32,
            "precision": "fp32",
            "schedule": "linear",
            "warmup_steps": 2,
            "max_grad_norm": 1.0,
            "eval_every": 6,
            "checkpoint_every": 4,
            "keep_checkpoints": 2,
            "lora": None,
        },
        "seed": seed,
    }
    spec["train"].update(train)
    return spec


def save_tiny_base(folder: Path, splits: dict[str, list[Path]]) -> tuple[Path, list[str]]:
    """A tiny "pretrained" BERT encoder folder (no classification head, as a checkpoint on a hub
    is) with its tokenizer trained on the train split, and the run's labels."""
    from campaign.train import models
    from campaign.train.loop import read_data

    data = read_data(splits)
    labels = models.label_names(data.train.labels)
    spec = tiny_spec()
    tokenizer = models.make_tokenizer(spec["model"], data.train.texts, None)
    encoder = models.build_model(spec["model"], tokenizer, labels, 0, None).bert
    encoder.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder, labels


# Short question -> answer pairs a tiny generation model memorizes in a few dozen steps (so the
# scores of its generated answers are checkable by hand).
QA_PAIRS = [
    ("Capital of France?", "Paris."),
    ("Capital of Italy?", "Rome."),
    ("Capital of Spain?", "Madrid."),
    ("Capital of Peru?", "Lima."),
    ("Which tool lists files?", "ls"),
    ("Which tool copies files?", "cp"),
]


def tiny_generation_spec(
    positions: int = 128, batch_size: int = 3, max_new_tokens: int = 8, **train
) -> dict:
    """A generation run of a tiny from-config Llama with grouped-query attention (hidden 64, 2
    layers, 4 heads sharing 2 key/value heads, `positions` max_position_embeddings), a tokenizer
    trained on the split's every word, the plain template (no chat template), exact match on
    greedy answers of up to max_new_tokens, generated batch_size at a time. `train`: keys over
    tiny_spec's, after grad_accum 1 and no warmup."""
    spec = tiny_spec("generation", "llama", hidden=64, layers=2)
    spec["model"]["config"].update(
        num_attention_heads=4,
        num_key_value_heads=2,
        dropout=0.0,
        max_position_embeddings=positions,
    )
    spec["model"]["tokenizer"].update(vocab_size=300, min_frequency=1, lowercase=False)
    spec["model"]["chat_template"] = "none"
    spec["model"]["generation"] = {
        "metric": "exact_match",
        "max_new_tokens": max_new_tokens,
        "batch_size": batch_size,
    }
    spec["train"].update({"grad_accum": 1, "warmup_steps": 0, **train})
    return spec


def write_conversations(folder: Path, name: str, ids: list[str], talks: list[list[dict]]):
    """[the split file `name`.parquet] as the split stage writes a conversations dataset: id,
    the dedup text, no label to stratify on, the messages as JSON."""
    from campaign.data import conversations as conv

    path = folder / f"{name}.parquet"
    pd.DataFrame(
        {
            "id": ids,
            "text": [conv.dedup_text(t) for t in talks],
            "label": [conv.UNSTRATIFIED] * len(ids),
            "messages": [conv.dump_messages(t) for t in talks],
        }
    ).to_parquet(path)
    return [path]


def preflight_config(blocking: list[str], **changes) -> dict:
    """A preflight section (every key the schema asks for) blocking on `blocking`, sized for a
    sample of 6 train and 4 validation examples; `changes` replace whole keys."""
    config = {
        "blocking": list(blocking),
        "sample": {"train_examples": 6, "validation_examples": 4},
        "inspect_examples": 2,
        "target_cards": [{"name": "L4", "memory_gib": 24}],
        "memory_margin": 0.1,
        "activation_tolerance": 0.02,
        "overfit": {"examples": 4, "steps": 10, "max_final_loss": 0.05},
        "grad_accum_tolerance": 1.0e-9,
        "max_unknown_token_share": 0.05,
        "resume": {"steps_before": 2, "steps_after": 2},
        "throughput": {"warmup_steps": 2, "window_steps": 4},
        "max_hours": None,
        "disk_margin": 0.2,
    }
    unknown = set(changes) - set(config)
    assert not unknown, f"not preflight keys: {sorted(unknown)}"
    return {**config, **changes}


def run_preflight(
    spec: dict, inputs: dict, config: dict, folder: Path, builtin_generates=False, **hooks
) -> dict:
    """The preflight report of config's blocking checks alone, run on the CPU in `folder`/work
    (hooks: bench.Hooks' other fields, e.g. transform_examples)."""
    import torch

    from campaign.preflight import bench
    from campaign.preflight import report as preflight_report

    return preflight_report.run_preflight(
        spec,
        inputs,
        config,
        folder / "work",
        REPO,
        only=tuple(config["blocking"]),
        hooks=bench.Hooks(device=torch.device("cpu"), **hooks),
        builtin_generates=builtin_generates,
    )


def context(spec: dict, inputs: dict, folder: Path) -> StageContext:
    out = folder / "outputs"
    out.mkdir(parents=True, exist_ok=True)
    work = folder / "work"
    work.mkdir(parents=True, exist_ok=True)
    return StageContext("train", spec, inputs, {n: out / n for n in OUTPUTS}, work, REPO)


# A training job (argv: spec JSON, inputs JSON, folder, step) that stops for good after `step`:
# the tests kill it there with SIGKILL, then resume from its last checkpoint.
def killed_job_env(path: str) -> dict:
    """The environment of a KILLED_JOB subprocess: this checkout's package first, no GPU, and
    this process's torch threads (a test process may have been pinned to fewer by a stage it
    ran in process, and the job's steps must round as the in-process runs' do)."""
    import torch

    return {
        **os.environ,
        "PYTHONPATH": path,
        "CUDA_VISIBLE_DEVICES": "",
        "KILLED_JOB_THREADS": str(torch.get_num_threads()),
    }


KILLED_JOB = """
import os, sys, time
from pathlib import Path
import torch
from campaign.train import run_training
from trainkit import REPO, context, tiny_spec
import json
import os

# The parent's intra-op threads (killed_job_env): a float sum over another number of threads
# rounds otherwise, and the resumed run would not be bitwise the uninterrupted one.
torch.set_num_threads(int(os.environ["KILLED_JOB_THREADS"]))

spec = json.loads(sys.argv[1])
inputs = {k: [Path(p) for p in v] for k, v in json.loads(sys.argv[2]).items()}
ctx = context(spec, inputs, Path(sys.argv[3]))

def after_step(step):
    if step == int(sys.argv[4]):
        Path(sys.argv[3], "stopped-here").write_text(str(step))
        time.sleep(600)  # the test kills the job here: steps after the checkpoint are lost

run_training(ctx.spec, ctx.inputs, ctx.outputs, ctx.work_dir, ctx.root, after_step=after_step)
"""

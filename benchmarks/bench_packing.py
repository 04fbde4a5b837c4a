"""Measures train.packing against the same causal recipe unpacked, in one process, as the
preflight measures a lever (campaign.memory.costs.measure_steps): a GPT-2 from config (hidden
128, 4 layers) on the demo corpus at max_length 160 (its texts run 50-150 tokens), micro_batch 8
and 32, grad_accum 1.

Per micro_batch and setting: the share of the step's token cells that are padding (over the
first 8 steps' micro-batches), the tensor bytes of the steps' peak (optimizer state +
LiveTensorBytes peak) and the seconds per step, with ratios packed / unpacked. Goals: packing
holds fewer pad cells, and its step takes no longer (ratio <= 1.00); MISSED where not.

    PYTHONPATH=workflow:tests .venv/bin/python benchmarks/bench_packing.py

Measured on 2 CPU cores shared with other jobs (load average ~12: the step times are noise at
this load; the pad shares and bytes are the same on every run):

    micro_batch  packing  pad share   peak bytes   s/step  bytes x   time x
              8    False      24.7%  108,017,568    1.920     1.00     1.00
              8     True      20.5%   95,150,696    2.875     0.88     1.50  (MISSED: slower)
             32    False      31.2%  354,936,912    5.943     1.00     1.00
             32     True      21.0%  326,915,672    5.761     0.92     0.97

The demo texts (50-150 tokens) are long against max_length 160, so most rows hold one example;
packing pays more where examples are much shorter than max_length.
"""

from __future__ import annotations

import io
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "workflow"), str(REPO / "tests")]

from trainkit import tiny_spec, write_splits  # noqa: E402

from campaign.memory.costs import measure_steps  # noqa: E402
from campaign.train import Trainer, read_data  # noqa: E402
from campaign.train.batches import micro_batches  # noqa: E402

LENGTH = 160
STEPS_COUNTED = 8


def spec_for(micro_batch: int, packing: bool) -> dict:
    spec = tiny_spec(
        task="causal_lm",
        architecture="gpt2",
        hidden=128,
        layers=4,
        max_length=LENGTH,
        micro_batch=micro_batch,
        grad_accum=1,
        packing=packing,
    )
    spec["model"]["config"].update(max_position_embeddings=LENGTH, num_attention_heads=4)
    return spec


def pad_share(trainer: Trainer) -> float:
    r = trainer.recipe
    perm = trainer.order.permutation(0)
    n = min(len(perm), STEPS_COUNTED * r.micro_batch)
    pack = r.max_length if r.packing else None
    batches = micro_batches(
        trainer.examples["train"], perm[:n], r.micro_batch, trainer.pad_id, pack
    )
    cells = sum(b["input_ids"].numel() for b in batches)
    tokens = sum(int(b["attention_mask"].sum()) for b in batches)
    return 1 - tokens / cells


def main() -> None:
    folder = Path(tempfile.mkdtemp())
    data = read_data(write_splits(folder / "splits", n_train=400, n_eval=8))
    print(f"GPT-2 from config (hidden 128, 4 layers), max_length {LENGTH}, CPU")
    header = f"{'micro_batch':>11}  {'packing':>7}  {'pad share':>9}  {'peak bytes':>11}"
    print(header + f"  {'s/step':>7}  {'bytes x':>7}  {'time x':>7}  goals")
    missed = False
    for mb in (8, 32):
        base = None
        for packing in (False, True):
            t = Trainer(
                spec_for(mb, packing), data, folder / f"w{mb}{packing}", stream=io.StringIO()
            )
            pad = pad_share(t)
            m = measure_steps(t, timed_steps=3, counted_steps=3)
            row = (mb, packing, pad, m["peak_bytes"], m["seconds_per_step"])
            if base is None:
                base = row
                ratios, verdict = "", ""
            else:
                bx, tx = row[3] / base[3], row[4] / base[4]
                ok_pad, ok_time = row[2] < base[2], tx <= 1.0
                missed |= not (ok_pad and ok_time)
                ratios = f"  {bx:7.2f}  {tx:7.2f}"
                verdict = "  " + ", ".join(
                    [
                        "fewer pad cells" if ok_pad else "MISSED: pad cells",
                        "no slower" if ok_time else "MISSED: slower step",
                    ]
                )
            print(
                f"{mb:>11}  {str(packing):>7}  {pad:9.1%}  {row[3]:>11,}  {row[4]:7.3f}"
                + (ratios or f"  {'1.00':>7}  {'1.00':>7}")
                + verdict
            )
    print("MISSED" if missed else "all goals met")


if __name__ == "__main__":
    main()

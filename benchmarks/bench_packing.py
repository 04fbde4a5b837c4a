"""Measures train.packing against the same causal recipe unpacked, in one process, as the
preflight measures a lever (campaign.memory.costs.measure_steps): a GPT-2 from config (hidden
128, 4 layers) on the demo corpus at max_length 160 (its texts run 50-150 tokens), micro_batch 8
and 32, grad_accum 1.

Per micro_batch and setting: the share of the step's token cells that are padding (over the
first 8 steps' micro-batches), the tensor bytes of the steps' peak (optimizer state +
LiveTensorBytes peak) and the seconds per step, with ratios packed / unpacked. Goals: packing
holds fewer pad cells, and its step takes no longer (ratio <= 1.00); MISSED where not.

    PYTHONPATH=workflow:tests .venv/bin/python benchmarks/bench_packing.py [generation|smollm2]

Measured on 2 CPU cores shared with other jobs (load average ~12: the step times are noise at
this load; the pad shares and bytes are the same on every run):

    micro_batch  packing  pad share   peak bytes   s/step  bytes x   time x
              8    False      24.7%  108,017,568    1.920     1.00     1.00
              8     True      20.5%   95,150,696    2.875     0.88     1.50  (MISSED: slower)
             32    False      31.2%  354,936,912    5.943     1.00     1.00
             32     True      21.0%  326,915,672    5.761     0.92     0.97

The demo texts (50-150 tokens) are long against max_length 160, so most rows hold one example;
packing pays more where examples are much shorter than max_length.

Generation rows (`generation` as the argument runs only these, in about 15 s): a Llama with
SmolLM2-135M's layer shapes scaled down (heads of 64 as SmolLM2's, 3 query heads sharing 1
key/value head, hidden 192, intermediate 512, 4 layers, tied embeddings) on 240 describe-shaped
conversations (a package-description prompt, a short answer, one in five with an earlier turn;
37-137 tokens with the plain template), at describe's max_length 136 and micro_batch 8, and at
max_length 512 and micro_batch 16; 3 timed steps after 2, one torch thread. Tokens/s counts the
conversations' real tokens per step (the same for both settings). Goal: packed tokens/s >= the
unpacked run's. Two runs on 2 cores shared with a test suite (load average about 4):

    max_length  micro_batch  packing   rows  pad share   s/step  tokens/s  tokens/s x
           136            8    False    8.0      25.8%    0.185     3,300        1.00
           136            8     True    6.2      15.2%    0.161     3,778        1.14
           512           16    False   16.0      36.4%    0.239     5,094        1.00
           512           16     True    3.4       2.4%    0.211     5,779        1.13
    (second run: 1.09x at 136, 1.21x at 512)

`smollm2` as the argument (about 30 s, once the model folder is converted: the `bench` extra,
scripts/models/smollm2.py) compares one micro-batch of 8 describe conversations (this machine's
dpkg status, shaped as examples/smollm2-debian/describe.yaml shapes it) packed and unpacked on
SmolLM2-135M-Instruct itself, fp32, SDPA, its own chat template:

    SmolLM2-135M-Instruct fp32, sdpa, CPU (1 thread): 8 describe conversations of 64-96 tokens
       batch      shape      loss sum  s fwd+bwd
    unpacked       8x96    262.874695       7.41
      packed      2x342    262.874695       5.69
    loss sum |packed - unpacked| 0.00e+00; gradients max |packed - unpacked| 2.38e-06
    (largest gradient 7.69e+00)

At max_length 512 nearly all padding goes (36.4% -> 2.4%) but the step gains only 1.1-1.2x on
this CPU: a packed row's block-diagonal mask is dense to SDPA, so attention costs the full row
width squared, where an unpacked row costs its own longest example's.
"""

from __future__ import annotations

import io
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "workflow"), str(REPO / "tests")]

from trainkit import tiny_generation_spec, tiny_spec, write_conversations, write_splits  # noqa: E402

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


def pad_share(trainer: Trainer, with_counts: bool = False):
    """The padding share of the first STEPS_COUNTED steps' micro-batches; with_counts: also the
    rows a micro-batch holds and the real tokens a step holds, on average."""
    r = trainer.recipe
    perm = trainer.order.permutation(0)
    n = min(len(perm), STEPS_COUNTED * r.micro_batch)
    pack = r.max_length if r.packing else None
    batches = micro_batches(
        trainer.examples["train"], perm[:n], r.micro_batch, trainer.pad_id, pack
    )
    cells = sum(b["input_ids"].numel() for b in batches)
    tokens = sum(int(b["attention_mask"].sum()) for b in batches)
    if not with_counts:
        return 1 - tokens / cells
    rows = sum(len(b["input_ids"]) for b in batches) / len(batches)
    per_step = tokens / len(batches) * r.grad_accum
    return 1 - tokens / cells, rows, per_step


# SmolLM2-135M's layer shapes (hidden 576, 30 layers, 9 heads of 64 sharing 3 key/value heads,
# intermediate 1536, tied embeddings) scaled down: heads of 64, a third of the width and layers.
SMOLLM2_SCALED = dict(
    hidden_size=192,
    num_hidden_layers=4,
    num_attention_heads=3,
    num_key_value_heads=1,
    intermediate_size=512,
)
WORDS = (
    "the package provides a library tool for files data network server client python perl "
    "utility shared runtime documentation development headers module plugin support command "
    "line interface system service daemon manager configuration debian gnu linux kernel "
    "version and of to with in on from"
).split()


def conversations(n: int, seed: int = 0) -> list[list[dict]]:
    """Describe-shaped conversations: a user prompt of 12-60 words asking for a package's
    synopsis, an answer of 3-20 words; one in five has an earlier turn (multi-turn)."""
    import random

    rng = random.Random(seed)

    def words(lo: int, hi: int) -> str:
        return " ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi)))

    talks = []
    for i in range(n):
        talk = [
            {"role": "user", "content": f"Describe the package pkg{i % 50}: " + words(12, 60)},
            {"role": "assistant", "content": words(3, 20)},
        ]
        if i % 5 == 0:
            talk = [
                {"role": "user", "content": "What does it do? " + words(4, 12)},
                {"role": "assistant", "content": words(3, 10)},
                *talk,
            ]
        talks.append(talk)
    return talks


def generation_spec(micro_batch: int, max_length: int, packing: bool) -> dict:
    spec = tiny_generation_spec(
        positions=max_length,
        max_length=max_length,
        micro_batch=micro_batch,
        packing=packing,
        lr=1e-3,
    )
    spec["model"]["config"].update(SMOLLM2_SCALED)
    spec["model"]["tokenizer"]["vocab_size"] = 1000  # whole words: a token a word, about
    return spec


def generation_table(folder: Path) -> bool:
    """train.packing for generation: SmolLM2-shaped Llama rows, tokens/s packed vs unpacked, on
    one torch thread (on shared cores two threads waiting on each other swamp the step)."""
    import torch

    torch.set_num_threads(1)
    talks = conversations(240)
    ids = [f"c{i}" for i in range(len(talks))]
    splits = {
        "train": write_conversations(folder, "train", ids, talks),
        "validation": write_conversations(folder, "validation", ids[:8], talks[:8]),
        "test": write_conversations(folder, "test", ids[8:16], talks[8:16]),
    }
    data = read_data(splits)
    shape = ", ".join(f"{k} {v}" for k, v in SMOLLM2_SCALED.items())
    print(f"\ngeneration: Llama with SmolLM2-135M's shapes scaled down ({shape}), CPU")
    print(
        f"{'max_length':>10}  {'micro_batch':>11}  {'packing':>7}  {'rows':>5}  {'pad share':>9}"
        f"  {'s/step':>7}  {'tokens/s':>8}  {'tokens/s x':>10}  goals"
    )
    missed = False
    for max_length, mb in ((136, 8), (512, 16)):
        base = None
        for packing in (False, True):
            t = Trainer(
                generation_spec(mb, max_length, packing),
                data,
                folder / f"g{max_length}{packing}",
                stream=io.StringIO(),
            )
            pad, rows, tokens = pad_share(t, with_counts=True)
            if base is None:
                lengths = sorted(len(e["input_ids"]) for e in t.examples["train"])
                print(f"{'':>10}  conversations of {lengths[0]}-{lengths[-1]} tokens")
            m = measure_steps(t, timed_steps=3, counted_steps=1)
            rate = tokens / m["seconds_per_step"]
            if base is None:
                base, ratio, verdict = rate, 1.0, ""
            else:
                ratio = rate / base
                missed |= ratio < 1.0
                verdict = "  more tokens/s" if ratio >= 1.0 else "  MISSED: fewer tokens/s"
            print(
                f"{max_length:>10}  {mb:>11}  {str(packing):>7}  {rows:>5.1f}  {pad:9.1%}"
                f"  {m['seconds_per_step']:7.3f}  {rate:8,.0f}  {ratio:10.2f}{verdict}"
            )
    return missed


def describe_examples(tokenizer, template: str, n: int, max_length: int) -> list[dict]:
    """n describe records of this machine's dpkg status (the describe example's shaping: prompts
    of at most 40 words, chosen by id hash), encoded with SmolLM2's chat template."""
    sys.path.insert(0, str(REPO / "scripts" / "corpora"))
    import debian_descriptions as corpus

    from campaign.data import conversations as conv
    from campaign.tasks.generation import chat

    text = Path("/var/lib/dpkg/status").read_text(encoding="utf-8", errors="replace")
    rows = corpus.sized(corpus.records(text, "describe"), max_words=40, limit=n)
    out = []
    for r in rows:
        e = chat.encode(
            tokenizer, template, conv.from_prompt_response(r["prompt"], r["response"]), max_length
        )
        out.append({"input_ids": e.input_ids, "labels": e.labels})
    return out


def smollm2_table(micro_batch: int = 8, max_length: int = 512) -> None:
    """SmolLM2-135M-Instruct (fp32, SDPA, eval mode: no dropout), its own chat template, on
    describe records: one micro-batch packed and unpacked, the loss sum and every weight's
    gradient compared, and the seconds of forward + backward."""
    import time

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    sys.path.insert(0, str(REPO / "benchmarks"))
    from bench_generate import smollm2_folder

    from campaign.train.batches import collate, collate_packed
    from campaign.train.steps import accumulated_gradients, loss_sum

    torch.set_num_threads(1)
    folder = smollm2_folder(REPO / "models" / "SmolLM2-135M-Instruct")
    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    examples = describe_examples(tok, tok.chat_template, micro_batch, max_length)
    lengths = sorted(len(e["input_ids"]) for e in examples)
    batches = {
        "unpacked": collate(examples, tok.pad_token_id),
        "packed": collate_packed(examples, tok.pad_token_id, max_length),
    }
    print(
        f"\nSmolLM2-135M-Instruct fp32, {model.config._attn_implementation}, CPU (1 thread): "
        f"{len(examples)} describe conversations of {lengths[0]}-{lengths[-1]} tokens, "
        f"max_length {max_length}"
    )
    print(f"{'batch':>8}  {'shape':>9}  {'loss sum':>12}  {'s fwd+bwd':>9}")
    losses, grads = {}, {}
    for name, batch in batches.items():
        with torch.no_grad():
            losses[name] = float(loss_sum(model, batch, "generation"))
        started = time.perf_counter()
        grads[name] = accumulated_gradients(model, [batch], "generation")
        seconds = time.perf_counter() - started
        shape = "x".join(str(d) for d in batch["input_ids"].shape)
        print(f"{name:>8}  {shape:>9}  {losses[name]:12.6f}  {seconds:9.2f}")
    worst = max(float((grads["packed"][k] - g).abs().max()) for k, g in grads["unpacked"].items())
    scale = max(float(g.abs().max()) for g in grads["unpacked"].values())
    print(
        f"loss sum |packed - unpacked| {abs(losses['packed'] - losses['unpacked']):.2e}; "
        f"gradients max |packed - unpacked| {worst:.2e} (largest gradient {scale:.2e})"
    )


def main() -> None:
    only = sys.argv[1:] and sys.argv[1:][-1]
    folder = Path(tempfile.mkdtemp())
    if only == "smollm2":
        smollm2_table()
        return
    if only == "generation":
        print("MISSED" if generation_table(folder) else "all goals met")
        return
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
    missed |= generation_table(folder)
    print("MISSED" if missed else "all goals met")


if __name__ == "__main__":
    main()

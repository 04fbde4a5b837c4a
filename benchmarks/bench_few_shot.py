"""The generation task's prompting floors on a real instruct model: retrieval, zero-shot and
3-shot (seeded and nearest) scored by token F1 on the same items, with each request's prompt
tokens (what serving the prompt costs) and generated tokens.

Corpus: a describe corpus from scripts/corpora/debian_descriptions.py (--corpus, JSONL with id,
prompt, response, source), split by a hash of the source package (half train, a quarter
validation); the first --items validation items are scored. Model: --model, a local causal LM
folder with a chat template (models/SmolLM2-135M-Instruct by default; scripts/models/smollm2.py
writes it). The floors' own functions run (campaign.tasks.generation): the base model loaded as
the floor stage loads it, the same engine, 28 new tokens, batch 8. Seconds are wall time per
item on this machine: indicative only under load.

    python scripts/corpora/debian_descriptions.py data/raw/debian-describe.jsonl \\
        --task describe --max-words 40 --limit 160
    PYTHONPATH=workflow .venv/bin/python benchmarks/bench_few_shot.py \\
        --corpus data/raw/debian-describe.jsonl --items 16

Measured (docs/development.md, "The SmolLM2 examples"): 3 nearest examples 39.1 % against
zero-shot 24.6 % on 16 items, at 235 prompt tokens per request against 64.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

import numpy as np


def _split(records: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {"train": [], "validation": [], "test": []}
    for r in records:
        h = int(hashlib.sha256(r["source"].encode()).hexdigest(), 16) % 4
        out["train" if h < 2 else ("validation" if h == 2 else "test")].append(r)
    return out


def main() -> None:
    import torch

    from campaign.data import conversations as conv
    from campaign.evaluate.floor import Timings
    from campaign.tasks.generation.few_shot import FewShot, few_shot_floor
    from campaign.tasks.generation.floor import EvalSet, generation_floors
    from campaign.tasks.generation.floor_stage import base_model
    from campaign.tasks.generation.text_scores import token_f1

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--model", type=Path, default=Path("models/SmolLM2-135M-Instruct"))
    parser.add_argument("--items", type=int, default=16)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    lines = args.corpus.read_text(encoding="utf-8").splitlines()
    parts = _split([json.loads(line) for line in lines if line.strip()])

    def as_set(rows):
        talks = [conv.from_prompt_response(r["prompt"], r["response"]) for r in rows]
        return EvalSet([r["id"] for r in rows], talks)

    train, val = as_set(parts["train"]), as_set(parts["validation"][: args.items])
    generation = {"metric": "token_f1", "max_new_tokens": 28, "batch_size": 8}
    model = {"task": "generation", "source": str(args.model), "chat_template": "model"}
    model["generation"] = generation
    base = base_model({"model": model, "floors": ["zero_shot"]}, args.model, Path("."))
    timings = Timings()
    frames = generation_floors(train.conversations, {"validation": val}, base, timings)
    for choose in ("seeded", "nearest"):
        name = f"few_shot k=3 {choose}"
        settings = FewShot(3, choose, seed=0)
        frames[name] = few_shot_floor(base, train, {"validation": val}, settings, timings)
        timings.floors[f"floor/{name}"] = timings.floors.pop("floor/few_shot")
    seconds = timings.as_dict()["floors"]
    zero_prompt = np.mean([len(base.prompt_ids(c)) for c in val.conversations])
    print(f"train {len(train.ids)}, validation items {len(val.ids)}")
    print("| floor | token F1 | prompt tokens | new tokens | s per item |")
    for name, split in frames.items():
        d = split["validation"]
        f1 = np.mean([token_f1(p, r) for p, r in zip(d["prediction"], d["reference"], strict=True)])
        prompt = d["prompt_tokens"].mean() if "prompt_tokens" in d else zero_prompt
        new = d["new_tokens"].mean() if "new_tokens" in d else float("nan")
        if name == "retrieval":
            prompt = float("nan")
        per_item = seconds[f"floor/{name}"]["predict_seconds"] / len(d)
        print(f"| {name} | {f1:.1%} | {prompt:.0f} | {new:.1f} | {per_item:.2f} |")


if __name__ == "__main__":
    main()

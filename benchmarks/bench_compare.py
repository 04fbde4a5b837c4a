"""The paired decision of `campaign compare` beside lm-evaluation-harness's own "is A better than
B" (scripts/model_comparator.py), on real lm-eval logs of two models on the same items.

model_comparator.py runs an unpaired z-test: z = (acc_1 - acc_2) / sqrt(se_1^2 + se_2^2), each se
the items-only standard error lm-eval reports (acc_stderr), as if the two models had been scored
on different items. On the same items the models' per-item outcomes are correlated (a fine-tune
is right where its base was right), and a paired comparison removes the items' shared part.

Two real lm-eval runs (--log_samples) on a local 4-choice task of --items items: a tiny
from-config Llama (the base) and the same weights perturbed by N(0, --noise) relative noise (a
stand-in for a fine-tune: most per-item outcomes kept). Then `campaign compare` (its CLI, into a
temporary folder) as a variant (--variant ft=base: non-inferiority, Tango's paired score
interval) and as two models (--control base, one run each: the stage's paired t on the items;
its decision is "inconclusive (one seed)", since one run measures no seed spread).

Run: python benchmarks/bench_compare.py [--items 400] [--noise 0.3] [--work DIR]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "workflow"))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "compare"))


def _logs(work: Path, items: int, noise: float) -> dict[str, Path]:
    """lm-eval output folders of the base and its perturbed copy (built once per --work)."""
    import logkit
    import torch
    from genkit import tiny_tokenizer
    from transformers import AutoModelForCausalLM

    logkit.MC_ITEMS = items
    tasks = logkit.write_tasks(work / "tasks")
    base = logkit.save_model(work / "models" / "base", 0)
    model = AutoModelForCausalLM.from_pretrained(base)
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(noise * p.abs().mean() * torch.randn(p.shape, generator=gen))
    ft = work / "models" / "ft"
    model.save_pretrained(ft)
    tiny_tokenizer().save_pretrained(ft)
    out = {}
    for name, folder in (("base", base), ("ft", ft)):
        out[name] = work / "lm_eval" / name
        if not any(out[name].rglob("results_*.json")):
            logkit.run_lm_eval(folder, tasks, ["tiny_mc"], out[name])
    return out


def model_comparator(results: dict[str, dict]) -> dict:
    """model_comparator.py's unpaired z-test from two results files' acc and acc_stderr."""
    from scipy import stats

    (a, se_a), (b, se_b) = ((r["acc,none"], r["acc_stderr,none"]) for r in results.values())
    se = math.sqrt(se_a**2 + se_b**2)
    z = (b - a) / se
    half = 1.959964 * se
    return {"estimate": b - a, "low": b - a - half, "high": b - a + half,
            "p": float(2 * stats.norm.sf(abs(z)))}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=400)
    parser.add_argument("--noise", type=float, default=0.3)
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "bench_compare")
    args = parser.parse_args()
    import pandas as pd

    from campaign.cli import main as campaign

    logs = _logs(args.work, args.items, args.noise)
    results = {}
    for name, folder in logs.items():
        path = next(folder.rglob("results_*.json"))
        results[name] = json.loads(path.read_text())["results"]["tiny_mc"]
    rows = [("lm-eval model_comparator.py (unpaired z)", model_comparator(results), "")]
    for what, flags in (
        ("compare --variant ft=base (paired, Tango)", ["--variant", "ft=base", "--margin", "0.02"]),
        ("compare --control base (paired t, items)", ["--control", "base"]),
    ):
        out = args.work / ("out-" + flags[0].strip("-"))
        sources = [f"{n}={p}" for n, p in logs.items()]
        if campaign(["compare", *sources, *flags, "--out", str(out)]) != 0:
            return 1
        row = pd.read_parquet(out / "comparisons.parquet").iloc[0]
        # p of "no difference": McNemar's exact test for the variant (its p_value is the
        # non-inferiority test's), the paired t's two-sided p for the models
        p = row["mcnemar_p"] if math.isfinite(row.get("mcnemar_p", math.nan)) else row["p_value"]
        got = {"estimate": row["estimate"], "low": row["ci_low"], "high": row["ci_high"], "p": p}
        rows.append((what, got, row["decision"]))
    width0 = rows[0][1]["high"] - rows[0][1]["low"]
    print(f"tiny_mc, {args.items} items, base vs ft (noise {args.noise}); acc "
          f"{results['base']['acc,none']:.3f} vs {results['ft']['acc,none']:.3f}")  # fmt: skip
    print(f"{'method':<44} {'ft - base':>9} {'95 % interval':>17} {'width':>7} {'ratio':>6} "
          f"{'p (no diff)':>11}  decision")  # fmt: skip
    for what, r, decision in rows:
        width = r["high"] - r["low"]
        print(f"{what:<44} {r['estimate'] * 100:+8.1f}  [{r['low'] * 100:6.1f}, "
              f"{r['high'] * 100:5.1f}] {width * 100:6.1f}  {width / width0:5.2f} {r['p']:11.3g}"
              f"  {decision}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

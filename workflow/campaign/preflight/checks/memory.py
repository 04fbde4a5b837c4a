"""memory: estimate vs measurement of one training step on the real model (weights, gradients and
optimizer state equal to the byte; activations within a tolerance; the KV cache for causal_lm),
and the fit table for the target cards."""

from __future__ import annotations

import torch

from campaign.memory import (
    compare,
    estimate_memory,
    fit_table,
    format_comparison,
    format_fit_table,
    measure_kv_cache,
    measure_memory,
)
from campaign.preflight.bench import (
    Bench,
    Result,
    configured_model,
    fmt_bytes,
    model_config,
    padded_batch,
)
from campaign.train import (
    count_targets,
    loss_sum,
)

ORDER = 20  # place in the report


EXACT_MEMORY = ("weights", "gradients", "optimizer_state")


def run(bench: Bench) -> Result:
    cfg, recipe = bench.cfg, bench.recipe
    trainer = bench.trainer()
    device = trainer.device
    attention = trainer.model.config._attn_implementation
    estimate = estimate_memory(
        model_config(trainer),
        bench.spec["train"],
        device=device.type,
        attention=attention,
    )
    batch = padded_batch(
        trainer.examples["train"], recipe.micro_batch, recipe.max_length, trainer.pad_id
    )
    task = bench.task

    def loss_fn(model, b):
        return loss_sum(model, b, task) / max(count_targets(b), 1)

    def optimizer_factory(params):
        return torch.optim.AdamW(params, lr=recipe.lr, weight_decay=recipe.weight_decay)

    measured = measure_memory(
        trainer.model,
        batch,
        optimizer_factory,
        device,
        loss_fn=loss_fn,
        autocast=trainer.autocast,
    )
    rows = compare(estimate, measured)
    problems = []
    for row in rows:
        if row["component"] in EXACT_MEMORY and row["estimated"] != row["measured"]:
            problems.append(
                f"{row['component']} estimated {row['estimated']} B, measured {row['measured']} B"
            )
    act = next(r for r in rows if r["component"].startswith("activations"))
    act_error = abs(act["estimated"] - act["measured"]) / max(act["measured"], 1)
    if act_error > cfg["activation_tolerance"]:
        problems.append(
            f"activations estimated {fmt_bytes(act['estimated'])}, measured "
            f"{fmt_bytes(act['measured'])} ({100 * act_error:.1f}% > "
            f"{100 * cfg['activation_tolerance']:.1f}%)"
        )
    kv = None
    if task == "causal_lm":
        with trainer.autocast():
            kv_measured = measure_kv_cache(
                trainer.model,
                batch["input_ids"].to(device),
                batch["attention_mask"].to(device),
            )
        kv = {"estimated": estimate["bytes"]["kv_cache"], "measured": kv_measured}
        if kv["estimated"] != kv["measured"]:
            problems.append(f"kv_cache estimated {kv['estimated']} B, measured {kv_measured} B")

    # The fit table: the target cards are accelerators, so the estimate is for CUDA, with the
    # configured vocabulary and the full train split's labels.
    target = estimate_memory(
        configured_model(bench, trainer),
        bench.spec["train"],
        num_labels=len(bench.label_names()),
        device="cuda",
        attention=attention,
    )
    fits = fit_table(target, cfg["target_cards"], cfg["memory_margin"])
    fitting = [r["card"] for r in fits if r["fits"]]
    if not fitting:
        problems.append(
            f"the run needs {fmt_bytes(target['peak_bytes'])} ({target['peak_phase']}) and fits "
            f"none of {', '.join(r['card'] for r in fits)} with a "
            f"{100 * cfg['memory_margin']:.0f}% margin"
        )
    details = {
        "comparison": rows,
        "activation_relative_error": act_error,
        "activation_tolerance": cfg["activation_tolerance"],
        "kv_cache": kv,
        "estimate_here": estimate,
        "measured": measured,
        "estimate_for_cards": target,
        "fit_table": fits,
        "fits": fitting,
        "problems": problems,
    }
    if problems:
        return Result(False, "; ".join(problems), details)
    return Result(
        True,
        f"weights, gradients, optimizer state exact; activations {fmt_bytes(act['estimated'])} "
        f"est vs {fmt_bytes(act['measured'])} measured ({100 * act_error:.2f}%); needs "
        f"{fmt_bytes(target['peak_bytes'])}, fits {len(fitting)} of {len(fits)} cards",
        details,
    )


def describe(d: dict) -> list[str]:
    lines = []
    if d.get("comparison"):
        lines += [f"on {d['measured']['device']} (one training step, padded to max_length):"]
        lines += format_comparison(d["comparison"]).splitlines()
        for phase, p in d["measured"]["phases"].items():
            if "peak_allocated" in p:  # CUDA: what tensors held vs what the allocator kept
                lines.append(
                    f"{phase}: peak allocated {fmt_bytes(p['peak_allocated'])}, reserved "
                    f"{fmt_bytes(p['peak_reserved'])}"
                )
            else:
                grew = p["peak_over_before"]
                sign = "+" if grew >= 0 else "-"
                lines.append(
                    f"{phase}: process RSS peak {fmt_bytes(p['rss_peak'])} "
                    f"({sign}{fmt_bytes(abs(grew))} over its start)"
                )
    if d.get("kv_cache"):
        kv = d["kv_cache"]
        lines.append(
            f"kv cache: estimated {fmt_bytes(kv['estimated'])}, measured "
            f"{fmt_bytes(kv['measured'])}"
        )
    if d.get("fit_table"):
        lines.append("fit on the target cards (CUDA estimate, configured vocabulary):")
        lines += format_fit_table(d["fit_table"]).splitlines()
    return lines

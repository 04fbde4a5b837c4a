"""What to change when a recipe does not fit a card, and the memory each change would give.

The levers of the checklist, each applied alone to the recipe:
    lora                     train.lora: r 8 adapters on the attention projections (a frozen base
                             has no gradients or optimizer state, and saves fewer activations)
    max_length               train.max_length halved (activations, evaluation, KV cache shrink)
    micro_batch              a smaller train.micro_batch with a larger train.grad_accum, the same
                             effective batch: the largest divisor of it that fits the card
    bf16                     train.precision bf16 (autocast: fp32 weights stay, activations halve)
    gradient_checkpointing   train.gradient_checkpointing: keep one hidden state per layer,
                             recompute in backward
    optimizer                train.optimizer adamw_8bit: torchao's 8-bit AdamW moments (CUDA)
    packing                  train.packing (the tasks core.tasks.packing_refusal lets pack): a
                             micro-batch's examples packed into fewer rows of max_length, so the
                             training step holds fewer rows
    generation_batch         a smaller model.generation.batch_size (model.task generation): the
                             KV cache holds the sequences generated together, not micro_batch
Every row's `setting` is the keys a user sets to pull the lever. micro_batch, optimizer,
packing and generation_batch are arithmetic on the estimate (its fixed and per-example bytes;
packing with the rows the preflight sample's micro-batches pack into, `packed_rows`); the
others are a second estimate ("variant") of the changed recipe: analytic for a known family
(`analytic_variants`), measured on the model otherwise (`measured_variants`). Each lever row
says which: "estimated" (from the config) or "measured" (from real passes on the model). The
preflight also measures each lever that is a key on real training steps (memory/costs.py) and
adds that saving and the step-time ratio to the rows (`with_costs`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from campaign.core.defaults import TRAIN_DEFAULTS
from campaign.core.errors import CampaignError
from campaign.core.tasks import packing_refusal
from campaign.memory.estimate import GENERATION_BATCH, MICRO_BATCH, setting
from campaign.memory.format import format_bytes
from campaign.memory.shape import analytic_family

LEVERS = (
    "lora",
    "max_length",
    "micro_batch",
    "bf16",
    "gradient_checkpointing",
    "optimizer",
    "packing",
    "generation_batch",
)
LEVER_LORA = {"r": 8, "alpha": 16, "dropout": 0.0}
# Attention projections of the known families (what default_lora_targets finds in them).
FAMILY_LORA_TARGETS = {"bert": ["key", "query", "value"], "gpt2": ["c_attn", "c_proj"]}
# torchao AdamW8bit: two 8-bit moments plus a 4-byte scale per block of 256 weights each, in
# place of two fp32 moments (tensors under 4,096 weights keep fp32 moments: a slight overstatement
# of the saving for models of many small tensors).
LOW_BIT_STATE_FRACTION = (2 + 2 * 4 / 256) / 8


def variant(
    lever: str,
    change: str,
    setting: dict | None,
    estimate: dict | None,
    source: str,
    note: str | None = None,
) -> dict[str, Any]:
    """One changed recipe: its estimate (None: the lever does not apply, `note` says why)."""
    return {
        "lever": lever,
        "change": change,
        "setting": setting,
        "estimate": estimate,
        "source": source,
        "note": note,
    }


def recipe_changes(train_cfg: dict, lora_targets: list[str]) -> list[dict[str, Any]]:
    """The levers that change the recipe, as {lever, change, setting, train, flags, note}."""
    out = []
    if train_cfg.get("lora"):
        out.append({"lever": "lora", "note": "the recipe already trains LoRA adapters"})
    elif not lora_targets:
        out.append({"lever": "lora", "note": "no linear layer to adapt was found"})
    else:
        lora = {**LEVER_LORA, "target_modules": list(lora_targets)}
        out.append(
            {
                "lever": "lora",
                "change": f"LoRA r {lora['r']} on {', '.join(lora_targets)}",
                "setting": {"train.lora": lora},
                "train": {"lora": lora},
            }
        )
    length = int(train_cfg["max_length"])
    if length >= 2:
        out.append(
            {
                "lever": "max_length",
                "change": f"max_length {length} -> {length // 2}",
                "setting": {"train.max_length": length // 2},
                "train": {"max_length": length // 2},
            }
        )
    if train_cfg["precision"] == "fp32":
        out.append(
            {
                "lever": "bf16",
                "change": "precision fp32 -> bf16",
                "setting": {"train.precision": "bf16"},
                "train": {"precision": "bf16"},
            }
        )
    else:
        out.append({"lever": "bf16", "note": f"the recipe already runs {train_cfg['precision']}"})
    if train_cfg.get("gradient_checkpointing"):
        out.append({"lever": "gradient_checkpointing", "note": "the recipe already checkpoints"})
    else:
        out.append(
            {
                "lever": "gradient_checkpointing",
                "change": "gradient checkpointing",
                "setting": {"train.gradient_checkpointing": True},
                "flags": {"gradient_checkpointing": True},
            }
        )
    return out


def _variants(
    train_cfg: dict,
    lora_targets: list[str],
    source: str,
    estimate_of: Callable[[dict, dict], dict | str | None],
) -> list[dict[str, Any]]:
    """Each change's variant; LoRA is estimated last (a measured one wraps the model)."""
    out = []
    changes = recipe_changes(train_cfg, lora_targets)
    for c in sorted(changes, key=lambda c: c["lever"] == "lora"):
        if "train" not in c and "flags" not in c:
            out.append(variant(c["lever"], "-", None, None, source, c["note"]))
            continue
        est = estimate_of({**train_cfg, **c.get("train", {})}, c.get("flags", {}))
        note = c.get("note")
        if not isinstance(est, dict):  # a reason the variant could not be estimated
            est, note = None, est or "this model does not support it"
        out.append(variant(c["lever"], c["change"], c.get("setting"), est, source, note))
    return sorted(out, key=lambda v: LEVERS.index(v["lever"]))


def analytic_variants(model_cfg: dict, train_cfg: dict, **kwargs: Any) -> list[dict[str, Any]]:
    """The recipe-changing levers, each estimated from the config (`estimate_memory` kwargs)."""
    from campaign.memory.estimate import estimate_memory

    targets = FAMILY_LORA_TARGETS.get(analytic_family(model_cfg) or "", [])

    def estimate_of(train: dict, flags: dict) -> dict:
        return estimate_memory(model_cfg, train, **{**kwargs, **flags})

    return _variants(train_cfg, targets, "estimated", estimate_of)


def _checkpointing(model: Any, enable: bool) -> None:
    """Turn transformers' activation (gradient) checkpointing on or off, hooks included."""
    if enable:
        if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5
            model.activation_checkpointing_enable({"use_reentrant": False})
        else:
            model.gradient_checkpointing_enable({"use_reentrant": False})
        return
    if hasattr(model, "activation_checkpointing_disable"):
        model.activation_checkpointing_disable()
    else:
        model.gradient_checkpointing_disable()
    # Enabling also made the embeddings' output require grad (for frozen bases); undo it.
    if hasattr(model, "disable_input_require_grads"):
        model.disable_input_require_grads()


def measured_variants(subject: Any) -> list[dict[str, Any]]:
    """The recipe-changing levers, each measured on `subject` (a probe.Subject).

    The LoRA lever wraps subject.model with peft in place, so it runs last: pass a throwaway.
    A lever whose passes fail here (bf16 on a card without it, out of memory) is listed with
    the reason instead of numbers.
    """
    import torch

    from campaign.memory.probe import default_lora_targets, measured_estimate, wrap_lora

    model = subject.model

    def measure(train: dict, flags: dict) -> dict | None:
        if flags.get("gradient_checkpointing"):
            if not getattr(model, "supports_gradient_checkpointing", False):
                return None
            _checkpointing(model, True)
            try:
                return measured_estimate(subject, train, gradient_checkpointing=True)
            finally:
                _checkpointing(model, False)
        if train.get("lora") and not subject.train_cfg.get("lora"):
            subject.model = wrap_lora(model, train["lora"], subject.task)
        return measured_estimate(subject, train)

    def estimate_of(train: dict, flags: dict) -> dict | str | None:
        try:
            return measure(train, flags)
        except (CampaignError, RuntimeError, ValueError) as e:  # OutOfMemoryError: RuntimeError
            if subject.device == "cuda":
                torch.cuda.empty_cache()
            return f"could not be measured: {type(e).__name__}: {' '.join(str(e).split())[:200]}"

    return _variants(subject.train_cfg, default_lora_targets(model), "measured", estimate_of)


# ------------------------------------------------------------------ lever rows for one card
def need_at(
    estimate: dict, micro_batch: int | None = None, generation_batch: int | None = None
) -> tuple[int, str]:
    """(bytes, phase) of the tightest phase at another micro_batch and/or generation batch, from
    fixed + per example: each phase moves with the batch its bytes scale with (`scales_with`:
    a generation task's KV cache with model.generation.batch_size, not micro_batch)."""
    batches = {MICRO_BATCH: micro_batch, GENERATION_BATCH: generation_batch}

    def need(p: dict) -> int:
        batch = batches.get(p.get("scales_with", MICRO_BATCH))
        return p["bytes"] if batch is None else p["fixed_bytes"] + p["bytes_per_example"] * batch

    needs = {name: need(p) for name, p in estimate["phases"].items()}
    phase = max(needs, key=lambda n: needs[n])
    return needs[phase], phase


def _row(
    lever: str,
    change: str,
    setting: dict | None,
    need: tuple[int, str] | None,
    base: int,
    usable: float,
    source: str,
    note: str | None,
) -> dict[str, Any]:
    return {
        "lever": lever,
        "change": change,
        "setting": setting,
        "need_bytes": None if need is None else need[0],
        "phase": None if need is None else need[1],
        "saves_bytes": None if need is None else base - need[0],
        "fits": None if need is None else need[0] <= usable,
        "source": source,
        "note": note,
    }


def micro_batch_row(estimate: dict, usable: float) -> dict[str, Any]:
    """The largest micro_batch below the recipe's that divides the effective batch and fits
    (else 1), with grad_accum raised to keep micro_batch x grad_accum."""
    mb = int(estimate["micro_batch"])
    accum = int(estimate.get("settings", {}).get("grad_accum", 1))
    base, source = estimate["peak_bytes"], estimate.get("source", "estimated")
    if mb <= 1:
        return _row("micro_batch", "-", None, None, base, usable, source, "micro_batch is 1")
    effective = mb * accum
    options = [m for m in range(mb - 1, 0, -1) if effective % m == 0]
    chosen = next((m for m in options if need_at(estimate, m)[0] <= usable), options[-1])
    change = (
        f"micro_batch {mb} -> {chosen}, grad_accum {accum} -> {effective // chosen} "
        f"(effective batch {effective})"
    )
    setting = {"train.micro_batch": chosen, "train.grad_accum": effective // chosen}
    need = need_at(estimate, chosen)
    return _row("micro_batch", change, setting, need, base, usable, source, None)


def optimizer_row(
    estimate: dict, usable: float, optimizer: str = TRAIN_DEFAULTS["optimizer"]
) -> dict[str, Any]:
    """train.optimizer adamw_8bit: every phase that holds the AdamW state (training,
    evaluation, a generation task's generation in the training process) holds
    LOW_BIT_STATE_FRACTION of it."""
    base, source = estimate["peak_bytes"], estimate.get("source", "estimated")
    if optimizer != "adamw":
        return _row("optimizer", "-", None, None, base, usable, source, f"already {optimizer}")
    state = estimate["bytes"]["optimizer_state"]
    saved = int(state * (1 - LOW_BIT_STATE_FRACTION))
    needs = {
        name: p["bytes"] - (saved if p.get("optimizer_state", 0) else 0)
        for name, p in estimate["phases"].items()
    }
    phase = max(needs, key=lambda n: needs[n])
    return _row(
        "optimizer",
        f"AdamW state {format_bytes(state)} -> {format_bytes(state - saved)} (8-bit moments)",
        {"train.optimizer": "adamw_8bit"},
        (needs[phase], phase),
        base,
        usable,
        source,
        "CUDA only (torchao AdamW8bit)",
    )


def packed_rows(micro_batch_lengths: Sequence[Sequence[int]], max_length: int) -> int:
    """The most rows of max_length any of these micro-batches packs into (train.packing)."""
    from campaign.train import pack_rows

    return max((len(pack_rows(list(n), max_length)) for n in micro_batch_lengths), default=0)


def packing_unavailable(task: str) -> str | None:
    """Why train.packing is no lever for a model of `task` (None: it is): the params check's
    own answer (core.tasks.packing_refusal), so no row offers a key the params check refuses."""
    refusal = packing_refusal(task)
    return None if refusal is None else f"train.packing {refusal}"


def packing_row(estimate: dict, usable: float, packing: dict | None) -> dict[str, Any]:
    """train.packing: the training step at the rows the micro-batches pack into in place of
    micro_batch rows (a packed row of max_length costs what one example padded to it does);
    evaluation scores unpacked, so its phase keeps micro_batch.

    packing: {"task", "enabled", "rows"} (None: not known, e.g. no sample was packed).
    """
    mb = int(estimate["micro_batch"])
    base, source = estimate["peak_bytes"], estimate.get("source", "estimated")

    def without(note: str) -> dict[str, Any]:
        return _row("packing", "-", None, None, base, usable, source, note)

    if packing is None:
        return without("not known here: no sample was packed")
    refusal = packing_unavailable(packing["task"])
    if refusal is not None:
        return without(refusal)
    if packing.get("enabled"):
        return without("the recipe already packs (the estimate counts micro_batch rows)")
    rows = int(packing["rows"])
    if not 0 < rows < mb:
        return without(f"the sample's micro-batches of {mb} pack into no fewer rows")
    needs = {
        name: p["fixed_bytes"] + p["bytes_per_example"] * rows
        if name == "train_step"
        else p["bytes"]
        for name, p in estimate["phases"].items()
    }
    phase = max(needs, key=lambda n: needs[n])
    return _row(
        "packing",
        f"{mb} examples in at most {rows} rows per micro-batch (preflight sample)",
        {"train.packing": True},
        (needs[phase], phase),
        base,
        usable,
        source,
        "rows of max_length, per-example masks",
    )


def generation_batch_row(estimate: dict, usable: float) -> dict[str, Any]:
    """The largest model.generation.batch_size below the recipe's at which every phase fits
    (else 1): a generation task's KV cache holds that many sequences (the generate phase
    scales with it; micro_batch does not move it)."""
    base, source = estimate["peak_bytes"], estimate.get("source", "estimated")
    gen = estimate["phases"].get("generate")
    if gen is None or gen.get("scales_with") != GENERATION_BATCH:
        note = "model.task generation only (no free text is generated in batches)"
        return _row("generation_batch", "-", None, None, base, usable, source, note)
    batch = int(gen["batch"])
    if batch <= 1:
        note = f"{GENERATION_BATCH} is 1"
        return _row("generation_batch", "-", None, None, base, usable, source, note)
    options = range(batch - 1, 0, -1)
    chosen = next((b for b in options if need_at(estimate, generation_batch=b)[0] <= usable), 1)
    return _row(
        "generation_batch",
        f"generation batch_size {batch} -> {chosen}",
        {GENERATION_BATCH: chosen},
        need_at(estimate, generation_batch=chosen),
        base,
        usable,
        source,
        "fewer sequences in the KV cache; the same greedy outputs, generated more slowly",
    )


def lever_rows(
    estimate: dict, variants: list[dict] | None, usable: float, packing: dict | None = None
) -> list[dict]:
    """One row per lever, in LEVERS order, for a card with `usable` bytes (packing: see
    packing_row)."""
    base = estimate["peak_bytes"]
    by_lever = {v["lever"]: v for v in variants or ()}
    rows = []
    for lever in LEVERS:
        if lever == "micro_batch":
            rows.append(micro_batch_row(estimate, usable))
        elif lever == "packing":
            rows.append(packing_row(estimate, usable, packing))
        elif lever == "generation_batch":
            rows.append(generation_batch_row(estimate, usable))
        elif lever == "optimizer":
            optimizer = setting(estimate, "optimizer")
            rows.append(optimizer_row(estimate, usable, optimizer))
        elif lever in by_lever:
            v = by_lever[lever]
            est = v["estimate"]
            need = None if est is None else (est["peak_bytes"], est["peak_phase"])
            rows.append(
                _row(lever, v["change"], v["setting"], need, base, usable, v["source"], v["note"])
            )
    return rows


def with_costs(rows: list[dict], costs: list[dict] | None) -> list[dict]:
    """Lever rows with the bytes the preflight measured the same key to save on real steps of
    the recipe (lever_costs rows; the same bytes on every run): measured_saves_bytes. The step
    time ratio, a machine measurement, stays in the lever_costs rows (format_levers joins it)."""
    by_lever = {c["lever"]: c for c in costs or ()}
    out = []
    for row in rows:
        cost = by_lever.get(row["lever"])
        same = cost is not None and cost["setting"] == row["setting"]
        out.append({**row, "measured_saves_bytes": cost["saves_bytes"] if same else None})
    return out

"""memory: the estimate of what a run needs against a measurement of one training step on the real
model, and the fit table for the target cards, with the levers for a card the run does not fit.

A known family (BERT, GPT-2) is estimated from its config (campaign.memory.estimate): weights,
gradients and optimizer state must equal the measured bytes, saved activations agree within
activation_tolerance, a causal LM's KV cache to the byte. Any other architecture is measured on
the model itself (campaign.memory.probe: a training step and an evaluation batch at two
micro-batch sizes, extrapolated linearly to micro_batch): weights, gradients and optimizer state
must still equal the measured bytes, the KV cache too; the extrapolation is reported against the
step at micro_batch, and a missing analytic model never fails the check by itself.

A generation task (a task module, campaign/tasks/) is probed as the causal LM it trains: the
step on formatted conversations (prompt + response) at max_length, the loss on the answer
tokens, and the KV cache of what the run generates: model.generation.batch_size sequences of
the longest formatted prompt of the full validation and test splits plus max_new_tokens
(`Generating`), beside the weights, and beside the optimizer state where the run's trainer
scores in its training process (the built-in loop; a train.command run's model is scored by the
campaign once the command has exited: campaign.train.scores_beside_optimizer).

Every detail but `measured` (process and allocator peaks) is tensor bytes, the same on every run
on a CPU: the report keeps them, measurements.json the peaks.
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass

import torch

from campaign.core.tasks import TASKS, module_of, packing_refusal
from campaign.memory import (
    PROBE_BATCHES,
    Subject,
    analytic_family,
    analytic_variants,
    compare,
    estimate_from_probe,
    estimate_memory,
    fit_table,
    format_comparison,
    format_fit_table,
    format_lever_costs,
    format_levers,
    lever_costs,
    measure_kv_cache,
    measure_memory,
    measured_variants,
    meta_parameter_bytes,
    packed_rows,
    parameter_bytes,
    probe_memory,
    setting,
    with_costs,
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
    IGNORE,
    autocast,
    count_targets,
    loss_sum,
    scores_beside_optimizer,
)

ORDER = 20  # place in the report
# Process memory peaks per phase and the levers' step times differ between identical runs.
VOLATILE = ("measured", "lever_costs")


EXACT_MEMORY = ("weights", "gradients", "optimizer_state")


# ------------------------------------------------------------------ how the campaign runs a model
@dataclass(frozen=True)
class Generating:
    """What the KV cache holds when a generation run generates: `batch` sequences (model.
    generation.batch_size) of `length` cached positions: the longest prompt (`prompt` tokens,
    `item` names it) plus max_new_tokens (`new_tokens`); `beside_optimizer`: whether the
    optimizer state is alive then (campaign.train.scores_beside_optimizer)."""

    batch: int
    length: int
    prompt: int
    new_tokens: int
    item: str
    beside_optimizer: bool

    @classmethod
    def of(cls, trainer, full, beside_optimizer: bool) -> Generating | None:
        """None for a task that generates no free text (labels are scored in one forward).

        The run generates on every item of validation and test (EVAL_SPLITS: the train stage's
        final predictions, the floors and the variants alike) from the whole prompt, every turn
        before the reference answer, formatted by the task's own `prompt_ids` and never cut
        (train/engine.py cuts nothing): so the longest over the full splits (`full`, the
        preflight's inputs; TaskModule.longest_prompt), not over the sample's examples, which
        max_length cut. Lengths are counted with the sample trainer's tokenizer: a pretrained
        model's own; a from-config one trained on the sample (coarser than the run's, so a
        prompt counts no fewer tokens).
        beside_optimizer: whether the optimizer state is alive when it generates (_beside).
        """
        task = module_of(trainer.task)
        if not task.generates_text():
            return None
        run = trainer.run_setup
        longest, item = task.longest_prompt(trainer, full)
        return cls(
            batch=run.batch_size,
            length=longest + run.max_new_tokens,
            prompt=longest,
            new_tokens=run.max_new_tokens,
            item=item,
            beside_optimizer=beside_optimizer,
        )

    def describe(self) -> str:
        return (
            f"the KV cache of {self.batch} generated sequences (model.generation.batch_size) of "
            f"{self.length} positions: the longest prompt, {self.item}, {self.prompt} tokens, "
            f"+ max_new_tokens {self.new_tokens}"
        )


def _beyond_positions(trainer, generating: Generating | None) -> str | None:
    """Why generation would run past the positions the model has (None: it does not). A learned
    position table has no row there (the cache cannot even be measured); a rotary model was
    never trained there. Either way the run's longest prompt needs a change first."""
    limit = getattr(trainer.model.config, "max_position_embeddings", None)
    if generating is None or not limit or generating.length <= limit:
        return None
    return (
        f"{generating.describe()}: more than the model's max_position_embeddings {limit}; "
        "lower model.generation.max_new_tokens or leave out the longest prompts"
    )


def positions_refusal(bench: Bench) -> tuple[str, dict] | None:
    """(the memory check's one-line refusal, its details) when what the run generates passes
    the model's positions, else None. The preflight asks this before any check runs: the
    overfit and resume checks generate from the sample's whole prompts, and a prompt far past
    the positions (a learned table has no row there; a rotary model's attention grows with the
    square of its length) would exhaust memory before this line was ever written."""
    if bench.task not in TASKS or not module_of(bench.task).generates_text():
        return None  # a task that scores in one forward of the cut example
    trainer = bench.trainer()
    generating = Generating.of(trainer, bench.full, _beside(bench))
    beyond = _beyond_positions(trainer, generating)
    if beyond is None:
        return None
    return beyond, {"generating": asdict(generating), "problems": [beyond]}


def _memory_task(trainer) -> str:
    """The task the memory model runs (TaskModule.memory_task): a generation task trains and
    scores as a causal LM (the LM head over the formatted conversation, no label set)."""
    return module_of(trainer.task).memory_task()


def _lm_head(task: str) -> bool:
    """Whether the memory model's task has a causal LM's head (its scoring reads the tokens'
    log-probabilities; the model keeps a KV cache) rather than a classifier's."""
    return module_of(task).memory_head() == "lm"


def _loss_fn(task: str):
    def loss_fn(model, batch):
        return loss_sum(model, batch, task) / max(count_targets(batch), 1)

    return loss_fn


def _logits(model, batch):
    return model(
        input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], use_cache=False
    ).logits.float()


def _score_fn(task: str):
    """The evaluation's scoring (train.scoring: classifier_scores, causal_scores), op for op."""

    def classifier(model, batch):
        logits = _logits(model, batch)
        loss = torch.nn.functional.cross_entropy(
            logits, batch["labels"], ignore_index=IGNORE, reduction="sum"
        )
        return loss, torch.softmax(logits, dim=-1)

    def causal(model, batch):
        logits = _logits(model, batch)
        target = batch["labels"][:, 1:]
        logp = torch.log_softmax(logits[:, :-1], dim=-1)
        picked = logp.gather(-1, target.clamp(min=0).unsqueeze(-1)).squeeze(-1)
        return picked.masked_fill(target == IGNORE, 0.0).sum(-1)

    return causal if _lm_head(task) else classifier


def _batch_maker(trainer):
    """make(n, length): n train examples cut to `length` tokens and padded to it, on device.

    The first is cut to half the length, so every batch has padding and the attention mask is
    in play (a batch without padding can skip it: less memory than a real run's batches).
    """
    examples = trainer.examples["train"]

    def make(n: int, length: int) -> dict:
        cut = [
            {
                k: (v[: length if i else max(1, length // 2)] if isinstance(v, list) else v)
                for k, v in e.items()
            }
            for i, e in enumerate(examples[:n])
        ]
        batch = padded_batch(cut, n, length, trainer.pad_id)
        return {k: v.to(trainer.device) for k, v in batch.items()}

    return make


def _subject(bench: Bench, trainer, n_labels: int, generating: Generating | None = None) -> Subject:
    """The trainer's model as the probe runs it, sized for the full label set (a generation
    run: scoring one conversation per example, the cache at what it generates)."""
    task, config = _memory_task(trainer), trainer.model.config
    return Subject(
        model=trainer.model,
        task=task,
        train_cfg=bench.spec["train"],
        make_batch=_batch_maker(trainer),
        loss_fn=_loss_fn(task),
        score_fn=_score_fn(task),
        autocast=lambda precision: functools.partial(autocast, trainer.device, precision),
        parameters=lambda lora: meta_parameter_bytes(config, task, n_labels, lora),
        eval_sequences=module_of(trainer.task).eval_sequences(n_labels),
        device=trainer.device.type,
        sizes=PROBE_BATCHES,
        architecture=getattr(config, "model_type", "") or "",
        kv_length=generating.length if generating is not None else None,
        kv_batch=generating.batch if generating is not None else None,
        optimizer_while_generating=generating is not None and generating.beside_optimizer,
    )


def _packing(trainer, task: str) -> dict:
    """What the fit table's packing lever needs: the run's model.task (`task`: whether it packs
    at all is the params check's answer, not the memory model's causal LM) and the most rows of
    max_length any micro-batch of the sample's first epoch (in the run's order) packs into."""
    r = trainer.recipe
    examples = trainer.examples["train"]
    perm = trainer.order.permutation(0)
    lengths = [
        [len(examples[i]["input_ids"]) for i in perm[j : j + r.micro_batch]]
        for j in range(0, len(perm), r.micro_batch)
    ]
    rows = packed_rows(lengths, r.max_length) if packing_refusal(task) is None else None
    return {"task": task, "enabled": r.packing, "rows": rows}


# ------------------------------------------------------------------ the check
def _beside(bench: Bench) -> bool:
    """Whether a generation run generates beside its optimizer state: the baseline's trainer
    says (campaign.train.scores_beside_optimizer), and a built-in run planned beside a command
    baseline (a factor on train.command: bench.builtin_generates) generates beside it too."""
    return scores_beside_optimizer(bench.spec["train"]) or bench.builtin_generates


def run(bench: Bench) -> Result:
    cfg, recipe = bench.cfg, bench.recipe
    train_cfg = bench.spec["train"]
    trainer = bench.trainer()
    task = _memory_task(trainer)
    generating = Generating.of(trainer, bench.full, _beside(bench))
    beyond = _beyond_positions(trainer, generating)
    if beyond is not None:
        return Result(False, beyond, {"generating": asdict(generating), "problems": [beyond]})
    here = model_config(trainer)
    # A generation run is probed (the analytic families model label heads and label scoring).
    family = analytic_family(here) if generating is None else None
    problems: list[str] = []
    estimate, target, subject = _estimates(bench, trainer, here, family, generating)
    make = _batch_maker(trainer)
    batch = make(recipe.micro_batch, recipe.max_length)
    measured = _measure_step(trainer, recipe, batch, task, problems)
    rows, act_error, extrapolation_error, kv = [], None, None, None
    if "error" not in measured:
        rows = compare(estimate, measured)
        act_error, extrapolation_error = _check_comparison(rows, family, cfg, problems)
        if _lm_head(task):
            cached = batch if generating is None else make(generating.batch, generating.length)
            kv = _check_kv_cache(trainer, cached, estimate, problems)
    # Each lever that is a train key, measured on real steps of the recipe (after the probe:
    # the trainers it builds are fresh).
    costs = lever_costs(bench.trainer, train_cfg, trainer.device.type, task=bench.task)
    fits = _fit_table(bench, trainer, target, subject, costs, _packing(trainer, bench.task))
    fitting = [r["card"] for r in fits if r["fits"]]
    if not fitting:
        problems.append(
            f"the run needs {fmt_bytes(target['peak_bytes'])} ({target['peak_phase']}) and fits "
            f"none of {', '.join(r['card'] for r in fits)} with a "
            f"{100 * cfg['memory_margin']:.0f}% margin"
            + (
                f" ({generating.describe()})"
                if generating is not None and target["peak_phase"] == "generate"
                else ""
            )
        )
    details = {
        "estimator": "analytic" if family is not None else "measured",
        "architecture": here["config"].get("model_type", family),
        "comparison": rows,
        "activation_relative_error": act_error,
        "extrapolation_relative_error": extrapolation_error,
        "activation_tolerance": cfg["activation_tolerance"],
        "kv_cache": kv,
        "generating": asdict(generating) if generating is not None else None,
        "estimate_here": estimate,
        "measured": measured,
        "estimate_for_cards": target,
        "fit_table": fits,
        "lever_costs": costs,
        "fits": fitting,
        "problems": problems,
    }
    return Result.of(problems, details, lambda: _summary(details, target, fits))


def _head_size(task: str, labels) -> int:
    """The outputs of the task's head over `labels` (its TaskModule.head_config num_labels: a
    classifier's one per label, a score's one), or one per label for a model without a head
    of labels (a causal LM scores each label as a sequence)."""
    labels = list(labels)
    return module_of(task).head_config(labels).get("num_labels", len(labels))


def _estimates(
    bench: Bench, trainer, here: dict, family, generating: Generating | None
) -> tuple[dict, dict, Subject | None]:
    """(the estimate here, the estimate for the target cards, the probe's subject or None).

    A known family is estimated from its config; the target cards are accelerators, so their
    estimate is for CUDA, with the configured vocabulary and the full train split's labels.
    Any other architecture, and any generation run, is probed on the model itself."""
    recipe, train_cfg = bench.recipe, bench.spec["train"]
    task = _memory_task(trainer)
    device = trainer.device
    attention = trainer.model.config._attn_implementation
    n_labels = 0 if generating is not None else _head_size(trainer.task, bench.label_names())
    if family is not None:
        common = dict(attention=attention, gradient_checkpointing=recipe.gradient_checkpointing)
        estimate = estimate_memory(
            here,
            train_cfg,
            num_labels=_head_size(trainer.task, trainer.labels),
            device=device.type,
            **common,
        )
        target = estimate_memory(
            configured_model(bench, trainer), train_cfg, num_labels=n_labels, device="cuda",
            **common,
        )  # fmt: skip
        return estimate, target, None
    subject = _subject(bench, trainer, n_labels, generating)
    probed = probe_memory(subject, recipe.max_length, recipe.precision)
    common = dict(
        task=task,
        architecture=subject.architecture,
        device=device.type,
        gradient_checkpointing=recipe.gradient_checkpointing,
        kv_batch=generating.batch if generating is not None else None,
        optimizer_while_generating=subject.optimizer_while_generating,
    )
    estimate = estimate_from_probe(
        probed,
        parameter_bytes(trainer.model),
        train_cfg,
        eval_sequences=subject.eval_sequences if generating is None else 1,
        **common,
    )
    target = estimate_from_probe(
        probed,
        subject.parameters(train_cfg.get("lora") or None),
        train_cfg,
        eval_sequences=subject.eval_sequences,
        **common,
    )
    return estimate, target, subject


def _measure_step(trainer, recipe, batch: dict, task: str, problems: list[str]) -> dict:
    """One training step at micro_batch, measured; out of memory is a problem, not a crash."""
    device = trainer.device

    def optimizer_factory(params):
        return torch.optim.AdamW(params, lr=recipe.lr, weight_decay=recipe.weight_decay)

    try:
        return measure_memory(
            trainer.model,
            batch,
            optimizer_factory,
            device,
            loss_fn=_loss_fn(task),
            autocast=trainer.autocast,
        )
    except torch.OutOfMemoryError as e:
        problems.append(
            f"a training step at micro_batch {recipe.micro_batch} ran out of memory on {device}"
        )
        if device.type == "cuda":
            torch.cuda.empty_cache()
        return {"device": str(device), "error": f"out of memory: {e}"}


def _check_comparison(rows: list[dict], family, cfg: dict, problems: list[str]) -> tuple:
    """(activation error, extrapolation error): weights, gradients and optimizer state must be
    exact; the activations within activation_tolerance for an analytic family (a probe's
    extrapolation error is reported, not a verdict)."""
    for row in rows:
        if row["component"] in EXACT_MEMORY and row["estimated"] != row["measured"]:
            problems.append(
                f"{row['component']} estimated {row['estimated']} B, measured {row['measured']} B"
            )
    act = next(r for r in rows if r["component"].startswith("activations"))
    error = abs(act["estimated"] - act["measured"]) / max(act["measured"], 1)
    if family is None:
        return None, error
    if error > cfg["activation_tolerance"]:
        problems.append(
            f"activations estimated {fmt_bytes(act['estimated'])}, measured "
            f"{fmt_bytes(act['measured'])} ({100 * error:.1f}% > "
            f"{100 * cfg['activation_tolerance']:.1f}%)"
        )
    return error, None


def _check_kv_cache(trainer, batch: dict, estimate: dict, problems: list[str]) -> dict:
    """A causal LM's KV cache, estimated against measured: equal to the byte."""
    device = trainer.device
    with trainer.autocast():
        kv_measured = measure_kv_cache(
            trainer.model, batch["input_ids"].to(device), batch["attention_mask"].to(device)
        )
    kv = {"estimated": estimate["bytes"]["kv_cache"], "measured": kv_measured}
    if kv["estimated"] != kv["measured"]:
        problems.append(f"kv_cache estimated {kv['estimated']} B, measured {kv_measured} B")
    return kv


def _fit_table(
    bench: Bench, trainer, target: dict, subject, costs: dict, packing: dict
) -> list[dict]:
    """The target cards' fit table; where a card does not fit, with the levers (and their
    measured costs) that would make it."""
    cfg, train_cfg = bench.cfg, bench.spec["train"]
    margin = cfg["memory_margin"]
    fits = fit_table(target, cfg["target_cards"], margin, packing=packing)
    if not all(r["fits"] for r in fits):
        if subject is None:
            variants = analytic_variants(
                configured_model(bench, trainer),
                train_cfg,
                num_labels=_head_size(trainer.task, bench.label_names()),
                device="cuda",
                attention=trainer.model.config._attn_implementation,
            )
        else:
            variants = measured_variants(subject)  # last: its LoRA lever wraps the model
        fits = fit_table(target, cfg["target_cards"], margin, variants, packing)
    return [{**r, "levers": with_costs(r["levers"], costs)} for r in fits]


def _summary(d: dict, target: dict, fits: list[dict]) -> str:
    devices = int(setting(target, "devices"))
    per_card = f" per card, {devices} cards a run" if devices > 1 else ""
    needs = (
        f"needs {fmt_bytes(target['peak_bytes'])} ({target['peak_phase']}){per_card}, fits "
        f"{len(d['fits'])} of {len(fits)} cards"
    )
    act = next(r for r in d["comparison"] if r["component"].startswith("activations"))
    if d["estimator"] == "analytic":
        return (
            f"weights, gradients, optimizer state exact; activations "
            f"{fmt_bytes(act['estimated'])} est vs {fmt_bytes(act['measured'])} measured "
            f"({100 * d['activation_relative_error']:.2f}%); {needs}"
        )
    fit = target["probe"]["fit"]["activations"]
    sizes = " and ".join(str(b) for b in target["probe"]["batch_sizes"])
    return (
        f"{d['architecture']}: no analytic model, measured; weights, gradients, optimizer state "
        f"exact; activations {fmt_bytes(fit['per_example'])} per example (micro-batches {sizes}), "
        f"{fmt_bytes(act['estimated'])} extrapolated vs {fmt_bytes(act['measured'])} measured "
        f"({100 * d['extrapolation_relative_error']:.2f}%); {needs}"
    )


def describe(d: dict) -> list[str]:
    lines = []
    measured = d.get("measured") or {}
    if d.get("estimator") == "measured":
        probe = d["estimate_for_cards"]["probe"]
        lines.append(
            f"{d['architecture']}: no analytic memory model; measured on {probe_device(d)} at "
            f"micro-batches {', '.join(map(str, probe['batch_sizes']))} (max_length "
            f"{probe['max_length']}, {probe['precision']}) and extrapolated linearly"
        )
    if measured.get("error"):
        lines.append(f"on {measured['device']}: {measured['error']}")
    if d.get("comparison"):
        lines += [f"on {measured['device']} (one training step, padded to max_length):"]
        lines += format_comparison(d["comparison"]).splitlines()
        for phase, p in measured["phases"].items():
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
    if d.get("generating"):
        g = d["generating"]
        beside = (
            "the weights and the optimizer state (the training process generates)"
            if g.get("beside_optimizer", True)
            else "the weights alone (the campaign generates after train.command has exited)"
        )
        lines.append(
            f"generation: {g['batch']} sequences x {g['length']} cached positions (the longest "
            f"prompt, {g['item']}, {g['prompt']} tokens, + max_new_tokens {g['new_tokens']}), "
            f"beside {beside}"
        )
    if d.get("lever_costs"):
        lines.append("levers that are train keys, measured on the recipe's first steps:")
        lines += format_lever_costs(d["lever_costs"]).splitlines()
    if d.get("fit_table"):
        if d.get("estimator") == "measured":
            lines.append("fit on the target cards (measured on this machine, full label set):")
        else:
            lines.append("fit on the target cards (CUDA estimate, configured vocabulary):")
        lines += format_fit_table(d["fit_table"]).splitlines()
        levers = format_levers(d["fit_table"], d.get("lever_costs"))
        if levers:
            lines += levers.splitlines()
    return lines


def probe_device(d: dict) -> str:
    return d["estimate_for_cards"]["settings"]["device"]

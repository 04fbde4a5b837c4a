"""The preflight phase: one cheap pass over the baseline recipe, before any training job spends
money, that fails loudly when the recipe is broken.

Eight checks (CHECKS), each on a seeded sample of the splits and each independent of the others
(a check builds its own throwaway Trainer; a broken piece fails its own check, not the rest):
    environment        versions and device; the requested precision runs on this device.
    memory             estimate vs measurement of one training step on the real model (weights,
                       gradients and optimizer state equal to the byte; activations within a
                       tolerance; the KV cache for causal_lm), and the fit table for target cards.
    tokenization       formatted examples as tokens, with the positions that carry loss; every
                       example has a target and (causal_lm) the loss covers exactly the response.
    overfit            a few examples, trained with the recipe's lr and optimizer, are learned.
    grad_accumulation  k micro-batches of different target counts accumulate to the gradient of
                       one batch holding all of them (float64, CPU).
    resume             save -> resume -> continue equals the uninterrupted run bitwise; the saved
                       model reloads and predicts (and, causal_lm, generates) exactly as in memory.
    throughput         sustained steps/s after a warm-up, projected to a run and to the plan.
    disk               checkpoints, model, logs and predictions of every run, against free space.

`cfg` is the `preflight` section of params.yaml; `cfg["blocking"]` names the checks whose failure
stops the campaign (`check_report`). Tests break one piece at a time through `Hooks`.

The report is a snapshot: throughput and free disk are measured when the stage runs, and the
store reuses the report until the spec, the data or the code change (the key does not hold the
host). Numbers come from the sample: a tokenizer trained on the sample (model.tokenizer.source
train_split) can hold fewer tokens than one trained on the full split, so the memory comparison
uses the model actually built, and the fit table the configured vocabulary size.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import math
import shutil
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from campaign import checkpoint, devices, memory, models, train
from campaign.batches import IGNORE, DataOrder, Split, collate, count_targets
from campaign.errors import CampaignError
from campaign.fsutil import atomic_write_text, remove_tree

CHECKS = (
    "environment",
    "memory",
    "tokenization",
    "overfit",
    "grad_accumulation",
    "resume",
    "throughput",
    "disk",
)
# The `preflight` section: key -> sub-keys (None: a plain value).
CONFIG_KEYS: dict[str, tuple[str, ...] | None] = {
    "blocking": None,
    "sample": ("train_examples", "validation_examples"),
    "inspect_examples": None,
    "target_cards": None,
    "memory_margin": None,
    "activation_tolerance": None,
    "overfit": ("examples", "steps", "max_final_loss"),
    "grad_accum_tolerance": None,
    "resume": ("steps_before", "steps_after"),
    "throughput": ("warmup_steps", "window_steps"),
    "max_hours": None,
    "disk_margin": None,
}
EXACT_MEMORY = ("weights", "gradients", "optimizer_state")
COULD_NOT_RUN = "could not run: "
_SAMPLE_STREAM = 0x9F1  # the sample's draw: a stream apart from the run's other seeded draws


# ------------------------------------------------------------------ configuration
def _whole(cfg: dict, key: str, where: str, minimum: int = 1) -> int:
    value = cfg[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise CampaignError(f"{where}.{key}: expected a whole number >= {minimum}, got {value!r}")
    return value


def _number(cfg: dict, key: str, where: str, low: float, high: float | None = None) -> float:
    value = cfg[key]
    ok = isinstance(value, int | float) and not isinstance(value, bool) and value >= low
    if ok and high is not None:
        ok = value < high
    if not ok:
        bound = f"in [{low}, {high})" if high is not None else f">= {low}"
        raise CampaignError(f"{where}.{key}: expected a number {bound}, got {value!r}")
    return float(value)


def check_config(cfg: dict) -> None:
    """The `preflight` section, checked: one-line errors naming the key."""
    if not isinstance(cfg, dict):
        raise CampaignError("preflight: expected a mapping")
    for key, sub in CONFIG_KEYS.items():
        if key not in cfg:
            raise CampaignError(f"preflight.{key}: missing (the preflight stage reads it)")
        if sub is not None:
            if not isinstance(cfg[key], dict):
                raise CampaignError(f"preflight.{key}: expected a mapping with {', '.join(sub)}")
            for s in sub:
                if s not in cfg[key]:
                    raise CampaignError(f"preflight.{key}.{s}: missing")
            extra = sorted(set(cfg[key]) - set(sub))
            if extra:
                raise CampaignError(f"preflight.{key}.{extra[0]}: not a key preflight knows")
    extra = sorted(set(cfg) - set(CONFIG_KEYS))
    if extra:
        raise CampaignError(f"preflight.{extra[0]}: not a key preflight knows")
    blocking = cfg["blocking"]
    if not isinstance(blocking, list) or any(b not in CHECKS for b in blocking):
        bad = [b for b in blocking if b not in CHECKS] if isinstance(blocking, list) else blocking
        raise CampaignError(
            f"preflight.blocking: {bad!r} is not a list of check names ({', '.join(CHECKS)})"
        )
    for key in ("train_examples", "validation_examples"):
        _whole(cfg["sample"], key, "preflight.sample")
    _whole(cfg, "inspect_examples", "preflight", 0)
    cards = cfg["target_cards"]
    if not isinstance(cards, list) or not cards:
        raise CampaignError(
            "preflight.target_cards: expected a non-empty list of {name, memory_gib}"
        )
    for n, card in enumerate(cards):
        if not isinstance(card, dict) or set(card) != {"name", "memory_gib"}:
            raise CampaignError(f"preflight.target_cards[{n}]: expected {{name, memory_gib}}")
        if not isinstance(card["name"], str) or not card["name"]:
            raise CampaignError(f"preflight.target_cards[{n}].name: expected a card name")
        gib = card["memory_gib"]
        if isinstance(gib, bool) or not isinstance(gib, int | float) or gib <= 0:
            raise CampaignError(
                f"preflight.target_cards[{n}].memory_gib: expected a number > 0, got {gib!r}"
            )
    _number(cfg, "memory_margin", "preflight", 0.0, 1.0)
    _number(cfg, "activation_tolerance", "preflight", 0.0)
    for key in ("examples", "steps"):
        _whole(cfg["overfit"], key, "preflight.overfit")
    _number(cfg["overfit"], "max_final_loss", "preflight.overfit", 0.0)
    _number(cfg, "grad_accum_tolerance", "preflight", 0.0)
    for key in ("steps_before", "steps_after"):
        _whole(cfg["resume"], key, "preflight.resume")
    _whole(cfg["throughput"], "warmup_steps", "preflight.throughput", 0)
    _whole(cfg["throughput"], "window_steps", "preflight.throughput")
    if cfg["max_hours"] is not None:
        _number(cfg, "max_hours", "preflight", 0.0)
    _number(cfg, "disk_margin", "preflight", 0.0)


# ------------------------------------------------------------------ seams and shared state
def free_disk_bytes(path: Path) -> int:
    """Free bytes on the file system holding `path` (its nearest existing parent)."""
    path = Path(path).absolute()
    while not path.exists():
        path = path.parent
    return shutil.disk_usage(path).free


def _environment_report() -> dict:
    from campaign import envreport

    return envreport.environment_report()


@dataclass(frozen=True)
class Hooks:
    """Seams through which a test breaks one piece on purpose; the defaults are the real ones.

    accumulated_gradients  the accumulation under test (train.accumulated_gradients)
    save_checkpoint        the checkpoint writer under test (checkpoint.save_checkpoint)
    transform_examples     applied to each Trainer's encoded train examples (a broken formatter)
    free_bytes             free disk bytes at a path
    environment_report     versions and device facts (envreport.environment_report)
    device                 the torch.device to run on (None: devices.select_device())
    """

    accumulated_gradients: Callable[..., dict] = train.accumulated_gradients
    save_checkpoint: Callable[[Path, dict, int], Path] = checkpoint.save_checkpoint
    transform_examples: Callable[[list[dict]], list[dict]] | None = None
    free_bytes: Callable[[Path], int] = free_disk_bytes
    environment_report: Callable[[], dict] = _environment_report
    device: Any = None


def sample_split(split: Split, n: int, rng: np.random.Generator) -> Split:
    """`n` records drawn without replacement (all when fewer), kept in file order."""
    if len(split) <= n:
        return split
    keep = np.sort(rng.choice(len(split), size=n, replace=False))
    return Split(
        ids=[split.ids[i] for i in keep],
        texts=[split.texts[i] for i in keep],
        labels=[split.labels[i] for i in keep],
    )


def sample_data(data: train.Data, train_n: int, validation_n: int, seed: int) -> train.Data:
    """The preflight sample: train and validation drawn with a Generator seeded by `seed`.

    The test split is left out (empty): no check needs it, and it stays unseen.
    """
    rng = np.random.default_rng([seed, _SAMPLE_STREAM])
    return train.Data(
        train=sample_split(data.train, train_n, rng),
        validation=sample_split(data.validation, validation_n, rng),
        test=Split([], [], []),
    )


@dataclass
class Result:
    passed: bool
    summary: str
    details: dict = field(default_factory=dict)


class Bench:
    """What every check shares: the spec, the sample, a scratch folder, fresh Trainers."""

    def __init__(
        self,
        spec: dict,
        data: train.Data,
        cfg: dict,
        work_dir: Path,
        root: Path,
        plan_size: int,
        base_model: Path | None,
        hooks: Hooks,
        stream,
    ):
        self.spec, self.full, self.cfg = spec, data, cfg
        self.recipe = train.Recipe.from_spec(spec["train"])
        self.task = spec["model"]["task"]
        self.work_dir, self.root, self.plan_size = Path(work_dir), Path(root), plan_size
        self.base_model, self.hooks, self.stream = base_model, hooks, stream
        self.device = hooks.device if hooks.device is not None else devices.select_device()
        self.sample = sample_data(
            data,
            cfg["sample"]["train_examples"],
            cfg["sample"]["validation_examples"],
            spec["seed"],
        )

    def scratch(self, name: str) -> Path:
        folder = self.work_dir / "preflight" / name
        if folder.exists():
            remove_tree(folder)
        folder.mkdir(parents=True)
        return folder

    def trainer(self, work_dir: Path | None = None, **train_overrides) -> train.Trainer:
        """A fresh Trainer on the sample (the recipe, with `train_overrides` applied)."""
        spec = {**self.spec, "train": {**self.spec["train"], **train_overrides}}
        trainer = train.Trainer(
            spec,
            self.sample,
            work_dir if work_dir is not None else self.scratch("trainer"),
            root=self.root,
            base_model=self.base_model,
            device=self.device,
            stream=self.stream,
        )
        if self.hooks.transform_examples is not None:
            trainer.examples["train"] = self.hooks.transform_examples(trainer.examples["train"])
        return trainer

    def label_names(self) -> list[str]:
        return models.label_names(self.full.train.labels)


# ------------------------------------------------------------------ small helpers
def _padded_batch(examples: Sequence[dict], n: int, length: int, pad_id: int) -> dict:
    """n examples (cycled when fewer), each right-padded to `length` tokens: the memory
    estimate's premise (every example padded to max_length)."""
    rows, mask = [], []
    for i in range(n):
        e = examples[i % len(examples)]
        real, extra = len(e["input_ids"]), length - len(e["input_ids"])
        row = {"input_ids": e["input_ids"] + [pad_id] * extra}
        if "labels" in e:
            row["labels"] = e["labels"] + [IGNORE] * extra
        else:
            row["label"] = e["label"]
        rows.append(row)
        mask.append([1] * real + [0] * extra)
    batch = collate(rows, pad_id)
    batch["attention_mask"] = torch.tensor(mask, dtype=torch.long)
    return batch


def _tree_bytes(path: Path) -> int:
    path = Path(path)
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _model_config(trainer: train.Trainer) -> dict:
    """The built model's geometry as the memory estimate reads it (HF config dict)."""
    return {"task": trainer.task, "config": trainer.model.config.to_dict()}


def _configured_model(bench: Bench, trainer: train.Trainer) -> dict:
    """The model section as a full run builds it: the configured vocabulary size (a sample's
    tokenizer may hold fewer tokens), else the pretrained config."""
    spec = bench.spec["model"]
    if spec["source"] == "from_config":
        return spec
    return _model_config(trainer)


def _sync(device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _fmt_bytes(n: float) -> str:
    return memory.format_bytes(n)


def _fmt_seconds(s: float) -> str:
    if s >= 3600:
        return f"{s / 3600:.2f} h"
    if s >= 60:
        return f"{s / 60:.1f} min"
    return f"{s:.2f} s"


# ------------------------------------------------------------------ 1. environment
def _precision_smoke(device, precision: str) -> dict:
    """A linear layer forward + backward under the recipe's autocast, on the device."""
    expected = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]
    gen = torch.Generator().manual_seed(0)
    layer = torch.nn.Linear(32, 32).to(device)
    x = torch.randn(8, 32, generator=gen).to(device)
    with devices.autocast(device, precision):
        out = layer(x)
    loss = out.float().pow(2).mean()
    loss.backward()
    grad = layer.weight.grad
    return {
        "output_dtype": str(out.dtype).removeprefix("torch."),
        "expected_dtype": str(expected).removeprefix("torch."),
        "grad_dtype": str(grad.dtype).removeprefix("torch."),
        "finite": bool(torch.isfinite(loss).item() and torch.isfinite(grad).all().item()),
        "ok": out.dtype == expected and bool(torch.isfinite(grad).all().item()),
    }


def check_environment(bench: Bench) -> Result:
    report = bench.hooks.environment_report()
    device, precision = bench.device, bench.recipe.precision
    problems: list[str] = []
    smoke = None
    try:
        devices.check_precision(device, precision)
    except CampaignError as e:
        problems.append(str(e))
    if not problems:
        try:
            smoke = _precision_smoke(device, precision)
        except RuntimeError as e:
            problems.append(f"train.precision: {precision} failed on {device.type}: {e}")
        else:
            if not smoke["ok"]:
                problems.append(
                    f"train.precision: {precision} autocast gave {smoke['output_dtype']} "
                    f"(finite: {smoke['finite']}) on {device.type}"
                )
    if precision == "bf16" and report.get("bf16_supported") is False:
        problems.append(f"train.precision: bf16 is not supported on {report.get('device_name')}")
    if bench.recipe.lora is not None and report.get("peft") is None:
        problems.append("train.lora: needs the peft package, which is not installed")
    info = devices.device_info(device)
    details = {
        "device": info,
        "precision": precision,
        "precision_smoke": smoke,
        "problems": problems,
        "report": report,
    }
    if problems:
        return Result(False, "; ".join(problems), details)
    return Result(
        True,
        f"{precision} runs on {device.type} ({info.get('name')}); torch {report.get('torch')}, "
        f"transformers {report.get('transformers')}",
        details,
    )


# ------------------------------------------------------------------ 2. memory
def check_memory(bench: Bench) -> Result:
    cfg, recipe = bench.cfg, bench.recipe
    trainer = bench.trainer()
    device = trainer.device
    attention = trainer.model.config._attn_implementation
    estimate = memory.estimate_memory(
        _model_config(trainer),
        bench.spec["train"],
        device=device.type,
        attention=attention,
    )
    batch = _padded_batch(
        trainer.examples["train"], recipe.micro_batch, recipe.max_length, trainer.pad_id
    )
    task = bench.task

    def loss_fn(model, b):
        return train.loss_sum(model, b, task) / max(count_targets(b), 1)

    def optimizer_factory(params):
        return torch.optim.AdamW(params, lr=recipe.lr, weight_decay=recipe.weight_decay)

    measured = memory.measure_memory(
        trainer.model,
        batch,
        optimizer_factory,
        device,
        loss_fn=loss_fn,
        autocast=trainer.autocast,
    )
    rows = memory.compare(estimate, measured)
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
            f"activations estimated {_fmt_bytes(act['estimated'])}, measured "
            f"{_fmt_bytes(act['measured'])} ({100 * act_error:.1f}% > "
            f"{100 * cfg['activation_tolerance']:.1f}%)"
        )
    kv = None
    if task == "causal_lm":
        with trainer.autocast():
            kv_measured = memory.measure_kv_cache(
                trainer.model,
                batch["input_ids"].to(device),
                batch["attention_mask"].to(device),
            )
        kv = {"estimated": estimate["bytes"]["kv_cache"], "measured": kv_measured}
        if kv["estimated"] != kv["measured"]:
            problems.append(f"kv_cache estimated {kv['estimated']} B, measured {kv_measured} B")

    # The fit table: the target cards are accelerators, so the estimate is for CUDA, with the
    # configured vocabulary and the full train split's labels.
    target = memory.estimate_memory(
        _configured_model(bench, trainer),
        bench.spec["train"],
        num_labels=len(bench.label_names()),
        device="cuda",
        attention=attention,
    )
    fits = memory.fit_table(target, cfg["target_cards"], cfg["memory_margin"])
    fitting = [r["card"] for r in fits if r["fits"]]
    if not fitting:
        problems.append(
            f"the run needs {_fmt_bytes(target['peak_bytes'])} ({target['peak_phase']}) and fits "
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
        f"weights, gradients, optimizer state exact; activations {_fmt_bytes(act['estimated'])} "
        f"est vs {_fmt_bytes(act['measured'])} measured ({100 * act_error:.2f}%); needs "
        f"{_fmt_bytes(target['peak_bytes'])}, fits {len(fitting)} of {len(fits)} cards",
        details,
    )


# ------------------------------------------------------------------ 3. tokenization
def _show_token(tokenizer, token_id: int) -> str:
    text = tokenizer.decode([token_id])
    return text.replace("\n", "\\n") if text else tokenizer.convert_ids_to_tokens(token_id)


def _loss_positions(example: dict, task: str, architecture: str | None) -> list[int]:
    """Positions whose label enters the loss (causal: label at t is predicted from t-1)."""
    if "labels" in example:
        return [i for i, v in enumerate(example["labels"]) if i > 0 and v != IGNORE]
    if example["label"] == IGNORE:
        return []
    # The sequence label is read at [CLS] (BERT) or at the last token (GPT-2's pooling).
    return [0] if architecture != "gpt2" else [len(example["input_ids"]) - 1]


def _architecture(trainer: train.Trainer) -> str:
    return trainer.model.config.model_type


def check_tokenization(bench: Bench) -> Result:
    trainer = bench.trainer()
    tok, task = trainer.tokenizer, bench.task
    arch = _architecture(trainer)
    examples = trainer.examples["train"]
    data = bench.sample.train
    no_loss, cut, wrong = [], [], []
    if task == "causal_lm":
        text_lengths = [
            len(ids)
            for ids in tok(list(data.texts), add_special_tokens=False, verbose=False)["input_ids"]
        ]
        limit = trainer.fmt.prompt_budget
    else:
        text_lengths = [len(ids) for ids in tok(list(data.texts), verbose=False)["input_ids"]]
        limit = bench.recipe.max_length
    for i, e in enumerate(examples):
        positions = _loss_positions(e, task, arch)
        if not positions:
            no_loss.append(i)
            continue
        if task != "causal_lm":
            continue
        lid = trainer.label_ids[data.labels[i]]
        target = trainer.fmt.targets[lid]
        expected = [IGNORE] * (len(e["input_ids"]) - len(target)) + target
        supervised = [e["labels"][p] for p in positions]
        if e["labels"] != expected:
            if len(supervised) < len(target) and target[: len(supervised)] == supervised:
                cut.append(i)
            else:
                wrong.append(i)
        elif any(e["labels"][p] != e["input_ids"][p] for p in positions):
            wrong.append(i)

    inspected = []
    for i in range(min(bench.cfg["inspect_examples"], len(examples))):
        e = examples[i]
        positions = set(_loss_positions(e, task, arch))
        tokens = [_show_token(tok, t) for t in e["input_ids"]]
        entry = {
            "id": data.ids[i],
            "label": data.labels[i],
            "tokens": tokens,
            "loss_positions": sorted(positions),
            "n_tokens": len(tokens),
            "text_tokens": text_lengths[i],
            "truncated": text_lengths[i] > limit,
        }
        if task == "causal_lm":
            entry["loss_text"] = tok.decode([e["labels"][p] for p in sorted(positions)])
            entry["masked_prompt_tokens"] = sum(v == IGNORE for v in e["labels"])
        else:
            entry["loss_on"] = (
                "the sequence (label id "
                f"{e['label']}: {trainer.labels[e['label']] if e['label'] != IGNORE else 'none'})"
            )
        inspected.append(entry)
    truncated = sum(n > limit for n in text_lengths)
    details = {
        "task": task,
        "max_length": bench.recipe.max_length,
        "examples": len(examples),
        "truncated_texts": truncated,
        "no_loss": len(no_loss),
        "target_truncated": len(cut),
        "mask_mismatch": len(wrong),
        "inspected": inspected,
    }
    if task == "causal_lm":
        details["prompt_budget"] = limit
        details["separator"] = tok.decode(trainer.fmt.sep_ids)
    problems = []
    if no_loss:
        problems.append(
            f"{len(no_loss)} of {len(examples)} examples carry no loss (labels masked everywhere; "
            f"first: {data.ids[no_loss[0]]})"
        )
    if cut:
        problems.append(f"truncation cut the target of {len(cut)} examples")
    if wrong:
        problems.append(
            f"{len(wrong)} examples' loss mask is not 'prompt masked, response carries loss'"
        )
    if problems:
        return Result(False, "; ".join(problems), details)
    carried = sum(len(_loss_positions(e, task, arch)) for e in examples)
    what = "response tokens" if task == "causal_lm" else "sequence labels"
    return Result(
        True,
        f"every example carries loss ({carried} {what} in {len(examples)} examples); "
        f"{truncated} texts truncated to fit max_length {bench.recipe.max_length}",
        details,
    )


# ------------------------------------------------------------------ 4. overfit
@torch.no_grad()
def _mean_loss(trainer: train.Trainer, examples: Sequence[dict]) -> float:
    """Mean loss per target over `examples` in eval mode (no dropout)."""
    was = trainer.model.training
    trainer.model.eval()
    total, count = 0.0, 0
    try:
        for j in range(0, len(examples), trainer.recipe.micro_batch):
            batch = trainer._to_device(
                collate(examples[j : j + trainer.recipe.micro_batch], trainer.pad_id)
            )
            with trainer.autocast():
                total += float(train.loss_sum(trainer.model, batch, trainer.task))
            count += count_targets(batch)
    finally:
        trainer.model.train(was)
    return total / count if count else float("nan")


def check_overfit(bench: Bench) -> Result:
    """One step = the whole tiny set (micro_batch x grad_accum covering it), constant lr after a
    warm-up of at most a quarter of the steps: the recipe's lr, optimizer and clipping."""
    cfg = bench.cfg["overfit"]
    n, steps, threshold = cfg["examples"], cfg["steps"], cfg["max_final_loss"]
    micro = min(bench.recipe.micro_batch, n)
    trainer = bench.trainer(
        max_steps=steps,
        micro_batch=micro,
        grad_accum=math.ceil(n / micro),
        schedule="constant",
        warmup_steps=min(bench.recipe.warmup_steps, steps // 4),
    )
    examples = trainer.examples["train"][:n]
    trainer.examples["train"] = examples
    trainer.order = DataOrder(len(examples), trainer.seed)
    details: dict[str, Any] = {
        "examples": len(examples),
        "steps": steps,
        "max_final_loss": threshold,
        "lr": bench.recipe.lr,
        "micro_batch": micro,
        "grad_accum": trainer.recipe.grad_accum,
    }
    if count_targets(collate(examples, trainer.pad_id)) == 0:
        details["losses"] = []
        return Result(False, "no target in the sample: all labels are masked", details)
    initial = _mean_loss(trainer, examples)
    losses, reached, final = [], None, initial
    for step in range(1, steps + 1):
        row = trainer.train_step()
        losses.append(row["loss"])
        if not math.isfinite(row["loss"]):
            break
        # The eval-mode loss (no dropout) on the same examples, after every step: stop as soon
        # as it is below the threshold.
        final = _mean_loss(trainer, examples)
        if final <= threshold:
            reached = step
            break
    details.update(
        {
            "initial_loss": initial,
            "final_loss": final,
            "reached_at_step": reached,
            "losses": losses,
            "grad_norm_last": row["grad_norm"],
        }
    )
    if not all(math.isfinite(v) for v in losses) or not math.isfinite(final):
        return Result(
            False,
            f"loss became non-finite at step {len(losses)} (lr {bench.recipe.lr:g} diverges)",
            details,
        )
    if final > threshold:
        trend = "rose" if final > initial else "only fell"
        return Result(
            False,
            f"loss {trend} from {initial:.3g} to {final:.3g} in {steps} steps on {n} examples "
            f"(must fall below {threshold:g}; lr {bench.recipe.lr:g})",
            details,
        )
    return Result(
        True,
        f"loss fell from {initial:.3g} to {final:.3g} (below {threshold:g}) at step {reached} "
        f"of {steps} on {n} examples",
        details,
    )


# ------------------------------------------------------------------ 5. grad_accumulation
def _reference_gradients(model, batch: dict, task: str) -> dict[str, torch.Tensor]:
    """The gradient of the mean loss of one batch, computed here (not by train.accumulate)."""
    was = model.training
    model.eval()
    try:
        model.zero_grad(set_to_none=True)
        loss = train.loss_sum(model, batch, task) / count_targets(batch)
        loss.backward()
        return {
            n: p.grad.detach().clone()
            for n, p in model.named_parameters()
            if p.requires_grad and p.grad is not None
        }
    finally:
        model.zero_grad(set_to_none=True)
        model.train(was)


def _relative_difference(a: dict, b: dict) -> float:
    if a.keys() != b.keys():
        return float("inf")
    diff = max(float((a[k] - b[k]).abs().max()) for k in a)
    scale = max(float(b[k].abs().max()) for k in b)
    return diff / scale if scale else diff


def check_grad_accumulation(bench: Bench) -> Result:
    """k = max(2, grad_accum) micro-batches of 1, 2, ..., k examples (so their target counts
    differ) vs one batch of all of them, on a float64 CPU copy of the model."""
    tolerance = bench.cfg["grad_accum_tolerance"]
    trainer = bench.trainer()
    k = max(2, bench.recipe.grad_accum)
    sizes = list(range(1, k + 1))
    pool = trainer.examples["train"]
    examples = [pool[i % len(pool)] for i in range(sum(sizes))]
    bounds = np.cumsum([0, *sizes])
    micro = [
        collate(examples[a:b], trainer.pad_id) for a, b in zip(bounds[:-1], bounds[1:], strict=True)
    ]
    whole = collate(examples, trainer.pad_id)
    counts = [count_targets(b) for b in micro]
    details: dict[str, Any] = {"micro_batches": k, "sizes": sizes, "target_counts": counts}
    if sum(counts) == 0:
        return Result(False, "no target in the batches: all labels are masked", details)
    model = copy.deepcopy(trainer.model).to("cpu", torch.float64)
    accumulated = bench.hooks.accumulated_gradients(model, micro, bench.task)
    reference = _reference_gradients(model, whole, bench.task)
    error = _relative_difference(accumulated, reference)
    # The check's power: the common shortcut (mean of per-micro-batch means) must differ.
    shortcut = train.accumulated_gradients(model, micro, bench.task, normalize=False)
    power = _relative_difference(shortcut, reference)
    details.update(
        {
            "relative_difference": error,
            "tolerance": tolerance,
            "shortcut_relative_difference": power,
            "distinct_target_counts": len(set(counts)) > 1,
        }
    )
    if not error <= tolerance:
        return Result(
            False,
            f"{k} accumulated micro-batches (targets {counts}) differ from one batch by "
            f"{error:.3g} (relative, > {tolerance:g}): the loss is not normalized by the whole "
            f"batch's target count",
            details,
        )
    return Result(
        True,
        f"{k} micro-batches (targets {counts}) equal one batch within {error:.2g} (tolerance "
        f"{tolerance:g}; the unnormalized shortcut would differ by {power:.2g})",
        details,
    )


# ------------------------------------------------------------------ 6. resume
def _weights(trainer: train.Trainer) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone().cpu() for k, v in trainer.model.state_dict().items()}


def _load_saved(folder: Path, task: str, device):
    from transformers import (
        AutoModelForCausalLM,
        AutoModelForSequenceClassification,
        AutoTokenizer,
    )

    cls = AutoModelForCausalLM if task == "causal_lm" else AutoModelForSequenceClassification
    model = cls.from_pretrained(str(folder), dtype=torch.float32).to(device).eval()
    return model, AutoTokenizer.from_pretrained(str(folder))


def _scores(frame) -> np.ndarray:
    return frame[[c for c in frame.columns if c.startswith("score_")]].to_numpy()


@torch.no_grad()
def _generate(trainer: train.Trainer, model, texts: Sequence[str]) -> list[list[int]]:
    """Greedy continuations of the prompts (text + separator), as long as the longest label."""
    new_tokens = max(len(t) for t in trainer.fmt.targets)
    out = []
    for ids in trainer.fmt.text_ids(trainer.tokenizer, texts):
        prompt = torch.tensor([ids + trainer.fmt.sep_ids], device=trainer.device)
        with trainer.autocast():
            generated = model.generate(
                prompt,
                attention_mask=torch.ones_like(prompt),
                max_new_tokens=new_tokens,
                do_sample=False,
                pad_token_id=trainer.pad_id,
            )
        out.append(generated[0, prompt.shape[1] :].tolist())
    return out


def check_resume(bench: Bench) -> Result:
    cfg = bench.cfg["resume"]
    before, after = cfg["steps_before"], cfg["steps_after"]
    folder = bench.scratch("resume")
    ckpt_dir = folder / "checkpoints"
    details: dict[str, Any] = {"steps_before": before, "steps_after": after}

    a = bench.trainer(work_dir=ckpt_dir)
    for _ in range(before):
        a.train_step()
    expected_keys = sorted(a.state_dict())
    path = bench.hooks.save_checkpoint(ckpt_dir, a.state_dict(), bench.recipe.keep_checkpoints)
    for _ in range(after):
        a.train_step()
    uninterrupted = _weights(a)

    saved = torch.load(path, map_location="cpu", weights_only=True)
    missing = [k for k in expected_keys if k not in saved]
    details.update({"checkpoint": path.name, "checkpoint_keys": sorted(saved), "missing": missing})
    if missing:
        return Result(
            False,
            f"the checkpoint at step {before} lacks {', '.join(missing)}: a resumed run could "
            f"not continue where it stopped",
            details,
        )
    b = bench.trainer(work_dir=ckpt_dir)
    resumed_at = b.resume()
    details["resumed_from"] = resumed_at
    if resumed_at != before:
        return Result(False, f"no usable checkpoint of step {before} was found", details)
    for _ in range(after):
        b.train_step()
    resumed = _weights(b)
    differing = [k for k in uninterrupted if not torch.equal(uninterrupted[k], resumed[k])]
    max_diff = max(
        (float((uninterrupted[k].double() - resumed[k].double()).abs().max()) for k in differing),
        default=0.0,
    )
    details.update({"differing_tensors": len(differing), "max_abs_difference": max_diff})
    if differing:
        return Result(
            False,
            f"resumed at step {before}, {len(differing)} of {len(uninterrupted)} weight tensors "
            f"differ from the uninterrupted run after {after} more steps (max |diff| "
            f"{max_diff:.3g}): the checkpoint does not hold the whole training state",
            details,
        )

    # reload -> predict (-> generate): the saved model folder against the model in memory.
    a.finish()
    model_dir = folder / "model"
    models.save_model(a.model, a.tokenizer, model_dir)
    split = "validation" if len(bench.sample.validation) else "train"
    texts = getattr(bench.sample, split).texts
    in_memory_model = a.model
    expected = a.predictions(split)
    generated = _generate(a, in_memory_model, texts[:2]) if bench.task == "causal_lm" else None
    reloaded, reloaded_tok = _load_saved(model_dir, bench.task, a.device)
    same_tokens = reloaded_tok(list(texts))["input_ids"] == a.tokenizer(list(texts))["input_ids"]
    a.model = reloaded
    got = a.predictions(split)
    score_diff = float(np.abs(_scores(got) - _scores(expected)).max()) if len(got) else 0.0
    same_predictions = bool(
        (got["prediction"] == expected["prediction"]).all()
        and np.array_equal(_scores(got), _scores(expected))
    )
    same_generation = None
    if generated is not None:
        same_generation = _generate(a, reloaded, texts[:2]) == generated
    details.update(
        {
            "model_folder_bytes": _tree_bytes(model_dir),
            "prediction_split": split,
            "predicted_examples": len(got),
            "tokenizer_reloads_identically": same_tokens,
            "predictions_identical": same_predictions,
            "max_score_difference": score_diff,
            "generation_identical": same_generation,
        }
    )
    remove_tree(folder)
    problems = []
    if not same_tokens:
        problems.append("the reloaded tokenizer encodes differently")
    if not same_predictions:
        problems.append(
            f"the reloaded model's predictions differ (max |score diff| {score_diff:.3g})"
        )
    if same_generation is False:
        problems.append("the reloaded model generates other tokens")
    if problems:
        return Result(False, "; ".join(problems), details)
    what = "predictions" + (" and generations" if generated is not None else "")
    return Result(
        True,
        f"resumed at step {before}: weights bitwise equal after {after} more steps; the saved "
        f"model reloads with identical {what} on {len(got)} examples",
        details,
    )


# ------------------------------------------------------------------ 7. throughput
def evaluations_per_run(max_steps: int, eval_every: int) -> int:
    """How often train.Trainer.run evaluates: every eval_every steps, and at the last step."""
    return max_steps // eval_every + (1 if max_steps % eval_every else 0)


def check_throughput(bench: Bench) -> Result:
    cfg, recipe = bench.cfg["throughput"], bench.recipe
    warmup, window = cfg["warmup_steps"], cfg["window_steps"]
    trainer = bench.trainer()
    first = []
    for _ in range(warmup):
        first.append(trainer.train_step())
    _sync(trainer.device)
    t0 = time.perf_counter()
    rows = [trainer.train_step() for _ in range(window)]
    _sync(trainer.device)
    elapsed = time.perf_counter() - t0
    steps_per_s = window / elapsed
    samples_per_s = window * recipe.batch_examples / elapsed
    tokens_per_s = sum(r["tokens"] for r in rows) / elapsed

    # Evaluation and checkpoint costs, measured here too: a run pays for them as well.
    split = "validation" if len(bench.sample.validation) else "train"
    n_eval = len(getattr(bench.sample, split))
    t0 = time.perf_counter()
    trainer.evaluate(split)
    _sync(trainer.device)
    eval_s_per_example = (time.perf_counter() - t0) / max(n_eval, 1)
    folder = bench.scratch("throughput")
    t0 = time.perf_counter()
    checkpoint.save_checkpoint(folder, trainer.state_dict(), 1)
    save_s = time.perf_counter() - t0
    remove_tree(folder)

    full_val, full_test = len(bench.full.validation), len(bench.full.test)
    train_s = recipe.max_steps / steps_per_s
    eval_s = (
        evaluations_per_run(recipe.max_steps, recipe.eval_every) * full_val * eval_s_per_example
    )
    predict_s = (full_val + full_test) * eval_s_per_example
    n_saves = recipe.max_steps // recipe.checkpoint_every + (
        1 if recipe.max_steps % recipe.checkpoint_every else 0
    )
    run_s = train_s + eval_s + predict_s + n_saves * save_s
    plan_s = run_s * bench.plan_size
    first_rate = (
        warmup * recipe.batch_examples / sum(r["seconds"] for r in first) if first else None
    )
    details = {
        "device": trainer.device.type,
        "warmup_steps": warmup,
        "window_steps": window,
        "window_seconds": elapsed,
        "steps_per_s": steps_per_s,
        "samples_per_s": samples_per_s,
        "tokens_per_s": tokens_per_s,
        "tokens": "unpadded tokens of the examples",
        "warmup_samples_per_s": first_rate,
        # The spread shows a noisy window (a shared machine, thermal limits) at a glance.
        "step_seconds": {
            "min": min(r["seconds"] for r in rows),
            "median": float(np.median([r["seconds"] for r in rows])),
            "max": max(r["seconds"] for r in rows),
        },
        "eval_seconds_per_example": eval_s_per_example,
        "checkpoint_save_seconds": save_s,
        "per_run_seconds": {
            "train": train_s,
            "evaluation": eval_s,
            "predictions": predict_s,
            "checkpoints": n_saves * save_s,
            "total": run_s,
        },
        "plan_size": bench.plan_size,
        "plan_seconds": plan_s,
        "plan_hours": plan_s / 3600,
        "max_hours": bench.cfg["max_hours"],
        "assumes": "every run of the plan costs what the baseline costs, one run at a time on "
        "this device",
    }
    summary = (
        f"{samples_per_s:.1f} samples/s, {tokens_per_s:.0f} tokens/s sustained over "
        f"{window} steps after {warmup}; a run ~{_fmt_seconds(run_s)}, the plan of "
        f"{bench.plan_size} runs ~{_fmt_seconds(plan_s)}"
    )
    max_hours = bench.cfg["max_hours"]
    if max_hours is not None and plan_s / 3600 > max_hours:
        return Result(False, f"{summary}: over max_hours {max_hours:g}", details)
    return Result(True, summary, details)


# ------------------------------------------------------------------ 8. disk
def check_disk(bench: Bench) -> Result:
    """Measured sizes of one run's artifacts (on the sample's model), projected to the plan."""
    recipe = bench.recipe
    folder = bench.scratch("disk")
    trainer = bench.trainer(work_dir=folder / "checkpoints")
    row = trainer.train_step()  # the optimizer state exists from the first step on
    ckpt = checkpoint.save_checkpoint(folder / "checkpoints", trainer.state_dict(), 1)
    checkpoint_bytes = ckpt.stat().st_size
    trainer.finish()
    models.save_model(trainer.model, trainer.tokenizer, folder / "model")
    model_bytes = _tree_bytes(folder / "model")

    split = "validation" if len(bench.sample.validation) else "train"
    predictions = trainer.predictions(split)
    train._write_parquet(predictions, folder / "predictions.parquet")
    per_prediction = (folder / "predictions.parquet").stat().st_size / max(len(predictions), 1)
    prediction_bytes = per_prediction * (len(bench.full.validation) + len(bench.full.test))
    # The metrics table as the run writes it: one row per step, one per evaluation.
    n_rows = recipe.max_steps + evaluations_per_run(recipe.max_steps, recipe.eval_every)
    trainer.history = [{**row, "step": s + 1} for s in range(n_rows)]
    train._write_parquet(trainer.metrics_frame(), folder / "metrics.parquet")
    manifest = train.run_manifest(trainer, {}, devices.device_info(trainer.device), 0.0)
    log_bytes = (folder / "metrics.parquet").stat().st_size + len(
        json.dumps(manifest, indent=2, sort_keys=True).encode()
    )
    remove_tree(folder)

    per_run = {
        "checkpoints": checkpoint_bytes * recipe.keep_checkpoints,
        "model": model_bytes,
        "logs": log_bytes,
        "predictions": int(prediction_bytes),
    }
    per_run_total = sum(per_run.values())
    need = int(per_run_total * bench.plan_size * (1 + bench.cfg["disk_margin"]))
    free = int(bench.hooks.free_bytes(bench.work_dir))
    details = {
        "checkpoint_bytes": checkpoint_bytes,
        "keep_checkpoints": recipe.keep_checkpoints,
        "per_run_bytes": per_run,
        "per_run_total_bytes": per_run_total,
        "plan_size": bench.plan_size,
        "disk_margin": bench.cfg["disk_margin"],
        "need_bytes": need,
        "free_bytes": free,
        "path": str(bench.work_dir),
        "assumes": "every run keeps keep_checkpoints checkpoints until it ends; outputs are "
        "materialized by hard link (a copy would count them twice)",
    }
    summary = (
        f"the plan needs {_fmt_bytes(need)} ({bench.plan_size} runs x "
        f"{_fmt_bytes(per_run_total)} + {100 * bench.cfg['disk_margin']:.0f}%), "
        f"{_fmt_bytes(free)} free"
    )
    if need > free:
        return Result(False, f"{summary}: does not fit", details)
    return Result(True, summary, details)


CHECK_FUNCTIONS: dict[str, Callable[[Bench], Result]] = {
    "environment": check_environment,
    "memory": check_memory,
    "tokenization": check_tokenization,
    "overfit": check_overfit,
    "grad_accumulation": check_grad_accumulation,
    "resume": check_resume,
    "throughput": check_throughput,
    "disk": check_disk,
}


# ------------------------------------------------------------------ the report
def _jsonable(value: Any) -> Any:
    """Plain JSON types; non-finite floats become the strings "nan", "inf", "-inf"."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, bool | str) or value is None:
        return value
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, float | np.floating):
        v = float(value)
        return v if math.isfinite(v) else str(v)
    if isinstance(value, Path):
        return str(value)
    return str(value)


def _run_one(name: str, bench: Bench, blocking: bool) -> dict:
    t0 = time.perf_counter()
    try:
        result = CHECK_FUNCTIONS[name](bench)
    except CampaignError as e:
        result = Result(False, f"{COULD_NOT_RUN}{e}", {"error": str(e)})
    except Exception as e:  # a crash inside a check is a failed check with its traceback
        result = Result(
            False,
            f"{COULD_NOT_RUN}{type(e).__name__}: {e}",
            {"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc(limit=8)},
        )
    summary = " ".join(result.summary.split())
    return {
        "passed": bool(result.passed),
        "blocking": blocking,
        "summary": summary,
        "details": _jsonable(result.details),
        "seconds": round(time.perf_counter() - t0, 3),
    }


def run_preflight(
    spec: dict,
    data: dict[str, list[Path]],
    cfg: dict,
    work_dir: Path,
    root: Path,
    plan_size: int,
    *,
    checks: Sequence[str] = CHECKS,
    hooks: Hooks | None = None,
    stream=None,
) -> dict:
    """Run the checks on the baseline run `spec` ({model, train, seed}) and its split files.

    data: {"train", "validation", "test": [Parquet paths]} (and "base_model" for a pretrained
    source). Returns {check: {passed, blocking, summary, details, seconds}, ..., "passed"}:
    "passed" is False when a blocking check failed. `checks` runs a subset (in CHECKS order).
    """
    check_config(cfg)
    unknown = [c for c in checks if c not in CHECKS]
    if unknown:
        raise CampaignError(f"preflight: unknown check {unknown[0]!r} (known: {', '.join(CHECKS)})")
    if not isinstance(plan_size, int) or plan_size < 1:
        raise CampaignError(f"plan_size: expected a whole number >= 1, got {plan_size!r}")
    base = data.get("base_model")
    bench = Bench(
        spec,
        train.read_data(data),
        cfg,
        work_dir,
        root,
        plan_size,
        Path(base[0]) if base else None,
        hooks or Hooks(),
        io.StringIO() if stream is None else stream,
    )
    report: dict[str, Any] = {}
    try:
        for name in CHECKS:
            if name in checks:
                report[name] = _run_one(name, bench, name in cfg["blocking"])
    finally:
        with contextlib.suppress(OSError):
            remove_tree(Path(work_dir) / "preflight")
    report["passed"] = not failed_blocking(report)
    return report


def failed_blocking(report: dict) -> list[str]:
    return [n for n in CHECKS if n in report and report[n]["blocking"] and not report[n]["passed"]]


def check_report(report: dict) -> None:
    """Raise CampaignError (one line: each failed blocking check and its summary), if any.

    Checks that could not run for the reason another one failed (a Trainer that cannot be built
    fails them all) are named once, after that reason.
    """
    failed = failed_blocking(report)
    if not failed:
        return
    groups: dict[str, list[str]] = {}
    for name in failed:
        reason = report[name]["summary"].removeprefix(COULD_NOT_RUN)
        groups.setdefault(reason, []).append(name)
    parts = []
    for names in groups.values():
        first, rest = names[0], names[1:]
        also = f" (so {', '.join(rest)} could not run)" if rest else ""
        summary = report[first]["summary"]
        parts.append(f"{first}: {summary}{also}")
    raise CampaignError(f"preflight failed ({len(failed)} blocking): {'; '.join(parts)}")


# ------------------------------------------------------------------ readable text
def _text_environment(d: dict) -> list[str]:
    from campaign import envreport

    lines = [f"precision {d.get('precision')}: smoke test {d.get('precision_smoke')}"]
    lines += [f"problem: {p}" for p in d.get("problems", [])]
    if isinstance(d.get("report"), dict):
        lines += envreport.format_report(d["report"]).splitlines()
    return lines


def _text_memory(d: dict) -> list[str]:
    lines = []
    if d.get("comparison"):
        lines += [f"on {d['measured']['device']} (one training step, padded to max_length):"]
        lines += memory.format_comparison(d["comparison"]).splitlines()
        for phase, p in d["measured"]["phases"].items():
            if "peak_allocated" in p:  # CUDA: what tensors held vs what the allocator kept
                lines.append(
                    f"{phase}: peak allocated {_fmt_bytes(p['peak_allocated'])}, reserved "
                    f"{_fmt_bytes(p['peak_reserved'])}"
                )
            else:
                grew = p["peak_over_before"]
                sign = "+" if grew >= 0 else "-"
                lines.append(
                    f"{phase}: process RSS peak {_fmt_bytes(p['rss_peak'])} "
                    f"({sign}{_fmt_bytes(abs(grew))} over its start)"
                )
    if d.get("kv_cache"):
        kv = d["kv_cache"]
        lines.append(
            f"kv cache: estimated {_fmt_bytes(kv['estimated'])}, measured "
            f"{_fmt_bytes(kv['measured'])}"
        )
    if d.get("fit_table"):
        lines.append("fit on the target cards (CUDA estimate, configured vocabulary):")
        lines += memory.format_fit_table(d["fit_table"]).splitlines()
    return lines


def _text_tokenization(d: dict) -> list[str]:
    lines = []
    for e in d.get("inspected", []):
        loss = set(e["loss_positions"])
        shown = "|".join(f"[[{t}]]" if i in loss else t for i, t in enumerate(e["tokens"]))
        cut = f", text cut from {e['text_tokens']} tokens" if e["truncated"] else ""
        lines.append(f"{e['id']} (label {e['label']}): {e['n_tokens']} tokens{cut}")
        lines.append(f"  tokens: {shown}")
        if "loss_text" in e:
            lines.append(
                f"  loss on {len(loss)} tokens {e['loss_text']!r}; "
                f"{e['masked_prompt_tokens']} prompt positions masked"
            )
        else:
            lines.append(f"  loss on {e['loss_on']}")
    if lines:
        lines.insert(0, "[[token]] = its position carries loss")
    return lines


def _text_overfit(d: dict) -> list[str]:
    losses = d.get("losses") or []
    if not losses:
        return []
    shown = ", ".join(f"{v:.3g}" for v in losses[:: max(1, len(losses) // 10)])
    return [f"train loss every ~{max(1, len(losses) // 10)} steps: {shown}"]


def _text_throughput(d: dict) -> list[str]:
    if "per_run_seconds" not in d:
        return []
    r = d["per_run_seconds"]
    return [
        f"first {d['warmup_steps']} steps: "
        + (f"{d['warmup_samples_per_s']:.1f} samples/s" if d["warmup_samples_per_s"] else "-"),
        "window step time min / median / max: "
        + " / ".join(f"{1000 * d['step_seconds'][k]:.1f} ms" for k in ("min", "median", "max")),
        f"per run: train {_fmt_seconds(r['train'])}, evaluation {_fmt_seconds(r['evaluation'])}, "
        f"predictions {_fmt_seconds(r['predictions'])}, checkpoints "
        f"{_fmt_seconds(r['checkpoints'])}",
    ]


def _text_disk(d: dict) -> list[str]:
    if "per_run_bytes" not in d:
        return []
    return ["per run: " + ", ".join(f"{k} {_fmt_bytes(v)}" for k, v in d["per_run_bytes"].items())]


_TEXT: dict[str, Callable[[dict], list[str]]] = {
    "environment": _text_environment,
    "memory": _text_memory,
    "tokenization": _text_tokenization,
    "overfit": _text_overfit,
    "throughput": _text_throughput,
    "disk": _text_disk,
}


def format_report(report: dict) -> str:
    """The report as text: a verdict, one line per check, then each check's detail."""
    names = [n for n in CHECKS if n in report]
    failed = failed_blocking(report)
    verdict = "PASSED" if not failed else f"FAILED ({', '.join(failed)})"
    width = max((len(n) for n in names), default=0)
    lines = [f"preflight: {verdict}"]
    for n in names:
        c = report[n]
        mark = "pass" if c["passed"] else ("FAIL" if c["blocking"] else "fail")
        lines.append(f"  {mark}  {n.ljust(width)}  {c['summary']}")
    for n in names:
        details = report[n]["details"]
        body = _TEXT.get(n, lambda d: [])(details) if "error" not in details else []
        body += details.get("traceback", "").rstrip().splitlines()
        if body:
            lines += ["", f"== {n} =="] + body
    return "\n".join(lines)


# ------------------------------------------------------------------ stage
def stage(ctx) -> None:
    """Stage entry (campaign.runner): ctx.spec = {run, preflight, plan_size}; inputs train,
    validation, test (and base_model); outputs report (JSON) and report_text.

    Both outputs are written and the text printed before a failed blocking check raises, so the
    stage log keeps the report of a failed preflight.
    """
    spec = ctx.spec
    lease = devices.lease_from_env()  # a card by lock, like a training job; before CUDA starts
    try:
        report = run_preflight(
            spec["run"],
            ctx.inputs,
            spec["preflight"],
            ctx.work_dir,
            ctx.root,
            spec["plan_size"],
            stream=sys.stderr,
        )
    finally:
        lease.release()
    text = format_report(report)
    atomic_write_text(ctx.outputs["report"], json.dumps(report, indent=2, sort_keys=True) + "\n")
    atomic_write_text(ctx.outputs["report_text"], text + "\n")
    print(text, flush=True)
    check_report(report)

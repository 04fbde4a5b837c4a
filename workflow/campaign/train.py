"""The training stage: fine-tune one run's model on the train split, resumably, and write the
model, its metrics, validation/test predictions and a run manifest.

Inputs (ctx.inputs): train, validation, test (Parquet: id, text, label, ...), and base_model
(the pretrained folder, when model.source is a path) so that its content is part of the key.
Outputs (ctx.outputs): model (folder), metrics (Parquet), predictions_validation,
predictions_test (Parquet), run_manifest (JSON).

Determinism: for a given spec and data on CPU, `model` and both `predictions` files are the same
bytes on every run, resumed or not; `metrics` and `run_manifest` also record timings.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.metadata
import json
import math
import platform
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from campaign import checkpoint, devices, models
from campaign.batches import (
    IGNORE,
    CausalFormat,
    DataOrder,
    Split,
    collate,
    count_targets,
    encode_causal,
    encode_classification,
    micro_batches,
    read_split,
)
from campaign.errors import CampaignError
from campaign.hashing import hash_file, hash_tree, hash_value

PRECISIONS = ("fp32", "bf16", "fp16")
SCHEDULES = ("constant", "linear", "cosine")
CODE_MODULES = ("train", "models", "batches", "checkpoint", "devices")
EVAL_SPLITS = ("validation", "test")
METRIC_COLUMNS = (
    "step",
    "split",
    "loss",
    "accuracy",
    "lr",
    "grad_norm",
    "targets",
    "tokens",
    "seconds",
    "tokens_per_s",
    "samples_per_s",
)


# ------------------------------------------------------------------ recipe
@dataclass(frozen=True)
class Recipe:
    """The `train` section of a run spec, checked."""

    lr: float
    weight_decay: float
    max_steps: int
    micro_batch: int
    grad_accum: int
    max_length: int
    precision: str
    schedule: str
    warmup_steps: int
    max_grad_norm: float | None
    eval_every: int
    checkpoint_every: int
    keep_checkpoints: int
    lora: dict | None

    @classmethod
    def from_spec(cls, train: dict) -> Recipe:
        fields = cls.__dataclass_fields__
        missing = [k for k in fields if k not in train]
        if missing:
            raise CampaignError(f"train.{missing[0]}: missing (the training stage reads it)")
        unknown = sorted(set(train) - set(fields))
        if unknown:
            raise CampaignError(f"train.{unknown[0]}: not a key the training stage knows")
        recipe = cls(**{k: train[k] for k in fields})
        recipe.check()
        return recipe

    def check(self) -> None:
        positive = ("max_steps", "micro_batch", "grad_accum", "eval_every", "checkpoint_every")
        for key in (*positive, "keep_checkpoints"):
            if not isinstance(getattr(self, key), int) or getattr(self, key) < 1:
                raise CampaignError(f"train.{key}: expected a whole number >= 1")
        if not 0 < self.lr <= 1:
            raise CampaignError(f"train.lr: {self.lr} is not in (0, 1]")
        if self.precision not in PRECISIONS:
            raise CampaignError(
                f"train.precision: {self.precision!r} is not one of fp32, bf16, fp16"
            )
        if self.schedule not in SCHEDULES:
            raise CampaignError(f"train.schedule: {self.schedule!r} is not one of {SCHEDULES}")
        if not 0 <= self.warmup_steps <= self.max_steps:
            raise CampaignError(
                f"train.warmup_steps: {self.warmup_steps} must be >= 0 and at most max_steps"
            )
        if self.max_grad_norm is not None and not self.max_grad_norm > 0:
            raise CampaignError("train.max_grad_norm: expected a number > 0, or null for none")
        if self.max_length < 2:
            raise CampaignError("train.max_length: expected at least 2 tokens")
        if self.lora is not None:
            models.check_lora(self.lora)

    @property
    def batch_examples(self) -> int:
        return self.micro_batch * self.grad_accum


def lr_factor(step: int, schedule: str, warmup_steps: int, max_steps: int) -> float:
    """Multiplier of the peak lr for optimizer step `step` (0-based).

    Linear warm-up over the first warmup_steps steps ((s+1)/(w+1), so no step is wasted at lr
    0), then constant, linear decay or cosine decay towards 0 at max_steps.
    """
    if step < warmup_steps:
        return (step + 1) / (warmup_steps + 1)
    progress = (step - warmup_steps) / max(1, max_steps - warmup_steps)
    if schedule == "constant":
        return 1.0
    if schedule == "linear":
        return 1.0 - progress
    return 0.5 * (1.0 + math.cos(math.pi * progress))


# ------------------------------------------------------------------ loss and gradients
def logits_of(model, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """(B, C) class logits or (B, L, V) token logits of one batch."""
    # use_cache=False: a decoder would otherwise build a KV cache it never reads (memory, time).
    return model(
        input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], use_cache=False
    ).logits


def loss_sum(model, batch: dict[str, torch.Tensor], task: str) -> torch.Tensor:
    """Sum (not mean) of per-target cross-entropies of one micro-batch, as a scalar tensor."""
    logits = logits_of(model, batch)
    if logits.dtype in (torch.float16, torch.bfloat16):
        logits = logits.float()  # the loss in fp32 even under autocast
    labels = batch["labels"]
    if task == "sequence_classification":
        return F.cross_entropy(logits, labels, ignore_index=IGNORE, reduction="sum")
    # Position t predicts token t+1.
    return F.cross_entropy(
        logits[:, :-1].reshape(-1, logits.shape[-1]),
        labels[:, 1:].reshape(-1),
        ignore_index=IGNORE,
        reduction="sum",
    )


def accumulate(
    model,
    batches: Sequence[dict[str, torch.Tensor]],
    task: str,
    normalize: bool = True,
    autocast: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext,
    scale: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> tuple[torch.Tensor, int]:
    """Backward over k micro-batches into .grad; returns (detached loss sum, target count).

    normalize=True: every micro-batch's loss sum is divided by the target count of the WHOLE
    accumulated batch, so the gradient equals that of one batch holding all k micro-batches.
    normalize=False: the common shortcut, mean of per-micro-batch means (biased when the
    micro-batches hold different numbers of targets) — kept to show the difference.
    """
    counts = [count_targets(b) for b in batches]
    total = sum(counts)
    if total == 0:
        raise CampaignError("a training step has no target tokens (all labels are masked)")
    loss_total = torch.zeros((), dtype=torch.float64)
    for batch, count in zip(batches, counts, strict=True):
        with autocast():
            s = loss_sum(model, batch, task)
        if normalize:
            loss = s / total
        else:
            loss = s / max(count, 1) / len(batches)
        (scale(loss) if scale is not None else loss).backward()
        loss_total += s.detach().to("cpu", torch.float64)
    return loss_total, total


def accumulated_gradients(
    model, batches: Sequence[dict[str, torch.Tensor]], task: str, normalize: bool = True
) -> dict[str, torch.Tensor]:
    """Gradients {parameter name: grad} after accumulating `batches`, for equivalence checks.

    Dropout is switched off (eval mode) for the call so that k micro-batches and one batch of
    all of them are the same computation; the model's mode and .grad are restored after.
    """
    was_training = model.training
    saved = {n: p.grad for n, p in model.named_parameters()}
    model.eval()
    try:
        for p in model.parameters():
            p.grad = None
        accumulate(model, batches, task, normalize=normalize)
        return {
            n: p.grad.detach().clone()
            for n, p in model.named_parameters()
            if p.requires_grad and p.grad is not None
        }
    finally:
        for n, p in model.named_parameters():
            p.grad = saved[n]
        model.train(was_training)


def _param_groups(model, weight_decay: float) -> list[dict]:
    """Decay matrices and embeddings; not biases or LayerNorm weights (nanoGPT's split)."""
    decay, no_decay = [], []
    for p in model.parameters():
        if p.requires_grad:
            (decay if p.dim() >= 2 else no_decay).append(p)
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]


# ------------------------------------------------------------------ the trainer
@dataclass
class Data:
    train: Split
    validation: Split
    test: Split


class Trainer:
    """One run: model, optimizer and data order, a step at a time, checkpointed in work_dir."""

    def __init__(
        self,
        spec: dict,
        data: Data,
        work_dir: Path,
        root: Path = Path("."),
        base_model: Path | None = None,
        device=None,
        stream=None,
    ):
        self.spec = spec
        self.model_spec = spec["model"]
        self.task = self.model_spec["task"]
        self.recipe = Recipe.from_spec(spec["train"])
        models.check_model_spec(self.model_spec)
        self.seed = int(spec["seed"])
        self.work_dir = Path(work_dir)
        self.stream = sys.stderr if stream is None else stream
        self.device = device if device is not None else devices.select_device()
        devices.check_precision(self.device, self.recipe.precision)
        self.data = data
        self.spec_hash = hash_value(spec)
        self.data_hash = hash_value([data.train.ids, data.train.texts, data.train.labels])

        random.seed(self.seed)
        np.random.seed(self.seed % 2**32)
        source = models.source_path(self.model_spec, root)
        if source is not None and base_model is not None:
            source = Path(base_model)  # the rule's input: its content is part of the key
        self.tokenizer = models.make_tokenizer(self.model_spec, data.train.texts, source)
        self.labels = models.label_names(data.train.labels)
        self.label_ids = {name: i for i, name in enumerate(self.labels)}
        self.fmt = None
        if self.task == "causal_lm":
            self.fmt = CausalFormat.build(self.tokenizer, self.labels, self.recipe.max_length)
        self.examples = {
            name: self._encode(getattr(data, name)) for name in ("train", *EVAL_SPLITS)
        }
        self.pad_id = self.tokenizer.pad_token_id

        model = models.build_model(self.model_spec, self.tokenizer, self.labels, self.seed, source)
        self._check_length(model.config)
        if self.recipe.lora is not None:
            model = models.apply_lora(model, self.recipe.lora, self.task)
        self.model = model.to(self.device)
        self.trainable = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(
            _param_groups(self.model, self.recipe.weight_decay), lr=self.recipe.lr
        )
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer,
            functools.partial(
                lr_factor,
                schedule=self.recipe.schedule,
                warmup_steps=self.recipe.warmup_steps,
                max_steps=self.recipe.max_steps,
            ),
        )
        self.scaler = torch.amp.GradScaler(
            self.device.type, enabled=self.recipe.precision == "fp16"
        )
        self.autocast = functools.partial(devices.autocast, self.device, self.recipe.precision)
        self.order = DataOrder(len(self.examples["train"]), self.seed)
        self.step = 0
        self.history: list[dict] = []
        self.train_seconds = 0.0
        self.resumed_from: int | None = None

    # -------------------------------------------------------------- data
    def _check_length(self, config) -> None:
        limit = getattr(config, "max_position_embeddings", None)
        if limit is not None and self.recipe.max_length > limit:
            where = (
                "model.config.max_position_embeddings"
                if self.model_spec["source"] == "from_config"
                else f"the model's max_position_embeddings ({self.model_spec['source']})"
            )
            raise CampaignError(
                f"train.max_length: {self.recipe.max_length} exceeds {where} ({limit})"
            )

    def _encode(self, split: Split) -> list[dict]:
        if len(split) == 0:
            return []
        if self.task == "sequence_classification":
            return encode_classification(
                self.tokenizer, split.texts, split.labels, self.label_ids, self.recipe.max_length
            )
        return encode_causal(self.tokenizer, split.texts, split.labels, self.label_ids, self.fmt)

    def _to_device(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {k: v.to(self.device, non_blocking=True) for k, v in batch.items()}

    # -------------------------------------------------------------- state
    def state_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "spec_hash": self.spec_hash,
            "data_hash": self.data_hash,
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "scaler": self.scaler.state_dict(),
            "rng": checkpoint.rng_state(),
            "data_order": self.order.state_dict(),
            "history": self.history,
            "train_seconds": self.train_seconds,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.scaler.load_state_dict(state["scaler"])
        self.order.load_state_dict(state["data_order"])
        checkpoint.set_rng_state(state["rng"])
        self.step = int(state["step"])
        self.history = list(state["history"])
        self.train_seconds = float(state["train_seconds"])

    def resume(self) -> int | None:
        """Load the newest good checkpoint from work_dir; returns its step (None: fresh start)."""
        state = checkpoint.load_latest(
            self.work_dir, {"spec_hash": self.spec_hash, "data_hash": self.data_hash}
        )
        if state is None:
            return None
        self.load_state_dict(state)
        self.resumed_from = self.step
        print(f"train: resumed from step {self.step}", file=self.stream, flush=True)
        return self.step

    def save(self) -> Path:
        return checkpoint.save_checkpoint(
            self.work_dir, self.state_dict(), self.recipe.keep_checkpoints
        )

    # -------------------------------------------------------------- steps
    def train_step(self) -> dict:
        """One optimizer step over micro_batch × grad_accum examples; returns its metrics row."""
        t0 = time.perf_counter()
        r = self.recipe
        indices = self.order.take(r.batch_examples)
        batches = [
            self._to_device(b)
            for b in micro_batches(self.examples["train"], indices, r.micro_batch, self.pad_id)
        ]
        tokens = sum(len(self.examples["train"][i]["input_ids"]) for i in indices)
        lr = self.scheduler.get_last_lr()[0]
        if not self.model.training:
            self.model.train()
        scale = self.scaler.scale if self.scaler.is_enabled() else None
        loss_total, targets = accumulate(
            self.model, batches, self.task, autocast=self.autocast, scale=scale
        )
        if self.scaler.is_enabled():
            self.scaler.unscale_(self.optimizer)
        if r.max_grad_norm is not None:
            grad_norm = torch.nn.utils.clip_grad_norm_(self.trainable, r.max_grad_norm)
        else:
            grad_norm = torch.nn.utils.get_total_norm(
                [p.grad for p in self.trainable if p.grad is not None]
            )
        if self.scaler.is_enabled():
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.step += 1
        loss = float(loss_total) / targets
        seconds = time.perf_counter() - t0
        self.train_seconds += seconds
        return {
            "step": self.step,
            "split": "train",
            "loss": loss,
            "accuracy": None,
            "lr": lr,
            "grad_norm": float(grad_norm),
            "targets": targets,
            "tokens": tokens,
            "seconds": seconds,
            "tokens_per_s": tokens / seconds,
            "samples_per_s": len(indices) / seconds,
        }

    def run(self, stop_after: int | None = None, after_step: Callable[[int], None] | None = None):
        """Train up to max_steps (or `stop_after` more steps), evaluating and checkpointing.

        after_step(step) is called after each step's checkpoint, if any (tests use it to stop a
        job at a known point).
        """
        r = self.recipe
        progress = devices.Progress(r.max_steps, initial=self.step, stream=self.stream)
        done = 0
        try:
            while self.step < r.max_steps and (stop_after is None or done < stop_after):
                row = self.train_step()
                self.history.append(row)
                done += 1
                last = self.step == r.max_steps
                fields = {"loss": row["loss"], "lr": row["lr"]}
                if self.step % r.eval_every == 0 or last:
                    t0 = time.perf_counter()
                    result = self.evaluate("validation")
                    if result is not None:
                        loss, accuracy, _ = result
                        seconds = time.perf_counter() - t0
                        n = len(self.examples["validation"])
                        self.history.append(
                            {
                                **dict.fromkeys(METRIC_COLUMNS),
                                "step": self.step,
                                "split": "validation",
                                "loss": loss,
                                "accuracy": accuracy,
                                "seconds": seconds,
                                "samples_per_s": n / seconds,
                            }
                        )
                        fields["val_acc"] = accuracy
                if self.step % r.checkpoint_every == 0 or last:
                    self.save()
                progress.update(self.step, **fields)
                if after_step is not None:
                    after_step(self.step)
        finally:
            progress.close()

    # -------------------------------------------------------------- evaluation
    @torch.no_grad()
    def scores(self, split: str) -> tuple[np.ndarray, float, int]:
        """Class probabilities (n, n_labels) for a split, with the summed loss and target count.

        causal_lm: every label's response is scored after the prompt; probabilities are the
        softmax of the labels' total log-likelihoods, the loss is that of the true response.
        """
        examples = self.examples[split]
        self.model.eval()
        if self.task == "sequence_classification":
            return self._classifier_scores(examples)
        return self._causal_scores(split)

    def _classifier_scores(self, examples: list[dict]) -> tuple[np.ndarray, float, int]:
        probs, loss, count = [], 0.0, 0
        size = self.recipe.micro_batch
        for j in range(0, len(examples), size):
            batch = self._to_device(collate(examples[j : j + size], self.pad_id))
            with self.autocast():
                logits = logits_of(self.model, batch).float()
            loss += float(
                F.cross_entropy(logits, batch["labels"], ignore_index=IGNORE, reduction="sum")
            )
            count += count_targets(batch)
            probs.append(torch.softmax(logits, dim=-1).cpu().double().numpy())
        return np.concatenate(probs), loss, count

    def _causal_scores(self, split: str) -> tuple[np.ndarray, float, int]:
        texts = getattr(self.data, split).texts
        labels = getattr(self.data, split).labels
        text_ids = self.fmt.text_ids(self.tokenizer, texts)
        n_labels = len(self.labels)
        pairs = [self._causal_pair(ids, target) for ids in text_ids for target in self.fmt.targets]
        logliks = np.zeros(len(pairs))
        size = self.recipe.micro_batch * n_labels
        for j in range(0, len(pairs), size):
            batch = self._to_device(collate(pairs[j : j + size], self.pad_id))
            with self.autocast():
                logits = logits_of(self.model, batch).float()
            target = batch["labels"][:, 1:]
            logp = torch.log_softmax(logits[:, :-1], dim=-1)
            picked = logp.gather(-1, target.clamp(min=0).unsqueeze(-1)).squeeze(-1)
            picked = picked.masked_fill(target == IGNORE, 0.0)
            logliks[j : j + len(picked)] = picked.sum(-1).double().cpu().numpy()
        logliks = logliks.reshape(len(text_ids), n_labels)
        probs = np.exp(logliks - logliks.max(axis=1, keepdims=True))
        probs /= probs.sum(axis=1, keepdims=True)
        loss, count = 0.0, 0
        for row, label in enumerate(labels):
            lid = self.label_ids.get(label)
            if lid is not None:
                loss -= logliks[row, lid]
                count += len(self.fmt.targets[lid])
        return probs, loss, count

    def _causal_pair(self, text_ids: list[int], target: list[int]) -> dict:
        from campaign.batches import causal_example

        return causal_example(text_ids, self.fmt.sep_ids, target, self.fmt.prompt_budget)

    def evaluate(self, split: str) -> tuple[float, float, np.ndarray] | None:
        """(mean loss per target, accuracy, probabilities) on a split; None when it is empty."""
        if not self.examples[split]:
            return None
        probs, loss, count = self.scores(split)
        truth = np.array([self.label_ids.get(v, -1) for v in getattr(self.data, split).labels])
        accuracy = float((probs.argmax(axis=1) == truth).mean())
        # Plain floats: rows go into checkpoints, which load with weights_only (no numpy types).
        return (float(loss) / count if count else float("nan")), accuracy, probs

    def predictions(self, split: str):
        """DataFrame: id, label, prediction, then score_<label> (probability) per class."""
        import pandas as pd

        data = getattr(self.data, split)
        result = self.evaluate(split)
        probs = result[2] if result is not None else np.zeros((0, len(self.labels)))
        frame = pd.DataFrame(
            {
                "id": pd.Series(data.ids, dtype="string"),
                "label": pd.Series(data.labels, dtype="string"),
                "prediction": pd.Series(
                    [self.labels[i] for i in probs.argmax(axis=1)], dtype="string"
                ),
            }
        )
        for i, name in enumerate(self.labels):
            frame[f"score_{name}"] = probs[:, i].astype(np.float64)
        return frame

    def metrics_frame(self):
        import pandas as pd

        frame = pd.DataFrame([{k: row.get(k) for k in METRIC_COLUMNS} for row in self.history])
        return frame.astype(
            {
                "step": "int64",
                "split": "string",
                "loss": "float64",
                "accuracy": "float64",
                "lr": "float64",
                "grad_norm": "float64",
                "targets": "Int64",
                "tokens": "Int64",
                "seconds": "float64",
                "tokens_per_s": "float64",
                "samples_per_s": "float64",
            }
        )

    def finish(self) -> None:
        """Merge LoRA adapters into the weights: the saved and scored model is a plain one."""
        self.model = models.unwrap(self.model)


# ------------------------------------------------------------------ outputs
def _write_parquet(frame, path: Path) -> None:
    # No pandas index and fixed writer options: the same frame gives the same bytes.
    frame.to_parquet(path, index=False, engine="pyarrow", compression="zstd")


def code_version() -> dict[str, str]:
    here = Path(__file__).resolve().parent
    return {f"campaign.{m}": hash_file(here / f"{m}.py") for m in CODE_MODULES}


def library_versions(lora: bool) -> dict[str, str]:
    names = ["torch", "transformers", "tokenizers", "safetensors", "numpy", "pandas", "pyarrow"]
    if lora:
        names.append("peft")
    out = {"python": platform.python_version()}
    for name in names:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "absent"
    return out


def run_manifest(
    trainer: Trainer,
    inputs: dict[str, list[Path]],
    device: dict,
    wall_s: float,
) -> dict:
    total, trainable = models.count_parameters(trainer.model)
    validation = [r for r in trainer.history if r["split"] == "validation"]
    return {
        "spec": trainer.spec,
        "spec_hash": trainer.spec_hash,
        "inputs": {
            name: [{"path": str(p), "blake3": hash_tree(p)} for p in paths]
            for name, paths in sorted(inputs.items())
        },
        "code": code_version(),
        "versions": library_versions(trainer.recipe.lora is not None),
        "device": device,
        "labels": trainer.labels,
        "tokenizer_vocab_size": len(trainer.tokenizer),
        "parameters": {"total": total, "trainable_during_training": trainable},
        "lora": "merged into the weights" if trainer.recipe.lora is not None else None,
        "steps": trainer.step,
        "examples_seen": trainer.step * trainer.recipe.batch_examples,
        "epochs_seen": trainer.step
        * trainer.recipe.batch_examples
        / len(trainer.examples["train"]),
        "resumed_from_step": trainer.resumed_from,
        "final_validation": validation[-1] if validation else None,
        "train_seconds": round(trainer.train_seconds, 3),
        "wall_seconds": round(wall_s, 3),
    }


def read_data(inputs: dict[str, list[Path]]) -> Data:
    for name in ("train", *EVAL_SPLITS):
        if name not in inputs:
            raise CampaignError(f"training stage: missing input '{name}'")
    return Data(**{name: read_split(inputs[name], name) for name in ("train", *EVAL_SPLITS)})


def run_training(
    spec: dict,
    inputs: dict[str, list[Path]],
    outputs: dict[str, Path],
    work_dir: Path,
    root: Path = Path("."),
    after_step: Callable[[int], None] | None = None,
    stream=None,
) -> Trainer:
    """The stage body: resume or start, train to max_steps, write every output."""
    started = time.perf_counter()
    lease = devices.lease_from_env()  # before anything touches CUDA
    data = read_data(inputs)
    base = inputs.get("base_model")
    trainer = Trainer(
        spec, data, work_dir, root=root, base_model=base[0] if base else None, stream=stream
    )
    trainer.resume()
    trainer.run(after_step=after_step)
    if trainer.step < trainer.recipe.max_steps:
        raise CampaignError(
            f"training stopped at step {trainer.step} of {trainer.recipe.max_steps}"
        )
    device = devices.device_info(trainer.device, lease)
    trainer.finish()
    models.save_model(trainer.model, trainer.tokenizer, outputs["model"])
    for split in EVAL_SPLITS:
        _write_parquet(trainer.predictions(split), outputs[f"predictions_{split}"])
    _write_parquet(trainer.metrics_frame(), outputs["metrics"])
    manifest = run_manifest(trainer, inputs, device, time.perf_counter() - started)
    outputs["run_manifest"].write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return trainer


def stage(ctx) -> None:
    """Stage entry (campaign.runner): ctx.spec is the run spec {model, train, seed}."""
    run_training(ctx.spec, ctx.inputs, ctx.outputs, ctx.work_dir, ctx.root)

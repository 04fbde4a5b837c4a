"""Scoring a model on a split: class probabilities, the loss, and the predictions table.

One implementation for every phase that scores a model, so a number computed after training (the
run's predictions) and one computed on a quantized copy of the same model (the quantize phase)
come from the same code, op for op. `SavedModel` scores a finished run from its model folder.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from campaign.core.tasks import module_of
from campaign.train.batches import (
    IGNORE,
    CausalFormat,
    Split,
    causal_example,
    collate,
    count_targets,
)
from campaign.train.steps import logits_of

Autocast = Callable[[], contextlib.AbstractContextManager]


class CausalProbs(np.ndarray):
    """Class probabilities (n, n_labels) of a causal LM that also carry, per item, the summed
    negative log-likelihood of the true response (`nll: (n,)`, nats; NaN for a label the model
    was not given) and its token count (`tokens: (n,)`, 0 there). The callers that pass
    probabilities along (the train loop, `SavedModel`) need not know: `prediction_frame` writes
    the two columns whenever they are present, so perplexity can be computed from predictions.
    """

    nll: np.ndarray | None = None
    tokens: np.ndarray | None = None

    def __array_finalize__(self, obj) -> None:
        # A view or slice of the probabilities is not one row per item any more: no columns.
        self.nll, self.tokens = None, None

    @classmethod
    def of(cls, probs: np.ndarray, nll: np.ndarray, tokens: np.ndarray) -> CausalProbs:
        out = np.asarray(probs).view(cls)
        out.nll = np.asarray(nll, dtype=np.float64)
        out.tokens = np.asarray(tokens, dtype=np.int64)
        return out


def _to(batch: dict[str, torch.Tensor], device) -> dict[str, torch.Tensor]:
    return {k: v.to(device, non_blocking=True) for k, v in batch.items()}


def classifier_scores(
    model,
    examples: Sequence[dict],
    batch_size: int,
    pad_id: int,
    device,
    autocast: Autocast = contextlib.nullcontext,
) -> tuple[np.ndarray, float, int]:
    """(probabilities (n, n_labels) float64, summed loss, target count) of a classifier.

    The examples are scored in batches of similar length (sorted by token count, ties in item
    order) and the rows put back in item order: a batch pads to its longest example, so on
    short texts with a long tail this does a fraction of the file-order work
    (benchmarks/bench_demo.py). A function of the examples only: every phase that scores gets
    the same bytes.
    """
    order = sorted(range(len(examples)), key=lambda i: (len(examples[i]["input_ids"]), i))
    probs, loss, count = [], 0.0, 0
    for j in range(0, len(order), batch_size):
        batch = _to(collate([examples[i] for i in order[j : j + batch_size]], pad_id), device)
        with autocast():
            logits = logits_of(model, batch).float()
        loss += float(
            F.cross_entropy(logits, batch["labels"], ignore_index=IGNORE, reduction="sum")
        )
        count += count_targets(batch)
        probs.append(torch.softmax(logits, dim=-1).cpu().double().numpy())
    stacked = np.concatenate(probs)
    out = np.empty_like(stacked)
    out[order] = stacked
    return out, loss, count


def causal_scores(
    model,
    tokenizer,
    fmt: CausalFormat,
    split: Split,
    label_ids: dict[str, int],
    batch_size: int,
    pad_id: int,
    device,
    autocast: Autocast = contextlib.nullcontext,
) -> tuple[np.ndarray, float, int]:
    """A causal LM scores every label's response after the prompt; probabilities are the softmax
    of the labels' total log-likelihoods, the loss is that of the true response.

    batch_size: examples per batch (each holds one sequence per label).
    """
    text_ids = fmt.text_ids(tokenizer, split.texts)
    n_labels = len(fmt.targets)
    pairs = [
        causal_example(ids, fmt.sep_ids, target, fmt.prompt_budget)
        for ids in text_ids
        for target in fmt.targets
    ]
    logliks = np.zeros(len(pairs))
    size = batch_size * n_labels
    for j in range(0, len(pairs), size):
        batch = _to(collate(pairs[j : j + size], pad_id), device)
        with autocast():
            logits = logits_of(model, batch).float()
        target = batch["labels"][:, 1:]
        logp = torch.log_softmax(logits[:, :-1], dim=-1)
        picked = logp.gather(-1, target.clamp(min=0).unsqueeze(-1)).squeeze(-1)
        picked = picked.masked_fill(target == IGNORE, 0.0)
        logliks[j : j + len(picked)] = picked.sum(-1).double().cpu().numpy()
    logliks = logliks.reshape(len(text_ids), n_labels)
    probs = np.exp(logliks - logliks.max(axis=1, keepdims=True))
    probs /= probs.sum(axis=1, keepdims=True)
    nll = np.full(len(text_ids), np.nan)
    tokens = np.zeros(len(text_ids), dtype=np.int64)
    for row, label in enumerate(split.labels):
        lid = label_ids.get(label)
        if lid is not None:
            nll[row] = -logliks[row, lid]
            tokens[row] = len(fmt.targets[lid])
    loss, count = 0.0, 0
    for row in np.flatnonzero(tokens > 0):  # in item order, as the training's loss always was
        loss += nll[row]
        count += int(tokens[row])
    return CausalProbs.of(probs, nll, tokens), loss, count


def prediction_frame(split: Split, labels: Sequence[str], probs: np.ndarray | None):
    """DataFrame: id, label, prediction, then score_<label> (probability) per class; for a
    causal LM (`probs` a CausalProbs) also nll (summed over the true response's tokens, nats)
    and tokens (their count), from which the evaluation computes perplexity."""
    import pandas as pd

    causal = getattr(probs, "nll", None) is not None
    probs = np.zeros((0, len(labels))) if probs is None else probs
    frame = pd.DataFrame(
        {
            "id": pd.Series(split.ids, dtype="string"),
            "label": pd.Series(split.labels, dtype="string"),
            "prediction": pd.Series([labels[i] for i in probs.argmax(axis=1)], dtype="string"),
        }
    )
    for i, name in enumerate(labels):
        frame[f"score_{name}"] = np.asarray(probs[:, i], dtype=np.float64)
    if causal:
        frame["nll"] = probs.nll
        frame["tokens"] = probs.tokens
    return frame


@dataclass
class SavedModel:
    """A finished run's model folder (model.safetensors, config, tokenizer), ready to score.

    `labels` are the classes in label-id order (the saved config's id2label for a classifier;
    for a causal LM the train split's sorted labels, given by the caller). `max_length` and
    `batch_size` are the run's train.max_length and train.micro_batch: the encoding and the
    evaluation batches the run's own predictions were computed with. The task's module
    (campaign.core.tasks.module_of) says which model the folder holds and, for a label task,
    how its items are encoded and scored.
    """

    folder: Path
    task: str
    labels: list[str]
    max_length: int
    batch_size: int
    # The base model folder, for a LoRA run's adapter folder (models.BASE_FILE); None otherwise.
    base: Path | None = None

    def __post_init__(self) -> None:
        from campaign.train.models import load_tokenizer

        self.kind = module_of(self.task)
        self.tokenizer = load_tokenizer(self.folder, self.task)
        self.pad_id = self.tokenizer.pad_token_id
        self.label_ids = {name: i for i, name in enumerate(self.labels)}

    @functools.cached_property
    def run(self):
        """The label task's setup for the run's labels (what encode and scores use)."""
        return self.kind.setup(
            None, self.tokenizer, None, labels=self.labels, max_length=self.max_length
        )

    @property
    def fmt(self) -> CausalFormat | None:
        """The causal_lm task's prompt format (None for a classifier)."""
        return self.run.fmt

    def load(self, dtype=torch.float32, **kwargs):
        """A fresh copy of the model, in eval mode (on the CPU unless kwargs place it). An adapter
        folder is merged into its base in memory (its hash checked); a loader option such as a
        quantization config then applies to the merged model, through a scratch folder."""
        import tempfile

        from campaign.train.models import adapter_info, load_run_model

        auto = self.kind.model_class()
        if adapter_info(self.folder) is None:
            return auto.from_pretrained(str(self.folder), dtype=dtype, **kwargs).eval()
        merged = load_run_model(self.folder, self.task, self.base)
        if not kwargs:
            return merged.to(dtype).eval()
        with tempfile.TemporaryDirectory(prefix="merged-") as scratch:
            merged.save_pretrained(scratch)
            return auto.from_pretrained(scratch, dtype=dtype, **kwargs).eval()

    def encode(self, split: Split) -> list[dict]:
        return self.kind.encode_split(self.run, self.tokenizer, split, self.max_length)

    def scores(
        self, model, split: Split, device, autocast: Autocast = contextlib.nullcontext
    ) -> np.ndarray | None:
        """Class probabilities (n, n_labels) of `model` on a split; None when it is empty."""
        if len(split) == 0:
            return None
        probs, _, _ = self.kind.scores(
            model,
            self.tokenizer,
            self.run,
            split,
            self.encode(split),
            micro_batch=self.batch_size,
            pad_id=self.pad_id,
            device=device,
            autocast=autocast,
        )
        return probs

    def predictions(self, model, split: Split, device, autocast: Autocast = contextlib.nullcontext):
        """The predictions table of `model` on a split, columns as the training run writes."""
        return prediction_frame(split, self.labels, self.scores(model, split, device, autocast))

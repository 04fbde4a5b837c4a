"""Training data as tensors: split files → encoded examples → padded micro-batches, in a seeded
order that resumes by position.

An example is a dict of plain lists, so a whole split is encoded once up front:
    sequence_classification: {"input_ids": [int], "label": int}   (label -100: not a train label)
    causal_lm:               {"input_ids": [int], "labels": [int]} (-100 on prompt positions)
    generation:              {"input_ids": [int], "labels": [int]} (-100 off the assistant turns)

train.packing (causal_lm, generation): a micro-batch's examples are packed into rows of at most
max_length tokens, in as few token cells as first-fit decreasing finds (pack_rows,
collate_packed); each row carries position ids that restart at every example (a conversation's
rotary positions are those it has alone) and segment ids from which train/packing.py builds a
block-diagonal causal mask. The micro-batch still holds the same examples, so the
effective batch and the loss normalization do not change.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from campaign.core.errors import CampaignError

IGNORE = -100  # the label value cross-entropy skips: prompt, padding, unknown label
CAUSAL_SEPARATOR = "\nTopic:"  # prompt = text + separator; response = " " + label + EOS
SPLIT_COLUMNS = ("id", "text", "label")
_ORDER_STREAM = 0x0DA7A  # keeps the data order independent of the model-init stream


@dataclass(frozen=True)
class Split:
    """One split's records, in file order."""

    ids: list[str]
    texts: list[str]
    labels: list[str]
    # A conversational dataset's conversations (JSON cells, read by campaign.tasks.generation.chat).
    messages: list[str] | None = None
    # Each record's source file as the data section names it (errors name the file and record).
    sources: list[str] | None = None

    def __len__(self) -> int:
        return len(self.ids)


def read_split(paths: Sequence[Path], name: str) -> Split:
    """Read a split from one or more Parquet files (columns id, text, label; others ignored)."""
    import pandas as pd

    frames = []
    for path in paths:
        try:
            frame = pd.read_parquet(path, columns=None)
        except (OSError, ValueError) as e:
            raise CampaignError(
                f"input '{name}': {path} is not a readable Parquet file ({e})"
            ) from None
        missing = [c for c in SPLIT_COLUMNS if c not in frame.columns]
        if missing:
            raise CampaignError(
                f"input '{name}': {path} lacks column(s) {', '.join(missing)} "
                f"(expected {', '.join(SPLIT_COLUMNS)})"
            )
        if frame["text"].isna().any() or frame["label"].isna().any():
            row = int(np.flatnonzero(frame["text"].isna() | frame["label"].isna())[0])
            raise CampaignError(f"input '{name}': {path} row {row} has an empty text or label")
        kept = (*SPLIT_COLUMNS, "messages", "source")
        frames.append(frame[[c for c in kept if c in frame.columns]])
    if not frames:
        return Split([], [], [])
    frame = pd.concat(frames, ignore_index=True)
    messages = None
    if "messages" in frame.columns and not frame["messages"].isna().any():
        messages = [str(v) for v in frame["messages"]]
    sources = None
    if "source" in frame.columns and not frame["source"].isna().any():
        sources = [str(v) for v in frame["source"]]
    return Split(
        ids=[str(v) for v in frame["id"]],
        texts=[str(v) for v in frame["text"]],
        labels=[str(v) for v in frame["label"]],
        messages=messages,
        sources=sources,
    )


# ------------------------------------------------------------------ encoding
def encode_classification(
    tokenizer,
    texts: Sequence[str],
    labels: Sequence[str],
    label_ids: dict[str, int],
    max_length: int,
) -> list[dict]:
    """Token ids (with the tokenizer's special tokens, truncated to max_length) and label id."""
    encoded = tokenizer(list(texts), truncation=True, max_length=max_length)["input_ids"]
    return [
        {"input_ids": list(ids), "label": label_ids.get(label, IGNORE)}
        for ids, label in zip(encoded, labels, strict=True)
    ]


def response_ids(tokenizer, label: str) -> list[int]:
    """The target tokens for a label: " " + label, then EOS."""
    return list(tokenizer(" " + label, add_special_tokens=False)["input_ids"]) + [
        tokenizer.eos_token_id
    ]


def causal_example(
    text_ids: Sequence[int], sep_ids: Sequence[int], target: Sequence[int], prompt_budget: int
) -> dict:
    """prompt (text truncated to prompt_budget tokens + separator) → target; loss on target only."""
    prompt = list(text_ids[:prompt_budget]) + list(sep_ids)
    return {"input_ids": prompt + list(target), "labels": [IGNORE] * len(prompt) + list(target)}


@dataclass(frozen=True)
class CausalFormat:
    """Token pieces shared by training and label scoring, so both see identical prompts."""

    sep_ids: list[int]
    targets: list[list[int]]  # response ids per label id
    prompt_budget: int  # text tokens kept, room left for the separator and the longest target

    @classmethod
    def build(cls, tokenizer, label_names: Sequence[str], max_length: int) -> CausalFormat:
        sep_ids = list(tokenizer(CAUSAL_SEPARATOR, add_special_tokens=False)["input_ids"])
        targets = [response_ids(tokenizer, name) for name in label_names]
        budget = max_length - len(sep_ids) - max(len(t) for t in targets)
        if budget < 1:
            raise CampaignError(
                f"train.max_length: {max_length} tokens leave no room for the text after the "
                f"separator ({len(sep_ids)} tokens) and the longest label "
                f"({max(len(t) for t in targets)} tokens)"
            )
        return cls(sep_ids, targets, budget)

    def text_ids(self, tokenizer, texts: Sequence[str]) -> list[list[int]]:
        encoded = tokenizer(list(texts), add_special_tokens=False)["input_ids"]
        return [list(ids[: self.prompt_budget]) for ids in encoded]


def encode_causal(
    tokenizer,
    texts: Sequence[str],
    labels: Sequence[str],
    label_ids: dict[str, int],
    fmt: CausalFormat,
) -> list[dict]:
    """Prompt → response examples; a label unknown to training gets an empty (all -100) target."""
    out = []
    for ids, label in zip(fmt.text_ids(tokenizer, texts), labels, strict=True):
        lid = label_ids.get(label)
        if lid is None:
            example = causal_example(ids, fmt.sep_ids, [], fmt.prompt_budget)
        else:
            example = causal_example(ids, fmt.sep_ids, fmt.targets[lid], fmt.prompt_budget)
        out.append(example)
    return out


# ------------------------------------------------------------------ batching
def collate(examples: Sequence[dict], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-pad to the longest example. Returns input_ids, attention_mask: (B, L) int64;
    labels: (B,) for classification, (B, L) with -100 on padding for causal_lm."""
    width = max(len(e["input_ids"]) for e in examples)
    # One tensor per field from padded lists: far cheaper than filling row by row.
    ids = [e["input_ids"] + [pad_id] * (width - len(e["input_ids"])) for e in examples]
    mask = [[1] * len(e["input_ids"]) + [0] * (width - len(e["input_ids"])) for e in examples]
    if "labels" in examples[0]:
        labels = torch.tensor(
            [e["labels"] + [IGNORE] * (width - len(e["labels"])) for e in examples],
            dtype=torch.long,
        )
    else:
        labels = torch.tensor([e["label"] for e in examples], dtype=torch.long)
    return {
        "input_ids": torch.tensor(ids, dtype=torch.long),
        "attention_mask": torch.tensor(mask, dtype=torch.long),
        "labels": labels,
    }


def count_targets(batch: dict[str, torch.Tensor]) -> int:
    """Items the loss is averaged over: examples (classification) or predicted tokens (causal).

    For causal_lm the token at position t is predicted from position t-1, so position 0's label
    is never a target.
    """
    labels = batch["labels"]
    if labels.dim() == 1:
        return int((labels != IGNORE).sum())
    return int((labels[:, 1:] != IGNORE).sum())


def length_grouped(
    perm: np.ndarray, lengths: np.ndarray, group: int, labels: np.ndarray | None = None
) -> np.ndarray:
    """`perm` with each window of `group` consecutive entries ordered longest first (ties keep
    their order): micro-batches then hold examples of similar length, so less padding. A
    function of the permutation alone, so a resumed run regroups exactly.

    labels (one per example): the window is ordered by each example's length rank WITHIN ITS
    LABEL (label_mixed), so every run of consecutive examples holds the labels in the window's
    proportions. A plain length sort makes micro-batches label-homogeneous wherever length and
    label go together (long political quotations, short one-liners on computers): each step's
    gradient then pulls towards one class and the run learns less than an unsorted one."""
    out = np.array(perm, copy=True)
    for start in range(0, len(out), group):
        window = out[start : start + group]
        if labels is None:
            order = np.argsort(-lengths[window], kind="stable")
        else:
            order = label_mixed(lengths[window], labels[window])
        out[start : start + group] = window[order]
    return out


def label_mixed(lengths: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Positions (n,) of a window ordered by length quantile within each label: the j-th longest
    of a label's n_c examples gets key (j + 0.5) / n_c, and keys sort ascending (ties: longer
    first, then window order). Any k consecutive positions then hold each label about
    k * n_c / n times, and lengths still fall from each label's longest to its shortest.

    lengths [9, 8, 2, 1], labels [a, a, b, b] -> [0, 2, 1, 3] (a 9, b 2, a 8, b 1)."""
    keys = np.empty(len(lengths), dtype=np.float64)
    for label in np.unique(labels):
        members = np.flatnonzero(labels == label)
        ranked = members[np.argsort(-lengths[members], kind="stable")]
        keys[ranked] = (np.arange(len(ranked)) + 0.5) / len(ranked)
    return np.lexsort((np.arange(len(lengths)), -lengths, keys))


class DataOrder:
    """A fresh seeded permutation of the examples each epoch; (epoch, index) is its whole state.

    Each epoch's permutation is drawn from numpy's Generator seeded by (run seed, epoch), so
    resuming needs only the position, not a saved generator state, and is exact by construction.
    """

    def __init__(
        self,
        n_examples: int,
        seed: int,
        lengths: Sequence[int] | None = None,
        group: int | None = None,
        labels: Sequence[int] | None = None,
    ):
        if n_examples < 1:
            raise CampaignError("input 'train': the train split has no examples")
        self.n, self.seed = n_examples, seed
        # train.group_by_length: each permutation sorted by length within windows of `group`.
        self.lengths = None if lengths is None else np.asarray(lengths, dtype=np.int64)
        self.group = group
        # With lengths: the examples' label ids, so that each micro-batch keeps the label mix.
        self.labels = None if labels is None else np.asarray(labels, dtype=np.int64)
        self.epoch, self.index = 0, 0
        self._perm = self.permutation(0)

    def permutation(self, epoch: int) -> np.ndarray:
        rng = np.random.Generator(
            np.random.PCG64(np.random.SeedSequence([self.seed, _ORDER_STREAM, epoch]))
        )
        perm = rng.permutation(self.n)
        if self.lengths is not None:
            perm = length_grouped(perm, self.lengths, int(self.group), self.labels)
        return perm

    def take(self, count: int) -> list[int]:
        """The next `count` example indices, running on into the next epoch when one ends."""
        out: list[int] = []
        while len(out) < count:
            if self.index == self.n:
                self.epoch, self.index = self.epoch + 1, 0
                self._perm = self.permutation(self.epoch)
            step = min(count - len(out), self.n - self.index)
            out.extend(int(i) for i in self._perm[self.index : self.index + step])
            self.index += step
        return out

    def state_dict(self) -> dict:
        return {"seed": self.seed, "n": self.n, "epoch": self.epoch, "index": self.index}

    def load_state_dict(self, state: dict) -> None:
        if state["seed"] != self.seed or state["n"] != self.n:
            raise CampaignError(
                f"checkpoint data order is for seed {state['seed']} over {state['n']} examples; "
                f"this run has seed {self.seed} over {self.n}"
            )
        self.epoch, self.index = int(state["epoch"]), int(state["index"])
        self._perm = self.permutation(self.epoch)


CAPACITIES = 16  # row capacities pack_rows tries between the longest example and max_length


def first_fit_decreasing(lengths: Sequence[int], capacity: int) -> list[list[int]]:
    """Rows of example positions, longest first, each into the first row with room for it
    (ties keep their order); an example longer than `capacity` gets a row of its own."""
    rows: list[list[int]] = []
    room: list[int] = []
    for i in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
        n = int(lengths[i])
        slot = next((r for r, free in enumerate(room) if free >= n), None)
        if slot is None:
            rows.append([i])
            room.append(capacity - n)
        else:
            rows[slot].append(i)
            room[slot] -= n
    return rows


def pack_rows(lengths: Sequence[int], max_length: int) -> list[list[int]]:
    """Rows of example positions whose lengths sum to at most max_length each, holding the
    fewest token cells (rows x the fullest row's length; ties: the narrower).

    First-fit decreasing at row capacities from the longest example up to max_length (at most
    CAPACITIES of them): at the longest example's length no row is wider than the unpacked
    batch, so packing never holds more cells than padding would. A function of the lengths
    alone, so a resumed run packs alike.

    lengths [5, 3, 4, 2], max_length 8: capacity 7 gives [[0, 3], [2, 1]] (5+2, 4+3): 2 rows
    of 7, 14 cells (capacity 8: 2 x 8 = 16; capacity 5: 3 x 5 = 15).
    """
    longest = max(int(n) for n in lengths)
    top = max(longest, max_length)
    steps = min(CAPACITIES - 1, top - longest)
    capacities = sorted({longest + (top - longest) * k // max(steps, 1) for k in range(steps + 1)})
    best, best_cost = None, None
    for capacity in capacities:
        rows = first_fit_decreasing(lengths, capacity)
        width = max(sum(int(lengths[i]) for i in row) for row in rows)
        cost = (len(rows) * width, width)
        if best_cost is None or cost < best_cost:
            best, best_cost = rows, cost
    return best


def collate_packed(
    examples: Sequence[dict], pad_id: int, max_length: int
) -> dict[str, torch.Tensor]:
    """Causal examples (causal_lm, generation) packed into rows (pack_rows), right-padded to the
    fullest row.

    Returns (R, W) int64 tensors, R rows of W <= max_length tokens: input_ids; attention_mask
    (1 on tokens, 0 on padding); labels (-100 on prompts, padding and every example's first
    token, which nothing before it in its own example predicts); position_ids, restarting at 0 at
    each example (and at the padding); segment_ids, 1..k for the row's k examples, 0 on padding.
    """
    if "labels" not in examples[0]:
        raise CampaignError("train.packing: packs examples with token labels only")
    rows = pack_rows([len(e["input_ids"]) for e in examples], max_length)
    fields: dict[str, list[list[int]]] = {k: [] for k in ("ids", "mask", "labels", "pos", "seg")}
    for row in rows:
        ids, labels, pos, seg = [], [], [], []
        for k, i in enumerate(row, start=1):
            e = examples[i]
            n = len(e["input_ids"])
            ids += e["input_ids"]
            labels += [IGNORE] + list(e["labels"][1:])
            pos += range(n)
            seg += [k] * n
        fields["ids"].append(ids)
        fields["labels"].append(labels)
        fields["pos"].append(pos)
        fields["seg"].append(seg)
    width = max(len(r) for r in fields["ids"])
    out = {}
    for name, key, fill in (
        ("input_ids", "ids", pad_id),
        ("labels", "labels", IGNORE),
        ("segment_ids", "seg", 0),
    ):
        out[name] = torch.tensor(
            [r + [fill] * (width - len(r)) for r in fields[key]], dtype=torch.long
        )
    # Padding is a segment of its own with positions from 0: every query attends to itself at
    # least (no all-masked softmax row), and the positions stay within the embedding table.
    out["position_ids"] = torch.tensor(
        [r + list(range(width - len(r))) for r in fields["pos"]], dtype=torch.long
    )
    out["attention_mask"] = (out["segment_ids"] > 0).long()
    return out


def micro_batches(
    examples: Sequence[dict],
    indices: Sequence[int],
    micro_batch: int,
    pad_id: int,
    pack_length: int | None = None,
) -> list[dict[str, torch.Tensor]]:
    """Split one optimizer step's indices into padded micro-batches of `micro_batch` examples;
    with pack_length (train.packing: max_length), each micro-batch's examples packed into rows."""
    chunks = [
        [examples[i] for i in indices[j : j + micro_batch]]
        for j in range(0, len(indices), micro_batch)
    ]
    if pack_length is not None:
        return [collate_packed(c, pad_id, pack_length) for c in chunks]
    return [collate(c, pad_id) for c in chunks]

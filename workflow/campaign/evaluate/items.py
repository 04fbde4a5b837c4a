"""The items every variant is scored on, and each variant's predictions aligned to them.

A split's items come from its split file (id, label and the slice columns); a predictions file
(id, label, prediction, score_<label>) must hold exactly those ids, else the evaluation stops
naming the file. Scores are put on one label list for the whole campaign: the train split's
sorted labels (the training runs' order), then any label seen only in evaluation, which no model
can predict (its items count as wrong). A task without labels (generation: the task says what an
item is) reads items without a label column: `labels` None, `truth` None.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from campaign.core.errors import CampaignError

SPLITS = ("validation", "test")


@dataclass
class Items:
    """One evaluation split: ids, true label indices into `labels` (None for a task without
    labels), and slice columns."""

    split: str
    ids: np.ndarray  # (n_items,) str
    truth: np.ndarray | None  # (n_items,) int64 index into labels
    labels: list[str] | None
    slices: dict[str, np.ndarray] = field(default_factory=dict)  # name -> (n_items,) bucket str

    def __len__(self) -> int:
        return len(self.ids)


def _bucket(values: np.ndarray, edges: list[int], unit: str) -> np.ndarray:
    """Each value's bucket name: "<= e1", "e1-e2" ..., "> e_last" (edges ascending)."""
    names, low = [], None
    for edge in edges:
        names.append(f"<= {edge} {unit}" if low is None else f"{low + 1}-{edge} {unit}")
        low = edge
    names.append(f"> {edges[-1]} {unit}")
    return np.asarray(names, dtype=object)[np.searchsorted(edges, values, side="left")]


def read_items(path: Path, split: str, labels: list[str] | None, settings: dict) -> Items:
    """The split file's items; `labels` None: a task without labels (no label column read)."""
    import pandas as pd

    frame = pd.read_parquet(path)
    missing = {"id", "text"} | ({"label"} if labels is not None else set())
    missing -= set(frame.columns)
    if missing:
        raise CampaignError(f"{path}: missing column(s) {', '.join(sorted(missing))}")
    ids = frame["id"].astype(str).to_numpy(dtype=object)
    truth = None
    if labels is not None:
        index = {name: i for i, name in enumerate(labels)}
        truth = np.array([index.get(str(v), -1) for v in frame["label"]], dtype=np.int64)
    slices: dict[str, np.ndarray] = {}
    if "source" in frame.columns:
        slices["source"] = frame["source"].astype(str).to_numpy(dtype=object)
    lengths = frame["text"].astype(str).str.len().to_numpy()
    slices["text length"] = _bucket(lengths, settings["length_buckets"], "chars")
    if "group" in frame.columns:
        sizes = frame.groupby("group")["id"].transform("size").to_numpy()
        slices["group size"] = _bucket(sizes, settings["group_size_buckets"], "records")
    if "duplicate_cluster" in frame.columns:
        member = frame["duplicate_cluster"].notna().to_numpy()
        slices["duplicate cluster"] = np.where(member, "member", "not a member").astype(object)
    return Items(split, ids, truth, labels, slices)


def campaign_labels(train_path: Path, eval_paths: list[Path]) -> list[str]:
    """The train split's sorted labels, then labels seen only in evaluation (sorted)."""
    import pyarrow.parquet as pq

    def read(path: Path) -> set[str]:
        return {str(v) for v in pq.read_table(path, columns=["label"])["label"].to_pylist()}

    train = sorted(read(train_path))
    extra: set[str] = set()
    for path in eval_paths:
        extra |= read(path)
    return train + sorted(extra - set(train))


def read_probs(path: Path, items: Items) -> np.ndarray:
    """(n_items, n_labels) probabilities of the predictions file, in `items` order."""
    import pandas as pd

    frame = pd.read_parquet(path)
    if "id" not in frame.columns:
        raise CampaignError(f"{path}: missing column 'id'")
    frame = frame.set_index(frame["id"].astype(str))
    if len(frame) != len(items) or not frame.index.is_unique:
        raise CampaignError(
            f"{path}: {len(frame)} predictions for the {len(items)} items of the {items.split} "
            "split (each item exactly once expected)"
        )
    try:
        frame = frame.loc[items.ids]
    except KeyError as e:
        raise CampaignError(f"{path}: no prediction for {items.split} items, e.g. {e}") from None
    if "label" in frame.columns:
        truth = np.asarray(items.labels, dtype=object)[items.truth.clip(0)]
        differs = np.flatnonzero(
            (frame["label"].astype(str).to_numpy() != truth) & (items.truth >= 0)
        )
        if differs.size:
            i = differs[0]
            raise CampaignError(
                f"{path}: item {items.ids[i]} has label '{frame['label'].iloc[i]}', the "
                f"{items.split} split says '{truth[i]}' (predictions of another split?)"
            )
    probs = np.zeros((len(items), len(items.labels)))
    scored = [c for c in frame.columns if c.startswith("score_")]
    if not scored:
        raise CampaignError(f"{path}: no score_<label> columns")
    for column in scored:
        label = column.removeprefix("score_")
        if label not in items.labels:
            raise CampaignError(f"{path}: score for label '{label}', which no split holds")
        probs[:, items.labels.index(label)] = frame[column].to_numpy(dtype=np.float64)
    return probs


def read_response_nll(path: Path, items: Items) -> tuple[np.ndarray, np.ndarray] | None:
    """(nll: (n_items,), tokens: (n_items,)) of a causal LM's predictions file in `items` order
    (summed negative log-likelihood of each item's true response, and its token count); None
    when the file has no such columns (a classifier, the floor)."""
    import pyarrow.parquet as pq

    names = set(pq.read_schema(path).names)
    if not {"nll", "tokens"} <= names:
        return None
    frame = pq.read_table(path, columns=["id", "nll", "tokens"]).to_pandas()
    frame = frame.set_index(frame["id"].astype(str)).loc[items.ids]  # read_probs checked the ids
    return frame["nll"].to_numpy(dtype=np.float64), frame["tokens"].to_numpy(dtype=np.int64)

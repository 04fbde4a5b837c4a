"""The scored-items table (campaign.evaluate.item_table): its exact columns and types, one line
naming the file, row and column for a bad table and no file left by a refused write; and the
tiny campaign's results/evaluation/items.parquet, one row per variant x split x item."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from campaign.core.errors import CampaignError
from campaign.evaluate.item_table import COLUMNS, read_items_table, write_items


def frame(**over) -> pd.DataFrame:
    rows = {
        "variant": ["r-1", "r-1", "floor/majority"],
        "cell": ["train.lr=0.001", "train.lr=0.001", ""],
        "seed": [1, 1, None],
        "split": ["test", "test", "test"],
        "task": ["", "", ""],
        "item": ["a", "b", "a"],
        "score": [1.0, 0.25, 0.0],
        "prediction": ["pos", "a long answer", None],
        "metric": ["token_f1"] * 3,
    }
    return pd.DataFrame(rows | over)


def test_the_table_round_trips_with_its_types(tmp_path):
    path = tmp_path / "items.parquet"
    write_items(path, frame())
    schema = pq.read_schema(path)
    assert tuple(schema.names) == COLUMNS
    assert schema.field("seed").type == pa.int64() and schema.field("score").type == pa.float64()
    assert not schema.field("variant").nullable and schema.field("prediction").nullable
    back = read_items_table(path)
    assert back.seed.tolist()[:2] == [1, 1] and pd.isna(back.seed.iloc[2])
    assert back.score.tolist() == [1.0, 0.25, 0.0]
    assert back.prediction.iloc[1] == "a long answer" and pd.isna(back.prediction.iloc[2])
    write_items(tmp_path / "again.parquet", back)  # what the reader gives, the writer takes
    assert (tmp_path / "again.parquet").read_bytes() == path.read_bytes()


@pytest.mark.parametrize(
    ("over", "message"),
    [
        ({"score": [1.0, 1.5, 0.0]}, r"row 1: column score: 1.5 is not a number in \[0, 1\]"),
        ({"score": [1.0, np.nan, 0.0]}, r"row 1: column score: nan is not a number in \[0, 1\]"),
        ({"score": [1.0, -0.1, 0.0]}, r"row 1: column score: -0.1 is not"),
        ({"seed": [1, 2.5, None]}, r"row 1: column seed: 2.5 is not a whole number or null"),
        ({"seed": ["1", "1", None]}, r"row 0: column seed: '1' is not a whole number"),
        ({"item": ["a", 7, "a"]}, r"row 1: column item: 7 is not a string"),
        ({"variant": ["r-1", None, "f"]}, r"row 1: column variant: null is not a string"),
        ({"prediction": ["x", 3, None]}, r"row 1: column prediction: 3 is not a string or null"),
        ({"item": ["a", "a", "a"]}, r"row 1: a second score for variant='r-1', split='test'"),
    ],
)
def test_a_bad_table_is_one_line_naming_file_row_and_column(tmp_path, over, message):
    path = tmp_path / "items.parquet"
    bad = frame(**over)
    with pytest.raises(CampaignError, match=rf"^{path}: {message}"):
        write_items(path, bad)
    assert not path.exists() and list(tmp_path.iterdir()) == []  # nothing half-written
    # the reader refuses the same table written by another tool
    if "score" in over or over.get("item") == ["a", "a", "a"]:
        other = tmp_path / "other.parquet"
        bad.to_parquet(other, index=False)
        with pytest.raises(CampaignError, match=rf"^{other}: {message}"):
            read_items_table(other)


def test_columns_must_be_exactly_the_shared_ones(tmp_path):
    with pytest.raises(CampaignError, match=r"x.parquet: not a scored-items table \(missing task"):
        write_items(tmp_path / "x.parquet", frame().drop(columns=["task"]))
    with pytest.raises(CampaignError, match=r"unexpected extra"):
        write_items(tmp_path / "x.parquet", frame(extra=[1, 2, 3]))
    with pytest.raises(CampaignError, match=r"columns out of order"):
        write_items(tmp_path / "x.parquet", frame()[list(reversed(COLUMNS))])
    (tmp_path / "y.parquet").write_text("not parquet")
    with pytest.raises(CampaignError, match=r"y.parquet: not a readable Parquet table"):
        read_items_table(tmp_path / "y.parquet")
    with pytest.raises(CampaignError, match=r"z.parquet: file not found"):
        read_items_table(tmp_path / "z.parquet")


@pytest.mark.slow
def test_the_finished_campaign_scores_every_item_of_every_variant(finished_campaign: Path):
    """The tiny campaign's items.parquet: every variant the metrics table scores, on both
    splits, on exactly the split file's items in their order; each variant's mean item score
    is the accuracy metrics.parquet reports, and a right item's prediction is its label."""
    results = finished_campaign / "results"
    items = read_items_table(results / "evaluation" / "items.parquet")
    metrics = pd.read_parquet(results / "evaluation" / "metrics.parquet")
    scored = metrics[(metrics.kind != "cell") & (metrics.metric == "accuracy")]
    assert set(items.variant) == set(scored.variant)
    assert set(items.metric) == {"accuracy"} and set(items.task) == {""}
    n_rows = 0
    for split in ("validation", "test"):
        truth = pd.read_parquet(results / "data" / "splits" / f"{split}.parquet")
        ids, labels = truth["id"].astype(str).tolist(), truth["label"].astype(str).to_numpy()
        for row in scored[scored.split == split].itertuples():
            mine = items[(items.variant == row.variant) & (items.split == split)]
            assert mine.item.tolist() == ids, row.variant
            assert mine.score.mean() == pytest.approx(row.value), row.variant
            right = mine.score.to_numpy() == 1.0
            assert (mine.prediction.to_numpy()[right] == labels[right]).all()
            assert (mine.prediction.to_numpy()[~right] != labels[~right]).all()
            seed = None if pd.isna(row.seed) else int(row.seed)
            assert set(mine.cell) == {"" if pd.isna(row.cell) else row.cell}
            assert mine.seed.isna().all() if seed is None else set(mine.seed) == {seed}
            n_rows += len(mine)
    assert (
        len(items)
        == n_rows
        == len(set(items.variant))
        * sum(
            len(pd.read_parquet(results / "data" / "splits" / f"{s}.parquet"))
            for s in ("validation", "test")
        )
    )

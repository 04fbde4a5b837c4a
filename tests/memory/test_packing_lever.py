"""train.packing as a memory lever: the fit table's row is arithmetic on the estimate with the
rows the sample packs into and names the key; the preflight measures the key on real steps of a
causal recipe and gives a classifier's row the reason instead of numbers."""

from __future__ import annotations

import io

import pytest
from trainkit import REPO, tiny_spec, write_splits

from campaign import memory
from campaign.memory.costs import lever_costs
from campaign.memory.levers import packed_rows, packing_row
from campaign.memory.shape import GIB
from campaign.train import Recipe, Trainer, read_data


@pytest.fixture(autouse=True)
def cpu_only(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")


def toy() -> dict:
    """A step of 4 GiB fixed + 0.5 GiB per example at micro_batch 4 (6 GiB), with an evaluation
    phase of 1 GiB + 0.25 GiB per example (2 GiB): packing leaves evaluation as it is."""
    return {
        "micro_batch": 4,
        "peak_bytes": 6 * GIB,
        "peak_phase": "train_step",
        "source": "estimated",
        "bytes": {"optimizer_state": GIB},  # the optimizer lever's row reads it
        "phases": {
            "train_step": {"bytes": 6 * GIB, "fixed_bytes": 4 * GIB, "bytes_per_example": GIB // 2},
            "evaluate": {"bytes": 2 * GIB, "fixed_bytes": GIB, "bytes_per_example": GIB // 4},
        },
    }


def test_packing_row_by_hand():
    assert packed_rows([[5, 3, 4, 2], [6, 6], [8]], 8) == 2  # [[5, 3], [4, 2]], [[6], [6]], [[8]]
    # 4 examples in 2 rows: the step needs 4 + 2 x 0.5 = 5 GiB; evaluation still 2 GiB.
    row = packing_row(toy(), 5.5 * GIB, {"task": "causal_lm", "enabled": False, "rows": 2})
    assert row["setting"] == {"train.packing": True}
    assert (row["need_bytes"], row["phase"]) == (5 * GIB, "train_step")
    assert row["saves_bytes"] == GIB and row["fits"] is True
    # One row: the step needs 4 + 0.5 = 4.5 GiB, still more than a 4 GiB card.
    one = packing_row(toy(), 4 * GIB, {"task": "causal_lm", "enabled": False, "rows": 1})
    assert one["need_bytes"] == int(4.5 * GIB) and one["fits"] is False
    for packing, note in (
        ({"task": "sequence_classification", "enabled": False, "rows": None}, "examples only"),
        ({"task": "sequence_classification", "enabled": False, "rows": 2}, "(model.task is seq"),
        ({"task": "causal_lm", "enabled": True, "rows": 2}, "already packs"),
        ({"task": "causal_lm", "enabled": False, "rows": 4}, "no fewer rows"),
        (None, "not known here"),
    ):
        row = packing_row(toy(), 5.5 * GIB, packing)
        assert row["setting"] is None and row["need_bytes"] is None and note in row["note"]
    # In the fit table of a card the recipe does not fit, named by its key.
    (card,) = memory.fit_table(
        toy(),
        [{"name": "c", "memory_gib": 5.5}],
        0.0,
        packing={"task": "causal_lm", "enabled": False, "rows": 2},
    )
    lever = next(r for r in card["levers"] if r["lever"] == "packing")
    assert lever["setting"] == {"train.packing": True} and lever["fits"]
    assert "4 examples in at most 2 rows" in memory.format_levers([card])


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return read_data(write_splits(tmp_path_factory.mktemp("splits"), n_train=48, n_eval=8))


def test_the_preflight_measures_packing_on_a_causal_recipe_and_not_a_classifier(data, tmp_path):
    # max_length 160: the demo texts (50-150 tokens) pack two or three to a row.
    causal = tiny_spec(
        task="causal_lm", architecture="gpt2", max_length=160, micro_batch=8, grad_accum=1
    )
    causal["model"]["config"]["max_position_embeddings"] = 160

    def maker(base):
        def make(**overrides):
            spec = {**base, "train": {**base["train"], **overrides}}
            return Trainer(spec, data, tmp_path / "t", root=REPO, stream=io.StringIO())

        return make

    (row,) = lever_costs(maker(causal), causal["train"], "cpu", ("packing",), "causal_lm")
    assert row["setting"] == {"train.packing": True} and not row["enabled"]
    keys = {k.removeprefix("train."): v for k, v in row["setting"].items()}
    assert Recipe.from_spec({**causal["train"], **keys}).packing is True
    # Fewer, fuller rows for the same examples: the steps hold fewer bytes at their peak.
    assert row["peak_bytes"] > 0 and row["saves_bytes"] > 0 and row["step_time_ratio"] > 0
    classifier = tiny_spec()
    (row,) = lever_costs(
        maker(classifier), classifier["train"], "cpu", ("packing",), "sequence_classification"
    )
    assert row["peak_bytes"] is None
    assert row["note"] == (
        "not measured here: train.packing packs causal_lm, generation examples only (model.task is "
        "sequence_classification)"
    )

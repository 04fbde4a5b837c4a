"""campaign.core.io: the one reader per artifact kind (JSON with dotted keys, tables with
required columns, the plan table with its cell ids) and the "module:function" resolver."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from campaign.core.errors import CampaignError
from campaign.core.io import cell_id, get, read_json, read_plan, read_table, resolve


def test_json_with_dotted_keys_names_the_file_and_the_key(tmp_path):
    path = tmp_path / "report.json"
    path.write_text(json.dumps({"memory": {"details": {"peak": 7}}, "a.b": 1}))
    data = read_json(path, required=("memory.details.peak",))
    assert get(data, "memory.details.peak", path) == 7
    assert get(data, ("a.b",), path) == 1  # a key that holds a dot
    assert get(data, "memory.nothing.here", path, default=None) is None
    with pytest.raises(CampaignError, match=r"report\.json: expected a key 'memory\.details\.x'$"):
        get(data, "memory.details.x", path)
    # Through a value that is not an object, the key named is the first one missing.
    with pytest.raises(CampaignError, match=r"expected a key 'memory\.details\.peak\.more'"):
        read_json(path, required=("memory.details.peak.more",))
    for text, why in (("{not json", "not valid JSON"), ("[1, 2]", "expected a JSON object")):
        path.write_text(text)
        with pytest.raises(CampaignError, match=rf"report\.json: {why}"):
            read_json(path)
    with pytest.raises(CampaignError, match=r"gone\.json: file not found"):
        read_json(tmp_path / "gone.json")


@pytest.mark.parametrize("suffix", [".parquet", ".csv", ".tsv"])
def test_a_table_must_have_its_columns(tmp_path, suffix):
    path = tmp_path / f"jobs{suffix}"
    frame = pd.DataFrame({"run": ["a", "b"], "cost": [1.5, 2.0]})
    if suffix == ".parquet":
        frame.to_parquet(path)
    else:
        frame.to_csv(path, sep="\t" if suffix == ".tsv" else ",", index=False)
    assert read_table(path, ("run", "cost"))["cost"].sum() == 3.5
    with pytest.raises(CampaignError, match=rf"jobs\{suffix}: expected a column 'offer'$"):
        read_table(path, ("run", "offer"))


def test_a_garbled_parquet_table_is_one_line(tmp_path):
    path = tmp_path / "metrics.parquet"
    path.write_bytes(b"PAR1 garbage")
    with pytest.raises(CampaignError, match=r"metrics\.parquet: not a readable Parquet table"):
        read_table(path, ("run",))


def test_plan_table_factors_seeds_kept_and_cell_ids(tmp_path):
    path = tmp_path / "runs.tsv"
    path.write_text(
        "run\ttrain.lr\tseed\ttier\tkept\n"
        "run-a\t0.001\t1\tcontrol\ttrue\n"
        "run-b\t0.001\t2\tcontrol\ttrue\n"
        "run-c\t0.003\t1\tmain\tfalse\n"
    )
    plan = read_plan(path)
    assert plan.factors == ("train.lr",) and plan.kept() == ["run-a", "run-b"]
    a, b, c = plan.rows
    assert (a["seed"], c["tier"]) == (1, "main")
    # A table without the column gets the ids the plan writes: one per cell, not per seed.
    assert a["cell_id"] == b["cell_id"] == cell_id({"train.lr": 0.001}) != c["cell_id"]
    with pytest.raises(CampaignError, match=r"runs\.tsv: expected a column 'projected_hours'"):
        read_plan(path, ("run", "projected_hours"))
    path.write_text("run\tseed\ttier\nrun-a\tone\tcontrol\n")
    with pytest.raises(CampaignError, match=r"runs\.tsv line 2: seed is not a whole number"):
        read_plan(path)
    path.write_text("run\tseed\ttier\nrun-a\t1\n")
    with pytest.raises(CampaignError, match=r"runs\.tsv: not a readable plan table \(line 2"):
        read_plan(path)


def test_cell_id_depends_on_the_levels_only():
    one = cell_id({"train.lr": 0.001, "train.lora": None})
    assert one == cell_id({"train.lora": None, "train.lr": 0.001})  # order of the factors
    assert one == cell_id({"train.lr": "0.001", "train.lora": "null"})  # as the table reads
    assert one != cell_id({"train.lr": 0.003, "train.lora": None})
    assert one.startswith("cell-") and len(one) == len("cell-") + 10


def test_resolve_names_the_reference_it_cannot_find():
    assert resolve("campaign.core.io:read_json") is read_json
    with pytest.raises(CampaignError, match=r"'campaign\.core\.io:nope': module .* has no"):
        resolve("campaign.core.io:nope")
    with pytest.raises(CampaignError, match=r"'campaign\.nowhere:f': no module"):
        resolve("campaign.nowhere:f")
    with pytest.raises(CampaignError, match=r"expected a reference 'module:function'"):
        resolve("campaign.core.io")


def test_the_training_stage_does_not_hold_the_readers_in_its_code_version():
    """core/io is read by the phases that read artifacts; the training stage reads none of
    them, so an edit of a reader must not retrain every run (its code version, hence its key)."""
    from campaign.core.code import import_closure
    from campaign.core.registry import stages

    train = stages()["train"]
    closure = {m for module in train.code_modules for m in import_closure(module)}
    assert "campaign.train.stage" in closure and "campaign.core.io" not in closure

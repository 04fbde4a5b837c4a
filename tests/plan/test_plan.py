"""The planner: cells × seeds, param-derived ids, the control merged with its grid cell."""

import copy

import pytest

from campaign.core.errors import CampaignError
from campaign.core.params import load_params
from campaign.plan import format_table, kept_runs, plan_rows, plan_runs, run_id


@pytest.fixture()
def params():
    p = load_params("params.yaml")
    p["ablation"]["factors"] = {"train": {"lr": [1.0e-4, 5.0e-4], "max_length": [32, 64]}}
    p["ablation"]["seeds"] = [1, 2]
    p["train"]["lr"] = 5.0e-4
    p["train"]["max_length"] = 64
    return p


def test_full_factorial_with_baseline_merged(params):
    runs = plan_runs(params)
    # 2 × 2 cells; the baseline (lr 5e-4, max_length 64) is one of them → 4 cells × 2 seeds.
    assert len(runs) == 8
    baseline = [r for r in runs if not r.moved]
    assert [r.seed for r in baseline] == [1, 2]
    assert all(r.roles == ("baseline",) and r.cell == baseline[0].cell for r in baseline)
    assert dict(baseline[0].cell) == {"train.lr": 5.0e-4, "train.max_length": 64}
    assert {dict(r.cell)["train.lr"] for r in runs} == {1.0e-4, 5.0e-4}
    assert len({r.run_id for r in runs}) == 8


def test_baseline_outside_the_grid_is_an_extra_cell(params):
    params["train"]["lr"] = 1.0e-3
    runs = plan_runs(params)
    assert len(runs) == 10  # (4 grid cells + baseline) × 2 seeds
    assert sum("baseline" in r.roles for r in runs) == 2
    assert all(r.roles in (("baseline",), ("grid",)) for r in runs)
    assert runs[0].roles == ("baseline",) and runs[0].tier == "control"


def test_no_factors_is_the_baseline_alone(params):
    params["ablation"]["factors"] = {}
    runs = plan_runs(params)
    assert [r.roles for r in runs] == [("baseline",), ("baseline",)]


def test_ids_depend_only_on_the_resolved_spec(params):
    before = {r.run_id: r for r in plan_runs(params)}
    assert all(r.run_id == run_id(r.spec) for r in before.values())
    # Editing one level: runs at the other level keep their ids; new ids for the new level.
    edited = copy.deepcopy(params)
    edited["ablation"]["factors"]["train"]["lr"] = [2.0e-4, 5.0e-4]
    after = {r.run_id: r for r in plan_runs(edited)}
    kept = set(before) & set(after)
    assert {dict(before[k].cell)["train.lr"] for k in kept} == {5.0e-4}
    assert len(kept) == 4 and len(set(after) - kept) == 4
    # Unrelated sections (data, campaign) do not change any run id.
    other = copy.deepcopy(params)
    other["data"]["sources"][0]["licence"] = "MIT"
    other["campaign"]["name"] = "renamed"
    assert {r.run_id for r in plan_runs(other)} == set(before)


def test_seed_changes_the_id(params):
    a = plan_runs(params)
    params["ablation"]["seeds"] = [3]
    b = plan_runs(params)
    assert not {r.run_id for r in a} & {r.run_id for r in b}


def test_model_factor():
    params = load_params("tests/fixtures/tiny_params.yaml")  # from_config: has a model.config
    params["ablation"]["factors"] = {"model": {"config": {"hidden_size": [32, 48]}}}
    runs = plan_runs(params)
    assert {r.spec["model"]["config"]["hidden_size"] for r in runs} == {32, 48}
    assert params["model"]["config"]["hidden_size"] == 32  # the input is not mutated


def test_max_runs_keeps_a_prefix_of_the_order(params):
    everything = plan_runs(params)
    params["ablation"]["max_runs"] = 5
    runs = plan_runs(params)
    assert [r.run_id for r in runs] == [r.run_id for r in everything]
    assert [r.kept for r in runs] == [True] * 5 + [False] * 3
    assert kept_runs(params) == [r.run_id for r in runs[:5]]


def test_a_design_too_large_to_order_stops_in_one_line(params):
    params["ablation"]["factors"] = {
        "train": {"lr": list(range(1, 400)), "warmup_steps": list(range(300))}
    }
    with pytest.raises(CampaignError, match=r"^ablation.factors: design full has 119700 cells"):
        plan_runs(params)


def test_a_factor_on_a_key_the_baseline_does_not_set_stops_in_one_line(params):
    params["ablation"]["factors"] = {"train": {"devices": [1, 2]}}
    params["train"].pop("devices", None)
    with pytest.raises(
        CampaignError, match=r"^ablation.factors.train.devices: the baseline sets no train.devices"
    ):
        plan_runs(params)
    # Set at 1, the control keeps its id (an effective batch of 1 device), and the 2-device
    # cell costs twice the tokens: it comes after the control.
    control = run_id(
        plan_runs({**params, "ablation": {**params["ablation"], "factors": {}}})[0].spec
    )
    params["train"]["devices"] = 1
    runs = plan_runs(params)
    assert runs[0].run_id == control
    assert [dict(r.cell)["train.devices"] for r in runs[:2]] == [1, 2]


def test_table_lists_every_run(params):
    rows = plan_rows(plan_runs(params))
    text = format_table(rows)
    assert text.splitlines()[0].split() == [
        "run", "train.lr", "train.max_length", "seed", "tier", "cell_id"
    ]  # fmt: skip
    assert len(text.splitlines()) == 2 + 8


def test_a_cells_id_is_the_same_at_every_seed_and_in_every_design(params):
    """cell_id names the cell (its levels), not the run: both seeds share it, another design
    with the same cell gives it the same id, and run ids do not change with it."""
    rows = plan_rows(plan_runs(params))
    by_cell = {}
    for r in rows:
        by_cell.setdefault((r["train.lr"], r["train.max_length"]), set()).add(r["cell_id"])
    assert len(by_cell) == 4 and all(len(ids) == 1 for ids in by_cell.values())
    assert len({next(iter(ids)) for ids in by_cell.values()}) == 4
    one_at_a_time = copy.deepcopy(params)
    one_at_a_time["ablation"]["design"] = "one_at_a_time"
    other = plan_rows(plan_runs(one_at_a_time))
    assert len(other) < len(rows)
    for r in other:
        assert r["cell_id"] in by_cell[(r["train.lr"], r["train.max_length"])]
    assert {r["run"] for r in other} <= {r["run"] for r in rows}
    assert all(r.run_id == run_id(r.spec) for r in plan_runs(params))


def test_an_optional_train_key_at_its_default_keeps_the_run_id(params):
    """A spec written before train.base_quantization existed trains the same model: same id
    (and store key); set, it is another run."""
    with_key = copy.deepcopy(params)
    with_key["train"]["base_quantization"] = None
    without = copy.deepcopy(params)
    without["train"].pop("base_quantization", None)
    ids = [[r.run_id for r in plan_runs(p)] for p in (with_key, without)]
    assert ids[0] == ids[1]
    quantized = copy.deepcopy(params)
    quantized["train"]["base_quantization"] = "int8_weight_only"
    assert not set(ids[0]) & {r.run_id for r in plan_runs(quantized)}

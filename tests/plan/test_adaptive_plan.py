"""The runs an adaptive campaign appends: the ids a fixed plan listing those seeds would give
the same cells, each cell's seeds in order after ablation.seeds, max_seeds a cap."""

import pytest

from campaign.core.errors import CampaignError
from campaign.core.io import cell_id
from campaign.core.params import load_params
from campaign.plan import plan_runs, run_spec
from campaign.plan.planner import adaptive_runs, adaptive_seeds, appended_runs


@pytest.fixture()
def params():
    p = load_params("params.yaml")
    p["train"].update(lr=1.0e-3)
    p["ablation"].update(design="full", seeds=[1, 2], max_runs=1000)
    p["ablation"]["factors"] = {"train": {"lr": [1.0e-3, 3.0e-3]}}
    p["ablation"]["adaptive"] = {"enabled": True, "max_looks": 3, "max_seeds": 4}
    return p


def _by_cell_seed(runs):
    return {(cell_id(dict(r.cell)), r.seed): r.run_id for r in runs}


def test_appended_runs_have_the_ids_of_a_fixed_plan_with_those_seeds(params):
    assert adaptive_seeds(params["ablation"]) == [3, 4]
    fixed = {**params, "ablation": {**params["ablation"], "seeds": [1, 2, 3, 4]}}
    want = {k: v for k, v in _by_cell_seed(plan_runs(fixed)).items() if k[1] > 2}
    assert _by_cell_seed(adaptive_runs(params)) == want
    # A run's spec resolves whether planned or appended (its train job needs it).
    rid = next(iter(want.values()))
    assert run_spec(params, rid)["seed"] in (3, 4)


def test_appended_runs_bring_each_cell_to_its_seeds(params):
    cells = {cell_id(dict(r.cell)) for r in plan_runs(params)}
    control, other = sorted(cells, key=lambda c: c != cell_id(dict(plan_runs(params)[0].cell)))
    runs = appended_runs(params, {control: 4, other: 2})
    assert [(cell_id(dict(r.cell)), r.seed) for r in runs] == [(control, 3), (control, 4)]
    with pytest.raises(CampaignError, match="max_seeds 4"):
        appended_runs(params, {control: 5})


def test_adaptive_off_appends_nothing(params):
    params["ablation"]["adaptive"]["enabled"] = False
    assert adaptive_runs(params) == []


def test_max_seeds_under_the_planned_seeds_is_refused_in_one_line(params):
    from campaign.plan import PHASE

    params["ablation"]["adaptive"]["max_seeds"] = 1
    with pytest.raises(CampaignError, match=r"ablation.adaptive.max_seeds: 1, fewer than the 2"):
        PHASE.check_params(params)


def test_adaptive_with_a_metric_the_looks_do_not_score_is_refused(params):
    from campaign.plan import PHASE

    params["evaluation"]["metric"] = "macro_f1"
    with pytest.raises(CampaignError, match=r"ablation.adaptive.enabled: .* macro_f1"):
        PHASE.check_params(params)


def test_adaptive_with_one_seed_is_refused_in_one_line(params):
    """With one seed a cell the first look cannot measure the seed spread, so it would add no
    seed anywhere and end: refused before anything runs."""
    from campaign.plan import PHASE

    params["ablation"]["seeds"] = [1]
    with pytest.raises(CampaignError, match=r"^ablation.adaptive.enabled: ablation.seeds has 1 "):
        PHASE.check_params(params)


def test_the_looks_hour_cap_is_the_lower_of_budget_hours_and_preflight_max_hours(params):
    from campaign.evaluate.looks import look_spec

    params["ablation"]["budget_hours"], params["preflight"]["max_hours"] = None, None
    assert look_spec(params, 1)["budget_hours"] is None
    params["preflight"]["max_hours"] = 5.0
    assert look_spec(params, 1)["budget_hours"] == 5.0
    params["ablation"]["budget_hours"] = 2.0
    assert look_spec(params, 1)["budget_hours"] == 2.0

"""The guard jobs in the plan (evaluation.guards): one per (run, guard task) and one per task
for the base model, kept with their run, each projected at a run's hours beyond its training
steps (what the budget prices a guard job at, measured), and never rows of the runs table."""

import json

import pytest
from test_projection import plan

from campaign.plan.guard_jobs import guard_lines, plan_guards
from campaign.plan.planner import plan_report, table_spec
from campaign.plan.projection import project
from campaign.plan.summary import report_lines


def guarded(tasks=("arith", "facts")):
    spec, report, measurements, free = plan()
    spec["rows"][1]["kept"] = False  # cut by max_runs
    spec |= {"guards": list(tasks), "max_runs": 1, "budget_hours": None}
    spec["design"] = {"name": "full", "factors": [], "control": [], "seeds": [1, 2], "lines": []}
    return spec, report, measurements, free


def test_a_guard_job_is_projected_at_a_runs_hours_beyond_its_steps():
    spec, report, measurements, free = guarded()
    rows = project(spec, report, measurements, free)
    jobs = plan_guards(spec, rows, report, measurements)
    # run-a by hand (test_projection): 4.0 s of validation, 1.6 of predictions, 1.5 of checkpoints.
    each = round((4.0 + 1.6 + 1.5) / 3600, 6)  # the table rounds hours to 6 places
    assert [(j["run"], j["guard"], j["kept"]) for j in jobs] == [
        ("base", "arith", True),
        ("base", "facts", True),
        ("run-a", "arith", True),
        ("run-a", "facts", True),
        ("run-b", "arith", False),  # its run is cut: so are its guard jobs
        ("run-b", "facts", False),
    ]
    assert all(j["projected_hours"] == pytest.approx(each, abs=1e-6) for j in jobs)
    lines = "\n".join(report_lines(spec, rows, guards=jobs)).splitlines()
    assert (
        "guard jobs (evaluation.guards): 4 = 2 tasks × (1 kept run + the base model), projected "
        f"at {4 * each:.4g} h beside the kept runs'" in "\n".join(lines)
    )
    table = lines[lines.index(next(x for x in lines if x.split()[:2] == ["guard", "tier"])) :]
    assert table[2].split() == ["arith", "guard", "2", f"{each:.4g}", f"{2 * each:.4g}"]


def test_without_guards_the_plan_has_no_guard_jobs_and_its_key():
    from campaign.core.params import load_params

    spec, report, measurements, free = guarded(tasks=())
    spec.pop("guards")
    rows = project(spec, report, measurements, free)
    assert plan_guards(spec, rows, report, measurements) == []
    assert guard_lines([]) == []
    # The plan table's spec (its store key) of a campaign without guards is the one it had before
    # guards existed: no "guards" entry, so nothing of it reruns; with guards, the tasks in order.
    params = load_params("params.yaml")
    params["evaluation"].pop("guards", None)
    assert "guards" not in table_spec(params)
    params["evaluation"]["guards"] = [{"task": "g", "include": "guards/g.yaml"},
                                      {"task": "h", "include": "guards/h.yaml"}]  # fmt: skip
    assert table_spec(params)["guards"] == ["g", "h"]


def test_before_the_preflight_the_guard_jobs_are_counted_without_hours(tmp_path):
    from campaign.core.params import load_params

    params = load_params("params.yaml")
    params["evaluation"]["guards"] = [{"task": "g", "include": "guards/g.yaml"}]
    rows, lines = plan_report(params, tmp_path / "report.json", tmp_path / "measurements.json")
    runs = [r for r in rows if r["tier"] != "guard"]
    guards = [r for r in rows if r["tier"] == "guard"]
    kept = sum(r["kept"] for r in runs)
    assert len(guards) == len(runs) + 1 and "projected_hours" not in guards[0]
    assert f"guard jobs (evaluation.guards): {kept + 1} = 1 task × (" in "\n".join(lines)
    assert json.dumps(rows)  # what `campaign plan --format json` prints

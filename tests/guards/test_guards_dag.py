"""The guards in the DAG: `snakemake -n` of a causal LM campaign on a pretrained base with one
guard lists one guard job per (kept run, guard task), one base job per guard task, and one
deciding job whose file the evaluation reads; `campaign validate` refuses a missing guard task
YAML in one line naming the key."""

from __future__ import annotations

import json
import shutil
from collections import Counter

import pytest
import yaml

from conftest import FIXTURES, campaign, copy_project, planned_jobs, snakemake

pytestmark = pytest.mark.slow(minutes=1)


@pytest.fixture(scope="module")
def guarded_project(tmp_path_factory):
    from genkit import tiny_llama, tiny_tokenizer

    project = copy_project(tmp_path_factory.mktemp("guards") / "project")
    tiny_llama(seed=1).save_pretrained(project / "models" / "base")
    tiny_tokenizer().save_pretrained(project / "models" / "base")
    shutil.copytree(FIXTURES / "guard_task", project / "guards")
    path = project / "params.yaml"
    params = yaml.safe_load(path.read_text())
    params["model"] = {
        "task": "causal_lm",
        "source": "models/base",
        "tokenizer": {"source": "model"},
    }
    params["evaluation"]["guards"] = [
        {"task": "tiny_guard", "include": "guards/tiny_guard.yaml", "margin": 0.15}
    ]
    path.write_text(yaml.safe_dump(params, sort_keys=False))
    return project


def test_the_dag_has_one_guard_job_per_run_and_task_and_the_base_once(guarded_project):
    jobs = planned_jobs(snakemake(guarded_project, "-n", timeout=300))
    rules = Counter(rule for rule, _ in jobs)
    assert rules["train"] == 4  # 2 cells x 2 seeds
    assert rules["guard"] == rules["train"] and rules["guard_base"] == 1 and rules["guards"] == 1
    guarded = sorted(out for rule, out in jobs if rule == "guard")
    trained = sorted(out for rule, out in jobs if rule == "train")
    runs = [p.split("/")[2] for p in trained]
    assert guarded == [f"results/guards/runs/{r}/tiny_guard.parquet" for r in runs]
    assert ("guard_base", "results/guards/base/tiny_guard.parquet") in jobs


def test_validate_refuses_a_missing_guard_task_yaml_naming_the_key(guarded_project, tmp_path):
    project = shutil.copytree(
        guarded_project, tmp_path / "p", ignore=shutil.ignore_patterns(".snakemake")
    )
    (project / "guards" / "tiny_guard.yaml").unlink()
    proc = campaign(project, "validate", check=False)
    assert proc.returncode != 0
    (line,) = proc.stderr.strip().splitlines()
    assert "evaluation.guards[0].include: " in line and "no such task YAML" in line


def test_campaign_plan_lists_the_guard_jobs_beside_the_runs(guarded_project):
    out = campaign(guarded_project, "plan").stdout
    lines = out.splitlines()
    # One job per (run, guard task) and one for the base model, under the runs they guard.
    assert "guard jobs (evaluation.guards): 5 = 1 task × (4 kept runs + the base model)" in lines
    header = lines.index(next(x for x in lines if x.split()[:2] == ["guard", "tier"]))
    assert lines[header].split() == ["guard", "tier", "jobs"]
    assert lines[header + 2].split() == ["tiny_guard", "guard", "5"]
    rows = json.loads(campaign(guarded_project, "plan", "--format", "json").stdout)
    runs = [r["run"] for r in rows if r["tier"] != "guard"]
    guards = [(r["run"], r["guard"], r["kept"]) for r in rows if r["tier"] == "guard"]
    assert guards == [(r, "tiny_guard", True) for r in ["base", *runs]]

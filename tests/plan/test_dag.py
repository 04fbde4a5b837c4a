"""Which runs the DAG has (campaign.plan.dag, what workflow/rules/common.smk asks): the params'
runs for a fixed campaign, the plan table's kept runs with a budget, the last look's runs in an
adaptive campaign, and each look's inputs. Snakemake's checkpoints are stood in for by the
files they would have written (the real ones run in tests/workflow: test_e2e, test_adaptive)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from campaign.core.errors import CampaignError
from campaign.core.params import load_params
from campaign.plan.dag import DagRuns

REPO = Path(__file__).resolve().parents[2]


class Checkpoints:
    """Snakemake's `checkpoints` as far as DagRuns asks it: `.get(**wildcards).output`; a
    checkpoint not yet written raises, as Snakemake's IncompleteCheckpointException does."""

    def __init__(self, root: Path):
        self.plan_table = self._one("runs", lambda: root / "runs.tsv")
        self.look = self._one("look", lambda look: root / f"look_{look}.json")
        self.asked: list[str] = []

    def _one(self, name: str, path):
        def get(**wildcards):
            p = path(**wildcards)
            self.asked.append(p.name)
            if not p.exists():
                raise LookupError(f"checkpoint {p.name} not written yet")
            return SimpleNamespace(output=SimpleNamespace(**{name: str(p)}))

        return SimpleNamespace(get=get)


@pytest.fixture()
def params():
    return load_params(REPO / "tests" / "fixtures" / "tiny_params.yaml")


def write_plan(root: Path, kept: dict[str, bool]) -> None:
    rows = ["run\tseed\ttier\tkept"] + [f"{r}\t1\tmain\t{str(k).lower()}" for r, k in kept.items()]
    (root / "runs.tsv").write_text("\n".join(rows) + "\n")


def write_look(root: Path, look: int, runs: list[str], final: bool) -> None:
    record = {"look": look, "runs": runs, "appended": [], "final": final}
    (root / f"look_{look}.json").write_text(json.dumps(record))


def test_a_fixed_campaign_lists_the_params_runs_without_asking_a_checkpoint(params, tmp_path):
    ckpt = Checkpoints(tmp_path)
    dag = DagRuns(params, ckpt)
    paths = dag.run_paths("results/runs/{run}/metrics.json")
    assert isinstance(paths, list) and len(paths) == 4  # 2 lr levels x 2 seeds
    assert paths == [f"results/runs/{r}/metrics.json" for r in dag.runs]
    assert dag.look_paths("results/adaptive/look_{look}.json") == []
    # The plan's order is the priority: the first run highest, a run not planned lowest.
    prio = [dag.priority(SimpleNamespace(run=r)) for r in dag.runs]
    assert prio == sorted(prio, reverse=True) and len(set(prio)) == 4
    assert dag.priority(SimpleNamespace(run="run-000000000000")) == 0
    assert dag.devices(SimpleNamespace(run=dag.runs[0])) == 1  # train.devices' default
    assert ckpt.asked == []


def test_a_budget_cut_asks_the_plan_table(params, tmp_path):
    params["ablation"]["budget_hours"] = 1.0
    ckpt = Checkpoints(tmp_path)
    paths = DagRuns(params, ckpt).run_paths("{run}.json")
    with pytest.raises(LookupError):  # Snakemake defers the consumer until the table exists
        paths(None)
    write_plan(tmp_path, {"a": True, "b": False, "c": True})
    assert paths(None) == ["a.json", "c.json"]


def test_an_adaptive_campaign_has_the_runs_of_its_last_look(params, tmp_path):
    params["ablation"]["adaptive"]["enabled"] = True
    ckpt = Checkpoints(tmp_path)
    dag = DagRuns(params, ckpt)
    first = dag.runs[:2]
    runs = dag.run_paths("{run}")
    looks = dag.look_paths("look_{look}.json")
    write_look(tmp_path, 1, first + ["x"], final=False)
    with pytest.raises(LookupError):  # look 2 not taken yet: the DAG waits for it
        runs(None)
    write_look(tmp_path, 2, first + ["x", "y"], final=True)
    assert runs(None) == first + ["x", "y"]
    assert looks(None) == ["look_1.json", "look_2.json"]
    # Look 1 evaluates the plan's runs; look 2 those look 1 lists, after look 1's record.
    evaluated = dag.look_run_paths("{run}")
    assert evaluated(SimpleNamespace(look="1")) == dag.runs
    assert evaluated(SimpleNamespace(look="2")) == first + ["x"]
    previous = dag.previous_look("look_{look}.json")
    assert previous(SimpleNamespace(look="1")) == []
    assert previous(SimpleNamespace(look="2")) == ["look_1.json"]


def test_a_look_record_without_its_runs_fails_in_one_line_naming_it(params, tmp_path):
    params["ablation"]["adaptive"]["enabled"] = True
    (tmp_path / "look_1.json").write_text(json.dumps({"look": 1, "final": True}))
    with pytest.raises(CampaignError, match=r"look_1.json: expected a key"):
        DagRuns(params, Checkpoints(tmp_path)).run_paths("{run}")(None)


def test_the_dag_imports_neither_torch_nor_scipy():
    """What the Snakefile imports to build the DAG (common.smk's modules, every phase's
    declaration, the runs and every quantize variant's declaration, whose METHOD is part of each
    job's key) loads no torch, transformers or scipy.stats: every `snakemake` call and every
    cluster job parses the Snakefile, and those imports took seconds each."""
    import os
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from campaign.core.params import load_params\n"
        "from campaign.core.registry import phases, stages\n"
        "from campaign.plan.dag import DagRuns\n"
        "from campaign.quantize import dag_job_paths, variants\n"
        "from campaign.tools.findings import after_run\n"
        f"params = load_params({str(REPO / 'tests' / 'fixtures' / 'tiny_params.yaml')!r})\n"
        "phases(); stages()\n"
        "runs = DagRuns(params, None).run_paths('{run}')\n"
        "dag_job_paths(params, '{run}/{variant}', runs, None)(None)\n"
        "methods = [variants.get(n).METHOD for n in variants.names()]\n"
        "print(sorted(m for m in ('torch', 'transformers', 'scipy.stats') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(REPO / "workflow")},
    )
    assert out.stdout.splitlines()[-1] == "[]", out.stdout

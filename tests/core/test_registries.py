"""Adding a phase, a preflight check or an ablation design is adding files: a throw-away one of
each, written into a copy of the project, shows up in `campaign --help`, in the plan and in the
preflight report, with no other file edited."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import yaml

from conftest import campaign, copy_project, env

STAGE_PHASE = '''
"""A throw-away phase: counts the lines of its input."""

from campaign.core.stage import File, Nothing, Phase, Stage


def _spec(params: dict) -> dict:
    return {"name": params["campaign"]["name"]}


PHASE = Phase(
    name="throwaway",
    order=90,
    stages=(
        Stage(
            name="count_lines",
            entry="campaign.throwaway.count:stage",
            help="count the lines of a file (a throw-away stage)",
            inputs={"text": Nothing()},  # a file a person names: --in text=...
            outputs={"count": File("results/throwaway/count.txt")},
            spec=_spec,
        ),
    ),
)
'''

STAGE_CODE = '''
"""The throw-away stage's code."""


def stage(ctx) -> None:
    lines = ctx.inputs["text"][0].read_text(encoding="utf-8").splitlines()
    ctx.outputs["count"].write_text(f"{ctx.spec['name']}: {len(lines)} lines\\n")
'''

CHECK = '''
"""throwaway: a check that always passes and says how many training examples it saw."""

from campaign.preflight.bench import Result

ORDER = 95


def run(bench) -> Result:
    n = len(bench.sample.train)
    return Result(True, f"saw {n} training examples", {"examples": n})


def describe(details: dict) -> list[str]:
    return [f"throw-away detail: {details['examples']} examples"]
'''

DESIGN = '''
"""corners: the cell with every factor at its first level and the one with all at the last."""

from typing import Any


def cells(keys: list[str], levels: list[list[Any]], baseline: dict, ablation: dict) -> list:
    if not keys:
        return []
    return [
        tuple((k, lv[0]) for k, lv in zip(keys, levels, strict=True)),
        tuple((k, lv[-1]) for k, lv in zip(keys, levels, strict=True)),
    ]
'''

PREFLIGHT_SCRIPT = """
import json, sys
from pathlib import Path

import pandas as pd

from campaign.plan import resolved_spec
from campaign.core.params import load_params
from campaign.preflight.report import format_report, run_preflight

params = load_params("params.yaml")
records = [json.loads(line) for line in Path("data/raw/demo.jsonl").read_text().splitlines()]
inputs = {}
for name, part in (("train", records[:120]), ("validation", records[120:160]),
                   ("test", records[160:200])):
    path = Path(f"{name}.parquet")
    pd.DataFrame([{"id": r["id"], "text": r["text"], "label": r["label"]} for r in part]
                 ).to_parquet(path, index=False)
    inputs[name] = [path]
spec = resolved_spec(params, {}, 1)
report = run_preflight(spec, inputs, params["preflight"], Path("work"), Path("."),
                       only=["tokenization", "throwaway"])
print(json.dumps({"report": report, "text": format_report(report)}))
"""


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")


def test_a_new_stage_check_and_design_are_only_new_files(tmp_path):
    project = copy_project(tmp_path / "project")
    package = project / "workflow" / "campaign"
    before = {p: p.read_bytes() for p in project.rglob("*") if p.is_file()}
    write(package / "throwaway" / "__init__.py", STAGE_PHASE)
    write(package / "throwaway" / "count.py", STAGE_CODE)
    write(package / "preflight" / "checks" / "throwaway.py", CHECK)
    write(package / "plan" / "designs" / "corners.py", DESIGN)
    # Nothing that existed was edited (params.yaml is the user's, changed below on purpose).
    assert all(p.read_bytes() == data for p, data in before.items())

    # The stage: a subcommand, and it runs through the runner and the store.
    help_text = campaign(project, "--help").stdout
    assert "count-lines" in help_text and "throw-away stage" in help_text
    campaign(project, "count-lines", "--in", "text=data/raw/demo.jsonl", "--out", "count=count.txt")
    assert (project / "count.txt").read_text() == "tiny: 3000 lines\n"

    # The design: accepted by the schema (its name comes from the folder) and used by the plan.
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["ablation"]["design"] = "corners"
    params["ablation"]["factors"] = {
        "train": {"lr": [1.0e-3, 2.0e-3, 3.0e-3], "max_steps": [10, 20]}
    }
    params["ablation"]["seeds"] = [1]
    params["preflight"]["blocking"] = ["tokenization", "throwaway"]
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    plan = json.loads(campaign(project, "plan", "--format", "json").stdout)
    cells = {(row["train.lr"], row["train.max_steps"]) for row in plan}
    # the baseline (lr 1e-3, 20 steps) plus the two corners, not the 6 cells of a full grid
    assert cells == {(1.0e-3, 20), (1.0e-3, 10), (3.0e-3, 20)}

    # The check: accepted in preflight.blocking and run into the report, text included (on the
    # preflight sample: 64 of the 120 training records, preflight.sample.train_examples).
    out = subprocess.run(
        [sys.executable, "-c", PREFLIGHT_SCRIPT],
        cwd=project,
        env={**env(), "PYTHONPATH": str(project / "workflow"), "CUDA_VISIBLE_DEVICES": ""},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.splitlines()[-1])
    check = result["report"]["throwaway"]
    assert check["passed"] and check["blocking"] and check["summary"] == "saw 64 training examples"
    assert "throw-away detail: 64 examples" in result["text"]
    # ...after the built-in checks (its ORDER), and only the requested ones ran.
    assert list(result["report"]) == ["tokenization", "throwaway", "passed"]


def test_unknown_registry_names_are_refused_with_the_known_ones(tmp_path):
    project = copy_project(tmp_path / "project")
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["ablation"]["design"] = "corners"
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    out = campaign(project, "validate", check=False)
    assert out.returncode == 2
    assert "ablation.design: expected one of explicit, fractional, full, one_at_a_time" in (
        out.stderr
    )
    params["ablation"]["design"] = "full"
    params["preflight"]["blocking"] = ["tokenisation"]
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    out = campaign(project, "validate", check=False)
    assert out.returncode == 2 and "preflight.blocking[0]: expected one of disk" in out.stderr

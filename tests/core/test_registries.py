"""Adding a phase, a preflight check or an ablation design is adding files: a throw-away one of
each, written into a copy of the project, shows up in `campaign --help`, in the plan and in the
preflight report, with no other file edited. A phase that contributes a report section, findings
and index columns, added to a copy of the finished tiny campaign, shows up in the DAG, the report,
`campaign findings` and the index with only its folder, rule file, schema section and params."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from conftest import campaign, copy_project, env, planned_jobs, snakemake


def trained_runs(project: Path) -> list[str]:
    """The runs a finished project trained (results/runs/<run>/)."""
    return sorted(p.name for p in (project / "results" / "runs").iterdir() if p.is_dir())


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
    assert out.returncode == 2
    assert "preflight.blocking[0]: expected one of command, disk" in out.stderr


# ---- a phase that contributes to the report, the findings and the index ----------------------

TALLY_PHASE = '''
"""A throw-away phase: tallies the rows of each run's training log."""

from campaign.core.stage import (
    EachRun,
    File,
    Findings,
    From,
    IndexColumns,
    Phase,
    ReportSection,
    Stage,
)

TALLY = {"tally": From("tally", "tally")}


def _spec(params: dict) -> dict:
    return {"note": params["tally"]["note"]}


PHASE = Phase(
    name="tally",
    order=78,
    stages=(
        Stage(
            name="tally",
            entry="campaign.tally.stage:stage",
            help="tally the rows of the runs' training logs (a throw-away phase)",
            inputs={"logs": EachRun("train", "metrics")},
            outputs={"tally": File("results/tally/tally.json")},
            spec=_spec,
        ),
    ),
    report=(
        ReportSection(
            "tally",
            "Tally of the logs",
            45,
            "campaign.tally.stage:render",
            TALLY,
            figure="6. Tally",
        ),
    ),
    findings=(Findings(TALLY, "campaign.tally.stage:describe"),),
    index=(IndexColumns((("log_rows", "int64"),), "campaign.tally.stage:columns", TALLY),),
)
'''

TALLY_CODE = '''
"""The throw-away phase's stage, its report section, its findings and its index column."""

import json

import pandas as pd

from campaign.core.stage import Section


def stage(ctx) -> None:
    rows = {p.parent.name: len(pd.read_parquet(p)) for p in ctx.inputs["logs"]}
    ctx.outputs["tally"].write_text(json.dumps({"note": ctx.spec["note"], "rows": rows}))


def _read(path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def render(inputs) -> Section:
    tally = _read(inputs.one("tally"))
    table = pd.DataFrame(sorted(tally["rows"].items()), columns=["run", "log_rows"])
    return Section(
        lines=[f"{tally['note']}: {len(table)} run(s)."],
        tables=[("Rows", table)],
        figure=(figure, (table,)),
    )


def figure(table):
    from campaign.core.figures import figure_axes

    fig, (ax,) = figure_axes()
    ax.bar(table["run"], table["log_rows"])
    ax.set_ylabel("rows of the training log")
    return fig


def describe(tally: dict) -> list[str]:
    return [f"tally: {len(tally['rows'])} run(s) tallied ({tally['note']})"]


def columns(inputs, rows) -> list[dict]:
    counts = _read(inputs["tally"][0])["rows"]
    return [{"log_rows": counts.get(r["run"])} if r["kind"] == "run" else {} for r in rows]
'''

TALLY_RULES = """
localrules:
    tally,


rule tally:
    input:
        **stage_inputs("tally"),
    output:
        **stage_outputs("tally"),
    log:
        "logs/tally/tally.log",
    params:
        **stage_params("tally"),
    shell:
        stage_shell("tally")
"""

TALLY_SCHEMA = """
  tally:
    description: a throw-away phase
    type: object
    additionalProperties: false
    required: [note]
    properties:
      note:
        type: string
        description: said in its report section and its findings
"""


@pytest.mark.slow
def test_a_new_phase_reaches_the_plan_report_findings_and_index(finished_project):
    """Its folder, its rule file, its schema section and its params: nothing else is edited,
    and only its own job and the two that gather from it (report, index) run."""
    import pandas as pd

    project = finished_project
    results = project / "results"
    before = {p: p.read_bytes() for p in (project / "workflow").rglob("*") if p.is_file()}
    before |= {p: p.read_bytes() for p in project.glob("*") if p.is_file()}
    old_md = (results / "report/summary.md").read_text()
    old_index = pd.read_parquet(results / "index.parquet")
    write(project / "workflow/campaign/tally/__init__.py", TALLY_PHASE)
    write(project / "workflow/campaign/tally/stage.py", TALLY_CODE)
    write(project / "workflow/rules/tally.smk", TALLY_RULES)
    schema = project / "workflow/schemas/params.schema.yaml"
    schema.write_text(schema.read_text() + TALLY_SCHEMA.lstrip("\n"))
    params = project / "params.yaml"
    params.write_text(params.read_text() + "\ntally:\n  note: hello\n")
    edited = {p for p, data in before.items() if p.read_bytes() != data}
    assert edited == {schema, params}

    # The plan: its job, and the report and index that now read its output; nothing retrains.
    assert {rule for rule, _ in planned_jobs(snakemake(project, "-n"))} == {
        "tally",
        "report",
        "index",
        "all",
    }
    snakemake(project)
    logs = {
        r: len(pd.read_parquet(results / "runs" / r / "metrics.parquet"))
        for r in trained_runs(project)
    }

    # The report: its section after the training curves (order 45), the others as they were.
    md = (results / "report/summary.md").read_text()
    table = "\n".join(f"| {run} | {n} |" for run, n in sorted(logs.items()))
    section = (
        f"## Tally of the logs\n\n- hello: {len(logs)} run(s).\n\n"
        "![Tally of the logs](figures/tally.png)\n\n**Rows**\n\n| run | log_rows |\n"
        f"|---|---|\n{table}\n\n"
    )
    assert section in md and md.index(section) > md.index("## Training curves")
    # Its figure: drawn by its own function, written beside the others.
    assert (results / "report/figures/tally.png").read_bytes().startswith(b"\x89PNG")
    (verdict, rest), (old_verdict, old_rest) = md.split("## Data", 1), old_md.split("## Data", 1)
    assert rest.replace(section, "") == old_rest
    # The verdict counts its finding too: it lists three, and the tiny campaign had three.
    more = "- ... and 1 more finding(s): campaign findings"
    assert verdict == old_verdict.rstrip("\n") + f"\n{more}\n\n"
    assert (
        '<section id="tally"><h2>Tally of the logs</h2>'
        in (results / "report/index.html").read_text()
    )

    # The findings: its line.
    out = campaign(project, "findings").stdout
    assert f"  tally: {len(logs)} run(s) tallied (hello)" in out.splitlines()

    # The index: its column last, each run's count, null elsewhere; every other column as before.
    index = pd.read_parquet(results / "index.parquet")
    assert list(index.columns) == [*old_index.columns, "log_rows"]
    runs = index[index["kind"] == "run"]
    assert dict(zip(runs["run"], runs["log_rows"], strict=True)) == logs
    assert index.loc[index["kind"] != "run", "log_rows"].isna().all()
    pd.testing.assert_frame_equal(index.drop(columns="log_rows"), old_index)

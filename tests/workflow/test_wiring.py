"""Each stage's input and output names, and their paths, live in its declaration only: every rule
takes them from the registry (no rule file spells an input, an output or a results/ path), the
references between stages resolve, and `rule all` is the final stages' outputs."""

from __future__ import annotations

import dataclasses
import os
import re

import pytest
import yaml

from campaign.core.registry import final_outputs, stages, wiring_problems
from campaign.core.stage import (
    Derived,
    EachJob,
    EachRun,
    Figure,
    File,
    Folder,
    From,
    PreviousLook,
    Stage,
)
from conftest import FIXTURES, REPO

RULES = REPO / "workflow" / "rules"
_RULE = re.compile(r"^(?P<indent> *)(?:rule|checkpoint) (?P<name>\w+):\n", re.M)


def rule_blocks() -> list[tuple[str, str, str]]:
    """(file name, rule name, body) of every rule and checkpoint in the rule files."""
    found = []
    for path in sorted(RULES.glob("*.smk")):
        text = path.read_text(encoding="utf-8")
        heads = list(_RULE.finditer(text))
        ends = [h.start() for h in heads[1:]] + [len(text)] * bool(heads)
        for head, end in zip(heads, ends, strict=True):
            body = text[head.end() : end]
            # The body ends at the first line indented no deeper than the rule's own line.
            inner = re.compile(rf"^{head['indent']}\S", re.M).search(body)
            found.append((path.name, head["name"], body[: inner.start()] if inner else body))
    return found


def section(body: str, key: str) -> str | None:
    """The text of a rule's `key:` section, stripped (None when the rule has none)."""
    m = re.search(rf"^( +){key}:\n((?:\1 +.*\n)*)", body, re.M)
    return None if m is None else m.group(2).strip()


def test_every_rule_takes_its_inputs_and_outputs_from_its_stage():
    blocks = rule_blocks()
    declared = stages()
    # One rule per stage (plan_table: a checkpoint or a rule, the same body twice).
    assert {name for _, name, _ in blocks} == set(declared)
    for file, name, body in blocks:
        stage = declared[name]
        want_in = f'**stage_inputs("{name}"),' if {**stage.inputs, **stage.after} else None
        assert section(body, "input") == want_in, (file, name)
        assert section(body, "output") == f'**stage_outputs("{name}"),', (file, name)
        assert section(body, "shell") == f'stage_shell("{name}")', (file, name)


def test_no_rule_file_spells_a_results_path_and_rule_all_comes_from_the_registry():
    for path in [*RULES.glob("*.smk"), REPO / "Snakefile"]:
        code = "\n".join(line.split("#")[0] for line in path.read_text().splitlines())
        assert not re.findall(r"[\"']results/", code), path.name
    snakefile = (REPO / "Snakefile").read_text()
    assert section(snakefile.partition("\nrule all:\n")[2], "input") == "final_targets(),"


def test_the_declared_wiring_is_sound():
    assert wiring_problems() == []
    # Every consumer reads a path some stage writes: the DAG has no dangling input.
    for stage in stages().values():
        for name, ref in {**stage.inputs, **stage.after}.items():
            if isinstance(ref, (From, EachRun, EachJob)):
                assert ref.output in stages()[ref.stage].outputs, (stage.name, name)


def _stage(name, inputs, outputs, final=False) -> Stage:
    return Stage(
        name=name,
        entry=f"campaign.x.{name}:stage",
        help="",
        inputs=inputs,
        outputs=outputs,
        spec=lambda params, **_: None,
        final=final,
    )


def test_a_broken_reference_is_one_line_naming_the_stage_and_input():
    declared = {
        "train": _stage(
            "train", {}, {"model": Folder("results/runs/{run}/model"), "x": File("results/x")}
        ),
        "table": _stage(
            "table",
            {
                "typo": From("train", "modle"),
                "nobody": From("ghost", "model"),
                "per_run": From("train", "model"),  # a fixed-path stage reading {run}
                "fixed": EachRun("train", "x"),  # nothing to expand
                "data": Derived(),  # no derive_inputs says which files
            },
            {"table": File("results/x")},  # train writes it too
            final=True,
        ),
        "jobs": _stage("jobs", {}, {"out": File("results/q/{run}/{variant}")}, final=True),
    }
    problems = wiring_problems(declared)
    assert problems == [
        "stages 'train' and 'table' both write results/x",
        "stage 'table', input 'typo': stage 'train' has no output 'modle' (it writes: model, x)",
        "stage 'table', input 'nobody': no stage 'ghost' (known: train, table, jobs)",
        "stage 'table', input 'per_run': results/runs/{run}/model holds {run}, which the "
        "stage's jobs do not have (EachRun and EachJob expand them)",
        "stage 'table', input 'fixed': EachRun needs a path in {run}: results/x",
        "stage 'table', input 'data': Derived, but the stage has no derive_inputs to find its "
        "files",
        "stage 'jobs': final, but its outputs expand over {run, variant} (a target of "
        "`snakemake` expands over runs only)",
    ]


def test_a_previous_look_naming_a_missing_output_or_a_wildcard_the_look_lacks_is_a_problem():
    """PreviousLook names another stage's output as From does: a typo, or a path in {run} read
    by a job of {look} alone, is one line naming the stage and the input."""
    declared = {
        "look": _stage(
            "look",
            {"previous": PreviousLook("look", "lokk"), "run": PreviousLook("train", "model")},
            {"look": File("results/adaptive/look_{look}.json")},
        ),
        "train": _stage("train", {}, {"model": Folder("results/runs/{run}/model")}),
    }
    assert wiring_problems(declared) == [
        "stage 'look', input 'previous': stage 'look' has no output 'lokk' (it writes: look)",
        "stage 'look', input 'run': results/runs/{run}/model holds {run}, which the stage's "
        "jobs do not have (EachRun and EachJob expand them)",
    ]


def test_a_declaration_in_names_only_is_refused_naming_the_stage():
    with pytest.raises(TypeError, match="stage 'table': inputs must map each name to one of From"):
        _stage("table", ("runs",), {"table": File("results/x")})
    with pytest.raises(TypeError, match="stage 'table': outputs .* got 'results/x'"):
        _stage("table", {}, {"table": "results/x"})


# What `rule all` listed by hand before it came from the registry: a bare `snakemake` still asks
# for each of them (and for the other outputs of the same jobs, no job more).
HAND_LISTED = [
    "results/data/manifest.parquet",
    "results/data/summary.json",
    "results/data/manifest_diff.json",
    "results/data/splits/train.parquet",
    "results/data/leakage_audit.json",
    "results/data/artifact_findings.json",
    "results/plan/runs.tsv",
    "results/preflight/report.json",
    "results/runs/{run}/spec.json",
    "results/runs/{run}/predictions_test.parquet",
    "results/quantize/variants.parquet",
    "results/evaluation/decisions.json",
    "results/budget/summary.txt",
    "results/index.parquet",
    "results/metrics.json",
    "results/report/index.html",
]


def test_rule_all_is_every_output_of_the_final_stages():
    params = yaml.safe_load((FIXTURES / "tiny_params.yaml").read_text())
    params["tracking"]["enabled"] = False
    paths = [out.path for out in final_outputs(params)]
    assert set(HAND_LISTED) <= set(paths)
    writer = {out.path: s.name for s in stages().values() for out in s.outputs.values()}
    # The stages whose jobs a bare `snakemake` needs anyway (floor, quantize jobs and the
    # selection through the ones that read them) are not final: no job is added.
    assert {writer[p] for p in paths} == {writer[p] for p in HAND_LISTED}
    assert not {"results/tracking/logged.json", "results/tensorboard"} & set(paths)
    params["tracking"]["enabled"] = True
    tracked = [out.path for out in final_outputs(params)]
    assert tracked == [*paths, "results/tracking/logged.json", "results/tensorboard"]


def test_the_report_and_index_gather_what_the_phases_declare():
    from campaign.core.errors import CampaignError
    from campaign.core.registry import get_stage, phases
    from campaign.core.stage import Findings, IndexColumns, Phase, ReportSection
    from campaign.index import gather as gather_index
    from campaign.report import gather as gather_report
    from campaign.report import sections_of

    report = get_stage("report")
    # Every section of every phase, in its declared order: the verdict first, decisions last.
    keys = [s.key for s in sections_of(phases())]
    assert keys[0] == "verdict" and keys[-1] == "decisions" and len(keys) == len(set(keys))
    assert {f"fig_{s.key}" for s in sections_of(phases()) if s.figure} == {
        n for n in report.outputs if n.startswith("fig_")
    }

    own = dataclasses.replace(report, inputs={}, outputs={}, code=())  # the report's own, none
    log = From("train", "metrics")
    a = Phase(
        "a",
        1,
        report=(ReportSection("s", "S", 5, "pkg.a:render", {"log": log}, figure="1. A"),),
        findings=(Findings({"summary": From("split", "audit")}, "pkg.f:describe"),),
    )
    gathered = gather_report(own, (a,))
    assert gathered.inputs == {"log": log, "summary": From("split", "audit")}
    assert gathered.outputs == {"fig_s": Figure("results/report/figures/s.png", "1. A")}
    assert gathered.code == ("pkg.a", "pkg.f")  # their code is part of the report's version
    # One name, two files: refused, naming both readers.
    b = Phase("b", 2, report=(ReportSection("t", "T", 6, "pkg.b:r", {"log": From("x", "y")}),))
    with pytest.raises(CampaignError, match=r"report section 't': input 'log' .* but report "):
        gather_report(own, (a, b))
    with pytest.raises(CampaignError, match="two sections declare the key 's'"):
        gather_report(own, (a, Phase("c", 3, report=a.report)))

    index = get_stage("index")
    c = Phase("c", 3, index=(IndexColumns((("n", "int64"),), "pkg.c:read", {"t": log}),))
    gathered = gather_index(index, (c,))
    assert gathered.inputs["t"] == log and "pkg.c" in gathered.code_modules
    with pytest.raises(CampaignError, match="two phases declare the column 'n'"):
        gather_index(index, (c, c))


def test_the_index_adds_the_declared_columns_row_by_row(tmp_path, monkeypatch):
    import sys
    import types

    from campaign.core.errors import CampaignError
    from campaign.core.stage import IndexColumns
    from campaign.index.stage import contributed_columns

    module = types.ModuleType("contributed_fake")
    module.read = lambda inputs, rows: [{"n": len(r["name"])} for r in rows if r["kind"] == "run"]
    module.wrong = lambda inputs, rows: [{"m": 1} for _ in rows]
    monkeypatch.setitem(sys.modules, "contributed_fake", module)
    rows = [{"name": "abc", "kind": "run"}, {"name": "floor/x", "kind": "floor"}]
    declared = [IndexColumns((("n", "int64"), ("k", "string")), "contributed_fake:read")]
    with pytest.raises(CampaignError, match="returned 1 rows of columns for 2 index rows"):
        contributed_columns({}, rows, declared)
    module.read = lambda inputs, rows: [
        {"n": len(r["name"])} if r["kind"] == "run" else {} for r in rows
    ]
    assert contributed_columns({}, rows, declared) == [("n", "int64"), ("k", "string")]
    assert rows == [
        {"name": "abc", "kind": "run", "n": 3, "k": None},
        {"name": "floor/x", "kind": "floor", "n": None, "k": None},
    ]
    with pytest.raises(CampaignError, match="undeclared column"):
        contributed_columns({}, rows, [IndexColumns((("n", "int64"),), "contributed_fake:wrong")])


def test_a_jobs_key_is_computed_without_the_heavy_libraries() -> None:
    """A store hit (a rerun after one parameter changed, `campaign status`) computes the job's
    key: the stage's derived inputs are resolved, its execution settings read and its input
    views run. None of it may import torch, transformers or peft (a quantize hit took 2.7 s,
    its torch import, instead of 0.4)."""
    import subprocess
    import sys

    refs, modules = set(), set()
    for s in stages().values():
        refs |= {s.derive_inputs} - {None} | {view for _, view in s.input_views}
        modules |= {s.execution} - {None}
    assert "campaign.quantize.inputs:derive_inputs" in refs
    assert "campaign.train.execution" in modules
    code = (
        "import importlib, sys\nfrom campaign.core.io import resolve\n"
        f"for ref in {sorted(refs)!r}:\n    resolve(ref)\n"
        f"for name in {sorted(modules)!r}:\n    importlib.import_module(name).settings(1)\n"
        "print(sorted(m for m in ('torch', 'transformers', 'peft') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(REPO / "workflow")},
    )
    assert out.stdout.split("\n")[-2] == "[]", out.stdout

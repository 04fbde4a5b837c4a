"""Adding a task is one module, one line in TASKS and its values in the schema (model.task's
enum, and evaluation.floor's for a floor of its own): a throw-away task (a text -> a score in
[0, 1], its own head, loss, per-item score and floor; tests/fixtures/score_regression_task.py),
written into a copy of the project, goes through split, preflight, train, quantize, evaluate,
the verdict and the report, and the test lists every file it touched."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml

from conftest import FIXTURES, copy_project, snakemake

pytestmark = pytest.mark.slow(minutes=2)

MODULE = Path("workflow/campaign/tasks/score_regression.py")
TASKS_FILE = Path("workflow/campaign/core/tasks.py")
SCHEMA = Path("workflow/schemas/params.schema.yaml")
DATA = Path("data/raw/scores.jsonl")

TASK_LINE = """\
        Task(
            name="score_regression",
            module="campaign.tasks.score_regression",
            scoring="item_score",
            floors=("train_mean",),
            stratify_by_label=True,
            packs=False,
        ),
"""
TASKS_END = "    )\n}\n"
ENUM = "enum: [sequence_classification, causal_lm, generation]"
FLOOR_ENUM = "items: {enum: [majority, tfidf_logreg, retrieval, zero_shot, few_shot]}"


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def touched(before: dict[str, bytes], after: dict[str, bytes]) -> set[str]:
    """Files added, changed or removed."""
    return {f for f in before.keys() | after.keys() if before.get(f) != after.get(f)}


def add_task(project: Path) -> None:
    """The new task: its module, its TASKS line, its value in the schema's enum."""
    shutil.copy(FIXTURES / "score_regression_task.py", project / MODULE)
    tasks = (project / TASKS_FILE).read_text(encoding="utf-8")
    assert tasks.count(TASKS_END) == 1
    (project / TASKS_FILE).write_text(
        tasks.replace(TASKS_END, TASK_LINE + TASKS_END), encoding="utf-8"
    )
    schema = (project / SCHEMA).read_text(encoding="utf-8")
    assert schema.count(ENUM) == 1
    assert schema.count(FLOOR_ENUM) == 1
    schema = schema.replace(ENUM, ENUM[:-1] + ", score_regression]")
    schema = schema.replace(FLOOR_ENUM, FLOOR_ENUM[:-2] + ", train_mean]}")
    (project / SCHEMA).write_text(schema, encoding="utf-8")


def add_campaign(project: Path) -> None:
    """The user's side: the demo's texts, each with a score in [0, 1] derived from its topic
    (evenly spaced over the sorted topics), and the tiny campaign's params for the new task."""
    records = [
        json.loads(line)
        for line in (project / "data/raw/demo.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    topics = sorted({r["label"] for r in records})
    score = {t: f"{i / (len(topics) - 1):.2f}" for i, t in enumerate(topics)}
    lines = [json.dumps({**r, "label": score[r["label"]]}) for r in records]
    (project / DATA).write_text("\n".join(lines) + "\n", encoding="utf-8")
    params = yaml.safe_load((FIXTURES / "tiny_params.yaml").read_text(encoding="utf-8"))
    params["data"]["sources"][0]["path"] = str(DATA)
    params["model"]["task"] = "score_regression"
    params["evaluation"].pop("metric")
    params["evaluation"]["floor"] = ["train_mean"]
    params["quantization"]["variants"] = ["int8_dynamic"]
    # A squared error on scores in [0, 1] starts near 0.1: memorising shows well below it.
    params["preflight"]["overfit"]["max_final_loss"] = 0.005
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


def test_a_throwaway_task_reaches_the_report_from_one_module(tmp_path):
    project = copy_project(tmp_path / "project")
    plain = snapshot(project)
    add_task(project)
    add_campaign(project)
    edited = touched(plain, snapshot(project))
    code = {str(MODULE), str(TASKS_FILE), str(SCHEMA)}
    assert edited == code | {"params.yaml", str(DATA)}, f"files touched: {sorted(edited)}"

    snakemake(project, "report", timeout=600)

    # split: the three split files, the items' scores as their labels.
    splits = project / "results" / "data" / "splits"
    for name in ("train", "validation", "test"):
        frame = pd.read_parquet(splits / f"{name}.parquet")
        assert len(frame) and frame["label"].astype(float).between(0, 1).all(), name
    # preflight: every check ran on the new task's examples and passed.
    preflight = (project / "results" / "preflight" / "report.txt").read_text(encoding="utf-8")
    assert preflight.startswith("preflight: PASSED"), preflight
    assert "every example carries its score" in preflight
    # train: every run (2 lr levels x 2 seeds) trained and scored its splits by closeness.
    runs = sorted(p for p in (project / "results" / "runs").iterdir() if p.is_dir())
    assert len(runs) == 4, runs
    for run in runs:
        metrics = pd.read_parquet(run / "metrics.parquet")
        assert metrics["step"].max() == 20, run.name
        predictions = pd.read_parquet(run / "predictions_validation.parquet")
        assert predictions["score"].between(0, 1).all(), run.name
        assert (predictions["score"] < 1).any(), run.name  # predicted, not copied

    # evaluate and the verdict: decided on the task's own metric, against its own floor.
    evaluation = project / "results" / "evaluation"
    decisions = json.loads((evaluation / "decisions.json").read_text(encoding="utf-8"))
    assert decisions["metric"] == "closeness", decisions
    summary = (evaluation / "summary.txt").read_text(encoding="utf-8")
    verdict = summary.split("\n\n")[0]
    assert verdict.startswith("Verdict (") and "closeness" in verdict, summary
    assert "floor/train_mean" in verdict and "train.lr=" in verdict, summary
    # quantize: the variant predicted the scores and was judged on closeness.
    judged = [line for line in summary.splitlines() if "/int8_dynamic: " in line]
    assert len(judged) == 1 and "validation closeness" in judged[0], summary
    # the report shows them.
    report = (project / "results" / "report" / "index.html").read_text(encoding="utf-8")
    assert "closeness" in report and "train_mean" in report and "int8_dynamic" in report

    # The run wrote results (and caches) only: the code the task touched is still three files.
    after = touched(plain, snapshot(project))
    code_after = {f for f in after if f.startswith("workflow/") and "__pycache__" not in f}
    assert code_after == code, sorted(code_after)
    print("files the new task touched:", *sorted(code), sep="\n  ")

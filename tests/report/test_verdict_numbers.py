"""The verdict block of the finished tiny campaign (the one scripts/demo.sh prints last, from
results/report/summary.md): each number in it is the one in the table it summarizes
(decisions.json, results/budget/equal_quality and to_decide), and the two summary.txt files
open with the same block, the evaluation's without the costs."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest
import yaml

from campaign.budget import format_money
from campaign.tools.findings import findings

LEVEL = re.compile(r"(\d+\.\d) % \[(-?\d+\.\d), (-?\d+\.\d)\]")
DIFFERENCE = re.compile(r"([+-]\d+\.\d) points \[(-?\d+\.\d), (-?\d+\.\d)\]")


def pct(*values: float) -> tuple[float, ...]:
    return tuple(round(v * 100, 1) for v in values)


def report_block(project) -> list[str]:
    """The '## Verdict' section of summary.md, one line per item (as demo.sh prints it)."""
    md = (project / "results/report/summary.md").read_text(encoding="utf-8").splitlines()
    start = md.index("## Verdict")
    end = next(i for i in range(start + 1, len(md)) if md[i].startswith("## "))
    return [line.removeprefix("- ") for line in md[start + 1 : end] if line.strip()]


def summary_block(path) -> list[str]:
    head = path.read_text(encoding="utf-8").partition("\n\n")[0].splitlines()
    assert head[0].startswith("Verdict ("), f"{path} does not open with the verdict"
    return [line.strip() for line in head[1:]]


@pytest.fixture(scope="module")
def tables(finished_campaign):
    results = finished_campaign / "results"
    return {
        "decisions": json.loads((results / "evaluation/decisions.json").read_text()),
        "equal": pd.read_parquet(results / "budget/equal_quality.parquet"),
        "to_decide": pd.read_parquet(results / "budget/to_decide.parquet"),
        "params": yaml.safe_load((finished_campaign / "params.yaml").read_text()),
    }


def line(block: list[str], prefix: str) -> str:
    found = [x for x in block if x.startswith(prefix)]
    assert len(found) == 1, (prefix, block)
    return found[0]


def test_each_number_in_the_verdict_is_the_one_in_its_table(finished_campaign, tables):
    block = report_block(finished_campaign)
    assert len(block) <= 12, block
    d, equal = tables["decisions"], tables["equal"]
    money = lambda x: format_money(x, tables["params"]["budget"]["currency"])  # noqa: E731

    # The option to keep, and its level on the split it was not chosen on.
    keep = line(block, "Keep: ")
    kind = d["verdict"]["kind"]
    if kind == "floor":  # the tiny campaign's 20-step fine-tunes are far below TF-IDF
        name = d["verdict"]["keep"]
        assert keep.startswith(f"Keep: the reference floor {name}: test ")
    else:
        name = keep.removeprefix("Keep: ").split()[1 if keep.startswith("Keep: run ") else 0]
    row = equal.set_index("variant").loc[name]
    assert row["quality_split"] == d["verdict"]["quality"]["split"] == "test"
    level = tuple(float(x) for x in LEVEL.search(keep).groups())
    assert level == pct(row["quality"], row["quality_low"], row["quality_high"])
    q = d["verdict"]["quality"]
    if kind == "floor":  # a kept run or variant is one of the cell's rows: its own level
        assert level == pct(q["value"], q["ci_low"], q["ci_high"])  # evaluation and budget agree

    # The best cell against the floor, in points, on the split decisions use.
    f = d["verdict"]["against_floor"]
    against = line(block, "Best cell against the floor ")
    assert f"{f['floor']}: " in against and against.endswith(f"on {f['split']}, {f['decision']}")
    diff = tuple(float(x) for x in DIFFERENCE.search(against).groups())
    assert diff == pct(f["estimate"], f["ci_low"], f["ci_high"])

    # Its cost to train and to serve, from the equal-quality table.
    n = tables["params"]["budget"]["predictions"]
    assert line(block, "Cost: ") == (
        f"Cost: {money(row['train_cost'])} to train + {money(row['serve_cost'])} to serve "
        f"{n:,} predictions = {money(row['total_cost'])} "
        f"(offer {tables['params']['budget']['reference_offer']})"
    )
    ship = [x for x in block if x.startswith("Ship: ")]
    assert bool(ship) == (row["kind"] != "floor")

    # Each open question with what would decide it and its price.
    opened = [x for x in block if x.startswith("Open: ")]
    priced = tables["to_decide"]
    unprovable = d["no_decision_possible"]
    assert len(opened) == len(priced) + len(unprovable) > 0
    for r in priced.itertuples():
        words = line(block, f"Open: {r.subject}, {r.decision}: ")
        assert f"{r.seeds_needed} seeds per cell = {r.extra_runs:,} more run(s)" in words
        assert words.endswith(f", {money(r.cost)}") or f", {money(r.cost)};" in words
    for u in unprovable:
        words = line(block, f"Open: {u['subject']}, ")
        assert f": {u['items_needed']:,} evaluation items" in words

    # The findings to act on: those `campaign findings` lists.
    acts = [x.removeprefix("Act on: ") for x in block if x.startswith("Act on: ")]
    assert acts == findings(finished_campaign)[:3] and acts


def test_both_summaries_open_with_the_same_verdict(finished_campaign, tables):
    results = finished_campaign / "results"
    report = report_block(finished_campaign)
    evaluation = summary_block(results / "evaluation/summary.txt")
    budget = summary_block(results / "budget/summary.txt")
    # The budget's block is the report's, but for the findings (the report adds the data's).
    before_findings = [x for x in report if not x.startswith(("Act on: ", "Findings to act"))]
    assert [x for x in budget if not x.startswith(("Act on: ", "Findings to act"))] == (
        before_findings[1:]  # the report's first line is the block's heading in words
    )
    # The evaluation knows no costs: it says where they are. It keeps the same floor, or the
    # cell whose run or adopted variant the budget keeps.
    if tables["decisions"]["verdict"]["kind"] == "floor":
        assert line(evaluation, "Keep: ") == line(report, "Keep: ")
    else:
        assert line(evaluation, "Keep: ").startswith(
            f"Keep: cell {tables['decisions']['verdict']['keep']}:"
        )
    assert line(evaluation, "Best cell against the floor") == line(
        report, "Best cell against the floor"
    )
    assert line(evaluation, "Cost to train and to serve: ").endswith(
        "results/budget/summary.txt (the budget phase runs after the evaluation)"
    )
    flags = [x for x in evaluation if x.startswith("Act on: evaluation: ")]
    assert flags and all(f in report for f in flags)

"""The verdict block (the one scripts/demo.sh prints last, from results/report/summary.md): each
number in it is the one in the table it summarizes (decisions.json, results/budget/equal_quality
and to_decide), on each of the verdict's branches: the floor kept (the finished tiny campaign),
a quantized variant of the chosen cell kept and its run kept (the demo campaign's own tables,
tests/fixtures/demo_verdict). The two summary.txt files open with the same block, the
evaluation's without the costs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
import yaml

from campaign.budget import format_money
from campaign.budget.words import verdict_values
from campaign.evaluate import decisions_from_dict, read_decisions, verdict_block
from campaign.report.sections import verdict_section
from campaign.tools.findings import findings

UNDECIDED = ("inconclusive", "adopt (smaller than useful)")  # and their "(...)" forms
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
        "decisions": read_decisions(results / "evaluation/decisions.json"),
        "equal": pd.read_parquet(results / "budget/equal_quality.parquet"),
        "to_decide": pd.read_parquet(results / "budget/to_decide.parquet"),
        "params": yaml.safe_load((finished_campaign / "params.yaml").read_text()),
    }


def line(block: list[str], prefix: str) -> str:
    found = [x for x in block if x.startswith(prefix)]
    assert len(found) == 1, (prefix, block)
    return found[0]


def check_verdict(block: list[str], tables: dict, acts_expected: list[str]) -> None:
    """Each number of the verdict block (the report's lines) is the one in its table: the kept
    option's level (equal_quality, and decisions.json for the floor), the best cell against the
    floor (decisions.json), the cost (equal_quality), each open question's price (to_decide) and
    the findings (`acts_expected`, the first three of `campaign findings`)."""
    assert len(block) <= 12, block
    d, equal = tables["decisions"], tables["equal"]
    money = lambda x: format_money(x, tables["params"]["budget"]["currency"])  # noqa: E731

    # The option to keep, and its level on the split it was not chosen on.
    keep = line(block, "Keep: ")
    kind = d.verdict.kind
    if kind == "floor":
        name = d.verdict.keep
        assert keep.startswith(f"Keep: the reference floor {name}: test ")
    else:
        name = keep.removeprefix("Keep: ").split()[1 if keep.startswith("Keep: run ") else 0]
    row = equal.set_index("variant").loc[name]
    assert row["quality_split"] == d.verdict.quality.split == "test"
    level = tuple(float(x) for x in LEVEL.search(keep).groups())
    assert level == pct(row["quality"], row["quality_low"], row["quality_high"])
    q = d.verdict.quality
    if kind == "floor":  # a kept run or variant is one of the cell's rows: its own level
        assert level == pct(q.value, q.ci_low, q.ci_high)  # evaluation and budget agree
    else:  # one of the chosen cell's rows: its representative run or one of that run's variants
        rep = d.best_cell.representative_run
        assert name == rep or name.startswith(f"{rep}/")
        assert f"cell {d.best_cell.cell}" in keep

    # The best cell against the floor, in points, on the split decisions use.
    f = d.verdict.against_floor
    against = line(block, "Kept cell against the floor ")
    assert f"{f.floor}: " in against and against.endswith(f"on {f.split}, {f.decision}")
    diff = tuple(float(x) for x in DIFFERENCE.search(against).groups())
    assert diff == pct(f.estimate, f.ci_low, f.ci_high)

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
    # Open: each main effect or quantized variant decisions.json leaves undecided (and a best
    # cell not shown above the floor), at most three listed.
    opened = [x for x in block if x.startswith("Open: ")]
    priced = tables["to_decide"]
    unprovable = d.no_decision_possible
    undecided = [
        x
        for x in d.decisions
        if x.kind in ("main", "quantized") and x.decision.startswith(UNDECIDED)
    ]
    first = int(f.decision == "not shown above floor")  # that question is listed first
    assert len(opened) == min(3, len(undecided) + first)
    if not opened:
        assert "Open questions: none" in block
    for x in undecided[: len(opened) - first]:
        words = line(block, f"Open: {x.subject}, {x.decision}: ")
        if x.kind == "quantized" and x.subject not in {u.subject for u in unprovable}:
            assert "more evaluation items would narrow it" in words
    for r in priced.itertuples():
        words = line(block, f"Open: {r.subject}, {r.decision}: ")
        if pd.isna(r.extra_runs):  # no count: the gap's lower bound reaches the bar, or items
            assert "no count is sized yet" in words or "evaluation items" in words, words
            continue
        assert f"{int(r.seeds_needed)} seeds per cell = {int(r.extra_runs):,} more run(s)" in words
        assert words.endswith(f", {money(r.cost)}") or f", {money(r.cost)};" in words
    for u in unprovable:
        words = line(block, f"Open: {u.subject}, ")
        assert f": {u.items_needed:,} evaluation items" in words

    # The findings to act on: those `campaign findings` lists.
    acts = [x.removeprefix("Act on: ") for x in block if x.startswith("Act on: ")]
    assert acts == acts_expected[:3]


def test_each_number_in_the_verdict_is_the_one_in_its_table(finished_campaign, tables):
    """The tiny campaign's 20-step fine-tunes are far below TF-IDF: the floor's branch."""
    assert tables["decisions"].verdict.kind == "floor"
    acts = findings(finished_campaign)
    assert acts
    check_verdict(report_block(finished_campaign), tables, acts)


# The demo campaign's own tables (params.yaml, as `bash scripts/demo.sh` ran it): its kept
# option is a fine-tune above the floor, with an adopted quantized variant.
DEMO = Path(__file__).resolve().parents[1] / "fixtures" / "demo_verdict"


def demo_tables() -> dict:
    return {
        "decisions": decisions_from_dict(json.loads((DEMO / "decisions.json").read_text())),
        "equal": pd.read_csv(DEMO / "equal_quality.csv"),
        "to_decide": pd.read_csv(DEMO / "to_decide.csv"),
        "params": {"budget": yaml.safe_load((DEMO / "budget.yaml").read_text())},
    }


def demo_block(tables: dict, tmp_path, acts: list[str]) -> list[str]:
    """The report's verdict lines as the budget and report stages make them from `tables`:
    the budget's block (verdict_values, verdict_block) opening its summary.txt, then the
    report's verdict_section over that file."""
    b = tables["params"]["budget"]
    equal = tables["equal"].to_dict("records")
    ship = {r["variant"]: f"results/ship/{r['variant']}" for r in equal if r["kind"] != "floor"}
    values = verdict_values(
        tables["decisions"],
        equal,
        tables["to_decide"].to_dict("records"),
        ship,
        [],
        b["predictions"],
        b["reference_offer"],
    )
    summary = tmp_path / "summary.txt"
    money = lambda x: format_money(x, b["currency"])  # noqa: E731
    summary.write_text("\n".join([*verdict_block(values, money), "", "the budget"]) + "\n")
    return verdict_section(summary, tables["decisions"], acts).lines


def test_a_kept_run_of_the_chosen_cell_is_the_one_in_its_tables(tmp_path):
    """The demo as it ran: the best cell above the floor, its representative run's ONNX fp32
    variant adopted (non-inferior) but slower to serve on that machine than torch (its
    equal_quality row costs more): the representative run is kept, with its own row's level
    (not the cell's), and the adopted variant is not claimed cheaper."""
    tables = demo_tables()
    d = tables["decisions"]
    assert d.verdict.kind == "cell"
    assert d.verdict.against_floor.decision == "above floor"
    rep = d.best_cell.representative_run
    acts = ["evaluation: one", "evaluation: two"]
    block = demo_block(tables, tmp_path, acts)
    assert line(block, "Keep: ").startswith(f"Keep: run {rep} of cell {d.best_cell.cell}:")
    assert line(block, "Ship: ") == f"Ship: results/ship/{rep}"
    check_verdict(block, tables, acts)


def test_a_kept_quantized_variant_of_the_chosen_cell_is_the_one_in_its_tables(tmp_path):
    """The same tables, the adopted ONNX fp32 variant's serving measured at half the run's cost
    (as where ONNX Runtime serves faster than torch): the variant is kept, with its own level
    and costs, and the findings say none."""
    tables = demo_tables()
    equal = tables["equal"]
    rep = tables["decisions"].best_cell.representative_run
    mine = equal["variant"] == f"{rep}/onnx_fp32"
    run_serve = equal.loc[equal["variant"] == rep, "serve_cost"].item()
    equal.loc[mine, "serve_cost"] = run_serve / 2
    equal.loc[mine, "total_cost"] = equal.loc[mine, "train_cost"] + run_serve / 2
    block = demo_block(tables, tmp_path, [])
    assert line(block, "Keep: ").startswith(
        f"Keep: {rep}/onnx_fp32 (quantized onnx_fp32 of run {rep}, cell "
    )
    assert "Findings to act on: none" in block
    check_verdict(block, tables, [])


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
    if tables["decisions"].verdict.kind == "floor":
        assert line(evaluation, "Keep: ") == line(report, "Keep: ")
    else:
        assert line(evaluation, "Keep: ").startswith(
            f"Keep: cell {tables['decisions'].verdict.keep}:"
        )
    assert line(evaluation, "Kept cell against the floor") == line(
        report, "Kept cell against the floor"
    )
    assert line(evaluation, "Cost to train and to serve: ").endswith(
        "results/budget/summary.txt (the budget phase runs after the evaluation)"
    )
    flags = [x for x in evaluation if x.startswith("Act on: evaluation: ")]
    assert flags and all(f in report for f in flags)

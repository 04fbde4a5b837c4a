"""The verdict block on hand-made tables: the option to keep across the chosen cell's runs,
their adopted quantized variants and the floor, with its quality, cost and the file to ship;
each open question with what would decide it and its price; the findings. Every number in a
line is the one in the table row it summarizes, in percent (levels) or points (differences)."""

from __future__ import annotations

import pytest

from campaign.budget import format_money
from campaign.budget.words import keep_row as _keep_row
from campaign.budget.words import verdict_values
from campaign.evaluate import decisions_from_dict, verdict_block
from campaign.evaluate import evaluation_verdict as _evaluation_verdict


def keep_row(d: dict, equal: list[dict]):
    return _keep_row(decisions_from_dict(d), equal)


def evaluation_verdict(d: dict, *args):
    return _evaluation_verdict(decisions_from_dict(d), *args)


def money(x: float) -> str:
    return format_money(x, "EUR")


def decisions(kind: str = "cell", open_effect: bool = False) -> dict:
    """decisions.json as the evaluation writes it: cell train.lr=0.001 (runs run-a, run-b),
    the floor floor/tfidf; `kind`: the verdict's ("cell" or "floor")."""
    effect = {
        "kind": "main",
        "subject": "train.lr 0.001 -> 0.003",
        "decision": "inconclusive" if open_effect else "adopt",
        "seeds_needed": 6 if open_effect else None,
        "items_needed": 4000 if open_effect else None,
    }
    return {
        "decide_on": "validation",
        "metric": "accuracy",
        "best_cell": {"cell": "train.lr=0.001", "runs": ["run-a", "run-b"]},
        "verdict": {
            "keep": "train.lr=0.001" if kind == "cell" else "floor/tfidf",
            "kind": kind,
            "quality": {"split": "test", "value": 0.80, "ci_low": 0.75, "ci_high": 0.85},
            "against_floor": {
                "floor": "floor/tfidf",
                "split": "validation",
                "estimate": 0.023 if kind == "cell" else -0.07,
                "ci_low": 0.005 if kind == "cell" else -0.11,
                "ci_high": 0.041 if kind == "cell" else -0.03,
                "decision": "above floor" if kind == "cell" else "below floor",
            },
        },
        "decisions": [
            effect,
            {
                "kind": "quantized",
                "subject": "run-a/int8_dynamic",
                "reference": "run-a",
                "decision": "adopt",
            },
        ],
        "no_decision_possible": [],
    }


def row(variant, kind, quality, train, serve, run=None) -> dict:
    return {
        "variant": variant,
        "run": run,
        "kind": kind,
        "quality_split": "test",
        "quality": quality,
        "quality_low": quality - 0.03,
        "quality_high": quality + 0.02,
        "train_cost": train,
        "serve_cost": serve,
        "total_cost": train + serve,
    }


EQUAL = [
    row("run-a", "run", 0.812, 2.0, 3.0, "run-a"),
    row("run-b", "run", 0.804, 2.5, 3.0, "run-b"),
    row("run-a/int8_dynamic", "quantized", 0.809, 2.0, 1.25, "run-a"),
]
SHIP = {
    "run-a": "results/runs/run-a/model/",
    "run-a/int8_dynamic": "results/quantize/run-a/int8_dynamic/model/model.safetensors",
}


def block(d: dict, equal: list[dict], to_decide=(), findings=()) -> list[str]:
    values = verdict_values(
        decisions_from_dict(d), equal, list(to_decide), SHIP, list(findings), 1_000_000,
        "workstation",
    )  # fmt: skip
    return verdict_block(values, money)


def test_keeps_the_cheapest_quantized_variant_and_names_the_file_to_ship():
    lines = block(decisions(), EQUAL)
    assert lines[0] == (
        "Verdict (chosen on validation; quality on test, accuracy; levels in %, differences in "
        "points)"
    )
    # The int8 variant costs 3.25 EUR in all, run-a 5.00, run-b 5.50: the int8 one is kept.
    assert lines[1] == (
        "  Keep: run-a/int8_dynamic (quantized int8_dynamic of run run-a, cell train.lr=0.001): "
        "test accuracy 80.9 % [77.9, 82.9]"
    )
    assert lines[2] == (
        "  Kept cell against the floor floor/tfidf: +2.3 points [0.5, 4.1] on validation, "
        "above floor"
    )
    assert lines[3] == (
        "  Cost: 2.00 EUR to train + 1.25 EUR to serve 1,000,000 predictions = 3.25 EUR "
        "(offer workstation)"
    )
    assert lines[4] == "  Ship: results/quantize/run-a/int8_dynamic/model/model.safetensors"
    assert lines[5:] == ["  Open questions: none", "  Findings to act on: none"]
    assert len(lines) <= 12


def test_keeps_the_floor_when_every_cell_is_below_it_even_when_a_run_is_cheaper():
    floor = row("floor/tfidf", "floor", 0.90, 0.001, 0.02)
    dearer_floor = floor | {"train_cost": 10.0, "total_cost": 10.02}
    for f in (floor, dearer_floor):
        lines = block(decisions("floor"), [*EQUAL, f], findings=["evaluation: below floor"])
        assert keep_row(decisions("floor"), [*EQUAL, f]) is f
        assert (
            lines[1] == "  Keep: the reference floor floor/tfidf: test accuracy 90.0 % [87.0, 92.0]"
        )
        assert lines[2] == (
            "  Kept cell against the floor floor/tfidf: -7.0 points [-11.0, -3.0] on validation, "
            "below floor"
        )
        assert lines[3].startswith(f"  Cost: {money(f['train_cost'])} to train + 0.02 EUR")
        assert not any(line.startswith("  Ship:") for line in lines)  # the floor is no file
        assert lines[-1] == "  Act on: evaluation: below floor"


def test_nothing_decided_lists_each_open_question_with_what_decides_it_and_its_price():
    to_decide = [
        {
            "subject": "train.lr 0.001 -> 0.003",
            "seeds_needed": 6,
            "extra_runs": 8,
            "cost": 1.2,
            "items_needed": 4000,
        }
    ]
    d = decisions(open_effect=True)
    d["decisions"][1] |= {"decision": "inconclusive (too few items)"}
    d["no_decision_possible"] = [{"subject": "run-a/int8_dynamic", "items_needed": 381}]
    equal = EQUAL[:2]  # the variant is not adopted: not at the bar
    lines = block(d, equal, to_decide)
    assert lines[1].startswith("  Keep: run run-a of cell train.lr=0.001: test accuracy 81.2 %")
    assert "  Ship: results/runs/run-a/model/" in lines
    opened = [line for line in lines if line.startswith("  Open: ")]
    assert opened == [
        "  Open: train.lr 0.001 -> 0.003, inconclusive: 6 seeds per cell = 8 more run(s), "
        "1.20 EUR; or 4,000 evaluation items (labelling not priced)",
        "  Open: run-a/int8_dynamic, inconclusive (too few items): 381 evaluation items "
        "(labelling not priced)",
    ]


def test_the_evaluation_block_says_where_the_costs_and_prices_are_and_caps_its_lists():
    d = decisions(open_effect=True)
    findings = [f"finding {i}" for i in range(5)]
    lines = verdict_block(evaluation_verdict(d, findings, "in the budget", "to_decide.csv"))
    assert lines[1] == "  Keep: cell train.lr=0.001: test accuracy 80.0 % [75.0, 85.0]"
    assert "  Cost to train and to serve: in the budget" in lines
    assert (
        "  Also adopted (within the loss limit; serving costs in the budget): run-a/int8_dynamic"
        in lines
    )
    assert any("6 seeds per cell (priced in to_decide.csv)" in line for line in lines)
    assert lines[-4:] == [
        "  Act on: finding 0",
        "  Act on: finding 1",
        "  Act on: finding 2",
        "  ... and 2 more finding(s): campaign findings",
    ]
    assert len(lines) <= 12


def test_an_unmeasured_level_is_said_not_printed_as_a_number():
    d = decisions()
    d["verdict"]["quality"] = {"split": "test", "value": None, "ci_low": None, "ci_high": None}
    lines = verdict_block(evaluation_verdict(d, [], "x"))
    assert lines[1] == "  Keep: cell train.lr=0.001: test accuracy not measured"
    assert not any("nan" in line for line in lines)


def test_an_open_quantized_variant_is_told_that_items_not_seeds_would_narrow_it():
    from campaign.evaluate import words

    decisions = {
        "decide_on": "validation",
        "metric": "accuracy",
        "decisions": [
            {"kind": "quantized", "subject": "run-a/int8_dynamic", "decision": "inconclusive"}
        ],
    }
    (q,) = decisions_from_dict(decisions).open_questions
    line = words._open_words(q, None, None)
    assert "more evaluation items" in line and "seeds do not apply" in line


def test_keeps_the_representative_run_or_its_variant_never_a_seed_cheaper_to_train():
    """The cell's representative run is run-b (its variants were judged against it): run-a,
    cheaper to train, is not kept for that; among run-b and its adopted variant the one cheaper
    to serve is."""
    d = decisions()
    d["best_cell"]["representative_run"] = "run-b"
    assert keep_row(d, EQUAL)["variant"] == "run-b"
    variant = row("run-b/onnx_fp32", "quantized", 0.804, 2.5, 2.0, "run-b")
    assert keep_row(d, [*EQUAL, variant]) is variant
    d["best_cell"]["representative_run"] = "run-gone"  # not among the rows: the cheapest
    assert keep_row(d, EQUAL)["variant"] == "run-a/int8_dynamic"


def test_a_cell_not_shown_above_the_floor_keeps_the_floor_and_prices_that_cells_seeds():
    """The best cell +2.0 points [-1.0, 5.0] over the floor on 2 seeds: not shown better, so the
    floor (next to nothing to train and serve) is kept, and the open question is that cell's:
    5 seeds would decide it, 3 more runs of that one cell (not of every cell) at the median
    forecast 1.0 h + 20 % margin, 2.00 EUR per card-hour: 3 x 1.2 x 2.00 = 7.20 EUR."""
    from campaign.budget.questions import price_to_decide

    d = decisions("floor")
    d["verdict"]["against_floor"] |= {
        "cell": "train.lr=0.001",
        "estimate": 0.02,
        "ci_low": -0.01,
        "ci_high": 0.05,
        "decision": "not shown above floor",
        "n_seeds": 2,
        "dominant": "seeds",
        "seeds_needed": 5,
        "items_needed": None,
    }
    forecast = [
        {"run": run, "kept": True, "forecast_hours": h}
        for run, h in (("run-a", 0.5), ("run-b", 1.5), ("run-c", 1.0), ("run-d", 1.0))
    ]
    cells = {"run-a": "c1", "run-b": "c1", "run-c": "c2", "run-d": "c2"}
    (q,) = price_to_decide(
        decisions_from_dict(d), forecast, cells, 2.0, {"margin": 0.2, "currency": "EUR"}
    )
    assert (q["subject"], q["cells"], q["extra_runs"]) == (
        "train.lr=0.001 against floor/tfidf",
        1,
        3,
    )
    assert q["cost"] == pytest.approx(7.2)
    floor = row("floor/tfidf", "floor", 0.78, 0.001, 0.02)
    lines = block(d, [*EQUAL, floor], [q])
    assert lines[1] == "  Keep: the reference floor floor/tfidf: test accuracy 78.0 % [75.0, 80.0]"
    assert lines[2] == (
        "  Kept cell against the floor floor/tfidf: +2.0 points [-1.0, 5.0] on validation, "
        "not shown above floor"
    )
    assert (
        "  Open: train.lr=0.001 against floor/tfidf, not shown above floor: 5 seeds per cell = "
        "3 more run(s), 7.20 EUR"
    ) in lines
    assert not any(line.startswith("  Ship:") for line in lines)


def test_the_budget_summary_keeps_what_the_verdict_keeps():
    """summary.txt's budget lines follow the verdict block: with run-b the representative run,
    its first line keeps run-b (5.50 EUR), not run-a/int8_dynamic, cheapest in total (3.25), and
    the others are listed at the bar. A cell not shown above the floor keeps the floor, and the
    line says so (not "below it")."""
    from campaign.budget.words import headline

    d = decisions()
    d["best_cell"]["representative_run"] = "run-b"
    equal = [dict(e, cheapest=e["variant"] == "run-a/int8_dynamic") for e in EQUAL]
    bar = {"cell": "train.lr=0.001"}
    assert headline(bar, equal, 1_000_000, money, decisions_from_dict(d)) == (
        "At equal quality, keep run-b: 2.50 EUR to train + 3.00 EUR to serve 1,000,000 "
        "predictions = 5.50 EUR."
    )
    assert block(d, equal)[1].startswith("  Keep: run run-b ")
    # Without the evaluation's decisions: the cheapest in total, as before.
    assert headline(bar, equal, 1_000_000, money).startswith("At equal quality, keep run-a/int8")

    d = decisions("floor")
    d["verdict"]["against_floor"]["decision"] = "not shown above floor"
    floor = dict(row("floor/tfidf", "floor", 0.78, 0.01, 0.02), cheapest=True)
    assert headline(bar, [*equal, floor], 1_000_000, money, decisions_from_dict(d)).startswith(
        "Keep the reference floor floor/tfidf: the chosen cell train.lr=0.001 is not shown above "
        "it by the evaluation's test, and it is cheaper: 0.01 EUR to train + 0.02 EUR to serve"
    )

"""An adaptive campaign's looks told in words, and the evaluation's decisions taken from the
last look's repeated intervals (hand-made look records)."""

from campaign.evaluate.look_words import look_lines, look_summary
from campaign.evaluate.looks import apply_last_look


def _row(name, kind, decision, status, low, high, reason="", of_look=1):
    return {
        "name": name,
        "kind": kind,
        "decision": decision,
        "status": status,
        "rci_low": low,
        "rci_high": high,
        "reason": reason,
        "of_look": of_look,
    }


LOOKS = [
    {
        "look": 1,
        "max_looks": 2,
        "final": False,
        "history": [{"c0": 2, "c1": 2, "c2": 2}],
        "spent": {"runs": 6, "hours": 1.5},
        "rows": [
            _row("lr up", "main", "inconclusive", "open", -0.04, 0.06, "adds seeds towards 3"),
            _row("lr down", "main", "reject", "decided", -0.4, -0.2, "the repeated interval"),
        ],
        "stopped": {"c2": "below the best cell by more than 1 point (upper end -20.0 points)"},
        "appended": ["run-a", "run-b"],
        "runs": [*(f"run-{i}" for i in range(6)), "run-a", "run-b"],
        "add_hours": 0.5,
        "open_cost_hours": {},
        "decided": {"lr down": "reject"},
        "fixed": {"runs": 9, "hours": 2.25},
    },
    {
        "look": 2,
        "max_looks": 2,
        "final": True,
        "history": [{"c0": 2, "c1": 2, "c2": 2}, {"c0": 3, "c1": 3, "c2": 2}],
        "spent": {"runs": 8, "hours": 2.0},
        "rows": [
            _row("lr up", "main", "adopt", "decided", 0.012, 0.05, "", 2),
            _row("lr down", "main", "inconclusive", "decided", -0.3, 0.01, "", 1),
        ],
        "stopped": {},
        "appended": [],
        "runs": [*(f"run-{i}" for i in range(6)), "run-a", "run-b"],
        "add_hours": 0.0,
        "open_cost_hours": {},
        "decided": {"lr up": "adopt", "lr down": "reject"},
        "fixed": {"runs": 9, "hours": 2.25},
    },
]


def test_each_look_says_what_was_open_added_stopped_and_the_total_against_fixed():
    lines = look_lines(LOOKS)
    assert lines[0] == "look 1 of 2: 6 runs (2 seeds per cell), 1.5 h projected"
    assert "  lr up: inconclusive [-4.0, +6.0] points; open (adds seeds towards 3)" in lines
    stopped = "  stopped c2: below the best cell by more than 1 point (upper end -20.0 points)"
    assert stopped in lines
    assert "  added 2 runs (0.5 h projected)" in lines
    assert "look 2 of 2: 8 runs (2-3 seeds per cell), 2 h projected" in lines
    assert lines[-1] == (
        "in all: 8 runs, 2 h projected, against 9 runs, 2.25 h for every cell at the most seeds"
    )
    assert look_lines([]) == []


def test_the_verdict_block_tells_the_looks_in_two_lines_and_a_fixed_campaign_in_none():
    """Two looks of two; 2 runs appended at look 1 (a seed each), c2 stopped there; 8 runs
    against 3 cells x 3 seeds = 9 for the fixed design."""
    from dataclasses import replace

    from campaign.evaluate import VerdictBlock, verdict_block

    summary = look_summary(LOOKS)
    assert summary == {
        "looks": 2,
        "max_looks": 2,
        "seeds_added": 2,
        "cells_stopped": ["c2"],
        "runs": 8,
        "fixed_runs": 9,
    }
    v = VerdictBlock(decided_on="validation", split="test", metric="accuracy")
    fixed, adaptive = verdict_block(v), verdict_block(replace(v, looks=summary))
    assert adaptive[:2] + adaptive[4:] == fixed == verdict_block(replace(v, looks=None))
    assert adaptive[2:4] == [
        "  Looks: 2 of 2 taken; 2 seeds added, 1 cell stopped; 8 runs against the fixed "
        "design's 9 (every cell at the most seeds)",
        "  After the looks: effects, interactions and cells against the control decided on "
        "repeated confidence intervals (O'Brien-Fleming), a cell against the floor tested "
        "Bonferroni over the 2 planned looks",
    ]
    assert look_summary([]) is None


def test_the_last_look_decides_and_a_question_closed_earlier_stays_closed():
    rows = [
        {"kind": "main", "subject": "lr up", "decision": "inconclusive", "interval_over": "x"},
        {"kind": "main", "subject": "lr down", "decision": "inconclusive", "interval_over": "x"},
        {"kind": "quantized", "subject": "lr up", "decision": "adopt", "interval_over": "y"},
    ]
    apply_last_look(rows, LOOKS)
    assert [r["decision"] for r in rows] == ["adopt", "reject", "adopt"]
    assert (rows[0]["adj_low"], rows[0]["adj_high"]) == (0.012, 0.05)
    # "lr down", rejected at look 1 on [-0.4, -0.2]: the last look alone says [-0.3, +0.01],
    # which would contradict it; the looks' intervals intersected say [-0.3, -0.2].
    assert (rows[1]["adj_low"], rows[1]["adj_high"]) == (-0.3, -0.2)
    assert "repeated confidence interval at the last look" in rows[0]["interval_over"]
    assert "adj_low" not in rows[2] and rows[2]["interval_over"] == "y"


def test_the_report_shows_the_looks_of_an_adaptive_campaign_only(tmp_path):
    """The evaluate phase's declared section renders the looks, and a fixed campaign (no
    adaptive_looks) has no such section in the report's list."""
    import json

    from campaign.core.io import resolve
    from campaign.core.registry import phases
    from campaign.report import sections_of
    from campaign.report.render import ReportInputs

    (declared,) = [s for s in sections_of(phases()) if s.key == "looks"]
    render = resolve(declared.render)

    def inputs(decisions: dict) -> ReportInputs:
        path = tmp_path / f"decisions-{len(decisions)}.json"
        path.write_text(json.dumps({"decide_on": "validation", "metric": "accuracy", **decisions}))
        return ReportInputs({"decisions": [path]})

    section = render(inputs({"decisions": [], "adaptive_looks": look_lines(LOOKS)}))
    assert section.pre.splitlines() == look_lines(LOOKS)
    assert render(inputs({"decisions": []})) is None


def test_after_the_looks_a_cell_is_above_the_floor_only_at_alpha_over_the_looks():
    """Two-sided p 0.03 and 0.01 against the floor (items only: normal, no seed df to cap at)
    are "above floor" in a fixed design (alpha 0.05). After the looks they are Holm-adjusted
    over the family (0.03 and 0.02) and then times the 2 planned looks: 0.06, not shown, and
    0.04, above. A row without a p (no floor test) is left alone."""
    from scipy import stats

    def row(name: str, estimate: float, p: float | None) -> dict:
        se = 0.01 if p is None else estimate / float(stats.norm.isf(p / 2))
        return {
            "kind": "floor",
            "subject": f"{name} against floor/t",
            "estimate": estimate,
            "se": se,
            "df": float("inf"),
            "seed_df": 0,
            "p_holm": p,
            "decision": "above floor" if p else "not shown above floor",
            "interval_over": "z",
        }

    rows = [row("c1", 0.02, 0.03), row("c2", 0.05, 0.01), row("c3", 0.05, None)]  # fmt: skip
    apply_last_look(rows, LOOKS, alpha=0.05)
    assert [r["decision"] for r in rows] == [
        "not shown above floor", "above floor", "not shown above floor",
    ]  # fmt: skip
    assert [round(r["p_holm"], 9) for r in rows[:2]] == [0.06, 0.04] and rows[2]["p_holm"] is None
    assert "Bonferroni over the 2 planned looks" in rows[0]["interval_over"]
    assert rows[2]["interval_over"] == "z"


def test_a_question_whose_cell_a_look_stopped_is_open_but_not_priced_in_seeds():
    """The last look stopped a cell of "lr up" (below the floor): the evaluation leaves it open
    with the look's reason, says so instead of a seeds-needed, and the budget prices no seeds
    for it (no look would add any); the other open question keeps its price."""
    from campaign.budget.questions import price_to_decide
    from campaign.evaluate import decisions_from_dict
    from campaign.evaluate.words import _open_words

    why = "cell c1 stopped: below the floor (upper end -30.0 points)"
    last = {
        **LOOKS[1],
        "rows": [
            _row("lr up", "main", "inconclusive", "stopped", -0.2, 0.2, why, 2),
            _row("lr down", "main", "inconclusive", "open", -0.3, 0.01, "", 2),
        ],
        "decided": {},
    }
    rows = [
        {"kind": "main", "subject": s, "decision": "inconclusive", "interval_over": "x"}
        for s in ("lr up", "lr down")
    ]
    apply_last_look(rows, [LOOKS[0], last])
    assert rows[0]["stopped_by_look"] == why and "stopped_by_look" not in rows[1]
    decisions = decisions_from_dict(
        {
            "decide_on": "validation",
            "metric": "accuracy",
            "decisions": [
                {**r, "n_seeds": 3, "seeds_needed": 40, "items_needed": None} for r in rows
            ],
        }
    )
    questions = {q.subject: q for q in decisions.open_questions}
    assert questions["lr up"].seeds_needed is None
    assert _open_words(questions["lr up"], None, None) == (
        f"  Open: lr up, inconclusive: not pursued, the looks stopped a cell of it ({why})"
    )
    assert questions["lr down"].seeds_needed == 40
    forecast = [{"run": f"r{i}", "kept": True, "forecast_hours": 1.0} for i in range(6)]
    cells = {f"r{i}": f"c{i // 3}" for i in range(6)}  # 3 seeds a cell, as n_seeds says
    priced = price_to_decide(decisions, forecast, cells, 2.0, {"margin": 0.0, "currency": "EUR"})
    # lr down only: 37 more seeds x 2 cells x 1 h x 2.00 = 148.00.
    assert [(r["subject"], r["extra_runs"], r["cost"]) for r in priced] == [("lr down", 74, 148.0)]


def test_after_the_looks_an_effect_shows_no_fixed_design_p_or_detectable_size():
    """The Holm p and the detectable size of the fixed design are not valid over seeds the
    looks chose: the row drops them and its line names the repeated interval instead."""
    import math

    from campaign.evaluate.words import _effect_line

    row = {
        "kind": "main", "subject": "lr up", "decision": "inconclusive", "interval_over": "x",
        "p_holm": 0.004, "mde": 0.02, "n_seeds": 3, "estimate": 0.03, "ci_low": 0.01,
        "ci_high": 0.05, "dominant": "seeds", "seeds_needed": 5,
    }  # fmt: skip
    fixed = _effect_line(dict(row, adj_low=0.0, adj_high=0.06), "validation", "accuracy",
                         {"min_useful_effect": 0.01})  # fmt: skip
    # one statement: the interval the decision reads, against the useful size (no Holm p
    # against 0 beside it)
    assert "family-adjusted interval [0.0, 6.0] against useful from 1.0 points" in fixed
    assert "Holm p" not in fixed and "detectable from 2.0 points" in fixed
    rows = [row]
    apply_last_look(rows, LOOKS)
    assert math.isnan(rows[0]["p_holm"]) and math.isnan(rows[0]["mde"])
    line = _effect_line(rows[0], "validation", "accuracy", {"min_useful_effect": 0.01})
    assert "Holm p" not in line and "detectable" not in line
    assert "repeated interval to look 2 [1.2, 5.0], useful from 1.0 points" in line, line

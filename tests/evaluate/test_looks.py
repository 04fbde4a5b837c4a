"""The look stage's own bookkeeping (campaign.evaluate.looks): every contrast whose cells the
looks gave seeds is decided on the looks' repeated intervals or not at all, and the runs a look
appends are the seeds it counts (hand-made look records)."""

from __future__ import annotations

from campaign.evaluate import decide
from campaign.evaluate.looks import NOT_ASKED, appended_runs, apply_last_look


def _look(j: int, rows: list[dict]) -> dict:
    return {"look": j, "max_looks": 2, "rows": rows, "decided": {}}


def _row(name: str, low: float, high: float, of_look: int = 1) -> dict:
    return {
        "name": name,
        "kind": "interaction",
        "decision": "interaction" if low > 0 or high < 0 else "no interaction shown",
        "rci_low": low,
        "rci_high": high,
        "of_look": of_look,
        "n_seeds": 3,
    }


def _fixed(name: str, kind: str, decision: str) -> dict:
    """A fixed design's row (Holm p, Bonferroni interval) before the looks are applied."""
    return {
        "kind": kind,
        "subject": name,
        "decision": decision,
        "adj_low": 0.01,
        "adj_high": 0.05,
        "interval_over": "crossed",
    }


def test_interactions_are_decided_on_the_looks_repeated_intervals():
    """'a x b' is shown by its fixed-design p (interval [0.01, 0.05]) but its repeated
    intervals, [-0.02, 0.08] then [-0.01, 0.06], both hold 0: no interaction shown, on
    [-0.01, 0.06]. 'a x c' excludes 0 at look 1 ([0.005, 0.09]) though look 2's alone does not
    ([-0.002, 0.07]): the intersection [0.005, 0.07] shows it. 'b x c', which no look asked,
    is not decided, and says why."""
    looks = [
        _look(1, [_row("a x b", -0.02, 0.08), _row("a x c", 0.005, 0.09)]),
        _look(2, [_row("a x b", -0.01, 0.06, 2), _row("a x c", -0.002, 0.07, 2)]),
    ]
    rows = [
        _fixed("a x b", "interaction", "interaction"),
        _fixed("a x c", "interaction", "no interaction shown"),
        _fixed("b x c", "interaction", "interaction"),
        _fixed("lr up", "main", decide.ADOPT),
        _fixed("v", "quantized", decide.ADOPT),
    ]
    apply_last_look(rows, looks)
    ab, ac, bc, main, quantized = rows
    assert (ab["decision"], ab["adj_low"], ab["adj_high"]) == ("no interaction shown", -0.01, 0.06)
    assert (ac["decision"], ac["adj_low"], ac["adj_high"]) == ("interaction", 0.005, 0.07)
    assert "repeated confidence interval" in ab["interval_over"] and ab["look"] == 2
    assert bc["decision"] == "no interaction shown" and bc["undecided_reason"] == NOT_ASKED
    assert main["decision"] == decide.INCONCLUSIVE and main["undecided_reason"] == NOT_ASKED
    assert quantized["decision"] == decide.ADOPT and "undecided_reason" not in quantized


def test_appended_runs_and_the_seeds_counted_are_one_list():
    """c1 has 3 seeds (look 1 appended c1-s3) and wants 6, but only 2 candidates are left
    (max_runs cut the rest): it gets c1-s4, c1-s5 and counts 5 seeds, not 6; c2 wants none."""
    candidates = {"c1": ["c1-s3", "c1-s4", "c1-s5"], "c2": ["c2-s3"]}
    runs = ["c1-s1", "c1-s2", "c1-s3", "c2-s1", "c2-s2"]
    appended, seeds = appended_runs({"c1": 6, "c2": 2}, {"c1": 3, "c2": 2}, runs, candidates)
    assert appended == ["c1-s4", "c1-s5"]
    assert seeds == {"c1": 5, "c2": 2}


def test_looks_whose_intervals_do_not_overlap_decide_on_their_span_and_say_so():
    """'lr up': look 1's repeated interval [4.0, 9.0] points adopted it (useful from 3), look 2's
    [-1.0, 2.5] misses look 1's: at least one misses the true gain. The row shows their span
    [-1.0, 9.0] and decides on it: inconclusive, not the look-1 adopt nor look 2's reject of
    the useful size. The flag and the note (each look's interval) are in the row, and its line
    says it. 'lr down' overlaps ([1.0, 5.0] and [2.0, 6.0]): intersected, no flag."""
    from campaign.evaluate.words import _effect_line

    def cell(name, low, high, decision, j):
        return {"name": name, "kind": "main", "decision": decision, "rci_low": low,
                "rci_high": high, "of_look": j, "n_seeds": 4}  # fmt: skip

    first = _look(
        1,
        [
            cell("lr up", 0.04, 0.09, decide.ADOPT, 1),
            cell("lr down", 0.01, 0.05, decide.INCONCLUSIVE, 1),
        ],
    )
    last = _look(
        2,
        [
            cell("lr up", -0.01, 0.025, decide.REJECT, 2),
            cell("lr down", 0.02, 0.06, decide.INCONCLUSIVE, 2),
        ],
    )
    first["decided"] = last["decided"] = {"lr up": decide.ADOPT}
    rows = [_fixed("lr up", "main", decide.ADOPT), _fixed("lr down", "main", decide.ADOPT)]
    apply_last_look(rows, [first, last], useful=0.03)
    up, down = rows
    assert (up["adj_low"], up["adj_high"]) == (-0.01, 0.09)
    assert up["decision"] == decide.INCONCLUSIVE and up["intervals_disagree"] is True
    assert "look 1 [4.0, 9.0], look 2 [-1.0, 2.5]" in up["interval_note"]
    assert "their span" in up["interval_over"]
    assert (down["adj_low"], down["adj_high"]) == (0.02, 0.05) and "intervals_disagree" not in down
    assert down["decision"] == decide.INCONCLUSIVE  # the last look's
    line = _effect_line(
        {**up, "estimate": 0.01, "ci_low": -0.01, "ci_high": 0.03, "n_seeds": 4,
         "dominant": None},
        "validation", "accuracy", {"min_useful_effect": 0.03},
    )  # fmt: skip
    assert "do not overlap (look 1 [4.0, 9.0], look 2 [-1.0, 2.5])" in line
    # Both looks clear the useful size though apart: the span adopts.
    clear = [_look(1, [cell("lr up", 0.04, 0.05, decide.ADOPT, 1)]),
             _look(2, [cell("lr up", 0.06, 0.08, decide.ADOPT, 2)])]  # fmt: skip
    (row,) = [_fixed("lr up", "main", decide.ADOPT)]
    apply_last_look([row], clear, useful=0.03)
    assert row["decision"] == decide.ADOPT and row["intervals_disagree"] is True


def test_an_adaptive_floor_row_is_tested_on_the_seed_df_holm_then_times_the_looks():
    """Two cells against the floor, 2 seeds each (seed_df 2) but a Satterthwaite df of 300 (the
    seed part came out small): t 5 and t 2.5. On 2 df, t's two-sided p is 1 - t / sqrt(t^2 + 2):
    0.03775 and 0.12961; Holm over the two, 0.0755 and 0.12961; times 3 planned looks, 0.2265
    and 0.3888: neither is shown above the floor at alpha 0.05 (on 300 df the t 5 cell's
    p, about 1e-6, would have been)."""
    rows = [
        {
            "kind": "floor",
            "subject": f"cell {i}",
            "estimate": est,
            "se": 0.02,
            "df": 300.0,
            "seed_df": 2,
            "p_holm": 1e-6,
            "decision": decide.ABOVE,
            "interval_over": "crossed",
        }
        for i, est in ((1, 0.10), (2, 0.05))
    ]
    last = {"look": 3, "max_looks": 3, "rows": [], "decided": {}}
    apply_last_look(rows, [last], alpha=0.05)
    # Holm: the smaller p times 2, the larger times 1 (not below the smaller's); then x 3.
    expected = [3 * 2 * (1 - 5 / 27**0.5), 3 * (1 - 2.5 / 8.25**0.5)]
    assert abs(rows[0]["p_holm"] - expected[0]) < 1e-9
    assert abs(rows[1]["p_holm"] - expected[1]) < 1e-9
    assert [r["decision"] for r in rows] == [decide.NOT_SHOWN, decide.NOT_SHOWN]
    assert all("planned looks" in r["interval_over"] for r in rows)

"""What deciding an open question costs when an adaptive campaign's looks left its cells with
uneven seeds: each cell's runs from its own seeds now up to the seeds needed."""

from __future__ import annotations

import pytest

from campaign.budget.questions import price_to_decide
from campaign.evaluate import decisions_from_dict


def test_each_cell_is_priced_from_its_own_seeds_to_the_seeds_needed():
    # The looks appended seeds unevenly: c0 has 4 runs, c1 2, c2 3 (1 h each, 2.00 EUR/h).
    cells = {f"r{i}": c for i, c in enumerate(["c0"] * 4 + ["c1"] * 2 + ["c2"] * 3)}
    forecast = [{"run": r, "kept": True, "forecast_hours": 1.0} for r in cells]
    # An adaptive candidate no look asked for is not the campaign's: not a seed of c1.
    forecast.append({"run": "r9", "kept": False, "forecast_hours": 1.0})
    cells["r9"] = "c1"
    effect = {
        "kind": "main",
        "subject": "lr up",
        "decision": "inconclusive",
        "n_seeds": 2,  # the fewest seeds among its cells
        "seeds_needed": 5,
        "seeds_needed_low": 4,
        "seeds_needed_high": 8,
    }
    decisions = {
        "decide_on": "validation",
        "metric": "accuracy",
        "decisions": [effect],
        "best_cell": {"cell": "lr=0.003", "cell_id": "c0", "runs": ["r0", "r1", "r2", "r3"]},
        "verdict": {
            "against_floor": {
                "floor": "floor/tfidf",
                "cell": "lr=0.003",
                "decision": "not shown above floor",
                "n_seeds": 4,
                "seeds_needed": 6,
            }
        },
    }
    floor, main = price_to_decide(
        decisions_from_dict(decisions), forecast, cells, 2.0, {"margin": 0.0, "currency": "€"}
    )
    # 5 seeds per cell: c0 1 more, c1 3, c2 2 = 6 runs (the smallest count x cells said 9).
    assert (main["cells"], main["extra_runs"], main["cost"]) == (3, 6, 12.0)
    # At the seed variance's ends: 4 seeds -> 0 + 2 + 1 = 3 runs; 8 -> 4 + 6 + 5 = 15 runs.
    assert (main["cost_low"], main["cost_high"]) == (6.0, 30.0)
    # The floor question is the best cell's alone: from its 4 seeds to 6.
    assert (floor["cells"], floor["extra_runs"], floor["cost"]) == (1, 2, pytest.approx(4.0))

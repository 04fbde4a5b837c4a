"""Error analysis of generated text per cell (tasks/generation/errors.py), on answers that can
be worked out by hand: scores pooled over seeds, the seed that did worst shown, fixed and broken
items between the control and the kept option at the threshold, on every seed."""

from __future__ import annotations

import numpy as np

from campaign.evaluate import CHANGE_RULE, CHANGE_THRESHOLD
from campaign.tasks.generation.errors import (
    Option,
    kept_change_rows,
    prompt_text,
    worst_cell_rows,
)

IDS = ["a", "b", "c", "d"]
PROMPTS = ["p-a", "p-b", "p-c", "p-d"]
REFS = ["r-a", "r-b", "r-c", "r-d"]


def cell(name: str, scores: list[list[float]]) -> Option:
    texts = [[f"{name}-seed{s}-{i}" for i in IDS] for s in range(len(scores))]
    return Option(name, np.array(scores), texts)


def test_worst_items_are_pooled_over_seeds_and_show_the_worst_seed():
    # item b: one seed perfect, one at 0 -> 0.5; item c: both 0.4 -> 0.4 (the lowest pooled),
    # although b has the lowest single score
    option = cell("lr=0.01", [[1.0, 1.0, 0.4, 0.9], [1.0, 0.0, 0.4, 0.7]])
    rows = worst_cell_rows(option, "validation", IDS, PROMPTS, REFS, n=2)
    assert [r["id"] for r in rows] == ["c", "b"]
    assert [r["score"] for r in rows] == [0.4, 0.5]
    assert rows[1]["prediction"] == "lr=0.01-seed1-b"  # the seed that scored 0 on it
    assert rows[0]["prediction"] == "lr=0.01-seed0-c"  # a tie: the first seed
    assert rows[0]["seeds"] == 2 and rows[0]["prompt"] == "p-c" and rows[0]["reference"] == "r-c"


def test_fixed_and_broken_items_between_the_kept_option_and_the_control():
    control = cell("baseline", [[0.0, 1.0, 0.5, 0.2], [0.2, 1.0, 0.5, 0.2]])  # 0.1 1 .5 .2
    kept = cell("lr=0.01", [[1.0, 0.0, 0.9, 0.8], [0.8, 0.2, 0.9, 0.7]])  # 0.9 .1 .9 .75
    rows = kept_change_rows(kept, control, "test", IDS, PROMPTS, REFS)
    # seed-wise gaps: a 0.8 - 0.2 (fixed), b 1.0 - 0.2 (broken), c 0.9 - 0.5 = 0.4 (under the
    # threshold), d 0.7 - 0.2 = 0.5 (at it); listed by the pooled deltas -0.9, +0.8, +0.55
    assert CHANGE_THRESHOLD == 0.5
    assert [(r["id"], r["change"]) for r in rows] == [
        ("b", "broken"),
        ("a", "fixed"),
        ("d", "fixed"),
    ]
    assert np.isclose(rows[2]["delta"], 0.55)
    b = rows[0]
    assert np.isclose(b["delta"], -0.9) and np.isclose(b["kept_score"], 0.1)
    assert (
        b["kept_prediction"] == "lr=0.01-seed0-b" and b["control_prediction"] == "baseline-seed0-b"
    )
    assert {r["kept"] for r in rows} == {"lr=0.01"} and {r["control"] for r in rows} == {"baseline"}


def test_one_seed_of_two_flipping_is_neither_fixed_nor_broken():
    # 0/1 scores at 2 seeds. a: the kept option right at one seed of two (pooled +0.5); b: right
    # at both where the control was wrong at both; c: the reverse; d: the control already right
    # at one seed (pooled +0.5). Only b and c moved on every seed.
    control = cell("baseline", [[0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 1.0, 1.0]])
    kept = cell("lr=0.01", [[1.0, 1.0, 0.0, 1.0], [0.0, 1.0, 0.0, 1.0]])
    rows = kept_change_rows(kept, control, "test", IDS, PROMPTS, REFS)
    assert [(r["id"], r["change"]) for r in rows] == [("b", "fixed"), ("c", "broken")]
    # the rule is what the report's section states
    assert "every seed" in CHANGE_RULE and f"{CHANGE_THRESHOLD:g}" in CHANGE_RULE


def test_a_floor_is_an_option_of_one_row():
    floor = Option("floor/retrieval", np.array([[1.0, 1.0, 0.0, 0.0]]), [["x"] * 4])
    control = cell("baseline", [[0.0, 1.0, 0.0, 1.0], [0.0, 1.0, 0.0, 1.0]])
    rows = kept_change_rows(floor, control, "test", IDS, PROMPTS, REFS)
    assert [(r["id"], r["change"]) for r in rows] == [("a", "fixed"), ("d", "broken")]


def test_the_prompt_shown_is_the_question_asked():
    talk = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "capital of Peru?"},
        {"role": "assistant", "content": "Lima"},
    ]
    assert prompt_text(talk) == "capital of Peru?"


def test_extraction_fields_are_counted_per_field_with_invalid_json():
    import pandas as pd

    from campaign.tasks.generation.scoring import field_rows

    frame = pd.DataFrame(
        {
            "prediction": ['{"name": "Vim", "size": 2}', "not json", '{"name": "emacs", "x": 1}'],
            "reference": ['{"name": "vim", "size": 2}', '{"name": "ed"}', '{"name": "nano"}'],
        }
    )
    rows = {r["field"]: r for r in field_rows("lr=0.01", "test", frame)}
    # name: correct (case ignored), missing (invalid JSON), wrong; size: correct; x: spurious
    assert {
        k: (r["correct"], r["wrong"], r["missing"], r["spurious"]) for k, r in rows.items()
    } == {
        "name": (1, 1, 1, 0),
        "size": (1, 0, 0, 0),
        "x": (0, 0, 0, 1),
    }
    assert {r["invalid"] for r in rows.values()} == {1} and {r["items"] for r in rows.values()} == {
        3
    }

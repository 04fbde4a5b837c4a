"""train.select's choice of a run's step."""

import math

import pytest

from campaign.train.select import chosen_step


def test_last_ignores_the_scores():
    assert chosen_step({4: 0.9, 8: 0.1}, "last", last=8) == 8


def test_best_generated_keeps_an_earlier_step_that_generated_better():
    assert chosen_step({4: 0.2, 8: 0.6, 12: 0.5}, "best_generated", last=12) == 8


def test_ties_keep_the_more_trained_step_and_unjudged_steps_are_skipped():
    scores = {4: 0.5, 8: math.nan, 12: 0.5, 16: 0.25}
    assert chosen_step(scores, "best_generated", last=16) == 12


def test_no_score_keeps_the_last_step():
    assert chosen_step({4: math.nan}, "best_generated", last=24) == 24


def test_an_unknown_mode_is_refused_naming_the_key():
    with pytest.raises(ValueError, match="train.select"):
        chosen_step({}, "best_loss", last=4)

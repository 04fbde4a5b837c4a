"""Per-item scores of generated text (campaign.evaluate.text_scores), on answers whose scores
can be worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from campaign.core.errors import CampaignError
from campaign.evaluate.text_scores import (
    exact_match,
    json_field_table,
    json_fields,
    normalize,
    score_items,
    similarity,
    token_f1,
)


def test_normalization_drops_case_punctuation_articles_and_extra_space():
    assert normalize("  The  Eiffel-Tower, in PARIS! ") == "eiffel tower in paris"
    assert normalize("ｆｕｌｌ width") == "full width"  # NFKC
    assert exact_match("The Paris.", "paris") == 1.0
    assert exact_match("Paris, France", "paris") == 0.0


def test_token_f1_by_hand():
    # prediction tokens: red fox jumps (3); reference: quick red fox (3); common: red fox (2)
    assert token_f1("the red fox jumps", "a quick red fox") == pytest.approx(2 / 3)
    # repeated tokens count as a multiset: "x x y" vs "x y" -> common 2, P = 2/3, R = 1
    assert token_f1("x x y", "x y") == pytest.approx(2 * (2 / 3) / (2 / 3 + 1))
    assert token_f1("nothing", "else") == 0.0
    assert token_f1("", "") == 1.0 and token_f1("", "an answer") == 0.0


def test_similarity_is_character_level():
    assert similarity("Paris", "paris.") == 1.0
    # "pariss" vs "paris": Indel distance 1 over 11 characters
    assert similarity("pariss", "paris") == pytest.approx(1 - 1 / 11)
    assert similarity("abc", "xyz") == 0.0


REF = '{"name": "Ada Lovelace", "year": 1815, "city": "London"}'


def test_json_fields_correct_wrong_missing_spurious_by_hand():
    # name correct (case and punctuation ignored), year wrong, city missing, born spurious:
    # correct 1, predicted 3, expected 3 -> F1 = 2 x 1 / 6
    pred = '{"name": "ada lovelace.", "year": 1816, "born": "yes"}'
    assert json_fields(pred, REF) == pytest.approx(1 / 3)
    table = json_field_table([pred, REF, "not json", "[1, 2]"], [REF] * 4)
    assert dict(table.correct) == {"name": 2, "year": 1, "city": 1}
    assert dict(table.wrong) == {"year": 1}
    assert dict(table.missing) == {"city": 3, "name": 2, "year": 2}
    assert dict(table.spurious) == {"born": 1}
    assert table.invalid == 2 and table.items == 4


def test_json_fields_edges():
    assert json_fields(REF, REF) == 1.0
    assert json_fields("```json\n" + REF + "\n```", REF) == 1.0  # a fenced answer is read
    assert json_fields('{"name": "Ada Lovelace"', REF) == 0.0  # cut off: invalid
    assert json_fields('"Ada"', REF) == 0.0  # JSON, but not an object
    assert json_fields("{}", "{}") == 1.0
    assert json_fields('{"year": "1815"}', '{"year": 1815}') == 0.0  # a string is not a number
    with pytest.raises(CampaignError, match="item 1: json_fields: the reference is not"):
        json_field_table([REF, REF], [REF, "oops"])


def test_score_items_gives_one_float_per_item_in_order():
    scores = score_items("exact_match", ["Paris", "Rome", "the cat"], ["paris", "Oslo", "Cat"])
    assert scores.dtype == np.float64
    assert scores.tolist() == [1.0, 0.0, 1.0]
    with pytest.raises(CampaignError, match="2 predictions for 1 references"):
        score_items("token_f1", ["a", "b"], ["a"])


def test_a_user_metric_by_dotted_name(tmp_path, monkeypatch):
    (tmp_path / "mymetrics.py").write_text(
        "def starts(p, r):\n    return float(p.startswith(r))\ndef broken(p, r):\n    return 2.0\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert score_items("mymetrics.starts", ["abc", "xbc"], ["ab", "ab"]).tolist() == [1.0, 0.0]
    assert score_items("mymetrics:starts", ["abc"], ["ab"]).tolist() == [1.0]
    with pytest.raises(CampaignError, match=r"metric mymetrics.broken, item 0: returned 2.0"):
        score_items("mymetrics.broken", ["a"], ["a"])
    with pytest.raises(CampaignError, match="cannot import"):
        score_items("mymetrics.nothing_here", ["a"], ["a"])
    with pytest.raises(CampaignError, match="not one of"):
        score_items("bleu", ["a"], ["a"])

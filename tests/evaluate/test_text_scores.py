"""Per-item scores of generated text (tasks/generation/text_scores.py), on answers whose scores
can be worked out by hand."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from campaign.core.errors import CampaignError
from campaign.tasks.generation.text_scores import (
    exact_match,
    json_field_table,
    json_fields,
    normalize,
    score_items,
    similarity,
    token_f1,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import bench_text_scores as squad  # noqa: E402 (SQuAD v1.1's reference functions)


def test_normalization_drops_case_punctuation_articles_and_extra_space():
    # SQuAD's rules: punctuation deleted (a hyphen joins), articles dropped, spaces collapsed
    assert normalize("  The  Eiffel-Tower, in PARIS! ") == "eiffeltower in paris"
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


@pytest.mark.parametrize(("prediction", "reference", "same", "what"), squad.SCRIPTS)
def test_every_script_keeps_its_letters(prediction, reference, same, what):
    """Words that differ only in a combining mark stay apart (Devanagari vowel signs, Thai
    vowels and tone marks, Vietnamese tones, emoji); a word written with or without optional
    marks (Arabic harakat), with the tone on either vowel (Vietnamese hòa / hoà) or in Hangul
    jamo is one word. Before, दिन and दान, ดู and ดี, 👍 and 👎 scored 1.0; كَتَبَ against كتب
    and hòa against hoà scored 0."""
    assert exact_match(prediction, reference) == float(same), what
    assert (token_f1(prediction, reference) == 1.0) == same, what
    assert (similarity(prediction, reference) == 1.0) == same, what


def test_marks_are_kept_inside_words_and_optional_ones_dropped():
    assert normalize("दिन।") == "दिन"  # the vowel sign stays, the danda is punctuation
    assert normalize("ข้าว ขาว") == "ข้าว ขาว"  # rice, white: the tone mark stays
    assert normalize("ذَهَبَ الوَلَدُ") == "ذهب الولد"
    assert normalize("שָׁלוֹם") == "שלום"
    assert normalize("Hòa-Bình") == "hoàbình"  # the tone moves before the hyphen goes
    assert normalize("hoàn") == "hoàn"  # a letter after oa: not a syllable's end, kept
    assert normalize("👨\u200d👩\u200d👧 ❤️") == "👨\u200d👩\u200d👧 ❤"  # joiners kept, selector not
    assert normalize("a\u0331 b") == "a\u0331 b"  # a letter with a mark, not the article a
    # the same phrase in two scripts' partial credit: one word in three differs
    assert token_f1("मेरा दिन अच्छा", "मेरा दान अच्छा") == pytest.approx(2 / 3)


def test_ascii_scores_are_squad_v1_1_s():
    """On ASCII text exact_match and token_f1 are the official SQuAD v1.1 evaluation's, on
    random edits of answers (punctuation inside words, articles, case, whitespace, swapped
    and hyphen-joined words) and random strings; the one difference is documented: two texts
    that both normalize to nothing score token_f1 1 (SQuAD's f1: 0)."""
    pairs = squad.ascii_pairs(400, seed=3)
    agree = squad.ascii_agreement(pairs)
    assert agree["em"] == agree["pairs"] == 400
    assert agree["f1_other"] == 0 and agree["f1"] + agree["f1_both_empty"] == 400
    assert agree["f1"] > 300
    # the hyphen: SQuAD deletes it (one token), it was a space here before
    assert token_f1("well-known", "well known") == squad.squad_f1("well-known", "well known")
    assert exact_match("Eiffel-Tower", "eiffel tower") == 0.0


@pytest.mark.parametrize(("prediction", "reference", "why"), squad.DIFFERENCES)
def test_each_documented_difference_from_squad_is_real(prediction, reference, why):
    """Each deliberate difference (NFKC, Unicode punctuation, optional marks, invisible
    characters, Vietnamese tone placement, both empty) changes a score against SQuAD's."""
    ours = (exact_match(prediction, reference), token_f1(prediction, reference))
    theirs = (float(squad.squad_em(prediction, reference)), squad.squad_f1(prediction, reference))
    assert ours != theirs, why
    assert token_f1(prediction, reference) == 1.0, why

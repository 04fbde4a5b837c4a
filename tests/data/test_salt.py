"""Tests for campaign.data.salt: the vectorized scores equal the audit's numbers, the current
salt is kept when it passes, and a search that cannot succeed says why in one line."""

from __future__ import annotations

import numpy as np
import pytest
from test_split import CFG, SEED, cfg, frame, random_text

from campaign.core.errors import CampaignError
from campaign.data import salt as salting
from campaign.data import split
from campaign.data.units import leak_units, unit_position


@pytest.fixture(scope="module")
def demo():
    import yaml
    from test_split import REPO

    from campaign.data.readers import load_records

    # The generator corpus (data/raw/demo.jsonl, the tiny campaign's data), not the default
    # campaign's quotations: these tests need its authors and planted duplicates.
    params = yaml.safe_load((REPO / "tests" / "fixtures" / "tiny_params.yaml").read_text())
    return load_records(params["data"]["sources"], params["data"]["fields"], REPO)


@pytest.mark.parametrize("policy", ["unite", "drop"])
def test_scores_equal_the_audit(demo, policy) -> None:
    """For each of 6 salts the scorer's label and size deviations, empty and missing flags are
    exactly the audit's for the split make_splits writes (drop included: copies removed)."""
    c = cfg(dedup={**CFG["dedup"], "policy": policy})
    units = leak_units(demo, c["dedup"]["near"], SEED, policy)
    scorer = salting.SaltScorer(units, c)
    salts = [f"probe-{i}" for i in range(6)]
    scores = scorer.score(salts)
    for i, s in enumerate(salts):
        _, audit = split.make_splits(demo, {**c, "salt": s}, seed=SEED)
        assert scores.label_deviation[i] == pytest.approx(audit["labels"]["max_deviation"]["value"])
        assert scores.size_deviation[i] == pytest.approx(audit["sizes"]["max_deviation"]["value"])
        assert bool(scores.missing_from_train[i]) == bool(audit["labels"]["missing_from_train"])


def test_find_salt_reproduces_the_demo_salt(demo) -> None:
    choice = salting.find_salt(demo, cfg(salt="demo"), seed=SEED, tries=1400)
    assert choice.salt == CFG["salt"] and not choice.kept
    assert choice.label_deviation <= CFG["stratify_tolerance"]
    assert choice.size_deviation <= CFG["size_tolerance"]


def test_a_passing_current_salt_is_kept(demo) -> None:
    choice = salting.find_salt(demo, cfg(), seed=SEED, tries=50)
    assert choice.kept and choice.salt == CFG["salt"] and choice.tried == 1


def test_find_salt_says_when_no_salt_fits(demo) -> None:
    with pytest.raises(CampaignError, match=r"^split-salt: none of the current salt") as caught:
        salting.find_salt(demo, cfg(stratify_tolerance=0.01), seed=SEED, tries=20)
    assert "closest label deviation" in str(caught.value) and "\n" not in str(caught.value)


def test_find_salt_says_when_no_salt_can_pass() -> None:
    """A label in one unit can never be in every split: refused before any salt is tried."""
    rng = np.random.default_rng(0)
    rows = [
        {"id": f"r{i}", "text": random_text(rng, 12), "label": "a", "group": f"g{i}"}
        for i in range(60)
    ]
    rows += [
        {"id": f"s{i}", "text": random_text(rng, 12), "label": "b", "group": "one"}
        for i in range(10)
    ]
    with pytest.raises(CampaignError, match=r"^split-salt: no salt can pass: label 'b'"):
        salting.find_salt(frame(rows), cfg(), seed=SEED, tries=20)


def test_tries_must_be_positive(demo) -> None:
    with pytest.raises(CampaignError, match=r"^--tries: expected a positive number"):
        salting.find_salt(demo, cfg(), seed=SEED, tries=0)


def test_positions_match_the_per_unit_function() -> None:
    keys = ["g:a", "g:b", "i:7"]
    table = salting.positions(
        np.array([salting.salt_hash("s1"), salting.salt_hash("s2")]), salting.key_hashes(keys)
    )
    for r, s in enumerate(["s1", "s2"]):
        for c, k in enumerate(keys):
            assert table[r, c] == unit_position(s, k)
    assert ((table >= 0) & (table < 1)).all()

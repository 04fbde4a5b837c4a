"""Tests for split.dedup.policy (unite / drop), the size audit and the giant-unit error, on a
corpus where one boilerplate line joins every group (the shape of package changelogs; the real
ones are in test_real_corpora.py)."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest
from test_split import CFG, SEED, cfg, frame, random_text

from campaign.core.errors import CampaignError
from campaign.data import audit as auditing
from campaign.data import split
from campaign.data.salt import find_salt

BOILERPLATE = "New upstream release."


def boilerplate_corpus(n_groups: int = 60, per_group: int = 8) -> list[dict]:
    """Groups of distinct texts, and in every group one record that is the same boilerplate
    line: under unite it joins all groups into one unit."""
    rng = np.random.default_rng(3)
    rows = []
    for g in range(n_groups):
        for j in range(per_group):
            text = BOILERPLATE if j == 0 else random_text(rng, 14)
            label = ["low", "medium", "high"][(g + j) % 3]
            rows.append({"id": f"p{g:03d}-{j}", "text": text, "label": label, "group": f"pkg{g}"})
    return rows


def drop_cfg(**changes) -> dict:
    return cfg(dedup={**CFG["dedup"], "policy": "drop"}, **changes)


def test_unite_refuses_a_giant_unit_in_one_line() -> None:
    with pytest.raises(CampaignError) as caught:
        split.make_splits(frame(boilerplate_corpus()), cfg(), seed=SEED)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("split: unit 'g:pkg0' holds 480 of 480 records (100.0%) in 60 groups")
    assert "largest groups: pkg0 (8)" in message
    assert "split.dedup.policy: drop" in message and "split.size_tolerance >=" in message


def test_drop_splits_it_without_leaks_and_lists_what_it_dropped() -> None:
    records = frame(boilerplate_corpus())
    choice = find_salt(records, drop_cfg(salt="b"), seed=SEED, tries=200)
    assignments, audit = split.make_splits(records, drop_cfg(salt=choice.salt), seed=SEED)
    auditing.check_audit(audit, CFG["audit"])  # sizes, labels, leaks all pass
    sides = defaultdict(set)
    for text, side in zip(assignments["text"], assignments["split"], strict=True):
        sides[text].add(side)
    assert sides[BOILERPLATE] == {"train"}  # copies left only where train has one
    dropped = audit["dedup"]["dropped"]
    in_eval = int((records["text"] == BOILERPLATE).sum()) - int(
        (assignments["text"] == BOILERPLATE).sum()
    )
    assert dropped["records"] == in_eval > 0 and dropped["by_split"]["train"] == 0
    assert set(dropped["ids"]).isdisjoint(assignments["id"])
    assert len(assignments) + dropped["records"] == len(records)
    assert audit["leaks"]["leaking_pairs"] == 0
    assert audit["sizes"]["within_tolerance"]
    # the duplicate-cluster column: the component's smallest id, null without duplicates
    boiler = assignments[assignments["text"] == BOILERPLATE]
    assert set(boiler["duplicate_cluster"]) == {"p000-0"}
    assert assignments[assignments["text"] != BOILERPLATE]["duplicate_cluster"].isna().all()
    assert "dropped" in auditing.audit_table(audit)


def test_drop_reports_dropped_records_as_moved() -> None:
    records = frame(boilerplate_corpus())
    everyone = {i: "test" for i in records["id"]}
    _, audit = split.make_splits(records, drop_cfg(), seed=SEED, previous=everyone)
    assert audit["moved"]["by_reason"]["dropped"] == audit["dedup"]["dropped"]["records"]


def test_size_audit_fails_a_lopsided_split() -> None:
    """Few large groups: some salt puts far more than 10% in test; the audit says so and
    check_audit fails naming split.size_tolerance."""
    rng = np.random.default_rng(5)
    rows = [
        {"id": f"r{i}", "text": random_text(rng, 12), "label": "ab"[i % 2], "group": f"g{i // 40}"}
        for i in range(400)
    ]
    found = False
    for i in range(40):
        _, audit = split.make_splits(frame(rows), cfg(salt=f"s-{i}"), seed=SEED)
        worst = audit["sizes"]["max_deviation"]["value"]
        shares = [audit["splits"][n]["share"] - CFG["fractions"][n] for n in CFG["fractions"]]
        assert worst == pytest.approx(max(abs(x) for x in shares))
        if worst > CFG["size_tolerance"] and audit["labels"]["within_tolerance"]:
            with pytest.raises(CampaignError, match=r"split\.size_tolerance 0\.05"):
                auditing.check_audit(audit, CFG["audit"])
            found = True
            break
    assert found


def test_label_absent_from_train_fails_the_audit() -> None:
    rng = np.random.default_rng(6)
    rows = [
        {"id": f"r{i}", "text": random_text(rng, 12), "label": "a", "group": f"g{i}"}
        for i in range(200)
    ]
    rows += [{"id": "rare", "text": random_text(rng, 12), "label": "z", "group": "lonely"}]
    for i in range(60):
        _, audit = split.make_splits(frame(rows), cfg(salt=f"m-{i}", stratify_tolerance=1.0),
                                     seed=SEED)  # fmt: skip
        if audit["labels"]["missing_from_train"]:
            with pytest.raises(CampaignError, match=r"label\(s\) absent from train: 'z'"):
                auditing.check_audit(audit, CFG["audit"])
            return
    pytest.fail("no salt put the rare label outside train")

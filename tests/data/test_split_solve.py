"""Tests for ``split.assign: solve`` (campaign.data.solve): small cases whose answers can be
worked out by hand. A feasible split the salt search misses, found; an infeasible one, refused
with its proved best deviation; stability when 10 % new units arrive; the fewest moves when
earlier units cannot all stay; and the params key unchanged for ``assign: hash``."""

from __future__ import annotations

import re
from collections import Counter
from importlib.metadata import version

import numpy as np
import pytest
from test_split import CFG, REPO, SEED, cfg, frame, random_text

from campaign.core.errors import CampaignError
from campaign.core.params import load_params
from campaign.core.registry import get_stage
from campaign.data import split
from campaign.data.salt import find_salt
from campaign.data.settings import OPTIONAL_DEFAULTS, check_cfg
from campaign.data.solve import Problem, SolveSettings, solve

TINY = REPO / "tests" / "fixtures" / "tiny_params.yaml"
SOLVE = {"time_limit_s": 120, "node_limit": 500, "max_units": 1000, "improve_steps": 1}


def solve_cfg(**changes) -> dict:
    return cfg(assign="solve", solve=dict(SOLVE), **changes)


def units_frame(units: list[tuple[str, str, int]], seed: int = 0):
    """Records of units given as (unit name, label, records): one group per unit, random texts
    (no duplicates join units)."""
    rng = np.random.default_rng(seed)
    rows = [
        {"id": f"{name}-{i:02d}", "text": random_text(rng, 12), "label": label, "group": name}
        for name, label, n in units
        for i in range(n)
    ]
    return frame(rows)


def per_split_units(assignments) -> dict[str, Counter]:
    """split -> Counter of labels over its units (each unit is one label here)."""
    first = assignments.drop_duplicates("unit")
    return {s: Counter(part["label"]) for s, part in first.groupby("split")}


# 80 units of 5 records, 20 per label a/b/c/d; 60/20/20 with both tolerances 0.01. Sizes force
# train 240 records (48 units), validation and test 80 (16 units each); a label share within
# 0.01 of 1/4 forces each split to hold a quarter of each label's units: train 12 of each,
# validation and test 4 of each. A salted hash draws units independently (each label falls
# 12/4/4 for ~5 % of salts, all four for ~6 in a million): 2,000 salts miss it.
FORCED = [(f"{lab}{i:02d}", lab, 5) for lab in "abcd" for i in range(20)]
FORCED_CFG = {
    "fractions": {"train": 0.6, "validation": 0.2, "test": 0.2},
    "stratify_tolerance": 0.01,
    "size_tolerance": 0.01,
}


def test_solver_finds_the_split_the_salt_search_misses() -> None:
    records = units_frame(FORCED)
    with pytest.raises(CampaignError, match=r"^split-salt: none of the current salt"):
        find_salt(records, cfg(**FORCED_CFG), seed=SEED, tries=2000)
    assignments, audit = split.make_splits(records, solve_cfg(**FORCED_CFG), seed=SEED)
    units = per_split_units(assignments)
    assert units["train"] == {"a": 12, "b": 12, "c": 12, "d": 12}
    assert units["validation"] == units["test"] == {"a": 4, "b": 4, "c": 4, "d": 4}
    assert audit["labels"]["max_deviation"]["value"] == pytest.approx(0.0, abs=1e-12)
    assert audit["sizes"]["max_deviation"]["value"] == pytest.approx(0.0, abs=1e-12)
    assert audit["assign"]["used"] == "solve" and audit["assign"]["moved_units"] == []
    again, _ = split.make_splits(records, solve_cfg(**FORCED_CFG), seed=SEED)
    assert again.equals(assignments)  # same units and settings, same split


def test_auto_keeps_a_passing_hash_and_solves_a_failing_one() -> None:
    records = units_frame(FORCED)
    _, solved = split.make_splits(records, cfg(assign="auto", **FORCED_CFG), seed=SEED)
    assert solved["assign"]["used"] == "solve"
    loose = {**FORCED_CFG, "stratify_tolerance": 1.0, "size_tolerance": 1.0}
    hashed, kept = split.make_splits(records, cfg(assign="auto", **loose), seed=SEED)
    plain, _ = split.make_splits(records, cfg(**loose), seed=SEED)
    assert kept["assign"]["used"] == "hash" and hashed.equals(plain)


# 8 units of 10 records, 5 of label a and 3 of b (a is 5/8 = 0.625); 50/25/25 with size
# tolerance 0.01 forces train 4 units, validation and test 2. A 2-unit split has an a share of
# 0, 1/2 or 1, so at best 1/2 (off by 0.125) in each evaluation split (1 a + 1 b each), which
# leaves train 3 a + 1 b: 3/4, off by 0.125 too. Best label deviation: exactly 0.125. With
# labels within 0.1 every split needs a share in [0.525, 0.725], i.e. 2 a per b, and 5 a cannot
# make three such splits at any sizes.
EIGHT = [(f"a{i}", "a", 10) for i in range(5)] + [(f"b{i}", "b", 10) for i in range(3)]
EIGHT_CFG = {
    "fractions": {"train": 0.5, "validation": 0.25, "test": 0.25},
    "stratify_tolerance": 0.1,
    "size_tolerance": 0.01,
}


def test_infeasible_split_fails_with_the_proved_best_deviation() -> None:
    records = units_frame(EIGHT)
    with pytest.raises(CampaignError) as caught:
        split.make_splits(records, solve_cfg(**EIGHT_CFG), seed=SEED)
    message = str(caught.value)
    assert "\n" not in message and message.startswith("split: no assignment of the 8 units")
    best = re.search(r"the smallest label deviation is (\S+) \(none reaches (\S+)\)", message)
    assert best and float(best[1]) == 0.125 and 0.124 <= float(best[2]) < 0.125
    assert "no split sizes at all let every label be within split.stratify_tolerance" in message
    assert message.endswith("make it feasible with split.stratify_tolerance >= 0.125")
    # ... and at that tolerance the split exists, off by exactly 0.125.
    _, audit = split.make_splits(
        records, solve_cfg(**{**EIGHT_CFG, "stratify_tolerance": 0.125}), seed=SEED
    )
    assert audit["labels"]["max_deviation"]["value"] == pytest.approx(0.125)


def test_proved_best_size_deviation() -> None:
    """One unit of 40 records of a, three of 10 a, three of 10 b (a is 0.7); 50/25/25 with
    labels within 0.25 (each split's a share in [0.45, 0.95]). Sizes alone cannot be met within
    0.01 (validation would need 25 +- 1 records from units of 10). With the labels: the big unit
    off train puts an evaluation split at 0.4 or more (size deviation >= 0.15); in train it
    needs a b unit (a share 1 > 0.95), so train holds 50, 60 or more records, and the five
    units of 10 left make evaluation splits of 20 and 30: size deviation 0.05 at best."""
    counts = np.array([[40, 0]] + [[10, 0]] * 3 + [[0, 10]] * 3)
    p = Problem(counts, np.array([0.25, 0.5, 0.25]), 1, 0.25, 0.01)
    with pytest.raises(CampaignError) as caught:
        solve(p, SolveSettings(), ["test", "train", "validation"], ["a", "b"])
    assert "the smallest size deviation is 0.0500 (none reaches 0.049" in str(caught.value)
    assert "no split of these units has sizes within split.size_tolerance 0.01" in str(caught.value)
    assert "split.size_tolerance >= 0.05" in str(caught.value)


def grown(seed: int, n_old: int) -> tuple[list, list]:
    """n_old earlier units of 1-30 records (label a for every third, else a/b/c/d at random),
    and 10 % more: one new unit of 10 records per label."""
    rng = np.random.default_rng(seed)
    units = []
    for u in range(n_old):
        size = int(rng.integers(1, 31))
        label = "abcd"[int(rng.integers(0, 4))] if u % 3 else "a"
        units.append((f"u{u:03d}", label, size))
    return units, units + [(f"n{lab}", lab, 10) for lab in "abcd"]


def test_ten_percent_new_units_move_no_earlier_unit() -> None:
    old_units, all_units = grown(3, 40)
    c = solve_cfg(stratify_tolerance=0.08, size_tolerance=0.05)
    first, _ = split.make_splits(units_frame(old_units), c, seed=SEED)
    previous = dict(zip(first["id"], first["split"], strict=True))
    records = units_frame(all_units)
    after, audit = split.make_splits(records, c, seed=SEED, previous=previous)
    assert audit["moved"]["count"] == 0 and audit["moved"]["compared"] == len(previous)
    assert audit["assign"]["earlier_units"] == 40 and audit["assign"]["new_units"] == 4
    assert audit["labels"]["within_tolerance"] and audit["sizes"]["within_tolerance"]
    # Without the earlier split, a fresh program places some earlier units elsewhere: the
    # stability comes from split.previous, not from luck.
    fresh, fresh_audit = split.make_splits(records, c, seed=SEED)
    fresh_of = dict(zip(fresh["id"], fresh["split"], strict=True))
    assert any(fresh_of[i] != s for i, s in previous.items())
    # The bound the improvement proved holds only with the earlier units in place: a fresh
    # split of the same units scores below it, so the note must say what it is proved for.
    bound = audit["assign"]["proved_lower"]
    fresh_score = max(fresh_audit["assign"][k] for k in ("label_deviation", "size_deviation"))
    assert fresh_score < bound
    assert audit["assign"]["proved_for"] == "the 40 earlier units in place"
    assert (
        f"no split within the tolerances with the 40 earlier units in place has both below "
        f"{bound:.4f}, proved" in audit["assign"]["note"]
    )


# 10 units of 10 records, 5 a and 5 b, 60/20/20 with both tolerances 0.01: train 3 a + 3 b,
# validation and test 1 a + 1 b each. The earlier split had validation a0, a1 and test b0,
# b1: both evaluation splits are wrong, and no single move fixes both, so the fewest moves are
# 2 units: an a from validation to test and a b from test to validation.
TEN = [(f"a{i}", "a", 10) for i in range(5)] + [(f"b{i}", "b", 10) for i in range(5)]
TEN_CFG = {
    "fractions": {"train": 0.6, "validation": 0.2, "test": 0.2},
    "stratify_tolerance": 0.01,
    "size_tolerance": 0.01,
}


def test_earlier_units_move_only_as_few_as_the_tolerances_need() -> None:
    records = units_frame(TEN)
    earlier = {"a0": "validation", "a1": "validation", "b0": "test", "b1": "test"}
    previous = {i: earlier.get(i.split("-")[0], "train") for i in records["id"]}
    after, audit = split.make_splits(records, solve_cfg(**TEN_CFG), seed=SEED, previous=previous)
    moved = audit["assign"]["moved_units"]
    assert len(moved) == 2 and sum(m["records"] for m in moved) == 20
    paths = sorted((m["unit"][2], m["from"], m["to"]) for m in moved)
    assert paths == [("a", "validation", "test"), ("b", "test", "validation")]
    assert all(m["reason"].startswith("rebalanced") for m in moved)
    assert audit["moved"]["by_reason"] == {"rebalanced": 20}
    assert audit["labels"]["max_deviation"]["value"] == pytest.approx(0.0, abs=1e-12)


def test_above_max_units_the_hash_places_them_and_says_so() -> None:
    records = units_frame(FORCED)
    c = solve_cfg(**FORCED_CFG)
    c["solve"]["max_units"] = 79
    assignments, audit = split.make_splits(records, c, seed=SEED)
    plain, _ = split.make_splits(records, cfg(**FORCED_CFG), seed=SEED)
    assert audit["assign"]["used"] == "hash" and assignments.equals(plain)
    assert "80 units are more than split.solve.max_units 79" in audit["assign"]["note"]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"assign": "exact"}, r"^split.assign: 'exact' is not one of hash, solve, auto"),
        (
            {"assign": "solve", "method": "temporal", "temporal_cutoff": "2024-01-01"},
            r"^split.assign: 'solve' needs method group_hash",
        ),
        ({"solve": {**SOLVE, "node_limit": 0}}, r"^split.solve.node_limit: expected a whole"),
        ({"solve": {"time_limit_s": 5}}, r"^split.solve.node_limit: missing"),
        ({"solve": {**SOLVE, "threads": 2}}, r"^split.solve.threads: unknown key"),
    ],
)
def test_bad_assign_settings_name_the_key(changes, message) -> None:
    with pytest.raises(CampaignError, match=message):
        check_cfg(cfg(**changes))


def test_assign_hash_leaves_the_split_key_as_before() -> None:
    """A params file without split.assign/solve and one with them at hash give one params view
    (so existing store keys of the split stage keep their params part); solve changes it, the
    time limit does not."""
    stage = get_stage("split")
    p = load_params(TINY)
    with_keys = stage.key_view(stage.spec(p))
    older = load_params(TINY)
    del older["split"]["assign"], older["split"]["solve"]
    assert stage.key_view(stage.spec(older)) == with_keys
    assert "assign" not in with_keys["split"] and "solve" not in with_keys["split"]
    p["split"]["assign"] = "solve"
    solved = stage.key_view(stage.spec(p))
    assert solved != with_keys
    p["split"]["solve"] = {**p["split"]["solve"], "time_limit_s": 9}
    assert stage.key_view(stage.spec(p)) == solved
    # What decides a solved split's bytes is keyed: the work limit, the improvement steps,
    # the size above which the hash places units (and scipy's version: its HiGHS).
    assert solved["split"]["solve"]["scipy"] == version("scipy")
    for key, value in (("node_limit", 501), ("improve_steps", 0), ("max_units", 10)):
        changed = {**p["split"], "solve": {**p["split"]["solve"], key: value}}
        assert stage.key_view(stage.spec({**p, "split": changed})) != solved, key
        hashed = {**changed, "assign": "hash"}
        assert stage.key_view(stage.spec({**p, "split": hashed})) == with_keys, key
    assert OPTIONAL_DEFAULTS["solve"] == SOLVE == load_params(TINY)["split"]["solve"]
    assert CFG.get("assign") is None  # test_split's CFG predates the key: hash


def test_the_stage_fails_in_one_line_with_no_output(tmp_path, capsys, monkeypatch) -> None:
    """The split command on the infeasible eight units: exit 2, one line, nothing written."""
    import json

    import yaml

    from campaign.cli import main

    rng = np.random.default_rng(0)
    lines = [
        json.dumps({"id": f"{u}-{i}", "text": random_text(rng, 12), "label": lab, "author": u})
        for u, lab, n in EIGHT
        for i in range(n)
    ]
    (tmp_path / "eight.jsonl").write_text("\n".join(lines) + "\n")
    params = load_params(TINY)
    params["data"]["sources"] = [
        {"path": "eight.jsonl", "format": "jsonl", "licence": "CC0-1.0", "origin": "test"}
    ]
    params["data"]["fields"] = {
        "id": "id",
        "text": "text",
        "label": "label",
        "group": "author",
        "timestamp": None,
    }
    params["split"].update(assign="solve", **EIGHT_CFG)
    params["campaign"]["state_dir"] = "state"
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    outputs = {o: tmp_path / "out" / o for o in get_stage("split").outputs}
    argv = ["split", "--params", "params.yaml", "--in", "sources=eight.jsonl", "--log", "x.log"]
    for o, path in outputs.items():
        argv += ["--out", f"{o}={path}"]
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: split: no assignment of the 8 units")
    assert not any(p.exists() for p in outputs.values())


def test_a_spent_time_limit_fails_the_split_and_says_so() -> None:
    records = units_frame(FORCED)
    c = solve_cfg(**FORCED_CFG)
    c["solve"]["time_limit_s"] = 1e-9
    with pytest.raises(CampaignError, match=r"^split.solve.time_limit_s: HiGHS reached") as e:
        split.make_splits(records, c, seed=SEED)
    assert "none is used" in str(e.value) and "split.solve.node_limit" in str(e.value)


def test_a_spent_node_limit_is_undecided_not_a_failure() -> None:
    """40 units of one label each (4 labels, 1-59 records), 80/10/10 within 0.005 and labels
    within 0.01: one branch-and-bound node decides nothing. The stage must say that the node
    limit left it open (and to raise it), never that HiGHS failed or that no split exists."""
    rng = np.random.default_rng(0)
    counts = np.zeros((40, 4))
    for u in range(40):
        counts[u, rng.integers(0, 4)] = rng.integers(1, 60)
    p = Problem(counts, np.array([0.1, 0.8, 0.1]), 1, 0.01, 0.005)
    with pytest.raises(CampaignError) as caught:
        solve(p, SolveSettings(node_limit=1, improve_steps=0), ["test", "train", "validation"])
    message = str(caught.value)
    assert message.startswith("split.solve.node_limit: HiGHS neither found a split"), message
    assert "raise split.solve.node_limit" in message and "no assignment" not in message


def test_fewest_moves_cut_by_the_node_limit_is_not_called_fewest() -> None:
    """80 units (5 labels, 1-29 records), a random earlier split that no longer fits 20/60/20
    within 0.01: the fewest-moves program needs more than one node. Cut there, its split is
    valid but its moves are not proved fewest, and the solution says so; with room it is."""
    rng = np.random.default_rng(2)
    counts = np.zeros((80, 5))
    for u in range(80):
        counts[u, rng.integers(0, 5)] = rng.integers(1, 30)
    earlier = rng.integers(0, 3, size=80)
    earlier[rng.random(80) < 0.1] = -1
    p = Problem(counts, np.array([0.2, 0.6, 0.2]), 1, 0.01, 0.01, earlier)
    names = ["test", "train", "validation"]
    cut = solve(p, SolveSettings(node_limit=1, improve_steps=0), names)
    full = solve(p, SolveSettings(improve_steps=0), names)
    assert cut.moved.any() and not cut.fewest_moves_proved
    assert full.fewest_moves_proved
    assert p.sizes[full.moved].sum() <= p.sizes[cut.moved].sum()


def test_a_previous_split_of_other_data_is_named_not_silently_ignored() -> None:
    """split.previous whose ids are none of these records (another corpus's split): no unit can
    stay in place, and the audit says so rather than report a stable split."""
    records = units_frame(TEN)
    other = {f"x{i}": "train" for i in range(10)}
    _, audit = split.make_splits(records, solve_cfg(**TEN_CFG), seed=SEED, previous=other)
    assert audit["assign"]["earlier_units"] == 0
    assert "split.previous holds none of these 100 records" in audit["assign"]["note"]

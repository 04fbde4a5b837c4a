"""Tests for campaign.data.split: planted leaks of every kind stay on one side, stability under
growth, the stratification check, temporal mode, bad input, determinism and the audit."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from campaign.core.errors import CampaignError
from campaign.data import audit as auditing
from campaign.data import dedup, split
from campaign.data.readers import load_records
from campaign.data.units import leak_units
from campaign.tools.demo_data import generate_corpus

REPO = Path(__file__).resolve().parents[2]
SEED = 7
# The proposed params `split` section. The salt is find_salt's pick for base "demo" on the demo
# corpus (test_salt.py::test_find_salt_reproduces_the_demo_salt); a stable per-unit hash passes
# a 0.05 label tolerance on these 254 units for only ~0.1-1% of salts (see split's docstring).
CFG = {
    "method": "group_hash",
    "fractions": {"train": 0.8, "validation": 0.1, "test": 0.1},
    "salt": "demo-1159",
    "stratify_tolerance": 0.05,
    "size_tolerance": 0.05,
    "temporal_cutoff": None,
    "dedup": {"policy": "unite", "near": {"threshold": 0.5, "num_perm": 128, "shingle_size": 3}},
    "audit": {
        "max_group_overlap": 0,
        "max_cross_split_duplicates": 0,
        "allow_label_conflicts": True,
    },
    "previous": None,
}


def cfg(**changes) -> dict:
    out = json.loads(json.dumps(CFG))
    out.update(changes)
    return out


def frame(rows: list[dict]) -> pd.DataFrame:
    """A load_records-shaped frame from dicts with id, text, label, and maybe group, time."""
    times = pd.to_datetime([r.get("timestamp") for r in rows], utc=True)
    return pd.DataFrame(
        {
            "id": pd.array([r["id"] for r in rows], dtype="str"),
            "text": pd.array([r["text"] for r in rows], dtype="str"),
            "label": pd.array([r["label"] for r in rows], dtype="str"),
            "group": pd.array([r.get("group") for r in rows], dtype="str"),
            "timestamp": times.astype("datetime64[us, UTC]"),
            "source": pd.array(["fixture"] * len(rows), dtype="str"),
            "licence": pd.array(["CC0-1.0"] * len(rows), dtype="str"),
        }
    )


def demo_rows(seed: int, n: int, prefix: str | None = None) -> list[dict]:
    rows = []
    for r in generate_corpus(seed, n):
        record_id = r["id"] if prefix is None else f"{prefix}-{r['id']}"
        rows.append(
            {
                "id": record_id,
                "text": r["text"],
                "label": r["label"],
                "group": r["author"],
                "timestamp": r["created_at"],
            }
        )
    return rows


@pytest.fixture(scope="module")
def demo() -> pd.DataFrame:
    """data/raw/demo.jsonl (the generator corpus) read as the manifest stage reads it."""
    # The generator corpus (data/raw/demo.jsonl, the tiny campaign's data), not the default
    # campaign's quotations: these tests need its authors and planted duplicates.
    params = yaml.safe_load((REPO / "tests" / "fixtures" / "tiny_params.yaml").read_text())
    return load_records(params["data"]["sources"], params["data"]["fields"], REPO)


@pytest.fixture(scope="module")
def demo_split(demo):
    return split.make_splits(demo, CFG, seed=SEED)


def split_of(assignments: pd.DataFrame) -> dict[str, str]:
    return dict(zip(assignments["id"], assignments["split"], strict=True))


def random_text(rng: np.random.Generator, n_words: int, vocab: str = "w") -> str:
    return " ".join(f"{vocab}{i}" for i in rng.integers(0, 5000, n_words).tolist())


# --- planted leaks -----------------------------------------------------------------------

CHAIN = "c0 c1 c2 c3 c4 c5 c6 c7 c8 c9 c10 c11 c12 c13 c14 c15 c16 c17 c18 c19".split()


def _chain_texts() -> tuple[str, str, str]:
    """A ~ B and B ~ C (Jaccard >= 0.5 on 3-word shingles) but not A ~ C."""
    a = list(CHAIN)
    b = list(a)
    b[3] = "bx"
    c = list(b)
    c[16] = "cx"
    c[9] = "cy"
    return " ".join(a), " ".join(b), " ".join(c)


PLANTED = {
    "exact": ["x1", "x2", "x3", "x4"],
    "near": ["n1", "n2"],
    "chain": ["c1", "c2", "c3"],
    "author": ["s1", "s2"],
}


@pytest.fixture(scope="module")
def planted() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = []
    for i in range(400):  # filler: 3 records per author, the first 60 without a group
        rows.append(
            {
                "id": f"f{i:03d}",
                "text": random_text(rng, int(rng.integers(12, 30))),
                "label": ["pos", "neg"][int(rng.integers(2))],
                "group": None if i < 60 else f"author{i // 3:03d}",
            }
        )
    exact = "Planted phrase one about quiet rivers, old bridges and the long walk home."
    near = "kilo lima mike november oscar papa quebec romeo sierra tango uniform victor"
    a, b, c = _chain_texts()
    rows += [
        {"id": "x1", "text": exact, "label": "pos", "group": "pa"},
        {"id": "x2", "text": exact, "label": "neg", "group": "pb"},  # conflicting label
        {"id": "x3", "text": "  PLANTED phrase one\tabout quiet rivers old  bridges AND the "
         "long walk home", "label": "pos", "group": "pc"},  # case and whitespace
        {"id": "x4", "text": exact.replace(",", ";").replace(".", "!!!"), "label": "pos"},
        {"id": "n1", "text": near, "label": "pos", "group": "pd"},
        {"id": "n2", "text": near.replace("papa", "zulu"), "label": "neg", "group": "pe"},
        {"id": "c1", "text": a, "label": "pos"},
        {"id": "c2", "text": b, "label": "pos"},
        {"id": "c3", "text": c, "label": "neg"},
        {"id": "s1", "text": random_text(rng, 20, "q"), "label": "pos", "group": "multi"},
        {"id": "s2", "text": random_text(rng, 20, "q"), "label": "neg", "group": "multi"},
    ]  # fmt: skip
    return frame(rows)


def test_chain_premise() -> None:
    a, b, c = (dedup.shingles(t, 3) for t in _chain_texts())
    assert dedup.jaccard(a, b) >= 0.5 and dedup.jaccard(b, c) >= 0.5
    assert dedup.jaccard(a, c) < 0.5


def test_planted_leaks_are_found(planted) -> None:
    units = leak_units(planted, CFG["dedup"]["near"], SEED)
    assert ["x1", "x2", "x3", "x4"] in units.exact
    pairs = {(a, b) for a, b, _ in units.near_pairs}
    assert {("n1", "n2"), ("c1", "c2"), ("c2", "c3")} <= pairs
    assert ("c1", "c3") not in pairs  # the chain joins them, not a direct pair
    unit_of = dict(zip(units.ids, units.unit, strict=True))
    for members in PLANTED.values():
        assert len({unit_of[m] for m in members}) == 1, members
    assert unit_of["s1"] == "g:multi"
    assert unit_of["x1"] == "g:pa"  # smallest anchor: group anchors sort before ids
    assert unit_of["c1"] == "i:c1"
    conflicting = {c.ids: c.kind for c in units.clusters if c.conflicting}
    assert conflicting[("x1", "x2", "x3", "x4")] == "exact"
    assert conflicting[("n1", "n2")] == "near"
    assert conflicting[("c1", "c2", "c3")] == "near"


@pytest.mark.parametrize("salt", [f"planted-{i}" for i in range(8)])
def test_planted_leaks_stay_on_one_side(planted, salt) -> None:
    assignments, audit = split.make_splits(planted, cfg(salt=salt), seed=SEED)
    where = split_of(assignments)
    for members in PLANTED.values():
        assert len({where[m] for m in members}) == 1, members
    for group, sides in assignments.groupby("group")["split"]:
        assert sides.nunique() == 1, group
    leaks = audit["leaks"]
    assert leaks["leaking_pairs"] == leaks["groups_in_several_splits"] == 0
    assert leaks["eval_records_with_train_partner"] == 0
    assert audit["naive_split"]["leaks"]["leaking_pairs"] > 0
    assert audit["label_conflicts"]["clusters"] == 3


# --- stability ---------------------------------------------------------------------------


def grown(demo: pd.DataFrame) -> pd.DataFrame:
    """The demo plus 10% new records: 290 from another corpus (ids renamed) and 10 by
    authors already in the demo."""
    rng = np.random.default_rng(5)
    authors = sorted(demo["group"].unique())
    own = demo_rows(12, 40, prefix="own")[:10]
    for row in own:
        row["group"] = authors[int(rng.integers(len(authors)))]
    extra = frame(demo_rows(11, 290, prefix="new") + own)
    return pd.concat([demo, extra], ignore_index=True)


def test_adding_records_moves_no_existing_record(demo, demo_split) -> None:
    before = split_of(demo_split[0])
    bigger = grown(demo)
    assignments, audit = split.make_splits(bigger, CFG, seed=SEED, previous=before)
    after = split_of(assignments)
    moved = [i for i in before if after[i] != before[i]]
    assert moved == []
    assert audit["moved"]["compared"] == len(demo) and audit["moved"]["count"] == 0
    # the records by existing authors joined those authors' units
    unit_of = dict(zip(assignments["id"], assignments["unit"], strict=True))
    unit_of_author = dict(zip(demo_split[0]["group"], demo_split[0]["unit"], strict=False))
    own = bigger[bigger["id"].str.startswith("own-")]
    for record_id, author in zip(own["id"], own["group"], strict=True):
        assert unit_of[record_id] == unit_of_author[author]
    print(
        f"growth +{len(bigger) - len(demo)} records: 0 of {len(demo)} moved; label deviation "
        f"{demo_split[1]['labels']['max_deviation']['value']:.3f} -> "
        f"{audit['labels']['max_deviation']['value']:.3f}"
    )


def test_bridging_record_moves_a_unit_and_is_reported(demo, demo_split) -> None:
    assignments = demo_split[0]
    before = split_of(assignments)
    by_unit = assignments.groupby("unit")
    first = assignments.iloc[0]
    other = next(
        row for row in assignments.itertuples() if before[row.id] != first["split"]
    )  # a record in another split, so in another unit
    bridge = frame(
        [
            {
                "id": "bridge-1",
                "text": first["text"],  # an exact copy of one unit's record ...
                "label": first["label"],
                "group": other.group,  # ... posted by an author of the other unit
                "timestamp": "2024-01-01T00:00:00Z",
            }
        ]
    )
    merged = pd.concat([demo, bridge], ignore_index=True)
    after_df, audit = split.make_splits(merged, CFG, seed=SEED, previous=before)
    after = split_of(after_df)
    moved = set(audit["moved"]["ids"])
    assert moved and audit["moved"]["by_reason"] == {"bridged": len(moved)}
    joined = set(by_unit.get_group(first["unit"])["id"]) | set(by_unit.get_group(other.unit)["id"])
    assert moved <= joined
    assert all(after[i] == before[i] for i in before if i not in joined)
    assert len({after[i] for i in joined}) == 1


def test_new_anchor_moves_a_unit_and_is_reported(demo, demo_split) -> None:
    """A new author whose record copies one of an existing unit's records brings an anchor
    that sorts first: the documented second way growth can move records."""
    assignments = demo_split[0]
    before = split_of(assignments)
    newcomer = "aaa-newcomer"
    new_side = split.assign_units([f"g:{newcomer}"], CFG["fractions"], CFG["salt"])
    row = next(r for r in assignments.itertuples() if r.split != new_side[f"g:{newcomer}"])
    copy = {"id": "copy-1", "text": row.text, "label": row.label, "group": newcomer}
    copy["timestamp"] = "2024-01-01T00:00:00Z"
    after_df, audit = split.make_splits(
        pd.concat([demo, frame([copy])], ignore_index=True), CFG, seed=SEED, previous=before
    )
    unit = set(assignments[assignments["unit"] == row.unit]["id"])
    assert set(audit["moved"]["ids"]) == unit
    assert audit["moved"]["by_reason"] == {"new_anchor": len(unit)}


def test_moved_reports_changed_params(demo, demo_split) -> None:
    before = split_of(demo_split[0])
    _, audit = split.make_splits(demo, cfg(salt="other"), seed=SEED, previous=before)
    assert audit["moved"]["count"] > 0
    assert set(audit["moved"]["by_reason"]) == {"params"}


# --- stratification ----------------------------------------------------------------------


def test_stratification_bound_holds_on_demo(demo_split) -> None:
    assignments, audit = demo_split
    labels = audit["labels"]
    assert labels["within_tolerance"] and labels["max_deviation"]["value"] <= 0.05
    overall = assignments["label"].value_counts(normalize=True)
    for name, part in assignments.groupby("split"):
        shares = part["label"].value_counts(normalize=True).reindex(overall.index, fill_value=0)
        assert float((shares - overall).abs().max()) <= CFG["stratify_tolerance"], name
    auditing.check_audit(audit, CFG["audit"])


def test_audit_says_when_the_bound_fails(demo) -> None:
    """For other salts the bound is statistical: the audit flag matches a recomputation and
    check_audit fails exactly when the flag is down."""
    flags = []
    for i in range(12):
        assignments, audit = split.make_splits(demo, cfg(salt=f"probe-{i}"), seed=SEED)
        overall = assignments["label"].value_counts(normalize=True)
        worst = max(
            float((part["label"].value_counts(normalize=True).reindex(overall.index, fill_value=0)
                   - overall).abs().max())
            for _, part in assignments.groupby("split")
        )  # fmt: skip
        assert audit["labels"]["max_deviation"]["value"] == pytest.approx(worst, abs=1e-12)
        within = worst <= CFG["stratify_tolerance"]
        assert audit["labels"]["within_tolerance"] == within
        flags.append(within)
        if not within:
            with pytest.raises(CampaignError, match="split.stratify_tolerance 0.05"):
                auditing.check_audit(audit, CFG["audit"])
    assert not all(flags)  # on 254 units most salts miss 0.05: the check is not vacuous


@pytest.fixture(scope="module")
def skewed() -> pd.DataFrame:
    """3,000 records, labels 90/8/2 %, authors of 1-4 records; no duplicates."""
    rng = np.random.default_rng(1)
    rows, author = [], 0
    while len(rows) < 3000:
        for _ in range(int(rng.integers(1, 5))):
            label = str(rng.choice(["common", "rare", "very_rare"], p=[0.9, 0.08, 0.02]))
            rows.append(
                {
                    "id": f"k{len(rows):05d}",
                    "text": random_text(rng, int(rng.integers(15, 40))),
                    "label": label,
                    "group": f"au{author:04d}",
                }
            )
        author += 1
    return frame(rows[:3000])


def test_stratification_bound_holds_on_skewed_labels(skewed) -> None:
    assignments, audit = split.make_splits(skewed, cfg(salt="skewed"), seed=SEED)
    assert audit["labels"]["within_tolerance"]
    assert audit["labels"]["missing"] == {"test": [], "train": [], "validation": []}
    auditing.check_audit(audit, CFG["audit"])
    # and for most salts, not just this one
    units = leak_units(skewed, CFG["dedup"]["near"], SEED)
    names = sorted(CFG["fractions"])
    deviations = [
        auditing._label_shares(units.labels, split._assign(units, cfg(salt=f"s{i}"), None), names)[
            "max_deviation"
        ]["value"]
        for i in range(100)
    ]
    passed = float(np.mean(np.array(deviations) <= CFG["stratify_tolerance"]))
    print(
        f"skewed 90/8/2: {passed:.0%} of 100 salts within 0.05 (median {np.median(deviations):.3f})"
    )
    assert passed >= 0.9


# --- temporal ----------------------------------------------------------------------------


def test_temporal_train_strictly_before_cutoff_and_units_whole(demo) -> None:
    cutoff = pd.Timestamp("2024-07-01T00:00:00Z")
    c = cfg(method="temporal", temporal_cutoff="2024-07-01T00:00:00Z", stratify_tolerance=1.0)
    assignments, audit = split.make_splits(demo, c, seed=SEED)
    times = dict(zip(demo["id"], demo["timestamp"], strict=True))
    stamp = assignments["id"].map(times)
    assert (stamp[assignments["split"] == "train"] < cutoff).all()
    assert assignments.groupby("unit")["split"].nunique().max() == 1
    # every pre-cutoff evaluation record came along with a unit that reaches past the cutoff
    latest = stamp.groupby(assignments["unit"]).max()
    early_eval = assignments[(assignments["split"] != "train") & (stamp < cutoff)]
    assert (latest[early_eval["unit"]] >= cutoff).all()
    t = audit["temporal"]
    assert t["train_records_at_or_after_cutoff"] == 0
    assert t["eval_records_before_cutoff"] == len(early_eval) > 0
    assert t["train_latest"] < t["cutoff"] <= "9999"
    counts = Counter(assignments["split"])
    assert counts["validation"] and counts["test"]
    assert audit["leaks"]["leaking_pairs"] == 0
    assert "Temporal: cutoff 2024-07-01T00:00:00Z" in auditing.audit_table(audit)
    # YAML reads an unquoted time as a datetime: the same cutoff, the same split
    as_datetime = cfg(**{**c, "temporal_cutoff": cutoff.to_pydatetime()})
    assert split.make_splits(demo, as_datetime, seed=SEED)[0].equals(assignments)


def test_temporal_cutoff_that_leaves_train_empty() -> None:
    rows = [
        {"id": f"t{i}", "text": f"text number {i} about {w}", "label": "ab"[i % 2],
         "group": f"g{i % 2}", "timestamp": f"2024-0{1 + i}-01T00:00:00Z"}
        for i, w in enumerate(["apples", "pears", "plums", "figs"])
    ]  # fmt: skip
    c = cfg(method="temporal", temporal_cutoff="2024-02-15T00:00:00Z")
    with pytest.raises(CampaignError, match=r"every unit with records before .* train would be"):
        split.make_splits(frame(rows), c, seed=SEED)


@pytest.mark.parametrize(
    ("cutoff", "message"),
    [
        ("2020-01-01T00:00:00Z", "no record is before 2020-01-01T00:00:00Z"),
        ("2030-01-01T00:00:00Z", "no record is at or after 2030-01-01T00:00:00Z"),
    ],
)
def test_temporal_cutoff_outside_the_data(demo, cutoff, message) -> None:
    with pytest.raises(CampaignError, match=f"^split.temporal_cutoff: {message}"):
        split.make_splits(demo, cfg(method="temporal", temporal_cutoff=cutoff), seed=SEED)


def test_temporal_needs_timestamps(demo) -> None:
    no_times = demo.assign(timestamp=pd.NaT)
    c = cfg(method="temporal", temporal_cutoff="2024-07-01")
    with pytest.raises(CampaignError, match=r"^data\.fields\.timestamp: split\.method"):
        split.make_splits(no_times, c, seed=SEED)
    one_missing = demo.copy()
    one_missing.loc[5, "timestamp"] = pd.NaT
    with pytest.raises(CampaignError, match=r"^record 'doc-000005': no timestamp"):
        split.make_splits(one_missing, c, seed=SEED)


# --- bad input ---------------------------------------------------------------------------


def tiny(n: int = 12, labels=("a", "b")) -> pd.DataFrame:
    rng = np.random.default_rng(2)
    return frame(
        [
            {
                "id": f"t{i}",
                "text": random_text(rng, 10),
                "label": labels[i % len(labels)],
                "group": f"g{i // 2}",
            }
            for i in range(n)
        ]
    )


@pytest.mark.parametrize(
    ("records", "changes", "message"),
    [
        (
            lambda: tiny().assign(group=pd.array([None] * 12, dtype="str")),
            {},
            r"^data\.fields\.group: split\.method 'group_hash' needs a group field",
        ),
        (lambda: tiny(labels=("a",)), {}, r"^data\.fields\.label: all 12 records have label 'a'"),
        (
            tiny,
            {"fractions": {"train": 0.8, "validation": 0.1, "test": 0.05}},
            r"^split\.fractions: sum to 0\.95, expected 1",
        ),
        (
            tiny,
            {"fractions": {"train": 1.1, "validation": 0.0 + 0.1, "test": -0.2}},
            r"^split\.fractions\.test: expected a fraction >= 0, got -0\.2",
        ),
        (
            tiny,
            {"fractions": {"train": 0.9, "validation": 0.1, "test": 0}},
            r"^split\.fractions\.test: is 0",
        ),
        (
            tiny,
            {"fractions": {"train": 0.98, "validation": 0.01, "test": 0.01}},
            r"^split\.fractions: split 'test' got no records \(6 units, 12 records in all\); "
            r"raise split\.fractions\.test or try another split\.salt$",
        ),
        (tiny, {"method": "random"}, r"^split\.method: 'random' is not one of"),
        (tiny, {"salt": ""}, r"^split\.salt: expected a non-empty string"),
        (tiny, {"stratify_tolerance": 0}, r"^split\.stratify_tolerance: expected"),
        (tiny, {"temporal_cutoff": "2024-01-01"}, r"^split\.temporal_cutoff: only used by"),
        (
            tiny,
            {"method": "temporal", "temporal_cutoff": "soon"},
            r"^split\.temporal_cutoff: 'soon' is not an ISO 8601 time",
        ),
        (tiny, {"shuffle": True}, r"^split\.shuffle: unknown key"),
        (
            tiny,
            {"dedup": {"policy": "unite", "near": {"threshold": 0.5, "num_perm": 128}}},
            r"^split\.dedup\.near\.shingle_size: missing",
        ),
        (
            tiny,
            {"audit": {**CFG["audit"], "max_group_overlap": -1}},
            r"^split\.audit\.max_group_overlap: expected an integer >= 0",
        ),
    ],
)
def test_bad_input_gives_one_line(records, changes, message) -> None:
    with pytest.raises(CampaignError, match=message) as caught:
        split.make_splits(records(), cfg(**changes), seed=SEED)
    assert "\n" not in str(caught.value)


def test_missing_key_is_named() -> None:
    c = cfg()
    del c["salt"]
    with pytest.raises(CampaignError, match=r"^split\.salt: missing$"):
        split.make_splits(tiny(), c, seed=SEED)


def test_check_audit_reports_every_violation(planted) -> None:
    """Audit a leaky (naive) assignment of the planted fixture: each policy key bites."""
    units = leak_units(planted, CFG["dedup"]["near"], SEED)
    leaky = auditing._naive_split(units.ids, CFG["fractions"], 3)
    audit = auditing.audit(units, leaky, CFG, seed=SEED)
    assert audit["leaks"]["groups_in_several_splits"] > 0
    strict = {**CFG["audit"], "allow_label_conflicts": False}
    with pytest.raises(CampaignError) as caught:
        auditing.check_audit(audit, strict)
    message = str(caught.value)
    assert message.startswith("split audit failed: ") and "\n" not in message
    assert "split.audit.max_group_overlap is 0" in message
    assert "split.audit.allow_label_conflicts is false" in message
    loose = {"max_group_overlap": 10**6, "max_cross_split_duplicates": 10**6}
    auditing.check_audit({**audit, "labels": {**audit["labels"], "within_tolerance": True}},
                      {**loose, "allow_label_conflicts": True})  # fmt: skip
    with pytest.raises(CampaignError, match=r"^split\.audit\.strict: unknown key"):
        auditing.check_audit(audit, {**CFG["audit"], "strict": True})


def test_duplicates_across_splits_fail_the_policy(planted) -> None:
    units = leak_units(planted, CFG["dedup"]["near"], SEED)
    where = dict(zip(units.ids, ["train"] * len(units.ids), strict=True))
    where["x2"], where["n2"] = "test", "validation"  # an exact and a near copy cross over
    where.update({i: "test" for i in units.ids[:20]})
    where.update({i: "validation" for i in units.ids[20:40]})
    audit = auditing.audit(units, [where[i] for i in units.ids], CFG, seed=SEED)
    assert audit["leaks"]["cross_split_exact_pairs"] == 3  # x2 against x1, x3, x4
    assert audit["leaks"]["cross_split_near_pairs"] == 1
    with pytest.raises(CampaignError, match=r"4 duplicate pairs cross splits \(exact 3, near 1"):
        auditing.check_audit(audit, {**CFG["audit"], "max_group_overlap": 10**6})


# --- determinism, audit shape ------------------------------------------------------------


def test_same_salt_same_split_other_salt_other_split(demo, demo_split) -> None:
    again, audit = split.make_splits(demo, CFG, seed=SEED)
    assert again.equals(demo_split[0])
    assert json.dumps(audit, sort_keys=True) == json.dumps(demo_split[1], sort_keys=True)
    other, _ = split.make_splits(demo, cfg(salt="another"), seed=SEED)
    changed = (other["split"] != demo_split[0]["split"]).mean()
    assert changed > 0.1


def test_input_order_does_not_matter(demo, demo_split) -> None:
    shuffled = demo.sample(frac=1.0, random_state=np.random.default_rng(4)).reset_index(drop=True)
    assignments, audit = split.make_splits(shuffled, CFG, seed=SEED)
    assert split_of(assignments) == split_of(demo_split[0])
    assert audit["naive_split"] == demo_split[1]["naive_split"]


def test_naive_contrast_depends_on_seed_only(demo) -> None:
    units = leak_units(demo, CFG["dedup"]["near"], SEED)
    a = auditing._naive_split(units.ids, CFG["fractions"], 1)
    assert a == auditing._naive_split(units.ids, CFG["fractions"], 1)
    assert a != auditing._naive_split(units.ids, CFG["fractions"], 2)


def test_assignments_shape(demo, demo_split) -> None:
    assignments, _ = demo_split
    assert tuple(assignments.columns) == split.ASSIGNMENT_COLUMNS
    assert list(assignments["id"]) == list(demo["id"])
    assert list(assignments["text"]) == list(demo["text"])
    assert set(assignments["split"]) == {"train", "validation", "test"}


def test_demo_audit_numbers(demo_split) -> None:
    _, audit = demo_split
    json.loads(json.dumps(audit))  # JSON-able
    leaks, naive = audit["leaks"], audit["naive_split"]["leaks"]
    assert leaks["leaking_pairs"] == 0 and leaks["groups_in_several_splits"] == 0
    assert naive["groups_in_several_splits"] > 100 and naive["cross_split_exact_pairs"] > 0
    assert audit["dedup"]["exact_clusters"] == 90 and audit["dedup"]["near_pairs"] == 60
    per_unit = defaultdict(set)
    assignments = demo_split[0]
    for unit, side in zip(assignments["unit"], assignments["split"], strict=True):
        per_unit[unit].add(side)
    assert all(len(s) == 1 for s in per_unit.values())
    table = auditing.audit_table(audit)
    for needle in ("leaking pairs, total", "naive split", "max |share - overall|", "test"):
        assert needle in table
    print("\n" + table)

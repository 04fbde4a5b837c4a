"""Tests for campaign.data.dedup: normalization, shingles, Jaccard, union-find, exact clusters,
MinHash (checked against exact Jaccard) and near-duplicate recall on the demo corpus."""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pytest

from campaign.core.errors import CampaignError
from campaign.data import dedup
from campaign.tools.demo_data import generate_corpus_with_truth


@pytest.fixture(scope="module")
def demo():
    records, truth = generate_corpus_with_truth(7, 3000)
    return records, truth


# --- normalize ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("  Hello,   WORLD!  ", "hello world"),
        ("tab\there\nnew line\r\n", "tab here new line"),
        ("Ｆｕｌｌｗｉｄｔｈ　ｔｅｘｔ", "fullwidth text"),  # NFKC: fullwidth letters and space
        ("ﬁne ﬂour", "fine flour"),  # NFKC: ligatures
        ("Straße", "strasse"),  # casefold, not lower
        ("don't stop", "dont stop"),  # punctuation is deleted, not replaced by a space
        ("e-mail — now", "email now"),  # a dash between spaces leaves nothing behind
        ("50% off $5 + tax", "50 off 5 tax"),  # symbols go too
        ("I ❤ NY 🙂", "i ny"),
        ("zero\u200bwidth soft\u00adhyphen", "zerowidth softhyphen"),  # Cf characters
        ("cafe\u0301 café", "café café"),  # decomposed and composed accents meet
        ("नमस्ते दुनिया", "नमस्ते दुनिया"),  # combining vowel signs are kept
        ("snake_case x2", "snakecase x2"),  # underscore is punctuation (Pc)
        ("...!!!", ""),
    ],
)
def test_normalize(text: str, expected: str) -> None:
    assert dedup.normalize(text) == expected


def test_normalize_is_idempotent() -> None:
    for text in ["  A-b, C!  ", "Ｆｕｌｌ", "Straße ﬁ", "e\u0301"]:
        once = dedup.normalize(text)
        assert dedup.normalize(once) == once


# --- shingles, Jaccard, union-find -------------------------------------------------------


def test_shingles_by_hand() -> None:
    assert dedup.shingles("a b c d", 3) == {"a b c", "b c d"}
    assert dedup.shingles("a b c", 3) == {"a b c"}
    assert dedup.shingles("a b", 3) == {"a b"}  # shorter than the size: one shingle, all words
    assert dedup.shingles("", 3) == set()
    assert dedup.shingles("a b a b a", 2) == {"a b", "b a"}  # a set: repeats count once


def test_jaccard_by_hand() -> None:
    assert dedup.jaccard({1, 2, 3}, {2, 3, 4}) == 0.5
    assert dedup.jaccard({1}, {1}) == 1.0
    assert dedup.jaccard({1}, {2}) == 0.0
    assert dedup.jaccard(set(), set()) == 0.0
    # "a b c d e" vs "a b c d f": shingles {abc, bcd, cde} vs {abc, bcd, cdf}: 2 / 4
    a = dedup.shingles("a b c d e", 3)
    b = dedup.shingles("a b c d f", 3)
    assert dedup.jaccard(a, b) == 0.5


def test_union_find_by_hand() -> None:
    uf = dedup.UnionFind(6)
    uf.union(0, 1)
    uf.union(2, 3)
    assert uf.find(0) == uf.find(1) != uf.find(2)
    uf.union(1, 3)  # joins {0, 1} and {2, 3}
    assert sorted(map(sorted, uf.components())) == [[0, 1, 2, 3], [4], [5]]
    assert uf.union(0, 3) == uf.find(2)  # already joined: no change


def test_clusters_from_pairs_chain_and_extra_items() -> None:
    ids = ["e", "d", "c", "b", "a", "z"]
    pairs = [("a", "b", 0.9), ("b", "c", 0.7), ("d", "e", 1.0)]
    assert dedup.clusters_from_pairs(ids, pairs) == [["a", "b", "c"], ["d", "e"]]
    with pytest.raises(CampaignError, match="unknown record id 'q'"):
        dedup.clusters_from_pairs(ids, [("a", "q")])


# --- exact clusters ----------------------------------------------------------------------


def test_exact_clusters_variants() -> None:
    ids = ["r1", "r2", "r3", "r4", "r5", "r6"]
    texts = [
        "The cat sat on the mat.",
        "the CAT   sat on\tthe mat",
        "The cat, sat on the mat!!",
        "A different text.",
        "a different text",
        "Unrelated.",
    ]
    assert dedup.exact_clusters(ids, texts) == [["r1", "r2", "r3"], ["r4", "r5"]]
    # independent of input order
    order = [5, 3, 1, 0, 4, 2]
    shuffled = dedup.exact_clusters([ids[i] for i in order], [texts[i] for i in order])
    assert shuffled == [["r1", "r2", "r3"], ["r4", "r5"]]


def test_exact_clusters_bad_input() -> None:
    with pytest.raises(CampaignError, match="record id 'a' appears twice"):
        dedup.exact_clusters(["a", "a"], ["x", "y"])
    with pytest.raises(CampaignError, match="2 ids but 1 texts"):
        dedup.exact_clusters(["a", "b"], ["x"])


def test_exact_clusters_find_every_planted_pair(demo) -> None:
    records, truth = demo
    clusters = dedup.exact_clusters([r["id"] for r in records], [r["text"] for r in records])
    found = {frozenset(p) for c in clusters for p in itertools.combinations(c, 2)}
    planted = {frozenset(p) for p in truth["exact_duplicates"]}
    assert found == planted  # recall 1.0 and nothing else (the generator keeps texts distinct)


# --- MinHash -----------------------------------------------------------------------------


def _pair_texts(seed: int, n_pairs: int) -> tuple[list[str], list[float]]:
    """n_pairs (base, edited) texts with Jaccards spread over [0, 1], and the exact Jaccards."""
    rng = np.random.default_rng(seed)
    texts, exact = [], []
    for _ in range(n_pairs):
        n = int(rng.integers(5, 150))
        base = [f"w{x}" for x in rng.integers(0, 5000, n)]
        edited = list(base)
        for i in rng.choice(n, int(rng.integers(0, n)), replace=False).tolist():
            edited[i] = f"v{rng.integers(10**6)}"
        texts += [" ".join(base), " ".join(edited)]
        exact.append(dedup.jaccard(dedup.shingles(texts[-2], 3), dedup.shingles(texts[-1], 3)))
    return texts, exact


def test_minhash_estimates_match_exact_jaccard() -> None:
    """Per slot, P(agree) = Jaccard: the estimate is unbiased and its spread is binomial."""
    num_perm = 128
    texts, exact = _pair_texts(3, 400)
    sets = dedup.shingle_hashes(texts, 3)
    for seed in (1, 2):
        sig = dedup.minhash_signatures(sets, num_perm, seed)
        estimate = (sig[0::2] == sig[1::2]).mean(axis=1)
        j = np.array(exact)
        mid = (j > 0.05) & (j < 0.95)
        z = (estimate - j)[mid] / np.sqrt(j[mid] * (1 - j[mid]) / num_perm)
        assert abs(float(np.mean(estimate - j))) < 0.01  # bias
        assert 0.8 < float(np.std(z)) < 1.25  # spread as with independent permutations
        assert float(np.max(np.abs(z))) < 5


def test_minhash_depends_on_seed_only() -> None:
    texts, _ = _pair_texts(4, 20)
    sets = dedup.shingle_hashes(texts, 3)
    a = dedup.minhash_signatures(sets, 64, 5)
    assert a.shape == (40, 64) and a.dtype == np.uint32
    assert np.array_equal(a, dedup.minhash_signatures(sets, 64, 5))
    assert not np.array_equal(a, dedup.minhash_signatures(sets, 64, 6))


def test_shingle_hashes_match_string_shingles() -> None:
    """Equal hash sets exactly when the string shingle sets are equal; sizes agree."""
    texts = ["a b c d", "b c d a", "a b c d a b c", "a b", "a b c", "", "x"]
    sets = dedup.shingle_hashes(texts, 3)
    for i, text in enumerate(texts):
        assert len(sets.set_of(i)) == len(dedup.shingles(text, 3))
    for i, j in itertools.combinations(range(len(texts)), 2):
        same = dedup.shingles(texts[i], 3) == dedup.shingles(texts[j], 3)
        assert same == np.array_equal(sets.set_of(i), sets.set_of(j)), (texts[i], texts[j])


def test_lsh_bands_meet_the_detection_floor() -> None:
    assert dedup.lsh_bands(0.5, 128) == (42, 3)
    assert dedup.lsh_bands(0.8, 128) == (21, 6)
    for threshold in (0.3, 0.5, 0.7, 0.8, 0.9):
        bands, rows = dedup.lsh_bands(threshold, 128)
        assert bands * rows <= 128
        assert 1 - (1 - threshold**rows) ** bands >= dedup.MIN_PAIR_DETECTION
        more = rows + 1
        assert 1 - (1 - threshold**more) ** (128 // more) < dedup.MIN_PAIR_DETECTION


def test_min_agreements_is_the_binomial_cutoff() -> None:
    for threshold in (0.5, 0.8, 1.0):
        m = dedup.min_agreements(threshold, 128)

        def below(k: int, t: float = threshold) -> float:  # P[Binomial(128, t) < k]
            return sum(math.comb(128, i) * t**i * (1 - t) ** (128 - i) for i in range(k))

        assert below(m) <= dedup.PREFILTER_MISS
        assert m == 128 or below(m + 1) > dedup.PREFILTER_MISS
    assert dedup.min_agreements(0.5, 128) == 37
    assert dedup.min_agreements(1.0, 128) == 128


def test_estimate_filter_keeps_pairs_with_enough_agreement() -> None:
    sig = np.zeros((3, 8), dtype=np.uint32)
    sig[1, :2] = 1  # doc 1 agrees with doc 0 in 6 of 8 slots
    sig[2, :6] = 2  # doc 2 agrees with doc 0 in 2 slots, with doc 1 in 2 slots
    pairs = np.array([[0, 1], [0, 2], [1, 2]])
    need = dedup.min_agreements(0.8, 8)
    kept = dedup.estimate_filter(sig, pairs, 0.8, chunk=2)
    expected = [p for p, agree in zip(pairs.tolist(), [6, 2, 2], strict=True) if agree >= need]
    assert kept.tolist() == expected and [0, 1] in expected


# --- near duplicates ---------------------------------------------------------------------


def test_near_pairs_by_hand() -> None:
    words = "one two three four five six seven eight nine ten eleven twelve".split()
    a = " ".join(words)
    b = " ".join(words[:-1] + ["zebra"])  # last word changed: 9 of 11 shingles shared
    far = " ".join(reversed(words))
    ids, texts = ["a", "b", "c", "d", "e"], [a, b, far, "One two", "one two!"]
    pairs = dedup.near_duplicate_pairs(ids, texts, 0.7, 128, 3, seed=1)
    assert pairs == [("a", "b", 9 / 11)]
    # d and e are exact duplicates (reported by exact_clusters, not here); a two-word text
    # has one shingle and cannot match a longer text
    assert dedup.exact_clusters(ids, texts) == [["d", "e"]]


def test_near_pairs_between_representatives_of_exact_clusters() -> None:
    base = "alpha beta gamma delta epsilon zeta eta theta iota kappa"
    near = base.replace("kappa", "lambda")
    ids = ["m2", "m1", "m3"]
    texts = [base, base.upper(), near]
    pairs = dedup.near_duplicate_pairs(ids, texts, 0.6, 128, 3, seed=1)
    assert pairs == [("m1", "m3", 7 / 9)]  # m1 stands for {m1, m2}


def test_near_pairs_bad_params() -> None:
    with pytest.raises(CampaignError, match=r"^split\.dedup\.near\.threshold: expected"):
        dedup.near_duplicate_pairs(["a"], ["x"], 1.5, 128, 3, seed=1)
    with pytest.raises(CampaignError, match=r"^split\.dedup\.near\.num_perm: expected"):
        dedup.near_duplicate_pairs(["a"], ["x"], 0.5, 0, 3, seed=1)
    with pytest.raises(CampaignError, match=r"^split\.dedup\.near\.shingle_size: expected"):
        dedup.near_duplicate_pairs(["a"], ["x"], 0.5, 128, True, seed=1)


def test_near_pairs_recall_on_demo_truth(demo) -> None:
    """Every planted near pair is found, nothing else is, and each Jaccard is exact."""
    records, truth = demo
    ids = [r["id"] for r in records]
    texts = {r["id"]: r["text"] for r in records}
    pairs = dedup.near_duplicate_pairs(ids, list(texts.values()), 0.5, 128, 3, seed=7)
    found = {frozenset(p[:2]) for p in pairs}
    planted = {frozenset(p) for p in truth["near_duplicates"]}
    recall = len(found & planted) / len(planted)
    print(f"near-duplicate recall on the demo truth: {recall:.3f} ({len(planted)} planted)")
    assert recall == 1.0
    assert found <= planted  # precision 1.0: unrelated demo texts stay below 0.2
    for a, b, score in pairs:
        sa = dedup.shingles(dedup.normalize(texts[a]), 3)
        sb = dedup.shingles(dedup.normalize(texts[b]), 3)
        assert math.isclose(score, dedup.jaccard(sa, sb), rel_tol=0, abs_tol=1e-12)


def test_near_pairs_match_all_pairs_jaccard_on_a_sample() -> None:
    """LSH + confirmation finds every pair that brute force finds (random edited texts)."""
    texts, _ = _pair_texts(8, 150)
    ids = [f"t{i:03d}" for i in range(len(texts))]
    threshold = 0.5
    sets = [dedup.shingles(dedup.normalize(t), 3) for t in texts]
    truth = {
        (ids[i], ids[j])
        for i, j in itertools.combinations(range(len(texts)), 2)
        if dedup.normalize(texts[i]) != dedup.normalize(texts[j])
        and dedup.jaccard(sets[i], sets[j]) >= threshold
    }
    found = {(a, b) for a, b, _ in dedup.near_duplicate_pairs(ids, texts, threshold, 128, 3, 2)}
    assert found <= truth
    assert len(found) >= 0.97 * len(truth) and truth


def test_near_pairs_independent_of_input_order(demo) -> None:
    records, _ = demo
    sample = records[:800]
    ids, texts = [r["id"] for r in sample], [r["text"] for r in sample]
    expected = dedup.near_duplicate_pairs(ids, texts, 0.5, 64, 3, seed=3)
    order = list(range(len(sample)))
    random.Random(0).shuffle(order)
    shuffled = dedup.near_duplicate_pairs(
        [ids[i] for i in order], [texts[i] for i in order], 0.5, 64, 3, seed=3
    )
    assert shuffled == expected


def test_duplicate_clusters_keep_label_conflicts() -> None:
    ids = ["a", "b", "c", "d", "e"]
    labels = ["x", "y", "x", "x", "z"]
    exact = [["a", "b"]]
    near = [("b", "c", 0.8), ("d", "e", 0.6)]
    clusters = dedup.duplicate_clusters(ids, labels, exact, near)
    assert [(c.kind, c.ids, c.labels, c.conflicting) for c in clusters] == [
        ("exact", ("a", "b"), ("x", "y"), True),
        ("near", ("a", "b", "c"), ("x", "y", "x"), True),
        ("near", ("d", "e"), ("x", "z"), True),
    ]
    same = dedup.duplicate_clusters(["a", "b"], ["x", "x"], [["a", "b"]], [])
    assert same == [dedup.DuplicateCluster("exact", ("a", "b"), ("x", "x"), False)]

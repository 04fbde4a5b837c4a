"""Benchmarks near-duplicate detection (campaign.data.dedup.near_duplicate_pairs) on synthetic text.

Corpus (seeded): ``--docs`` documents, of which ``--near`` are near copies of random others
with 1-6 word edits (70% substitutions, 15% insertions, 15% deletions) and the rest random
documents of 40-200 words drawn from a Zipf-weighted vocabulary of 20,000 made-up words (so
frequent word triples recur across unrelated documents, as in real text).

Truth, computed without MinHash: the exact Jaccard of the word-shingle STRING sets
(``dedup.shingles``) for all pairs within a random ``--sample`` of documents (sparse matrix
product) plus every planted (original, copy) pair; a true pair has Jaccard >= threshold.
Recall = true pairs reported / true pairs; precision = reported pairs whose exact Jaccard is
>= threshold / reported pairs. Goals: total wall time <= 30 s for 100,000 documents on this
machine's cores, recall >= 0.95.

Baseline: datasketch's standard MinHash (one ``update_batch`` per document) + MinHashLSH
insert and query, on the first ``--baseline-docs`` documents; its per-document throughput is
compared with ours on the same documents and on the whole corpus.

    .venv/bin/python benchmarks/bench_dedup.py [--docs 100000 --near 5000 --sample 3000]
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from campaign.data import dedup

TIME_GOAL_S = 30.0
RECALL_GOAL = 0.95
_SYLLABLES = [c + v for c in "bcdfghjklmnprstvwz" for v in "aeiou"]


def vocabulary(rng: np.random.Generator, n_words: int) -> list[str]:
    words: set[str] = set()
    while len(words) < n_words:
        n_syl = int(rng.integers(1, 4))
        words.add("".join(_SYLLABLES[i] for i in rng.integers(len(_SYLLABLES), size=n_syl)))
    return sorted(words)


def corpus(seed: int, n_docs: int, n_near: int) -> tuple[list[str], list[str], list[tuple]]:
    """(ids, texts, planted (original id, copy id) pairs)."""
    rng = np.random.default_rng(seed)
    vocab = np.array(vocabulary(rng, 20_000), dtype=object)
    weights = 1.0 / (np.arange(len(vocab)) + 10.0)
    weights /= weights.sum()
    n_random = n_docs - n_near
    lengths = rng.integers(40, 201, n_random)
    words = rng.choice(len(vocab), int(lengths.sum()), p=weights)
    cuts = np.cumsum(lengths)[:-1]
    docs = [list(vocab[chunk]) for chunk in np.split(words, cuts)]
    planted = []
    for copy_index in range(n_near):
        original = int(rng.integers(n_random))
        edited = list(docs[original])
        for _ in range(int(rng.integers(1, 7))):
            kind = rng.random()
            at = int(rng.integers(len(edited)))
            new_word = vocab[int(rng.choice(len(vocab), p=weights))]
            if kind < 0.7:
                edited[at] = new_word
            elif kind < 0.85:
                edited.insert(at, new_word)
            elif len(edited) > 5:
                del edited[at]
        docs.append(edited)
        planted.append((original, n_random + copy_index))
    ids = [f"d{i:06d}" for i in range(n_docs)]
    texts = [" ".join(d).capitalize() + "." for d in docs]
    return ids, texts, [(ids[a], ids[b]) for a, b in planted]


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def ours_by_phase(ids, texts, threshold, num_perm, shingle_size, seed) -> tuple[list, dict]:
    """The same steps as near_duplicate_pairs, timed one by one (also checked equal)."""
    phases = {}
    normalized, phases["normalize"] = timed(lambda: [dedup.normalize(t) for t in texts])
    rep_of: dict[str, str] = {}
    for record_id, text in zip(ids, normalized, strict=True):
        if text not in rep_of or record_id < rep_of[text]:
            rep_of[text] = record_id
    reps = list(rep_of)
    sets, phases["shingle hashes"] = timed(lambda: dedup.shingle_hashes(reps, shingle_size))
    sig, phases["MinHash signatures"] = timed(
        lambda: dedup.minhash_signatures(sets, num_perm, seed)
    )
    bands, rows = dedup.lsh_bands(threshold, num_perm)
    pairs, phases["LSH candidates"] = timed(lambda: dedup.candidate_pairs(sig, bands, rows))
    phases["candidates"] = len(pairs)
    pairs, phases["estimate filter"] = timed(lambda: dedup.estimate_filter(sig, pairs, threshold))
    phases["after filter"] = len(pairs)
    confirmed, phases["confirm (exact Jaccard)"] = timed(
        lambda: dedup.confirm_pairs(sets, pairs, threshold)
    )
    rep_ids = [rep_of[t] for t in reps]
    found = sorted(
        (min(rep_ids[i], rep_ids[j]), max(rep_ids[i], rep_ids[j]), s) for i, j, s in confirmed
    )
    return found, phases


def exact_pairs_in_sample(texts: dict[str, str], sample: list[str], size: int, threshold: float):
    """{(id_a, id_b): jaccard} for every pair in the sample with Jaccard >= threshold."""
    from scipy import sparse

    index: dict[str, int] = {}
    rows, cols = [], []
    for r, record_id in enumerate(sample):
        for shingle in dedup.shingles(dedup.normalize(texts[record_id]), size):
            rows.append(r)
            cols.append(index.setdefault(shingle, len(index)))
    m = sparse.csr_matrix(
        (np.ones(len(rows), dtype=np.int32), (rows, cols)), shape=(len(sample), len(index))
    )
    sizes = np.asarray(m.sum(axis=1)).ravel()
    inter = sparse.triu(m @ m.T, k=1).tocoo()
    jac = inter.data / (sizes[inter.row] + sizes[inter.col] - inter.data)
    keep = jac >= threshold
    return {
        tuple(sorted((sample[i], sample[j]))): float(s)
        for i, j, s in zip(inter.row[keep], inter.col[keep], jac[keep], strict=True)
    }


def exact_jaccard(texts: dict[str, str], a: str, b: str, size: int) -> float:
    sa = dedup.shingles(dedup.normalize(texts[a]), size)
    sb = dedup.shingles(dedup.normalize(texts[b]), size)
    return dedup.jaccard(sa, sb)


def datasketch_baseline(texts: list[str], threshold, num_perm, shingle_size, seed):
    """(candidate pairs, seconds) with datasketch MinHash + MinHashLSH, one doc at a time."""
    from datasketch import MinHash, MinHashLSH

    start = time.perf_counter()
    lsh = MinHashLSH(threshold=threshold, num_perm=num_perm)
    sketches = []
    for i, text in enumerate(texts):
        m = MinHash(num_perm=num_perm, seed=seed)
        m.update_batch([s.encode() for s in dedup.shingles(dedup.normalize(text), shingle_size)])
        lsh.insert(i, m)
        sketches.append(m)
    candidates = {(min(i, j), max(i, j)) for i, m in enumerate(sketches) for j in lsh.query(m)}
    candidates = {p for p in candidates if p[0] != p[1]}
    return candidates, time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--docs", type=int, default=100_000)
    p.add_argument("--near", type=int, default=5_000)
    p.add_argument("--sample", type=int, default=3_000)
    p.add_argument("--baseline-docs", type=int, default=10_000)
    p.add_argument("--threshold", type=float, default=0.8)
    p.add_argument("--num-perm", type=int, default=128)
    p.add_argument("--shingle-size", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    t, k, perms = args.threshold, args.shingle_size, args.num_perm
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()

    (ids, texts, planted), gen_s = timed(lambda: corpus(args.seed, args.docs, args.near))
    by_id = dict(zip(ids, texts, strict=True))
    print(
        f"corpus: {args.docs:,} docs ({args.docs - args.near:,} random + {args.near:,} near "
        f"copies), {sum(map(len, texts)) / 1e6:.1f} MB, generated in {gen_s:.1f} s; "
        f"{cores} cores; threshold {t}, {k}-word shingles, {perms} hashes "
        f"({'{} bands x {} rows'.format(*dedup.lsh_bands(t, perms))})"
    )

    # Warm-up on a few documents: the first call imports pyarrow and fills the normalize table.
    _, warm_s = timed(lambda: dedup.near_duplicate_pairs(ids[:50], texts[:50], t, perms, k, 1))
    pairs, total_s = timed(lambda: dedup.near_duplicate_pairs(ids, texts, t, perms, k, seed=1))
    by_phase, phases = ours_by_phase(ids, texts, t, perms, k, 1)
    assert by_phase == pairs, "phase-by-phase run differs from near_duplicate_pairs"
    found = {(a, b) for a, b, _ in pairs}

    rng = np.random.default_rng(args.seed + 1)
    sample = sorted(rng.choice(ids, size=min(args.sample, len(ids)), replace=False).tolist())
    (sample_truth), truth_s = timed(lambda: exact_pairs_in_sample(by_id, sample, k, t))
    planted_j = {tuple(sorted(pair)): exact_jaccard(by_id, *pair, k) for pair in planted}
    planted_truth = {pair for pair, j in planted_j.items() if j >= t}
    truth = set(sample_truth) | planted_truth
    recall = len(found & truth) / len(truth) if truth else float("nan")
    correct = sum(exact_jaccard(by_id, a, b, k) >= t for a, b in found)
    precision = correct / len(found) if found else float("nan")
    near_edges = [j for j in planted_j.values() if t - 0.05 <= j < t + 0.05]

    # Baseline subset: planted pairs (both ends) plus random documents, so both find something.
    sub = min(args.baseline_docs, len(ids))
    chosen = {x for pair in planted[: sub // 4] for x in pair}
    rest = [i for i in rng.permutation(len(ids)).tolist() if ids[i] not in chosen]
    subset = sorted(chosen | {ids[i] for i in rest[: sub - len(chosen)]})
    sub_texts = [by_id[i] for i in subset]
    ds_candidates, ds_s = datasketch_baseline(sub_texts, t, perms, k, 1)
    ds_found = {
        (subset[i], subset[j])
        for i, j in ds_candidates
        if exact_jaccard(by_id, subset[i], subset[j], k) >= t
    }
    ours_sub, ours_sub_s = timed(
        lambda: dedup.near_duplicate_pairs(subset, sub_texts, t, perms, k, seed=1)
    )
    ours_found = {(a, b) for a, b, _ in ours_sub}
    in_subset = set(subset)
    sub_truth = {p for p in planted_truth if p[0] in in_subset and p[1] in in_subset}
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    ok = {True: "PASS", False: "MISS"}
    counts = ("candidates", "after filter")
    rows = [(name, f"{value:.2f}") for name, value in phases.items() if name not in counts]
    print()
    print(f"{'near_duplicate_pairs, ' + format(args.docs, ',') + ' docs':<44}{'value':>12}")
    for name, value in rows:
        print(f"  {name + ' (s)':<42}{value:>12}")
    print(f"  {'total wall time (s), one call':<42}{total_s:>12.2f}   goal <= {TIME_GOAL_S:.0f} s "
          f"{ok[total_s <= TIME_GOAL_S]}")  # fmt: skip
    print(f"  {'(warm-up call on 50 docs, imports) (s)':<42}{warm_s:>12.2f}")
    print(f"  {'throughput (docs/s)':<42}{args.docs / total_s:>12,.0f}")
    print(
        f"  {'pairs: LSH candidates -> filter -> confirmed':<46}{phases['candidates']:,} -> "
        f"{phases['after filter']:,} -> {len(found):,}"
    )
    print(f"  {'peak RSS (MB)':<42}{peak_mb:>12,.0f}")
    print()
    print(f"{'accuracy vs exact Jaccard':<44}{'value':>12}")
    print(f"  {'true pairs: planted (J >= t)':<42}{len(planted_truth):>12,}"
          f"   ({len(planted) - len(planted_truth):,} planted copies fell below t)")  # fmt: skip
    print(f"  {'true pairs: all pairs in the sample':<42}{len(sample_truth):>12,}"
          f"   ({len(sample):,} docs, {len(sample) * (len(sample) - 1) // 2:,} pairs, "
          f"{truth_s:.1f} s)")  # fmt: skip
    print(f"  {'recall (true pairs reported)':<42}{recall:>12.4f}   goal >= {RECALL_GOAL} "
          f"{ok[recall >= RECALL_GOAL]}")  # fmt: skip
    hit_edge = sum(1 for pair, j in planted_j.items() if t <= j < t + 0.05 and pair in found)
    edge_true = sum(1 for j in planted_j.values() if t <= j < t + 0.05)
    print(f"  {'recall for planted J in [t, t + 0.05)':<42}"
          f"{(hit_edge / edge_true if edge_true else float('nan')):>12.4f}"
          f"   ({edge_true} pairs; {len(near_edges)} planted within 0.05 of t)")  # fmt: skip
    print(f"  {'precision (reported with exact J >= t)':<42}{precision:>12.4f}")
    print()
    title = f"baseline, {sub:,} docs ({len(sub_truth):,} true pairs)"
    print(f"{title:<44}{'seconds':>10}{'docs/s':>10}{'recall':>8}")
    for name, secs, n, hits in [
        ("datasketch MinHash+LSH, then confirm", ds_s, sub, ds_found),
        ("ours, same docs", ours_sub_s, sub, ours_found),
    ]:
        r = len(hits & sub_truth) / len(sub_truth) if sub_truth else float("nan")
        print(f"  {name:<42}{secs:>10.2f}{n / secs:>10,.0f}{r:>8.3f}")
    print(f"  {'ours, all ' + format(args.docs, ',') + ' docs':<42}{total_s:>10.2f}"
          f"{args.docs / total_s:>10,.0f}{recall:>8.3f}")  # fmt: skip
    print(
        f"  per-doc throughput, ours / datasketch: {(args.docs / total_s) / (sub / ds_s):.1f}x "
        f"(ours at {args.docs:,} docs), {ds_s / ours_sub_s:.1f}x on the same {sub:,} docs "
        "(datasketch time excludes confirmation)"
    )
    return 0 if total_s <= TIME_GOAL_S and recall >= RECALL_GOAL else 1


if __name__ == "__main__":
    sys.exit(main())

"""Benchmarks near-duplicate detection (campaign.data.dedup.near_duplicate_pairs) against
datasketch MinHash + MinHashLSH, both on the same synthetic documents, in one process.

Corpus (seeded): ``--docs`` documents, of which ``--near`` are near copies of random others
with 1-6 word edits (70% substitutions, 15% insertions, 15% deletions) and the rest random
documents of 40-200 words drawn from a Zipf-weighted vocabulary of 20,000 made-up words (so
frequent word triples recur across unrelated documents, as in real text).

Settings: the pipeline's (params.yaml split.dedup.near: threshold 0.5, num_perm 128, word
3-shingles; MinHash seed = campaign.seed, 7), and the same at threshold 0.8 (``--thresholds``).

Both methods start from the raw texts and do the whole job, timed end to end:
- ours: one call of ``dedup.near_duplicate_pairs`` (normalize, collapse exact duplicates,
  shingle hashes, one-permutation MinHash, LSH banding, estimate filter, exact-Jaccard
  confirmation on the shingle sets).
- datasketch (the fast way its docs describe): the same ``dedup.normalize`` and exact-duplicate
  collapse and the same word-shingle sets (``dedup.shingles``, UTF-8 bytes); signatures with
  ``MinHash.generator`` (the bulk API: one initialized MinHash copied per document) turned into
  ``LeanMinHash``; ``MinHashLSH(threshold, num_perm)`` with its own optimized bands, filled
  through ``insertion_session()``; ``query`` of every document; each candidate pair then
  CONFIRMED by its exact Jaccard on those same shingle sets (as the pipeline confirms its own,
  and as datasketch's docs advise for exact results).
Times are the median of ``--repeats`` runs of each (the order alternates between repeats).
``--our-bands`` adds a third row (information): datasketch with ``params=(bands, rows)`` set to
ours instead of its optimizer's choice, i.e. the same candidate probability at the threshold.

Accuracy: every pair either method reports is re-checked by exact Jaccard of the word-shingle
STRING sets; truth = the union of both methods' confirmed pairs that pass (with --our-bands, of
all three). Recall of a method = its share of that union; precision = its pairs that pass / its
pairs (1.0 expected after confirmation). Pairs every method misses are invisible to this
union, so two independent checks follow: the planted (original, copy) pairs with exact Jaccard
>= t, and all pairs of a random ``--sample`` of documents (exact Jaccard by sparse matrices).

Goals (the pipeline's, at each threshold): 100,000 documents in <= 30 s on 2 cores, recall
>= 0.95. A goal not met prints MISSED. The time goal is judged only at ``--docs 100000``.

    .venv/bin/python benchmarks/bench_dedup.py            # full run (about 7 minutes)
    .venv/bin/python benchmarks/bench_dedup.py --docs 10000 --near 500 --repeats 1  # trial
"""

from __future__ import annotations

import argparse
import functools
import os
import resource
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from campaign.data import dedup

GOAL_DOCS = 100_000
TIME_GOAL_S = 30.0
RECALL_GOAL = 0.95
GOAL_CORES = 2
REPO = Path(__file__).resolve().parent.parent
_SYLLABLES = [c + v for c in "bcdfghjklmnprstvwz" for v in "aeiou"]


# ------------------------------------------------------------------------------ corpus
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


# ------------------------------------------------------------------------------ the two methods
def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def ours(ids, texts, threshold, num_perm, shingle_size, seed) -> tuple[list, dict]:
    """The pipeline's one call; (pairs, {})."""
    return dedup.near_duplicate_pairs(ids, texts, threshold, num_perm, shingle_size, seed), {}


def ours_by_phase(ids, texts, threshold, num_perm, shingle_size, seed) -> tuple[list, dict]:
    """The same steps as near_duplicate_pairs, timed one by one (checked equal by the caller)."""
    phases: dict[str, float] = {}
    normalized, phases["normalize"] = timed(lambda: [dedup.normalize(t) for t in texts])
    rep_of: dict[str, str] = {}
    for record_id, text in zip(ids, normalized, strict=True):
        if text not in rep_of or record_id < rep_of[text]:
            rep_of[text] = record_id
    reps = list(rep_of)
    sets, phases["shingle hashes"] = timed(lambda: dedup.shingle_hashes(reps, shingle_size))
    sig, phases["MinHash signatures (one permutation)"] = timed(
        lambda: dedup.minhash_signatures(sets, num_perm, seed)
    )
    bands, rows = dedup.lsh_bands(threshold, num_perm)
    has = np.flatnonzero(np.diff(sets.offsets) > 0)
    pairs, phases["LSH banding"] = timed(lambda: has[dedup.candidate_pairs(sig[has], bands, rows)])
    phases["#candidates"] = len(pairs)
    pairs, phases["estimate filter"] = timed(lambda: dedup.estimate_filter(sig, pairs, threshold))
    phases["#after filter"] = len(pairs)
    confirmed, phases["confirm (exact Jaccard)"] = timed(
        lambda: dedup.confirm_pairs(sets, pairs, threshold)
    )
    rep_ids = [rep_of[t] for t in reps]
    found = sorted(
        (min(rep_ids[i], rep_ids[j]), max(rep_ids[i], rep_ids[j]), s) for i, j, s in confirmed
    )
    return found, phases


def datasketch_lsh(threshold: float, num_perm: int, our_bands: bool = False):
    """MinHashLSH with its own optimizer's (bands, rows) for the threshold, or with ours."""
    from datasketch import MinHashLSH

    params = dedup.lsh_bands(threshold, num_perm) if our_bands else None
    return MinHashLSH(threshold=threshold, num_perm=num_perm, params=params)


def datasketch(
    ids, texts, threshold, num_perm, shingle_size, seed, our_bands: bool = False
) -> tuple[list, dict]:
    """datasketch's bulk path, same documents and shingle sets; (pairs, phase seconds/counts)."""
    from datasketch import LeanMinHash, MinHash

    phases: dict[str, float] = {}
    t0 = time.perf_counter()
    normalized = [dedup.normalize(t) for t in texts]
    rep_of: dict[str, str] = {}
    for record_id, text in zip(ids, normalized, strict=True):
        if text not in rep_of or record_id < rep_of[text]:
            rep_of[text] = record_id
    reps = [t for t in rep_of if t]  # no words, no shingles: never a near duplicate (as ours)
    rep_ids = [rep_of[t] for t in reps]
    t_norm = time.perf_counter()
    phases["normalize + exact collapse"] = t_norm - t0
    sets = [dedup.shingles(t, shingle_size) for t in reps]
    encoded = [[s.encode("utf-8") for s in shingle_set] for shingle_set in sets]
    t1 = time.perf_counter()
    phases["shingle sets (str), UTF-8 bytes"] = t1 - t_norm

    sketches = [LeanMinHash(m) for m in MinHash.generator(encoded, num_perm=num_perm, seed=seed)]
    t2 = time.perf_counter()
    phases["MinHash.generator -> LeanMinHash"] = t2 - t1

    lsh = datasketch_lsh(threshold, num_perm, our_bands)
    with lsh.insertion_session() as session:
        for i, m in enumerate(sketches):
            session.insert(i, m)
    t3 = time.perf_counter()
    phases["MinHashLSH insertion_session"] = t3 - t2

    candidates: set[tuple[int, int]] = set()
    for i, m in enumerate(sketches):
        for j in lsh.query(m):
            if j > i:
                candidates.add((i, j))
    t4 = time.perf_counter()
    phases["MinHashLSH query (every doc)"] = t4 - t3
    phases["#candidates"] = len(candidates)

    found = []
    for i, j in candidates:
        a, b = sets[i], sets[j]
        inter = len(a & b)
        score = inter / (len(a) + len(b) - inter)
        if score >= threshold:
            x, y = rep_ids[i], rep_ids[j]
            found.append((min(x, y), max(x, y), score))
    phases["confirm (exact Jaccard)"] = time.perf_counter() - t4
    return sorted(found), phases


OUR_BANDS = "datasketch, our bands"


# ------------------------------------------------------------------------------ truth checks
def string_jaccard(by_id: dict[str, str], size: int, cache: dict) -> Callable[[str, str], float]:
    def sets_of(record_id: str) -> set[str]:
        if record_id not in cache:
            cache[record_id] = dedup.shingles(dedup.normalize(by_id[record_id]), size)
        return cache[record_id]

    return lambda a, b: dedup.jaccard(sets_of(a), sets_of(b))


def exact_pairs_in_sample(by_id: dict[str, str], sample: Sequence[str], size: int, threshold):
    """{(id_a, id_b)} for every pair in the sample with exact Jaccard >= threshold whose
    normalized texts differ (exact duplicates are not near pairs)."""
    from scipy import sparse

    normalized = [dedup.normalize(by_id[record_id]) for record_id in sample]
    index: dict[str, int] = {}
    rows, cols = [], []
    for r, text in enumerate(normalized):
        for shingle in dedup.shingles(text, size):
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
        tuple(sorted((sample[i], sample[j])))
        for i, j in zip(inter.row[keep].tolist(), inter.col[keep].tolist(), strict=True)
        if normalized[i] != normalized[j]
    }


# ------------------------------------------------------------------------------ one threshold
def methods(args) -> dict[str, Callable]:
    out = {"ours": ours, "datasketch": datasketch}
    if args.our_bands:
        out[OUR_BANDS] = functools.partial(datasketch, our_bands=True)
    return out


def bench_threshold(args, t: float, ids, texts, by_id, planted, sample, jcache) -> dict:
    k, perms, seed = args.shingle_size, args.num_perm, args.hash_seed
    run = methods(args)
    times: dict[str, list[float]] = {name: [] for name in run}
    phases: dict[str, list[dict]] = {name: [] for name in run}
    found: dict[str, list] = {}
    for r in range(args.repeats):
        order = list(run) if r % 2 == 0 else list(reversed(run))
        for name in order:
            (pairs, ph), secs = timed(lambda f=run[name]: f(ids, texts, t, perms, k, seed))
            times[name].append(secs)
            phases[name].append(ph)
            if name in found and found[name] != pairs:
                sys.exit(f"error: {name} gave different pairs on repeat {r + 1} (t={t})")
            found[name] = pairs
    by_phase, our_phases = ours_by_phase(ids, texts, t, perms, k, seed)
    if by_phase != found["ours"]:
        sys.exit("error: the phase-by-phase run differs from near_duplicate_pairs")

    jac = string_jaccard(by_id, k, jcache)
    sets = {name: {(a, b) for a, b, _ in pairs} for name, pairs in found.items()}
    union = set().union(*sets.values())
    exact = {pair: jac(*pair) for pair in union}
    truth = {pair for pair, j in exact.items() if j >= t}
    off = sum(abs(exact[(a, b)] - s) > 1e-9 for name in found for a, b, s in found[name])

    planted_true = {tuple(sorted(p)) for p in planted if jac(*p) >= t}
    sample_true = exact_pairs_in_sample(by_id, sample, k, t)
    ds_lsh = datasketch_lsh(t, perms)
    bands = {"ours": dedup.lsh_bands(t, perms), "datasketch": (ds_lsh.b, ds_lsh.r)}
    return {
        "t": t,
        "times": times,
        "phases": phases,
        "our_phases": our_phases,
        "sets": sets,
        "truth": truth,
        "jaccard_off": off,
        "planted_true": planted_true,
        "sample_true": sample_true,
        "bands": bands,
    }


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def report(args, res: dict, n_docs: int, cores: int, default_t: float) -> list[bool]:
    t = res["t"]
    truth = res["truth"]
    med = {name: statistics.median(v) for name, v in res["times"].items()}
    tag = " (the pipeline's default)" if t == default_t else ""
    print(f"\n## threshold {t}{tag}: {n_docs:,} documents, median of {args.repeats} runs")
    ours_b, ours_r = res["bands"]["ours"]
    ds_b, ds_r = res["bands"]["datasketch"]
    print(
        f"# LSH: ours {ours_b} bands x {ours_r} rows (a pair at J = t is a candidate with "
        f"p = {1 - (1 - t**ours_r) ** ours_b:.3f}); datasketch {ds_b} bands x {ds_r} rows, its "
        f"optimizer's choice (p = {1 - (1 - t**ds_r) ** ds_b:.3f})"
    )
    w = max(len(name) for name in res["times"]) + 2
    header = (
        f"{'method':<{w}}{'median s':>9}{'min s':>8}{'us/doc':>8}{'docs/s':>9}"
        f"{'candidates':>12}{'confirmed':>11}{'recall':>8}{'precision':>10}"
    )
    print(header)
    print("-" * len(header))
    recall = {}
    for name, times in res["times"].items():
        got = res["sets"][name]
        recall[name] = len(got & truth) / len(truth) if truth else float("nan")
        precision = len(got & truth) / len(got) if got else float("nan")
        cand = (
            res["our_phases"]["#candidates"]
            if name == "ours"
            else res["phases"][name][0]["#candidates"]
        )
        print(
            f"{name:<{w}}{med[name]:>9.2f}{min(times):>8.2f}{med[name] / n_docs * 1e6:>8.1f}"
            f"{n_docs / med[name]:>9,.0f}{cand:>12,}{len(got):>11,}{recall[name]:>8.4f}"
            f"{precision:>10.4f}"
        )
    for name in res["times"]:
        if name != "ours":
            print(
                f"speed: ours is {med[name] / med['ours']:.1f}x {name} per document "
                f"(median time {name} / ours, same documents, same settings)"
            )
    only = {
        name: len(res["sets"][name] - res["sets"][other])
        for name, other in (("ours", "datasketch"), ("datasketch", "ours"))
    }
    what = "both" if len(res["sets"]) == 2 else f"all {len(res['sets'])}"
    print(
        f"truth (union of {what}, exact J >= t re-checked on shingle strings): {len(truth):,} "
        "pairs; "
        f"only ours: {only['ours']:,}, only datasketch: {only['datasketch']:,}; reported J "
        f"differing from the string-set J: {res['jaccard_off']}"
    )
    union = set().union(*res["sets"].values())
    planted_missed = len(res["planted_true"] - union)
    sample_missed = len(res["sample_true"] - union)
    print(
        f"missed by {what}: {planted_missed} of {len(res['planted_true']):,} planted pairs with "
        f"J >= t; {sample_missed} of {len(res['sample_true']):,} true pairs among all pairs of "
        f"{len(args.sample_ids):,} sampled documents"
    )

    print("phases (s)   ours: one extra phase-by-phase run   datasketch: median of the runs")
    ours_rows = [(k, v) for k, v in res["our_phases"].items() if not k.startswith("#")]
    ds_rows = [
        (k, statistics.median(p[k] for p in res["phases"]["datasketch"]))
        for k in res["phases"]["datasketch"][0]
        if not k.startswith("#")
    ]
    for i in range(max(len(ours_rows), len(ds_rows))):
        left = f"{ours_rows[i][0]:<38}{ours_rows[i][1]:>6.2f}" if i < len(ours_rows) else ""
        right = f"{ds_rows[i][0]:<36}{ds_rows[i][1]:>6.2f}" if i < len(ds_rows) else ""
        print(f"  {left:<46}  {right}")

    oks = []
    if n_docs == GOAL_DOCS:
        ok = med["ours"] <= TIME_GOAL_S
        oks.append(ok)
        note = "" if cores == GOAL_CORES else f" (this machine: {cores} cores)"
        time_line = f"{med['ours']:.1f} s -> {verdict(ok)}{note}"
    else:
        projected = med["ours"] * GOAL_DOCS / n_docs
        time_line = (
            f"not judged: run with --docs {GOAL_DOCS} ({med['ours']:.1f} s here, "
            f"{projected:.0f} s if linear)"
        )
    print(f"goal t={t}: {GOAL_DOCS:,} docs in <= {TIME_GOAL_S:.0f} s on {GOAL_CORES} cores: "
          f"{time_line}")  # fmt: skip
    ok = recall["ours"] >= RECALL_GOAL
    oks.append(ok)
    print(f"goal t={t}: recall >= {RECALL_GOAL}: {recall['ours']:.4f} -> {verdict(ok)}")
    return oks


# ------------------------------------------------------------------------------ main
def pipeline_params() -> tuple[dict, int]:
    """params.yaml's split.dedup.near and campaign.seed (the settings the split stage uses)."""
    import yaml

    params = yaml.safe_load((REPO / "params.yaml").read_text(encoding="utf-8"))
    return dict(params["split"]["dedup"]["near"]), int(params["campaign"]["seed"])


def load_note(at_start: float) -> str:
    """The machine's 1-minute load average at the start and the end (others' work included)."""
    return (
        f"# load average (1 min): {at_start:.2f} at the start, {os.getloadavg()[0]:.2f} at the "
        f"end, on {os.cpu_count()} CPUs (other processes' work included)"
    )


def main(argv: list[str] | None = None) -> int:
    load_start = os.getloadavg()[0]
    near, campaign_seed = pipeline_params()
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--docs", type=int, default=GOAL_DOCS, help="documents (100000)")
    p.add_argument("--near", type=int, default=5_000, help="planted near copies among them")
    default_thresholds = ",".join(dict.fromkeys([str(near["threshold"]), "0.8"]))
    p.add_argument(
        "--thresholds",
        default=default_thresholds,
        help=f"Jaccard thresholds, comma separated ({default_thresholds}: params.yaml's, 0.8)",
    )
    p.add_argument(
        "--num-perm",
        type=int,
        default=near["num_perm"],
        help=f"MinHash hash functions ({near['num_perm']}: params.yaml)",
    )
    p.add_argument(
        "--shingle-size",
        type=int,
        default=near["shingle_size"],
        help=f"words per shingle ({near['shingle_size']}: params.yaml)",
    )
    p.add_argument(
        "--hash-seed",
        type=int,
        default=campaign_seed,
        help=f"MinHash seed ({campaign_seed}: params.yaml campaign.seed)",
    )
    p.add_argument("--seed", type=int, default=0, help="corpus seed (0)")
    p.add_argument("--repeats", type=int, default=3, help="timed runs of each method (3)")
    p.add_argument("--sample", type=int, default=3_000, help="docs for the all-pairs check")
    p.add_argument(
        "--our-bands",
        action="store_true",
        help="also run datasketch with our (bands, rows) instead of its optimizer's (info)",
    )
    p.add_argument("--strict", action="store_true", help="exit 1 when a goal is MISSED")
    args = p.parse_args(argv)
    thresholds = [float(x) for x in args.thresholds.split(",")]
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    import datasketch as ds

    (ids, texts, planted), gen_s = timed(lambda: corpus(args.seed, args.docs, args.near))
    by_id = dict(zip(ids, texts, strict=True))
    rng = np.random.default_rng(args.seed + 1)
    args.sample_ids = sorted(
        rng.choice(ids, size=min(args.sample, len(ids)), replace=False).tolist()
    )
    print("# bench_dedup: near-duplicate pairs, campaign.data.dedup vs datasketch, same documents")
    print(
        f"# corpus: {args.docs:,} docs ({args.docs - args.near:,} random + {args.near:,} near "
        f"copies), {sum(map(len, texts)) / 1e6:.1f} MB, seed {args.seed}, generated in "
        f"{gen_s:.1f} s"
    )
    print(
        f"# settings: thresholds {', '.join(map(str, thresholds))}; {args.shingle_size}-word "
        f"shingles; num_perm {args.num_perm}; MinHash seed {args.hash_seed}; {args.repeats} "
        f"repeats, order alternating; {cores} cores; datasketch {ds.__version__} (MinHash "
        "scheme affine32, sha1_hash32 shingle hash, dict storage)"
    )
    print(
        f"# goals (pipeline): {GOAL_DOCS:,} docs <= {TIME_GOAL_S:.0f} s on {GOAL_CORES} cores; "
        f"recall >= {RECALL_GOAL} against the union of both methods' confirmed pairs"
    )

    # Warm-up on a few documents: imports (pyarrow, datasketch) and the normalize table.
    for fn in methods(args).values():
        fn(ids[:50], texts[:50], thresholds[0], args.num_perm, args.shingle_size, args.hash_seed)

    oks: list[bool] = []
    jcache: dict[str, set[str]] = {}
    default_t = float(near["threshold"])
    for t in thresholds:
        res = bench_threshold(args, t, ids, texts, by_id, planted, args.sample_ids, jcache)
        oks += report(args, res, args.docs, cores, default_t)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\npeak RSS of the process: {peak_mb:,.0f} MB")
    print(f"goals: {sum(oks)} of {len(oks)} judged met" + ("" if all(oks) else " (MISSED above)"))
    print(load_note(load_start))
    return 1 if args.strict and not all(oks) else 0


if __name__ == "__main__":
    sys.exit(main())

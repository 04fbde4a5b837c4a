"""Measures file-hashing throughput (BLAKE3 vs MD5) and re-manifesting an unchanged data tree.

(a) BLAKE3 (the blake3 package, as campaign.core.hashing uses it) against hashlib MD5 over the
    same bytes, ONE THREAD AGAINST ONE THREAD: a large file (blake3 ``max_threads=1`` with
    ``update_mmap``, hash_file's large-file path on one thread, vs ``hashlib.file_digest``), and
    many small files hashed one by one through ``hashing.hash_file`` (files under 1 MiB: one
    read, one thread) vs md5 of one read. Goal on those two rows: BLAKE3/MD5 >= 4x. A separate
    row times ``hashing.hash_file`` on the large file as the project runs it (memory-mapped,
    ``max_threads=blake3.AUTO``: every core) against the same one-thread MD5, with its own
    ratio and its speedup over one-thread BLAKE3; it is information, not the goal (MD5 cannot
    use more threads). Info rows split the cost: 1 MiB reads instead of mmap, bytes in memory.
    The page cache is warmed first, so this is CPU-bound. Times: median of --repeats, the two
    sides alternating (A B A B ...) so drift hits both alike; the best-of ratio is shown too.
(b) A folder of small JSONL files: hashed through campaign.core.hashcache.HashCache with an empty
    cache (cold) and again with every file unchanged (stat-cache hit), per file and as one
    tree; large files through the cache, cold and unchanged; then the whole manifest stage
    through campaign.core.runner.run_stage, first run (store miss: hash inputs, build and
    commit the manifest) against a rerun on the unchanged tree (hit: stat cache, verify the
    entry, materialize). Reported as files/s and hit/miss speedup; no numeric goal (info).

    .venv/bin/python benchmarks/bench_hash.py            # full run
    .venv/bin/python benchmarks/bench_hash.py --large-mib 32 --small-files 200 --tree-files 300
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import random
import shutil
import stat
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MiB = 1 << 20
WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi pi rho".split()


# ------------------------------------------------------------------------------ helpers
def campaign_modules():
    """The campaign package of this checkout (not whatever the venv's install points at)."""
    sys.path.insert(0, str(REPO / "workflow"))
    import campaign.data as data
    from campaign.core import hashcache, hashing, runner, store

    return hashing, hashcache, data, runner, store


def timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def alternate(sides: dict[str, Callable[[], object]], repeats: int) -> dict[str, list[float]]:
    """Seconds of each side, run in turn within each repeat (A B A B ...)."""
    times: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(repeats):
        for name, fn in sides.items():
            times[name].append(timed(fn))
    return times


def rmtree(path: Path) -> None:
    """Remove a scratch tree, including the store's read-only files and folders."""

    def onerror(func, p, _exc):
        os.chmod(os.path.dirname(p), stat.S_IRWXU)
        with contextlib.suppress(FileNotFoundError):
            os.chmod(p, stat.S_IRWXU)
        func(p)

    shutil.rmtree(path, onerror=onerror)


def write_random(path: Path, n_bytes: int, rng: random.Random) -> None:
    with open(path, "wb") as f:
        left = n_bytes
        while left:
            chunk = min(left, 16 * MiB)
            f.write(rng.randbytes(chunk))
            left -= chunk


def md5_file(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "md5").hexdigest()


def md5_small(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def warm(paths: list[Path]) -> None:
    """Read every file once so the timed passes find them in the page cache."""
    for p in paths:
        with open(p, "rb") as f:
            while f.read(16 * MiB):
                pass


# ------------------------------------------------------------------------------ (a) throughput
def bench_throughput(scratch: Path, args, hashing) -> list[bool]:
    """Prints the table; returns the verdicts of the goal rows."""
    import blake3

    rng = random.Random(args.seed)
    large = scratch / "large.bin"
    write_random(large, args.large_mib * MiB, rng)
    small_dir = scratch / "small"
    small_dir.mkdir()
    small = [small_dir / f"s{i:05d}.bin" for i in range(args.small_files)]
    for p in small:
        p.write_bytes(rng.randbytes(args.small_kib * 1024))
    warm([large, *small])
    data = large.read_bytes()
    small_data = [p.read_bytes() for p in small]

    def blake3_mmap_1_thread():
        return blake3.blake3(max_threads=1).update_mmap(large).hexdigest()

    def blake3_reads_1_thread():
        hasher, buf = blake3.blake3(max_threads=1), bytearray(MiB)
        view = memoryview(buf)
        with open(large, "rb", buffering=0) as f:
            while n := f.readinto(buf):
                hasher.update(view[:n])
        return hasher.hexdigest()

    # The same digests whichever way the bytes are fed (checked once, untimed).
    digests = {
        hashing.hash_file(large),
        blake3_mmap_1_thread(),
        blake3_reads_1_thread(),
        blake3.blake3(data, max_threads=1).hexdigest(),
    }
    if len(digests) != 1:
        sys.exit("error: the BLAKE3 variants disagree on the large file's digest")

    n_small = args.small_files * args.small_kib * 1024
    threads = os.cpu_count()
    # (name, bytes, blake3 side, md5 side, kind): kind "goal" rows compare one thread with one
    # thread on the project's own paths; "threads" is hash_file's multithreaded large-file path
    # against single-threaded MD5 (MD5 cannot use more); "info" rows split the cost.
    cases = [
        (
            f"{args.large_mib} MiB file: blake3 mmap max_threads=1 vs md5 file_digest",
            len(data),
            blake3_mmap_1_thread,
            lambda: md5_file(large),
            "goal",
        ),
        (
            f"{args.small_files} x {args.small_kib} KiB files, one by one: hash_file vs md5",
            n_small,
            lambda: [hashing.hash_file(p) for p in small],
            lambda: [md5_small(p) for p in small],
            "goal",
        ),
        (
            f"{args.large_mib} MiB file: hash_file (mmap, AUTO = {threads} threads) vs md5",
            len(data),
            lambda: hashing.hash_file(large),
            lambda: md5_file(large),
            "threads",
        ),
        (
            f"{args.large_mib} MiB file: blake3 1 MiB readinto, 1 thread vs md5 file_digest",
            len(data),
            blake3_reads_1_thread,
            lambda: md5_file(large),
            "info",
        ),
        (
            f"{args.large_mib} MiB in memory, 1 thread each (CPU only)",
            len(data),
            lambda: blake3.blake3(data, max_threads=1).hexdigest(),
            lambda: hashlib.md5(data).hexdigest(),
            "info",
        ),
        (
            f"{args.small_files} x {args.small_kib} KiB in memory, 1 thread each (CPU only)",
            n_small,
            lambda: [blake3.blake3(b, max_threads=1).hexdigest() for b in small_data],
            lambda: [hashlib.md5(b).hexdigest() for b in small_data],
            "info",
        ),
    ]
    print(
        f"\n## (a) hashing throughput, page cache warm; MiB/s from the median of {args.repeats} "
        "runs (blake3 and md5 alternate)"
    )
    print(
        f"# goal: BLAKE3/MD5 >= {args.goal:g}x, one thread against one thread, on the paths "
        "hash_file takes (large file: mmap; small file: one read)"
    )
    width = max(len(c[0]) for c in cases)
    print(f"{'case':<{width}} {'blake3':>8} {'md5':>8} {'ratio':>6} {'best':>6}  goal")
    oks, one_thread_rate = [], None
    for name, n_bytes, b3, md5, kind in cases:
        times = alternate({"blake3": b3, "md5": md5}, args.repeats)
        rate = {k: n_bytes / MiB / statistics.median(v) for k, v in times.items()}
        ratio = rate["blake3"] / rate["md5"]
        best = min(times["md5"]) / min(times["blake3"])
        if kind == "goal":
            oks.append(ratio >= args.goal)
            note = "met" if oks[-1] else "MISSED"
            if one_thread_rate is None:
                one_thread_rate = rate["blake3"]
        elif kind == "threads":
            note = (
                f"(info: {threads} threads vs 1; {rate['blake3'] / one_thread_rate:.1f}x the "
                "1-thread blake3 row)"
            )
        else:
            note = "(info)"
        print(
            f"{name:<{width}} {rate['blake3']:>8.0f} {rate['md5']:>8.0f} {ratio:>5.1f}x "
            f"{best:>5.1f}x  {note}"
        )
    return oks


# ------------------------------------------------------------------------------ (b) re-manifest
def make_tree(folder: Path, n_files: int, records: int, rng: random.Random) -> list[Path]:
    """n_files JSONL files of `records` records each, in the params' field names."""
    folder.mkdir(parents=True)
    paths = []
    for i in range(n_files):
        lines = []
        for j in range(records):
            text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 40)))
            record = {
                "id": f"r{i:06d}-{j}",
                "text": text,
                "label": rng.choice(["pos", "neg"]),
                "author": f"a{rng.randrange(200)}",
                "created_at": f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T12:00:00Z",
            }
            lines.append(json.dumps(record) + "\n")
        path = folder / f"part-{i:06d}.jsonl"
        path.write_text("".join(lines), encoding="utf-8")
        paths.append(path)
    return paths


def bench_remanifest(scratch: Path, args, hashing, hashcache, data, runner, store) -> None:
    rng = random.Random(args.seed + 1)
    root = scratch / "project"
    files = make_tree(root / "data" / "tree", args.tree_files, args.records, rng)
    warm(files)
    n = len(files)
    counter = iter(range(1_000_000))

    cache_paths: list[Path] = []

    def cache_path_of(paths: list[Path]) -> Path:
        return paths[-1]

    def fresh_cache():
        cache_paths.append(scratch / "caches" / f"{next(counter)}" / "hashcache.sqlite")
        return hashcache.HashCache(cache_paths[-1])

    rows: list[tuple[str, list[float], str]] = []

    # Per-file and per-tree hashing through the stat cache: cold (fresh database) then warm.
    plain = alternate({"plain": lambda: [hashing.hash_file(p) for p in files]}, args.repeats)
    rows.append(("hashing.hash_file per file (no cache)", plain["plain"], ""))
    for label, run in (
        ("HashCache.hash per file", lambda c: [c.hash(p) for p in files]),
        ("HashCache.hash_tree(folder)", lambda c: c.hash_tree(root / "data" / "tree")),
    ):
        cold, hit = [], []
        for _ in range(args.repeats):
            cache = fresh_cache()
            try:
                cold.append(timed(lambda c=cache, f=run: f(c)))
                hit.append(timed(lambda c=cache, f=run: f(c)))
            finally:
                cache.close()
        rows.append((f"{label}, cold (empty cache)", cold, ""))
        speedup = statistics.median(cold) / statistics.median(hit)
        rows.append((f"{label}, unchanged (stat hit)", hit, f"{speedup:.1f}x vs cold"))

    # Large files are where the stat cache pays: an unchanged file is not re-read.
    big_dir = root / "data" / "big"
    big = []
    for k in range(args.big_files):
        path = big_dir / f"part-{k:03d}.bin"
        path.parent.mkdir(parents=True, exist_ok=True)
        write_random(path, args.big_mib << 20, rng)
        big.append(path)
    warm(big)
    cold, hit = [], []
    for _ in range(args.repeats):
        cache = fresh_cache()
        try:
            cold.append(timed(lambda c=cache: c.hash_tree(big_dir)))
            cache.close()
            cache = hashcache.HashCache(cache_path_of(cache_paths))
            hit.append(timed(lambda c=cache: c.hash_tree(big_dir)))
        finally:
            cache.close()
    big_rows = [
        (f"HashCache.hash_tree, {args.big_files} × {args.big_mib} MiB, cold", cold, ""),
        (
            f"HashCache.hash_tree, {args.big_files} × {args.big_mib} MiB, unchanged",
            hit,
            f"{statistics.median(cold) / statistics.median(hit):.0f}x vs cold",
        ),
    ]

    # The manifest stage end to end, as `campaign manifest` runs it under Snakemake: from the
    # project folder, with the inputs and outputs relative to it (params.yaml's data section).
    spec = {
        "sources": [
            {
                "path": "data/tree/*.jsonl",
                "format": "jsonl",
                "licence": "CC0-1.0",
                "origin": "bench_hash.py synthetic records",
            }
        ],
        "fields": {
            "id": "id",
            "text": "text",
            "label": "label",
            "group": "author",
            "timestamp": "created_at",
        },
        "previous_manifest": None,
        "privacy": "report",
    }
    outputs = {
        "manifest": Path("results/data/manifest.parquet"),
        "summary": Path("results/data/summary.json"),
        "diff": Path("results/data/manifest_diff.json"),
    }
    miss, hit = [], []
    with contextlib.chdir(root):
        inputs = {"sources": data.expand_sources(spec["sources"], Path(".")), "previous": []}
        assert len(inputs["sources"]) == n
        for r in range(args.stage_repeats):
            st = store.Store(scratch / "state" / f"{r}")
            results = []
            for bucket in (miss, hit):
                with contextlib.redirect_stdout(io.StringIO()):
                    t0 = time.perf_counter()
                    results.append(runner.run_stage("manifest", spec, inputs, outputs, st))
                    bucket.append(time.perf_counter() - t0)
            if [x.hit for x in results] != [False, True] or results[0].key != results[1].key:
                sys.exit(f"error: expected a miss then a hit on one key, got {results}")
    rows.append(("run_stage manifest, first run (store miss)", miss, ""))
    speedup = statistics.median(miss) / statistics.median(hit)
    rows.append(("run_stage manifest, unchanged (store hit)", hit, f"{speedup:.1f}x vs miss"))

    print(
        f"\n## (b) re-manifest of an unchanged tree: {n} JSONL files × {args.records} records "
        f"({sum(p.stat().st_size for p in files) / n:.0f} B/file avg), page cache warm"
    )
    print(
        "# info (no numeric goal): what an unchanged tree costs against a first pass "
        "(stat cache, store hit)"
    )
    width = max(len(r[0]) for r in rows)
    print(f"{'case':<{width}} {'median s':>9} {'min s':>7} {'files/s':>9}  ratio")
    for name, times, note in rows:
        med = statistics.median(times)
        print(f"{name:<{width}} {med:>9.3f} {min(times):>7.3f} {n / med:>9.0f}  {note}")
    print(
        f"# files under {hashcache.MIN_CACHED_BYTES >> 20} MiB skip the stat cache: hashing them "
        "costs less than the lookup. The cache pays on large files:"
    )
    for name, times, note in big_rows:
        med = statistics.median(times)
        mib_s = args.big_files * args.big_mib / med
        print(f"{name:<{width}} {med:>9.3f} {min(times):>7.3f} {mib_s:>7.0f} MiB/s  {note}")


# ------------------------------------------------------------------------------ main
def load_note(at_start: float) -> str:
    """The machine's 1-minute load average at the start and the end (others' work included)."""
    return (
        f"# load average (1 min): {at_start:.2f} at the start, {os.getloadavg()[0]:.2f} at the "
        f"end, on {os.cpu_count()} CPUs (other processes' work included)"
    )


def main(argv: list[str] | None = None) -> int:
    load_start = os.getloadavg()[0]
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--large-mib", type=int, default=256, help="large file size (256 MiB)")
    ap.add_argument("--small-files", type=int, default=2000, help="small files for (a) (2000)")
    ap.add_argument(
        "--small-kib", type=int, default=64, help="size of each small file, < 1024 (64 KiB)"
    )
    ap.add_argument("--tree-files", type=int, default=5000, help="JSONL files for (b) (5000)")
    ap.add_argument("--records", type=int, default=3, help="records per JSONL file (3)")
    ap.add_argument("--big-files", type=int, default=8, help="large files for (b) (8)")
    ap.add_argument("--big-mib", type=int, default=32, help="size of each large file (32 MiB)")
    ap.add_argument("--repeats", type=int, default=3, help="repeats per hashing case (3)")
    ap.add_argument("--stage-repeats", type=int, default=3, help="miss+hit stage runs (3)")
    ap.add_argument("--seed", type=int, default=0, help="RNG seed for the scratch data (0)")
    ap.add_argument("--goal", type=float, default=4.0, help="min blake3/md5 ratio (4)")
    ap.add_argument("--part", choices=("a", "b", "all"), default="all", help="what to run (all)")
    ap.add_argument("--keep", action="store_true", help="keep the scratch folder")
    ap.add_argument("--strict", action="store_true", help="exit 1 when a goal is MISSED")
    args = ap.parse_args(argv)
    if not 0 < args.small_kib < 1024:
        ap.error("--small-kib must be in 1..1023: hash_file hashes files of 1 MiB and more on "
                 "every core, and the small-file row compares one thread with one")  # fmt: skip

    hashing, hashcache, data, runner, store = campaign_modules()
    import blake3

    print(
        "# bench_hash: BLAKE3 (campaign.core.hashing) vs MD5 throughput; stat-cache and store-hit"
    )
    print(
        "# speed of re-manifesting an unchanged tree (campaign.core.hashcache, "
        "campaign.core.runner)"
    )
    print(
        f"# {os.cpu_count()} CPUs, blake3 {blake3.__version__}, "
        f"md5 = hashlib.{hashlib.md5.__name__} ({ssl_version()}), seed {args.seed}, "
        f"{args.repeats} repeats (stage: {args.stage_repeats}); large file {args.large_mib} MiB, "
        f"{args.small_files} small files of {args.small_kib} KiB, tree {args.tree_files} files"
    )
    scratch = Path(tempfile.mkdtemp(prefix="bench_hash-"))
    oks: list[bool] = []
    try:
        if args.part in ("a", "all"):
            oks += bench_throughput(scratch, args, hashing)
        if args.part in ("b", "all"):
            bench_remanifest(scratch, args, hashing, hashcache, data, runner, store)
    finally:
        if args.keep:
            print(f"\n(scratch kept: {scratch})")
        else:
            rmtree(scratch)
    if oks:
        print(f"\ngoals: {sum(oks)} of {len(oks)} met" + ("" if all(oks) else " (MISSED above)"))
    print(load_note(load_start))
    return 1 if args.strict and not all(oks) else 0


def ssl_version() -> str:
    import ssl

    return ssl.OPENSSL_VERSION


if __name__ == "__main__":
    sys.exit(main())

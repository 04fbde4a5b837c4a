"""Benchmarks `campaign split-salt` (campaign.data.salt) against the split itself.

Baseline: one split (``split.make_splits``: leak units with exact and near dedup, the
assignment and the audit), the work of the split stage after reading its records. Measured:
a full salt search of ``--tries`` salts (2,000, the CLI's default) as ``find_salt`` does it when
the current salt fails: the same leak units once, each unit's label counts and key hash once,
then the salts scored in blocks (``SaltScorer.score``). Both from the same in-memory records,
medians of ``--repeats`` runs, in one process. The ratio is search / split.

Corpora:
- changelogs: the Debian package changelogs installed on this machine, shaped by
  scripts/corpora/debian_changelogs.py (real text; about 9,700 entries of 365 packages on
  this machine), with ``split.dedup.policy: drop`` (under unite they form a giant unit that
  the split refuses). Skipped, with the reason, when too few are installed.
- demo-N: ``campaign demo-data`` corpus generated with ``--n`` records (default 30,000),
  policy unite.

Goal: search <= 2x the split for 2,000 salts on every corpus; a row over it prints MISSED.

    .venv/bin/python benchmarks/bench_split_salt.py
    .venv/bin/python benchmarks/bench_split_salt.py --n 5000 --repeats 1   # quick trial
"""

from __future__ import annotations

import argparse
import copy
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from campaign.data import split
from campaign.data.readers import load_records
from campaign.data.salt import SALTS_PER_BLOCK, SaltScorer
from campaign.tools.demo_data import generate_corpus

REPO = Path(__file__).resolve().parents[1]
GOAL_RATIO = 2.0
SEED = 7
FIELDS = {
    "id": "id",
    "text": "text",
    "label": "label",
    "group": "author",
    "timestamp": "created_at",
}


def params_split(policy: str) -> dict:
    import yaml

    cfg = copy.deepcopy(yaml.safe_load((REPO / "params.yaml").read_text())["split"])
    cfg["dedup"]["policy"] = policy
    return cfg


def demo_records(n: int) -> pd.DataFrame:
    import json

    tmp = Path(tempfile.mkdtemp(prefix="bench-salt-"))
    path = tmp / "demo.jsonl"
    with path.open("w", encoding="utf-8") as f:
        for r in generate_corpus(SEED, n):
            f.write(json.dumps(r) + "\n")
    return load_records([{"path": str(path), "format": "jsonl", "licence": "CC0-1.0",
                          "origin": "generated"}], FIELDS, tmp)  # fmt: skip


def changelog_records() -> pd.DataFrame | str:
    tmp = Path(tempfile.mkdtemp(prefix="bench-salt-"))
    path = tmp / "changelogs.jsonl"
    script = REPO / "scripts" / "corpora" / "debian_changelogs.py"
    done = subprocess.run([sys.executable, str(script), str(path)], capture_output=True, text=True)
    if done.returncode != 0:
        return done.stderr.strip() or f"exit {done.returncode}"
    return load_records([{"path": str(path), "format": "jsonl", "licence": "various",
                          "origin": "Debian"}], FIELDS, tmp)  # fmt: skip


def search(records: pd.DataFrame, cfg: dict, tries: int) -> int:
    """find_salt's full search (the current salt failing): units once, then blocks of salts."""
    units, stamps = split.prepare(records, cfg, SEED)
    latest = split.latest_times(units, cfg, stamps) if stamps is not None else None
    scorer = SaltScorer(units, cfg, latest)
    passing = int(scorer.score([cfg["salt"]]).passes.sum())
    for lo in range(0, tries, SALTS_PER_BLOCK):
        salts = [f"{cfg['salt']}-{i}" for i in range(lo, min(tries, lo + SALTS_PER_BLOCK))]
        passing += int(scorer.score(salts).passes.sum())
    return passing


def median_time(fn, repeats: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), result


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=30_000, help="demo records (default %(default)s)")
    ap.add_argument("--tries", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)

    corpora = [(f"demo-{args.n}", demo_records(args.n), "unite")]
    cl = changelog_records()
    if isinstance(cl, str):
        print(f"changelogs: skipped ({cl})")
    else:
        corpora.insert(0, ("changelogs", cl, "drop"))

    header = (
        f"{'corpus':<14}{'records':>9}{'policy':>8}{'split s':>9}{'search s':>10}"
        f"{'salts':>7}{'passing':>9}{'ratio':>7}  goal <= {GOAL_RATIO:g}x"
    )
    print(header)
    print("-" * len(header))
    missed = False
    for name, records, policy in corpora:
        cfg = params_split(policy)
        t_split, _ = median_time(
            lambda r=records, c=cfg: split.make_splits(r, c, seed=SEED), args.repeats
        )
        t_search, passing = median_time(
            lambda r=records, c=cfg: search(r, c, args.tries), args.repeats
        )
        ratio = t_search / t_split
        verdict = "met" if ratio <= GOAL_RATIO else "MISSED"
        missed |= ratio > GOAL_RATIO
        print(
            f"{name:<14}{len(records):>9}{policy:>8}{t_split:>9.2f}{t_search:>10.2f}"
            f"{args.tries + 1:>7}{passing:>9}{ratio:>7.2f}  {verdict}"
        )
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
